// SPDX-License-Identifier: GPL-2.0

//! Building whole RoCEv2 packets over IPv4 or IPv6: IP and UDP headers, BTH and extension
//! headers, payload, pad and ICRC (and for IPv6 the UDP checksum, which IPv6 requires).

use super::{
    bth::Bth,
    icrc::{ICRC_LEN, IPV4_HDR_LEN, IPV6_HDR_LEN, UDP_HDR_LEN},
    opcode::{OpInfo, Transport},
    packet::{icrc_ipv4, icrc_ipv6, pad_len, write_headers, BuildError, ExtHeaders},
    psn::Psn,
    ROCE_V2_UDP_PORT,
};

/// Where a packet goes: RoCE v2 over IPv4 or over IPv6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    V4(Ipv4Path),
    V6(Ipv6Path),
}

impl Path {
    /// Whether the packet is for the sender's own address.
    pub(crate) fn is_loopback(&self) -> bool {
        match self {
            Path::V4(p) => p.saddr == p.daddr,
            Path::V6(p) => p.saddr == p.daddr,
        }
    }

    /// Whether a received packet with IP header `ip` comes back along this path: from its
    /// destination, to its source (RC and UC QPs take packets from their peer only).
    pub(crate) fn answers(&self, ip: &[u8]) -> bool {
        match self {
            Path::V4(p) => {
                ip.len() == IPV4_HDR_LEN
                    && ip.get(12..16) == Some(&p.daddr[..])
                    && ip.get(16..20) == Some(&p.saddr[..])
            }
            Path::V6(p) => {
                ip.len() == IPV6_HDR_LEN
                    && ip.get(8..24) == Some(&p.daddr[..])
                    && ip.get(24..40) == Some(&p.saddr[..])
            }
        }
    }

    /// The traffic class (IPv4: TOS): DSCP and ECN.
    pub(crate) fn tclass(&self) -> u8 {
        match self {
            Path::V4(p) => p.tos,
            Path::V6(p) => p.tclass,
        }
    }

    /// This path with traffic class `tclass`.
    pub(crate) fn with_tclass(mut self, tclass: u8) -> Self {
        match &mut self {
            Path::V4(p) => p.tos = tclass,
            Path::V6(p) => p.tclass = tclass,
        }
        self
    }

    /// The length of the IP header.
    pub(crate) fn ip_header_len(&self) -> usize {
        match self {
            Path::V4(_) => IPV4_HDR_LEN,
            Path::V6(_) => IPV6_HDR_LEN,
        }
    }

    /// The length of the IP packet of `opcode` carrying `payload_len` bytes.
    pub(crate) fn packet_len(&self, opcode: u8, payload_len: usize) -> Option<usize> {
        match self {
            Path::V4(_) => ipv4_packet_len(opcode, payload_len),
            Path::V6(_) => ipv6_packet_len(opcode, payload_len),
        }
    }

    /// Writes the whole packet into `out`, which must be [`Path::packet_len`] long. (The module
    /// gathers payloads from memory regions with [`Path::build_with`].)
    #[cfg(ferroce_host)]
    pub(crate) fn build(
        &self,
        bth: &Bth,
        ext: &ExtHeaders,
        payload: &[u8],
        out: &mut [u8],
    ) -> Result<(), BuildError> {
        self.build_with(bth, ext, payload.len(), out, |dst| {
            dst.copy_from_slice(payload);
            Ok(())
        })
    }

    /// Like [`Path::build`], but `fill` writes the `payload_len` payload bytes in place, so a
    /// payload gathered from memory regions is copied once, straight into the packet.
    pub(crate) fn build_with(
        &self,
        bth: &Bth,
        ext: &ExtHeaders,
        payload_len: usize,
        out: &mut [u8],
        fill: impl FnOnce(&mut [u8]) -> Result<(), BuildError>,
    ) -> Result<(), BuildError> {
        match self {
            Path::V4(p) => build_ipv4(p, bth, ext, payload_len, out, fill),
            Path::V6(p) => build_ipv6(p, bth, ext, payload_len, out, fill),
        }
    }
}

