// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 invariant CRC: CRC-32 (IEEE, reflected) over the IP, UDP and transport headers with
//! the mutable fields masked to ones, then the payload and pad.

/// CRC state after 8 bytes of 0xFF (the masked LRH of IBTA's ICRC) from an all-ones start.
pub(crate) const ICRC_SEED: u32 = 0xdebb_20e3;

/// Size of the ICRC trailer on the wire.
pub(crate) const ICRC_LEN: usize = 4;

const POLY: u32 = 0xedb8_8320;

/// Slice-by-8 tables: `TABLES[k][b]` is the CRC of byte `b` followed by `k` zero bytes.
static TABLES: [[u32; 256]; 8] = make_tables();

const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            bit += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

/// Advances a raw CRC-32 register over `data`, without pre- or post-inversion (like `crc32_le`).
///
/// The crate root supplies the implementation: the kernel's `crc32_le` in the module (it uses
/// carry-less multiplication where the CPU has it, several times faster than tables), and
/// [`table_crc32`] on the host.
#[inline]
pub(crate) fn crc32_update(crc: u32, data: &[u8]) -> u32 {
    crate::crc32_le(crc, data)
}

/// A slice-by-8 CRC-32 with the same contract as [`crc32_update`]: the host's implementation,
/// and the reference the module's KUnit tests hold the kernel's against.
pub(crate) fn table_crc32(mut crc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = TABLES[7][(lo & 0xff) as usize]
            ^ TABLES[6][((lo >> 8) & 0xff) as usize]
            ^ TABLES[5][((lo >> 16) & 0xff) as usize]
            ^ TABLES[4][(lo >> 24) as usize]
            ^ TABLES[3][(hi & 0xff) as usize]
            ^ TABLES[2][((hi >> 8) & 0xff) as usize]
            ^ TABLES[1][((hi >> 16) & 0xff) as usize]
            ^ TABLES[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = (crc >> 8) ^ TABLES[0][((crc ^ u32::from(b)) & 0xff) as usize];
    }
    crc
}

/// Length of an IPv4 header without options; RoCEv2 packets carry none.
pub(crate) const IPV4_HDR_LEN: usize = 20;
/// Length of an IPv6 header.
pub(crate) const IPV6_HDR_LEN: usize = 40;
/// Length of a UDP header.
pub(crate) const UDP_HDR_LEN: usize = 8;
/// Length of a base transport header.
pub(crate) const BTH_LEN: usize = 12;

/// Computes an ICRC incrementally: headers first (masked), then the rest of the packet.
pub(crate) struct Icrc(u32);

impl Icrc {
    /// Starts from an IPv4 header (20 bytes), the UDP header and the BTH, as they are on the wire.
    pub(crate) fn ipv4(
        ip: &[u8; IPV4_HDR_LEN],
        udp: &[u8; UDP_HDR_LEN],
        bth: &[u8; BTH_LEN],
    ) -> Self {
        let mask = |ip: &mut [u8; IPV4_HDR_LEN]| {
            ip[1] = 0xff; // TOS: DSCP and ECN may change in flight.
            ip[8] = 0xff; // TTL.
            ip[10] = 0xff; // Header checksum.
            ip[11] = 0xff;
        };
        Self(masked_headers_crc(ip, mask, udp, bth))
    }

    /// Starts from an IPv6 header (40 bytes), the UDP header and the BTH, as they are on the wire.
    pub(crate) fn ipv6(
        ip: &[u8; IPV6_HDR_LEN],
        udp: &[u8; UDP_HDR_LEN],
        bth: &[u8; BTH_LEN],
    ) -> Self {
        let mask = |ip: &mut [u8; IPV6_HDR_LEN]| {
            ip[0] |= 0x0f; // Traffic class and flow label.
            ip[1] = 0xff;
            ip[2] = 0xff;
            ip[3] = 0xff;
            ip[7] = 0xff; // Hop limit.
        };
        Self(masked_headers_crc(ip, mask, udp, bth))
    }

    /// Adds the bytes after the BTH: extension headers, payload and pad.
    pub(crate) fn update(&mut self, data: &[u8]) {
        self.0 = crc32_update(self.0, data);
    }

    /// Returns the ICRC; it goes on the wire as 4 little-endian bytes.
    pub(crate) fn finish(&self) -> u32 {
        !self.0
    }
}