/// Where an IPv6 packet goes and how it is marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ipv6Path {
    pub(crate) saddr: [u8; 16],
    pub(crate) daddr: [u8; 16],
    /// DSCP and ECN.
    pub(crate) tclass: u8,
    pub(crate) hop_limit: u8,
    /// The low 20 bits go in the header.
    pub(crate) flow_label: u32,
    pub(crate) sport: u16,
}

/// Where an IPv4 packet goes and how it is marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ipv4Path {
    pub(crate) saddr: [u8; 4],
    pub(crate) daddr: [u8; 4],
    /// DSCP and ECN.
    pub(crate) tos: u8,
    pub(crate) ttl: u8,
    pub(crate) sport: u16,
}

/// The length of the UDP datagram of `opcode` carrying `payload_len` bytes.
fn udp_len(opcode: u8, payload_len: usize) -> Option<usize> {
    let info = OpInfo::lookup(opcode)?;
    let pad = usize::from(pad_len(payload_len));
    [UDP_HDR_LEN, info.hdr_len, payload_len, pad, ICRC_LEN]
        .iter()
        .try_fold(0usize, |a, &b| a.checked_add(b))
}

/// The length of the IPv4 packet of `opcode` carrying `payload_len` bytes.
pub(crate) fn ipv4_packet_len(opcode: u8, payload_len: usize) -> Option<usize> {
    udp_len(opcode, payload_len)?.checked_add(IPV4_HDR_LEN)
}

/// The length of the IPv6 packet of `opcode` carrying `payload_len` bytes.
pub(crate) fn ipv6_packet_len(opcode: u8, payload_len: usize) -> Option<usize> {
    udp_len(opcode, payload_len)?.checked_add(IPV6_HDR_LEN)
}

/// Writes the UDP header (checksum 0), the BTH and extension headers, the payload (by `fill`)
/// and pad into `udp_packet`; the ICRC (its last 4 bytes) is the caller's.
fn write_udp(
    sport: u16,
    bth: &Bth,
    ext: &ExtHeaders,
    payload_len: usize,
    udp_packet: &mut [u8],
    fill: impl FnOnce(&mut [u8]) -> Result<(), BuildError>,
) -> Result<(), BuildError> {
    let udp_len = u16::try_from(udp_packet.len()).map_err(|_| BuildError::NoRoom)?;
    let (udp, body) = udp_packet
        .split_at_mut_checked(UDP_HDR_LEN)
        .ok_or(BuildError::NoRoom)?;
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&ROCE_V2_UDP_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6..8].fill(0);
    let mut bth = *bth;
    bth.pad = pad_len(payload_len);
    let hdr_len = write_headers(&bth, ext, body)?;
    let (payload, pad_and_icrc) = body
        .get_mut(hdr_len..)
        .and_then(|b| b.split_at_mut_checked(payload_len))
        .ok_or(BuildError::NoRoom)?;
    fill(payload)?;
    // The buffer may be reused: pad bytes go out as zeros.
    pad_and_icrc.fill(0);
    Ok(())
}