/// The CRC, from the seed, over an IP header of `N` bytes (its fields that change in flight
/// masked by `mask_ip`), the UDP header and the BTH (theirs masked here), side by side in one
/// call: each call to the kernel's `crc32_le` has a fixed cost. Every range is a constant of `N`.
fn masked_headers_crc<const N: usize>(
    ip: &[u8; N],
    mask_ip: impl FnOnce(&mut [u8; N]),
    udp: &[u8; UDP_HDR_LEN],
    bth: &[u8; BTH_LEN],
) -> u32 {
    const { assert!(N == IPV4_HDR_LEN || N == IPV6_HDR_LEN) };
    let mut ip = *ip;
    mask_ip(&mut ip);
    let mut buf = [0u8; IPV6_HDR_LEN + UDP_HDR_LEN + BTH_LEN];
    buf[..N].copy_from_slice(&ip);
    buf[N..N + UDP_HDR_LEN].copy_from_slice(udp);
    buf[N + 6] = 0xff; // UDP checksum.
    buf[N + 7] = 0xff;
    buf[N + UDP_HDR_LEN..N + UDP_HDR_LEN + BTH_LEN].copy_from_slice(bth);
    buf[N + UDP_HDR_LEN + 4] = 0xff; // FECN, BECN and reserved bits.
    crc32_update(ICRC_SEED, &buf[..N + UDP_HDR_LEN + BTH_LEN])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit-at-a-time reference CRC-32 (zlib's `crc32()`: inverted in and out).
    fn reference_crc32(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ POLY
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn crc32_check_value() {
        assert_eq!(!crc32_update(!0, b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn table_crc32_matches_bitwise_on_all_lengths() {
        let data: [u8; 67] = core::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
        for start in 0..8 {
            for end in start..data.len() {
                let d = &data[start..end];
                assert_eq!(!table_crc32(!0, d), reference_crc32(d), "{start}..{end}");
            }
        }
    }

    #[test]
    fn seed_is_crc_of_masked_lrh() {
        assert_eq!(crc32_update(!0, &[0xff; 8]), ICRC_SEED);
    }

    fn sample_ipv4() -> ([u8; 20], [u8; 8], [u8; 12]) {
        let ip = [
            0x45, 0x02, 0x00, 0x3c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0xab, 0xcd, 192, 0, 2, 1,
            192, 0, 2, 2,
        ];
        let udp = [0xc0, 0x01, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00];
        let bth = [
            0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x07,
        ];
        (ip, udp, bth)
    }

    /// zlib's CRC over the packet as IBTA defines the ICRC's input: the masked LRH (8 bytes of
    /// ones), then the IP header as `masked_ip` (its mutable fields already ones), `udp` and
    /// `bth` with theirs masked, and the payload.
    fn reference_icrc(masked_ip: &[u8], udp: &[u8; 8], bth: &[u8; 12], payload: &[u8]) -> u32 {
        let mut masked = [0xffu8; 8].to_vec();
        masked.extend_from_slice(masked_ip);
        let mut mudp = *udp;
        mudp[6] = 0xff;
        mudp[7] = 0xff;
        masked.extend_from_slice(&mudp);
        let mut mbth = *bth;
        mbth[4] = 0xff;
        masked.extend_from_slice(&mbth);
        masked.extend_from_slice(payload);
        reference_crc32(&masked)
    }

    #[test]
    fn icrc_is_zlib_crc_over_masked_packet() {
        let (ip, udp, bth) = sample_ipv4();
        let payload = [0x5a; 16];
        let mut icrc = Icrc::ipv4(&ip, &udp, &bth);
        icrc.update(&payload);
        let mut mip = ip;
        mip[1] = 0xff;
        mip[8] = 0xff;
        mip[10] = 0xff;
        mip[11] = 0xff;
        assert_eq!(icrc.finish(), reference_icrc(&mip, &udp, &bth, &payload));
    }

    #[test]
    fn icrc_ipv6_is_zlib_crc_over_masked_packet() {
        let mut ip = [0u8; 40];
        ip[..8].copy_from_slice(&[0x61, 0x23, 0x45, 0x67, 0x00, 0x2c, 0x11, 0x40]);
        ip[8..24].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        ip[24..40].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        let (_, mut udp, bth) = sample_ipv4();
        udp[5] = 0x2c; // 8 + 12 + 20 + 4 bytes, as the IPv6 payload length says.
        let payload = [0xa5; 20];
        let mut icrc = Icrc::ipv6(&ip, &udp, &bth);
        icrc.update(&payload);
        let mut mip = ip;
        mip[..4].copy_from_slice(&[0x6f, 0xff, 0xff, 0xff]);
        mip[7] = 0xff;
        assert_eq!(icrc.finish(), reference_icrc(&mip, &udp, &bth, &payload));
    }

    #[test]
    fn icrc_ignores_fields_that_change_in_flight() {
        let (ip, udp, bth) = sample_ipv4();
        let base = Icrc::ipv4(&ip, &udp, &bth).finish();
        let (mut ip2, mut udp2, mut bth2) = (ip, udp, bth);
        ip2[1] = 0x03; // ECN rewritten to CE.
        ip2[8] = 0x3f; // TTL decremented.
        ip2[10] = 0x00; // Checksum updated.
        udp2[6] = 0x12;
        bth2[4] = 0xc0; // FECN and BECN set.
        assert_eq!(Icrc::ipv4(&ip2, &udp2, &bth2).finish(), base);
        // The destination QPN is covered.
        bth2[7] ^= 1;
        assert_ne!(Icrc::ipv4(&ip2, &udp2, &bth2).finish(), base);
    }

    #[test]
    fn icrc_ipv6_masks_class_flow_and_hop_limit() {
        let mut ip = [0u8; 40];
        ip[0] = 0x60;
        ip[4] = 0x00;
        ip[5] = 0x28;
        ip[6] = 17;
        ip[7] = 64;
        ip[8..24].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let (_, udp, bth) = sample_ipv4();
        let base = Icrc::ipv6(&ip, &udp, &bth).finish();
        let mut ip2 = ip;
        ip2[0] = 0x6b;
        ip2[1] = 0xa5;
        ip2[3] = 0x77;
        ip2[7] = 1;
        assert_eq!(Icrc::ipv6(&ip2, &udp, &bth).finish(), base);
        ip2[0] = 0x70; // The version nibble is covered.
        assert_ne!(Icrc::ipv6(&ip2, &udp, &bth).finish(), base);
    }
}