/// Writes the whole IPv6 packet into `out`, which must be [`ipv6_packet_len`] long.
pub(crate) fn build_ipv6(
    path: &Ipv6Path,
    bth: &Bth,
    ext: &ExtHeaders,
    payload_len: usize,
    out: &mut [u8],
    fill: impl FnOnce(&mut [u8]) -> Result<(), BuildError>,
) -> Result<(), BuildError> {
    let len = ipv6_packet_len(bth.opcode, payload_len).ok_or(BuildError::UnknownOpcode)?;
    if out.len() != len {
        return Err(BuildError::NoRoom);
    }
    let udp_len = u16::try_from(len - IPV6_HDR_LEN).map_err(|_| BuildError::NoRoom)?;
    let (ip, rest) = out.split_at_mut(IPV6_HDR_LEN);
    let fl = path.flow_label & 0xf_ffff;
    ip[0] = 0x60 | path.tclass >> 4;
    ip[1] = path.tclass << 4 | (fl >> 16) as u8;
    ip[2..4].copy_from_slice(&(fl as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
    ip[6] = 17; // UDP
    ip[7] = path.hop_limit;
    ip[8..24].copy_from_slice(&path.saddr);
    ip[24..40].copy_from_slice(&path.daddr);
    write_udp(path.sport, bth, ext, payload_len, rest, fill)?;
    let (udp, body) = rest.split_at_mut(UDP_HDR_LEN);
    let (body, icrc) = body.split_at_mut(body.len() - ICRC_LEN);
    let ip: &[u8; IPV6_HDR_LEN] = (&*ip).try_into().map_err(|_| BuildError::NoRoom)?;
    let udp_hdr: &[u8; UDP_HDR_LEN] = (&*udp).try_into().map_err(|_| BuildError::NoRoom)?;
    let crc = icrc_ipv6(ip, udp_hdr, body).ok_or(BuildError::NoRoom)?;
    icrc.copy_from_slice(&crc.to_le_bytes());
    // The UDP checksum covers a pseudo-header, the UDP header and everything after it.
    let mut sum = Checksum::default();
    sum.add(&ip[8..40]);
    sum.add(&u32::from(udp_len).to_be_bytes());
    sum.add(&[0, 0, 0, 17]);
    sum.add(udp);
    sum.add(body);
    sum.add(icrc);
    let csum = match !sum.fold() {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&csum.to_be_bytes());
    Ok(())
}

/// The Internet checksum (RFC 1071) over a sequence of even-length pieces, the last of which
/// may be odd.
#[derive(Default)]
struct Checksum(u64);

impl Checksum {
    fn add(&mut self, data: &[u8]) {
        let mut words = data.chunks_exact(2);
        for w in &mut words {
            self.0 += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [last] = words.remainder() {
            self.0 += u64::from(*last) << 8;
        }
    }

    fn fold(&self) -> u16 {
        let mut s = self.0;
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }
}

/// Writes the whole packet into `out`, which must be [`ipv4_packet_len`] long. The IP header
/// checksum is left 0 (the stack fills it; the ICRC masks it); the ID is 0 with DF set, as RFC
/// 6864 allows for atomic datagrams.
pub(crate) fn build_ipv4(
    path: &Ipv4Path,
    bth: &Bth,
    ext: &ExtHeaders,
    payload_len: usize,
    out: &mut [u8],
    fill: impl FnOnce(&mut [u8]) -> Result<(), BuildError>,
) -> Result<(), BuildError> {
    let len = ipv4_packet_len(bth.opcode, payload_len).ok_or(BuildError::UnknownOpcode)?;
    if out.len() != len {
        return Err(BuildError::NoRoom);
    }
    let tot_len = u16::try_from(len).map_err(|_| BuildError::NoRoom)?;
    let (ip, rest) = out.split_at_mut(IPV4_HDR_LEN);
    ip.copy_from_slice(&[
        0x45,
        path.tos,
        (tot_len >> 8) as u8,
        tot_len as u8,
        0,
        0,
        0x40, // DF
        0,
        path.ttl,
        17, // UDP
        0,
        0,
        path.saddr[0],
        path.saddr[1],
        path.saddr[2],
        path.saddr[3],
        path.daddr[0],
        path.daddr[1],
        path.daddr[2],
        path.daddr[3],
    ]);
    write_udp(path.sport, bth, ext, payload_len, rest, fill)?;
    let (udp, body) = rest.split_at_mut(UDP_HDR_LEN);
    let (hdrs_and_payload, icrc) = body.split_at_mut(body.len() - ICRC_LEN);
    let ip: &[u8; IPV4_HDR_LEN] = (&*ip).try_into().map_err(|_| BuildError::NoRoom)?;
    let udp: &[u8; UDP_HDR_LEN] = (&*udp).try_into().map_err(|_| BuildError::NoRoom)?;
    let crc = icrc_ipv4(ip, udp, hdrs_and_payload).ok_or(BuildError::NoRoom)?;
    icrc.copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// The RoCE v2 UDP source port of a flow label (`rdma_flow_label_to_udp_sport`).
pub(crate) const fn udp_sport(flow_label: u32) -> u16 {
    let low = (flow_label & 0x3fff) ^ ((flow_label & 0xf_c000) >> 14);
    (low | 0xc000) as u16
}

/// A symmetric flow label for a QP pair (`rdma_calc_flow_label`), when the consumer set none.
pub(crate) const fn flow_label(lqpn: u32, rqpn: u32) -> u32 {
    let mut v = lqpn as u64 * rqpn as u64;
    v ^= v >> 20;
    v ^= v >> 40;
    (v & 0xf_ffff) as u32
}

/// The PSN of the RC request in `ip_packet`, a whole packet as [`Path::build_with`] wrote it;
/// `None` for any other packet (a response, UC, UD, a CNP). What a sender reads back from a
/// packet the stack refused, to resend from there.
pub(crate) fn rc_request_psn(ip_packet: &[u8]) -> Option<Psn> {
    let ip_len = match ip_packet.first()? >> 4 {
        4 => IPV4_HDR_LEN,
        6 => IPV6_HDR_LEN,
        _ => return None,
    };
    let bth = Bth::parse(ip_packet.get(ip_len + UDP_HDR_LEN..)?).ok()?;
    let info = OpInfo::lookup(bth.opcode)?;
    (info.transport == Transport::Rc && info.is_request()).then_some(bth.psn)
}

#[cfg(test)]
mod answers_tests {
    use super::*;

    /// From 10.0.0.1 to 10.0.0.2, TOS 0.
    pub(super) fn v4_path() -> Path {
        Path::V4(Ipv4Path {
            saddr: [10, 0, 0, 1],
            daddr: [10, 0, 0, 2],
            tos: 0,
            ttl: 64,
            sport: 0xc000,
        })
    }

    #[test]
    fn a_path_is_answered_from_its_peer_only() {
        let p = v4_path();
        let mut ip = [0u8; IPV4_HDR_LEN];
        ip[0] = 0x45;
        ip[12..16].copy_from_slice(&[10, 0, 0, 2]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 1]);
        assert!(p.answers(&ip));
        // Spoofed source, another destination, the wrong family.
        let mut spoof = ip;
        spoof[15] = 9;
        assert!(!p.answers(&spoof));
        let mut other = ip;
        other[19] = 7;
        assert!(!p.answers(&other));
        assert!(!p.answers(&[0u8; IPV6_HDR_LEN]));
        let mut s6 = [0u8; 16];
        s6[15] = 1;
        let mut d6 = [0u8; 16];
        d6[15] = 2;
        let p6 = Path::V6(Ipv6Path {
            saddr: s6,
            daddr: d6,
            tclass: 0,
            hop_limit: 64,
            flow_label: 0,
            sport: 0xc000,
        });
        let mut ip6 = [0u8; IPV6_HDR_LEN];
        ip6[0] = 0x60;
        ip6[8..24].copy_from_slice(&d6);
        ip6[24..40].copy_from_slice(&s6);
        assert!(p6.answers(&ip6));
        ip6[23] = 3;
        assert!(!p6.answers(&ip6));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        packet::{parse, verify_icrc_ipv4, verify_icrc_ipv6, Deth},
        psn::Psn,
    };

    /// From fd70::1 to fd70::2.
    fn v6_path(tclass: u8, flow_label: u32, sport: u16) -> Path {
        Path::V6(Ipv6Path {
            saddr: [0xfd, 0x70, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            daddr: [0xfd, 0x70, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            tclass,
            hop_limit: 64,
            flow_label,
            sport,
        })
    }

    #[test]
    fn ud_send_round_trips_through_the_parser() {
        let path = Path::V4(Ipv4Path {
            saddr: [10, 0, 0, 1],
            daddr: [10, 0, 0, 2],
            tos: 0x02,
            ttl: 64,
            sport: udp_sport(flow_label(17, 0x123)),
        });
        let bth = Bth::new(0x64, 0x123, Psn::new(5));
        let ext = ExtHeaders {
            deth: Some(Deth {
                qkey: 0x1111_1111,
                src_qpn: 17,
            }),
            ..ExtHeaders::default()
        };
        let payload = [7u8; 13];
        let len = ipv4_packet_len(0x64, payload.len()).unwrap();
        assert_eq!(len, 20 + 8 + 12 + 8 + 13 + 3 + 4);
        // A reused buffer: the pad must still go out as zeros.
        let mut out = [0xeeu8; 68];
        path.build(&bth, &ext, &payload, &mut out[..len]).unwrap();
        assert_eq!(out[len - 7..len - 4], [0, 0, 0]);
        let ip: &[u8; 20] = out[..20].try_into().unwrap();
        let udp: &[u8; 8] = out[20..28].try_into().unwrap();
        assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 4791);
        assert!(udp[0] >= 0xc0);
        assert!(verify_icrc_ipv4(ip, udp, &out[28..len]));
        let p = parse(&out[28..len]).unwrap();
        assert_eq!(p.bth.dest_qpn, 0x123);
        assert_eq!(p.ext.deth.unwrap().src_qpn, 17);
        assert_eq!(p.payload, &payload);
        assert!(matches!(
            path.build(&bth, &ext, &payload, &mut out[..len - 1]),
            Err(BuildError::NoRoom)
        ));
    }

    #[test]
    fn payload_filled_in_place_is_the_same_packet() {
        let path = Path::V4(Ipv4Path {
            saddr: [10, 0, 0, 1],
            daddr: [10, 0, 0, 2],
            tos: 0,
            ttl: 64,
            sport: 0xc000,
        });
        let bth = Bth::new(0x04, 0x42, Psn::new(9));
        let ext = ExtHeaders::default();
        let payload: [u8; 10] = core::array::from_fn(|i| i as u8 + 1);
        let len = path.packet_len(0x04, payload.len()).unwrap();
        let mut copied = [0u8; 64];
        path.build(&bth, &ext, &payload, &mut copied[..len])
            .unwrap();
        let mut filled = [0x55u8; 64];
        let mut asked = 0;
        path.build_with(&bth, &ext, payload.len(), &mut filled[..len], |dst| {
            asked = dst.len();
            dst.copy_from_slice(&payload);
            Ok(())
        })
        .unwrap();
        assert_eq!(asked, payload.len());
        assert_eq!(filled[..len], copied[..len]);
        let failed = path.build_with(&bth, &ext, payload.len(), &mut filled[..len], |_| {
            Err(BuildError::Payload)
        });
        assert!(matches!(failed, Err(BuildError::Payload)));
    }

    #[test]
    fn ipv6_rc_write_round_trips_with_icrc_and_udp_checksum() {
        let path = v6_path(0xa2, 0xf_1234, 0xc123);
        let bth = Bth {
            ack_req: true,
            ..Bth::new(0x0a, 0x77, Psn::new(0x100))
        };
        let ext = ExtHeaders {
            reth: Some(crate::proto::packet::Reth {
                va: 0x1000,
                rkey: 0x1234,
                dma_len: 7,
            }),
            ..ExtHeaders::default()
        };
        let payload = [0xa5u8; 7];
        let len = path.packet_len(0x0a, payload.len()).unwrap();
        assert_eq!(len, 40 + 8 + 12 + 16 + 7 + 1 + 4);
        let mut out = [0u8; 88];
        path.build(&bth, &ext, &payload, &mut out[..len]).unwrap();
        let out = &out[..len];
        assert_eq!(out[..4], [0x6a, 0x2f, 0x12, 0x34]);
        assert_eq!(u16::from_be_bytes([out[4], out[5]]) as usize, len - 40);
        assert_eq!((out[6], out[7]), (17, 64));
        let ip: &[u8; 40] = out[..40].try_into().unwrap();
        let udp: &[u8; 8] = out[40..48].try_into().unwrap();
        assert!(verify_icrc_ipv6(ip, udp, &out[48..]));
        // A receiver's check: the sum over the pseudo-header and the datagram is all ones.
        let mut sum = Checksum::default();
        sum.add(&out[8..40]);
        sum.add(&((len - 40) as u32).to_be_bytes());
        sum.add(&[0, 0, 0, 17]);
        sum.add(&out[40..]);
        assert_eq!(sum.fold(), 0xffff);
        assert_ne!(udp[6..8], [0, 0]);
        let p = parse(&out[48..]).unwrap();
        assert_eq!((p.bth.dest_qpn, p.payload), (0x77, &payload[..]));
        assert_eq!(p.ext.reth.unwrap().rkey, 0x1234);
    }

    #[test]
    fn only_rc_requests_give_their_psn_back() {
        use crate::proto::opcode::Opcode;
        let v4 = super::answers_tests::v4_path();
        let v6 = v6_path(0, 1, 0xc001);
        let reth = ExtHeaders {
            reth: Some(crate::proto::packet::Reth {
                va: 0,
                rkey: 1,
                dma_len: 4096,
            }),
            ..ExtHeaders::default()
        };
        let aeth = ExtHeaders {
            aeth: Some(crate::proto::packet::Aeth {
                syndrome: 0x1f,
                msn: 1,
            }),
            ..ExtHeaders::default()
        };
        let psn = Psn::new(0xff_fffe);
        let none = ExtHeaders::default();
        let cases: [(Path, Opcode, &ExtHeaders, usize, Option<Psn>); 6] = [
            (v4, Opcode::RcWriteFirst, &reth, 256, Some(psn)),
            (v6, Opcode::RcReadRequest, &reth, 0, Some(psn)),
            (v6, Opcode::RcSendOnly, &none, 8, Some(psn)),
            (v4, Opcode::RcAck, &aeth, 0, None),
            (v4, Opcode::RcReadResponseOnly, &aeth, 64, None),
            (v6, Opcode::UcSendOnly, &none, 8, None),
        ];
        for (path, op, ext, n, want) in cases {
            let op = op as u8;
            let len = path.packet_len(op, n).unwrap();
            let mut out = vec![0u8; len];
            path.build(&Bth::new(op, 9, psn), ext, &vec![1; n], &mut out)
                .unwrap();
            assert_eq!(rc_request_psn(&out), want, "opcode {op:#x}");
            // Cut inside the BTH, or not an IP packet at all: nothing.
            let ip_len = path.ip_header_len();
            assert_eq!(rc_request_psn(&out[..ip_len + 8 + 11]), None);
        }
        assert_eq!(rc_request_psn(&[]), None);
        assert_eq!(rc_request_psn(&[0x50; 64]), None);
    }

    #[test]
    fn checksum_folds_carries() {
        let mut sum = Checksum::default();
        sum.add(&[0xff, 0xff, 0x00, 0x01]);
        assert_eq!(sum.fold(), 0x0001);
        sum.add(&[0x12]);
        assert_eq!(sum.fold(), 0x1201);
    }

    #[test]
    fn sport_and_flow_label_match_the_kernel_convention() {
        assert_eq!(udp_sport(0), 0xc000);
        assert_eq!(udp_sport(0x3fff), 0xffff);
        assert_eq!(udp_sport(0xf_c000), 0xc03f);
        assert_eq!(flow_label(0, 5), 0);
        assert_eq!(flow_label(3, 5), 15);
        assert_eq!(
            flow_label(0x12_3456, 0xab_cdef),
            flow_label(0xab_cdef, 0x12_3456)
        );
        assert!(flow_label(0xff_ffff, 0xff_ffff) <= 0xf_ffff);
    }
}
