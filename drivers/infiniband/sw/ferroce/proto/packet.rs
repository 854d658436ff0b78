// SPDX-License-Identifier: GPL-2.0

//! Splitting the UDP payload of a RoCEv2 packet into BTH, extension headers, payload, pad and
//! ICRC, and writing the headers back.
//!
//! Parsing checks structure only: that the opcode is known and the lengths add up. Whether the
//! QP, PSN, keys and ICRC are right is up to the receiver, which knows the QP and the IP and UDP
//! headers. Every input is untrusted, so nothing here indexes, unwraps or overflows.

use super::bth::{Bth, BthError, QPN_MASK};
use super::icrc::{Icrc, BTH_LEN, ICRC_LEN, IPV4_HDR_LEN, IPV6_HDR_LEN, UDP_HDR_LEN};
use super::opcode::{ExtHdr, OpInfo, Position};

/// The largest payload of one packet: the largest IB MTU.
pub(crate) const MAX_PAYLOAD: usize = 4096;

/// Why a received packet was dropped. The driver keeps one counter per reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DropReason {
    /// Shorter than its BTH, extension headers and ICRC.
    Truncated,
    /// The BTH is malformed (transport header version not 0).
    BadHeader,
    /// The opcode is reserved or of a transport ferroce does not implement.
    UnknownOpcode,
    /// The payload length does not fit the opcode or the pad count.
    BadLength,
    /// The ICRC does not match. [`parse`] never returns it: the check needs the IP and UDP
    /// headers, see [`verify_icrc_ipv4`] and [`verify_icrc_ipv6`].
    BadIcrc,
}

// Names and indexes for the host's fuzz statistics; the module counts by its own counters.
#[cfg(ferroce_host)]
impl DropReason {
    /// Every reason, in the order of [`DropReason::index`].
    pub(crate) const ALL: [DropReason; 5] = [
        DropReason::Truncated,
        DropReason::BadHeader,
        DropReason::UnknownOpcode,
        DropReason::BadLength,
        DropReason::BadIcrc,
    ];

    /// Number of reasons, the size of a counter array.
    pub(crate) const COUNT: usize = Self::ALL.len();

    /// Position in [`DropReason::ALL`], for indexing a counter array.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// Short name, for counters and logs.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::BadHeader => "bad_header",
            DropReason::UnknownOpcode => "unknown_opcode",
            DropReason::BadLength => "bad_length",
            DropReason::BadIcrc => "bad_icrc",
        }
    }
}

/// RDMA extended transport header: the remote buffer of a write or read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reth {
    /// Remote virtual address.
    pub(crate) va: u64,
    /// Remote key.
    pub(crate) rkey: u32,
    /// Length of the whole message, not of this packet.
    pub(crate) dma_len: u32,
}

/// ACK extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Aeth {
    /// ACK, RNR NAK or NAK, with credits, timer or NAK code.
    pub(crate) syndrome: u8,
    /// Message sequence number (24 bits).
    pub(crate) msn: u32,
}

/// Datagram extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deth {
    /// Queue key the destination QP checks.
    pub(crate) qkey: u32,
    /// Source QP number (24 bits).
    pub(crate) src_qpn: u32,
}

/// Atomic extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AtomicEth {
    /// Remote virtual address of the 8-byte operand.
    pub(crate) va: u64,
    /// Remote key.
    pub(crate) rkey: u32,
    /// Value to swap in (CmpSwap) or to add (FetchAdd).
    pub(crate) swap_add: u64,
    /// Value to compare with (CmpSwap only).
    pub(crate) compare: u64,
}

/// Atomic ACK extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AtomicAckEth {
    /// The remote value before the operation.
    pub(crate) orig: u64,
}

/// Invalidate extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ieth {
    /// The R_Key to invalidate at the responder.
    pub(crate) rkey: u32,
}

/// FLUSH extended transport header (IBA 1.5, 9.3.4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Feth {
    /// Placement type: bit 0 global visibility, bit 1 persistence (4 bits).
    pub(crate) placement: u8,
    /// Selectivity level: 0 the RETH's range, 1 the whole region its key names (2 bits).
    pub(crate) selectivity: u8,
}

/// The extension headers of a packet; each is `Some` exactly when the opcode carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExtHeaders {
    /// RDMA extended transport header.
    pub(crate) reth: Option<Reth>,
    /// ACK extended transport header.
    pub(crate) aeth: Option<Aeth>,
    /// Datagram extended transport header.
    pub(crate) deth: Option<Deth>,
    /// Immediate data, read big-endian like every other field, so the number is the one the
    /// sender's `__be32` denotes. Verbs hand immediate data over as `__be32`, i.e. with the wire
    /// bytes in memory: that is `imm.to_be()`, or `imm.to_be_bytes()` as bytes.
    pub(crate) imm: Option<u32>,
    /// Atomic extended transport header.
    pub(crate) atomic: Option<AtomicEth>,
    /// Atomic ACK extended transport header.
    pub(crate) atomic_ack: Option<AtomicAckEth>,
    /// Invalidate extended transport header.
    pub(crate) ieth: Option<Ieth>,
    /// FLUSH extended transport header.
    pub(crate) feth: Option<Feth>,
}

/// The headers of a received packet and where its parts lie in its UDP payload; what the
/// receiver parses before it touches the payload, which may not be contiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Headers {
    /// The base transport header.
    pub(crate) bth: Bth,
    /// What the opcode implies.
    pub(crate) info: &'static OpInfo,
    /// The extension headers.
    pub(crate) ext: ExtHeaders,
    /// Length of BTH and extension headers: where the payload starts.
    pub(crate) hdr_len: usize,
    /// Length of the payload, without pad and ICRC.
    pub(crate) payload_len: usize,
}

impl Headers {
    /// Where the ICRC starts in the UDP payload: after headers, payload and pad.
    pub(crate) fn icrc_offset(&self) -> usize {
        self.hdr_len + self.payload_len + usize::from(self.bth.pad)
    }
}

/// The most header bytes any opcode carries (BTH and AtomicETH); [`parse_headers`] needs at
/// most this many, or the whole UDP payload if it is shorter.
pub(crate) const MAX_HDR_LEN: usize = 48;

/// A received packet, split into its parts. Borrows the payload from the buffer.
///
/// Whole-buffer parsing serves the host's tests and fuzzers; the module reads packets out of
/// skbs with [`parse_headers`] and checks their ICRC there.
#[cfg(ferroce_host)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packet<'a> {
    /// The base transport header.
    pub(crate) bth: Bth,
    /// What the opcode implies.
    pub(crate) info: &'static OpInfo,
    /// The extension headers.
    pub(crate) ext: ExtHeaders,
    /// The payload, without pad and ICRC.
    pub(crate) payload: &'a [u8],
    /// Length of BTH and extension headers: where the payload starts.
    pub(crate) hdr_len: usize,
    /// The ICRC as sent: the last 4 bytes read little-endian, to compare with [`Icrc::finish`].
    pub(crate) icrc_wire: u32,
}

/// Takes fixed-size fields off the front of a slice; [`DropReason::Truncated`] when it runs out.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], DropReason> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or(DropReason::Truncated)?;
        self.0 = rest;
        Ok(*head)
    }

    fn u32(&mut self) -> Result<u32, DropReason> {
        self.bytes().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Result<u64, DropReason> {
        self.bytes().map(u64::from_be_bytes)
    }
}

/// Parses the UDP payload of a RoCEv2 packet: BTH, extension headers, payload, pad, ICRC.
#[cfg(ferroce_host)]
pub(crate) fn parse(udp_payload: &[u8]) -> Result<Packet<'_>, DropReason> {
    let h = parse_headers(udp_payload, udp_payload.len())?;
    let payload = udp_payload
        .get(h.hdr_len..h.hdr_len + h.payload_len)
        .ok_or(DropReason::Truncated)?;
    let icrc = udp_payload
        .last_chunk::<ICRC_LEN>()
        .ok_or(DropReason::Truncated)?;
    Ok(Packet {
        bth: h.bth,
        info: h.info,
        ext: h.ext,
        payload,
        hdr_len: h.hdr_len,
        icrc_wire: u32::from_le_bytes(*icrc),
    })
}

/// Parses the headers of a RoCEv2 packet whose UDP payload is `len` bytes long and starts with
/// `head` (at least [`MAX_HDR_LEN`] bytes of it, or all of it), and checks that the lengths add
/// up: headers, payload, pad and ICRC.
pub(crate) fn parse_headers(head: &[u8], len: usize) -> Result<Headers, DropReason> {
    let body_len = len.checked_sub(ICRC_LEN).ok_or(DropReason::Truncated)?;
    let head = head
        .get(..head.len().min(body_len))
        .ok_or(DropReason::Truncated)?;
    let bth = Bth::parse(head).map_err(|e| match e {
        BthError::Truncated => DropReason::Truncated,
        BthError::BadVersion => DropReason::BadHeader,
    })?;
    let info = OpInfo::lookup(bth.opcode).ok_or(DropReason::UnknownOpcode)?;
    let hdrs = head.get(..info.hdr_len).ok_or(DropReason::Truncated)?;
    let rest = body_len - info.hdr_len;
    let pad = usize::from(bth.pad);
    let payload_len = rest.checked_sub(pad).ok_or(DropReason::BadLength)?;
    check_length(info, payload_len, rest)?;

    let mut r = Reader(hdrs);
    r.bytes::<BTH_LEN>()?;
    let mut ext = ExtHeaders::default();
    for &e in info.exts {
        match e {
            ExtHdr::Reth => {
                ext.reth = Some(Reth {
                    va: r.u64()?,
                    rkey: r.u32()?,
                    dma_len: r.u32()?,
                })
            }
            ExtHdr::Aeth => {
                let v = r.u32()?;
                ext.aeth = Some(Aeth {
                    syndrome: v.to_be_bytes()[0],
                    msn: v & QPN_MASK,
                })
            }
            ExtHdr::Deth => {
                ext.deth = Some(Deth {
                    qkey: r.u32()?,
                    src_qpn: r.u32()? & QPN_MASK,
                })
            }
            ExtHdr::ImmDt => ext.imm = Some(r.u32()?),
            ExtHdr::AtomicEth => {
                ext.atomic = Some(AtomicEth {
                    va: r.u64()?,
                    rkey: r.u32()?,
                    swap_add: r.u64()?,
                    compare: r.u64()?,
                })
            }
            ExtHdr::AtomicAckEth => ext.atomic_ack = Some(AtomicAckEth { orig: r.u64()? }),
            ExtHdr::Ieth => ext.ieth = Some(Ieth { rkey: r.u32()? }),
            ExtHdr::Feth => {
                let bits = r.u32()?;
                // CAST: Masked to 4 and 2 bits; the rest is reserved.
                ext.feth = Some(Feth {
                    placement: (bits & 0xf) as u8,
                    selectivity: ((bits >> 4) & 0x3) as u8,
                })
            }
            // Reserved: ignored on receipt.
            ExtHdr::CnpReserved => {
                r.bytes::<16>()?;
            }
        }
    }

    Ok(Headers {
        bth,
        info,
        ext,
        hdr_len: info.hdr_len,
        payload_len,
    })
}

/// Checks that `payload_len` bytes of payload, padded to `padded_len`, fit the opcode.
fn check_length(info: &OpInfo, payload_len: usize, padded_len: usize) -> Result<(), DropReason> {
    let ok = if info.has_payload() {
        // Headers are whole words, and the pad count exists to make the payload one too.
        padded_len & 3 == 0
            && payload_len <= MAX_PAYLOAD
            // Only the last packet of a message may be short, and only a one-packet message may
            // be empty.
            && (payload_len > 0 || info.position == Position::Only)
    } else {
        padded_len == 0
    };
    if ok {
        Ok(())
    } else {
        Err(DropReason::BadLength)
    }
}

/// Why [`write_headers`] could not write a packet's headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BuildError {
    /// The BTH opcode is not a known one.
    UnknownOpcode,
    /// The opcode carries an extension header that was not given.
    MissingHeader(ExtHdr),
    /// The output buffer is shorter than the headers.
    NoRoom,
    /// The payload could not be read from where it lives.
    Payload,
}

/// Puts fixed-size fields at the front of a slice.
struct Writer<'a>(&'a mut [u8]);

impl Writer<'_> {
    fn put<const N: usize>(&mut self, v: [u8; N]) -> Result<(), BuildError> {
        let buf = core::mem::take(&mut self.0);
        let (head, rest) = buf.split_first_chunk_mut::<N>().ok_or(BuildError::NoRoom)?;
        *head = v;
        self.0 = rest;
        Ok(())
    }
}

/// Pad bytes that make a payload of `payload_len` bytes a whole number of words.
pub(crate) const fn pad_len(payload_len: usize) -> u8 {
    (payload_len.wrapping_neg() & 3) as u8
}

/// Writes the BTH and the extension headers its opcode carries, in order, at the start of `out`;
/// returns their length. Headers of `ext` that the opcode does not carry are ignored.
///
/// The caller adds the payload, `bth.pad` zero bytes (see [`pad_len`]) and the ICRC.
pub(crate) fn write_headers(
    bth: &Bth,
    ext: &ExtHeaders,
    out: &mut [u8],
) -> Result<usize, BuildError> {
    let info = OpInfo::lookup(bth.opcode).ok_or(BuildError::UnknownOpcode)?;
    if out.len() < info.hdr_len {
        return Err(BuildError::NoRoom);
    }
    let mut w = Writer(out);
    let mut b = [0; BTH_LEN];
    bth.write(&mut b);
    w.put(b)?;
    for &e in info.exts {
        let missing = BuildError::MissingHeader(e);
        match e {
            ExtHdr::Reth => {
                let h = ext.reth.ok_or(missing)?;
                w.put(h.va.to_be_bytes())?;
                w.put(h.rkey.to_be_bytes())?;
                w.put(h.dma_len.to_be_bytes())?;
            }
            ExtHdr::Aeth => {
                let h = ext.aeth.ok_or(missing)?;
                let [_, m1, m2, m3] = h.msn.to_be_bytes();
                w.put([h.syndrome, m1, m2, m3])?;
            }
            ExtHdr::Deth => {
                let h = ext.deth.ok_or(missing)?;
                w.put(h.qkey.to_be_bytes())?;
                w.put((h.src_qpn & QPN_MASK).to_be_bytes())?;
            }
            ExtHdr::ImmDt => w.put(ext.imm.ok_or(missing)?.to_be_bytes())?,
            ExtHdr::AtomicEth => {
                let h = ext.atomic.ok_or(missing)?;
                w.put(h.va.to_be_bytes())?;
                w.put(h.rkey.to_be_bytes())?;
                w.put(h.swap_add.to_be_bytes())?;
                w.put(h.compare.to_be_bytes())?;
            }
            ExtHdr::AtomicAckEth => w.put(ext.atomic_ack.ok_or(missing)?.orig.to_be_bytes())?,
            ExtHdr::Ieth => w.put(ext.ieth.ok_or(missing)?.rkey.to_be_bytes())?,
            ExtHdr::Feth => {
                let h = ext.feth.ok_or(missing)?;
                let bits = u32::from(h.placement & 0xf) | (u32::from(h.selectivity & 0x3) << 4);
                w.put(bits.to_be_bytes())?
            }
            ExtHdr::CnpReserved => w.put([0; 16])?,
        }
    }
    Ok(info.hdr_len)
}

/// ICRC over `body`, the UDP payload up to the ICRC, starting from `start` on its BTH; `None`
/// if `body` is shorter than a BTH.
fn icrc_of(start: impl FnOnce(&[u8; BTH_LEN]) -> Icrc, body: &[u8]) -> Option<u32> {
    let (bth, rest) = body.split_first_chunk::<BTH_LEN>()?;
    let mut icrc = start(bth);
    icrc.update(rest);
    Some(icrc.finish())
}

/// Whether the last 4 bytes of `udp_payload` are the ICRC of the rest.
#[cfg(ferroce_host)]
fn verify(start: impl FnOnce(&[u8; BTH_LEN]) -> Icrc, udp_payload: &[u8]) -> bool {
    match udp_payload.split_last_chunk::<ICRC_LEN>() {
        Some((body, wire)) => icrc_of(start, body) == Some(u32::from_le_bytes(*wire)),
        None => false,
    }
}

/// ICRC of an IPv4 packet whose UDP payload up to the ICRC is `body`; `None` if `body` is
/// shorter than a BTH. It goes on the wire as `to_le_bytes()`.
pub(crate) fn icrc_ipv4(
    ip: &[u8; IPV4_HDR_LEN],
    udp: &[u8; UDP_HDR_LEN],
    body: &[u8],
) -> Option<u32> {
    icrc_of(|bth| Icrc::ipv4(ip, udp, bth), body)
}

/// ICRC of an IPv6 packet whose UDP payload up to the ICRC is `body`; `None` if `body` is
/// shorter than a BTH. It goes on the wire as `to_le_bytes()`.
pub(crate) fn icrc_ipv6(
    ip: &[u8; IPV6_HDR_LEN],
    udp: &[u8; UDP_HDR_LEN],
    body: &[u8],
) -> Option<u32> {
    icrc_of(|bth| Icrc::ipv6(ip, udp, bth), body)
}

/// Whether the ICRC at the end of the UDP payload of an IPv4 packet is right. False if the
/// payload cannot hold a BTH and an ICRC.
#[cfg(ferroce_host)]
pub(crate) fn verify_icrc_ipv4(
    ip: &[u8; IPV4_HDR_LEN],
    udp: &[u8; UDP_HDR_LEN],
    udp_payload: &[u8],
) -> bool {
    verify(|bth| Icrc::ipv4(ip, udp, bth), udp_payload)
}

/// Whether the ICRC at the end of the UDP payload of an IPv6 packet is right. False if the
/// payload cannot hold a BTH and an ICRC.
#[cfg(ferroce_host)]
pub(crate) fn verify_icrc_ipv6(
    ip: &[u8; IPV6_HDR_LEN],
    udp: &[u8; UDP_HDR_LEN],
    udp_payload: &[u8],
) -> bool {
    verify(|bth| Icrc::ipv6(ip, udp, bth), udp_payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::opcode::Opcode;
    use crate::proto::psn::Psn;

    const IP4: [u8; 20] = [
        0x45, 0x02, 0x00, 0x3c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0xab, 0xcd, 192, 0, 2, 1, 192,
        0, 2, 2,
    ];
    const UDP: [u8; 8] = [0xc0, 0x01, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00];

    fn ip6() -> [u8; 40] {
        let mut ip = [0u8; 40];
        ip[..8].copy_from_slice(&[0x60, 0x12, 0x34, 0x56, 0x00, 0x28, 17, 64]);
        ip[8] = 0xfd;
        ip[23] = 1;
        ip[24] = 0xfd;
        ip[39] = 2;
        ip
    }

    fn sample_ext() -> ExtHeaders {
        ExtHeaders {
            reth: Some(Reth {
                va: 0x0123_4567_89ab_cdef,
                rkey: 0x1122_3344,
                dma_len: 0x0001_0000,
            }),
            aeth: Some(Aeth {
                syndrome: 0x1f,
                msn: 0x12_3456,
            }),
            deth: Some(Deth {
                qkey: 0x8001_0000,
                src_qpn: 0xab_cdef,
            }),
            imm: Some(0xdead_beef),
            atomic: Some(AtomicEth {
                va: 0xffff_0000_1111_2228,
                rkey: 0x5566_7788,
                swap_add: 7,
                compare: u64::MAX,
            }),
            atomic_ack: Some(AtomicAckEth {
                orig: 0x0102_0304_0506_0708,
            }),
            ieth: Some(Ieth { rkey: 0x9abc_def0 }),
            feth: Some(Feth {
                placement: 0x3,
                selectivity: 0x1,
            }),
        }
    }

    fn sample_bth(opcode: u8, pad: u8) -> Bth {
        Bth {
            pad,
            ack_req: true,
            ..Bth::new(opcode, 0x11, Psn::new(7))
        }
    }

    /// Everything but the ICRC: headers, payload and pad.
    fn body(opcode: u8, payload: &[u8]) -> Vec<u8> {
        let pad = pad_len(payload.len());
        let mut out = vec![0; 64];
        let n = write_headers(&sample_bth(opcode, pad), &sample_ext(), &mut out).unwrap();
        out.truncate(n);
        out.extend_from_slice(payload);
        out.resize(out.len() + usize::from(pad), 0);
        out
    }

    fn with_icrc(mut body: Vec<u8>) -> Vec<u8> {
        let icrc = icrc_ipv4(&IP4, &UDP, &body).unwrap();
        body.extend_from_slice(&icrc.to_le_bytes());
        body
    }

    fn build(opcode: u8, payload: &[u8]) -> Vec<u8> {
        with_icrc(body(opcode, payload))
    }

    /// Payload with a recognisable pattern.
    fn payload(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(13) ^ 0xa5)
            .collect()
    }

    #[test]
    fn headers_fit_max_hdr_len() {
        for op in 0..=255u8 {
            if let Some(info) = OpInfo::lookup(op) {
                assert!(info.hdr_len <= MAX_HDR_LEN, "{op:#x}");
            }
        }
    }

    #[test]
    fn headers_from_a_prefix_match_the_whole_parse() {
        for (op, len) in [
            (0x04u8, 100usize),
            (0x0a, 1024),
            (0x0c, 0),
            (0x11, 0),
            (0x64, 9),
        ] {
            let pkt = build(op, &payload(len));
            let whole = parse(&pkt).unwrap();
            for cut in [MAX_HDR_LEN, pkt.len()] {
                let h = parse_headers(&pkt[..cut.min(pkt.len())], pkt.len()).unwrap();
                assert_eq!(
                    (h.bth, h.ext, h.hdr_len),
                    (whole.bth, whole.ext, whole.hdr_len)
                );
                assert_eq!(h.payload_len, whole.payload.len());
                assert_eq!(h.icrc_offset() + 4, pkt.len());
            }
        }
        // A prefix shorter than the headers is truncated, whatever the length claims.
        let pkt = build(0x0a, &payload(64));
        assert_eq!(
            parse_headers(&pkt[..20], pkt.len()),
            Err(DropReason::Truncated)
        );
    }

    #[test]
    fn drop_reason_table() {
        assert_eq!(DropReason::COUNT, 5);
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            let name = r.name();
            assert!(!name.is_empty());
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
            for other in &DropReason::ALL[i + 1..] {
                assert_ne!(name, other.name());
            }
        }
    }

    #[test]
    fn pad_len_fills_the_word() {
        assert_eq!(pad_len(0), 0);
        assert_eq!(pad_len(1), 3);
        assert_eq!(pad_len(2), 2);
        assert_eq!(pad_len(3), 1);
        assert_eq!(pad_len(4096), 0);
        assert_eq!(pad_len(usize::MAX), 1);
    }

    #[test]
    fn send_only_with_payload_and_pad() {
        let data = payload(5);
        let wire = build(0x04, &data);
        assert_eq!(wire.len(), 12 + 5 + 3 + 4);
        let p = parse(&wire).unwrap();
        assert_eq!(p.info.opcode, Opcode::RcSendOnly);
        assert_eq!(p.bth, sample_bth(0x04, 3));
        assert_eq!(p.hdr_len, 12);
        assert_eq!(p.payload, &data[..]);
        assert_eq!(p.ext, ExtHeaders::default());
        let tail: [u8; 4] = wire[wire.len() - 4..].try_into().unwrap();
        assert_eq!(p.icrc_wire, u32::from_le_bytes(tail));
        assert_eq!(
            Some(p.icrc_wire),
            icrc_ipv4(&IP4, &UDP, &wire[..wire.len() - 4])
        );
        assert!(verify_icrc_ipv4(&IP4, &UDP, &wire));
    }

    #[test]
    fn write_first_with_reth() {
        let data = payload(256);
        let wire = build(0x06, &data);
        let p = parse(&wire).unwrap();
        assert_eq!(p.hdr_len, 28);
        assert_eq!(
            &wire[12..28],
            &[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x11, 0x22, 0x33, 0x44, 0, 1, 0, 0]
        );
        assert_eq!(p.ext.reth, sample_ext().reth);
        assert_eq!(p.ext.imm, None);
        assert_eq!(p.payload, &data[..]);
        assert!(p.info.is_write() && p.info.position == Position::First);
    }

    #[test]
    fn ack_with_aeth() {
        let wire = build(0x11, &[]);
        assert_eq!(wire.len(), 12 + 4 + 4);
        assert_eq!(&wire[12..16], &[0x1f, 0x12, 0x34, 0x56]);
        let p = parse(&wire).unwrap();
        assert_eq!(
            p.ext.aeth,
            Some(Aeth {
                syndrome: 0x1f,
                msn: 0x12_3456
            })
        );
        assert!(p.payload.is_empty());
        assert!(p.info.is_response());
    }

    #[test]
    fn read_request() {
        let p_wire = build(0x0c, &[]);
        let p = parse(&p_wire).unwrap();
        assert_eq!(p.hdr_len, 28);
        assert_eq!(p.ext.reth, sample_ext().reth);
        assert!(p.payload.is_empty() && p.info.is_read() && p.info.requires_ack());
    }

    #[test]
    fn ud_send_only_with_deth() {
        let data = payload(64);
        let mut b = body(0x64, &data);
        assert_eq!(&b[12..20], &[0x80, 0x01, 0, 0, 0, 0xab, 0xcd, 0xef]);
        // The byte before the source QPN is reserved: ignored on receipt.
        b[16] = 0x5a;
        let wire = with_icrc(b);
        let p = parse(&wire).unwrap();
        assert_eq!(p.ext.deth, sample_ext().deth);
        assert_eq!(p.hdr_len, 20);
        assert_eq!(p.payload, &data[..]);
        assert_eq!(p.info.transport, crate::proto::opcode::Transport::Ud);
    }

    #[test]
    fn send_with_immediate_keeps_wire_order() {
        let data = payload(3);
        let wire = build(0x05, &data);
        assert_eq!(&wire[12..16], &[0xde, 0xad, 0xbe, 0xef]);
        let p = parse(&wire).unwrap();
        assert_eq!(p.ext.imm, Some(0xdead_beef));
        assert_eq!(p.ext.imm.unwrap().to_be_bytes(), [0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(p.payload, &data[..]);
        assert_eq!(p.bth.pad, 1);

        let wire = build(0x65, &data);
        let p = parse(&wire).unwrap();
        assert_eq!(p.hdr_len, 24);
        assert_eq!(&wire[20..24], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(
            (p.ext.deth, p.ext.imm),
            (sample_ext().deth, Some(0xdead_beef))
        );
    }

    #[test]
    fn atomics_invalidate_and_cnp() {
        let p_wire = build(0x13, &[]);
        let p = parse(&p_wire).unwrap();
        assert_eq!((p.hdr_len, p.ext.atomic), (40, sample_ext().atomic));
        let p_wire = build(0x12, &[]);
        let p = parse(&p_wire).unwrap();
        assert_eq!(p.ext.aeth, sample_ext().aeth);
        assert_eq!(p.ext.atomic_ack, sample_ext().atomic_ack);
        let p_wire = build(0x17, &payload(8));
        let p = parse(&p_wire).unwrap();
        assert_eq!(p.ext.ieth, Some(Ieth { rkey: 0x9abc_def0 }));
        assert_eq!(p.payload.len(), 8);

        // The CNP of the Mellanox packet-format example; reserved bytes are not checked.
        let mut cnp = vec![
            0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x00, 0xd2, 0x00, 0x00, 0x00, 0x00,
        ];
        cnp.extend_from_slice(&[0x77; 16]);
        cnp.extend_from_slice(&[1, 2, 3, 4]);
        let p = parse(&cnp).unwrap();
        assert_eq!(p.info.opcode, Opcode::Cnp);
        assert!(p.bth.becn && p.payload.is_empty());
        assert_eq!((p.hdr_len, p.icrc_wire), (28, 0x0403_0201));
    }

    #[test]
    fn every_opcode_round_trips() {
        for &op in Opcode::ALL {
            let info = op.info();
            let len = if info.has_payload() { 37 } else { 0 };
            let data = payload(len);
            let wire = build(op as u8, &data);
            let p = parse(&wire).unwrap_or_else(|e| panic!("{op:?}: {e:?}"));
            assert_eq!(p.info, info);
            assert_eq!(p.payload, &data[..]);
            assert_eq!(
                p.hdr_len + p.payload.len() + usize::from(p.bth.pad) + 4,
                wire.len()
            );
            assert!(verify_icrc_ipv4(&IP4, &UDP, &wire));
            // Exactly the headers the opcode carries are decoded, with the values written.
            let all = sample_ext();
            let expect = ExtHeaders {
                reth: all.reth.filter(|_| info.has(ExtHdr::Reth)),
                aeth: all.aeth.filter(|_| info.has(ExtHdr::Aeth)),
                deth: all.deth.filter(|_| info.has(ExtHdr::Deth)),
                imm: all.imm.filter(|_| info.has(ExtHdr::ImmDt)),
                atomic: all.atomic.filter(|_| info.has(ExtHdr::AtomicEth)),
                atomic_ack: all.atomic_ack.filter(|_| info.has(ExtHdr::AtomicAckEth)),
                ieth: all.ieth.filter(|_| info.has(ExtHdr::Ieth)),
                feth: all.feth.filter(|_| info.has(ExtHdr::Feth)),
            };
            assert_eq!(p.ext, expect, "{op:?}");
            let mut again = [0u8; 64];
            let n = write_headers(&p.bth, &p.ext, &mut again).unwrap();
            assert_eq!(&again[..n], &wire[..n], "{op:?}");
        }
    }

    #[test]
    fn write_headers_errors() {
        let mut out = [0u8; 64];
        let ext = ExtHeaders::default();
        assert_eq!(
            write_headers(&sample_bth(0x18, 0), &ext, &mut out),
            Err(BuildError::UnknownOpcode)
        );
        assert_eq!(
            write_headers(&sample_bth(0x0b, 0), &ext, &mut out),
            Err(BuildError::MissingHeader(ExtHdr::Reth))
        );
        let only_reth = ExtHeaders {
            reth: sample_ext().reth,
            ..ext
        };
        assert_eq!(
            write_headers(&sample_bth(0x0b, 0), &only_reth, &mut out),
            Err(BuildError::MissingHeader(ExtHdr::ImmDt))
        );
        assert_eq!(
            write_headers(&sample_bth(0x0b, 0), &sample_ext(), &mut out[..31]),
            Err(BuildError::NoRoom)
        );
        assert_eq!(
            write_headers(&sample_bth(0x0b, 0), &sample_ext(), &mut out[..32]),
            Ok(32)
        );
    }

    #[test]
    fn truncated() {
        for len in 0..16 {
            assert_eq!(
                parse(&[0u8; 16][..len]),
                Err(DropReason::Truncated),
                "{len}"
            );
        }
        // Opcode 0 needs no extension header: BTH and ICRC are a whole (empty) send.
        assert_eq!(
            parse(&[0u8; 16]).map(|p| p.payload.len()),
            Err(DropReason::BadLength)
        );
        assert!(parse(&build(0x04, &[])).is_ok());
        // Room for a BTH and ICRC but not for the RETH of a write.
        let wire = build(0x06, &payload(256));
        for len in 16..32 {
            assert_eq!(parse(&wire[..len]), Err(DropReason::Truncated), "{len}");
        }
        let ack = build(0x11, &[]);
        assert_eq!(parse(&ack[..19]), Err(DropReason::Truncated));
    }

    #[test]
    fn bad_header() {
        let mut wire = build(0x04, &payload(4));
        for v in 1..16 {
            wire[1] = v;
            assert_eq!(parse(&wire), Err(DropReason::BadHeader));
        }
    }

    #[test]
    fn unknown_opcode() {
        let mut wire = build(0x04, &payload(4));
        for op in [0x15, 0x18, 0x1f, 0x40, 0x66, 0x80, 0xff] {
            wire[0] = op;
            assert_eq!(parse(&wire), Err(DropReason::UnknownOpcode), "{op:#x}");
        }
    }

    #[test]
    fn bad_length() {
        let with_payload = |op: u8, len: usize, pad: u8| {
            let mut b = body(op, &[]);
            b[1] = pad << 4;
            b.resize(b.len() + len, 0);
            b.extend_from_slice(&[0; 4]);
            parse(&b).map(|p| p.payload.len())
        };
        // Opcodes without payload.
        for op in [0x0c, 0x11, 0x12, 0x13, 0x14, 0x81] {
            assert_eq!(
                with_payload(op, 4, 0),
                Err(DropReason::BadLength),
                "{op:#x}"
            );
            assert_eq!(
                with_payload(op, 4, 3),
                Err(DropReason::BadLength),
                "{op:#x}"
            );
            assert_eq!(
                with_payload(op, 0, 1),
                Err(DropReason::BadLength),
                "{op:#x}"
            );
            assert_eq!(with_payload(op, 0, 0), Ok(0), "{op:#x}");
        }
        // More pad than payload.
        assert_eq!(with_payload(0x04, 2, 3), Err(DropReason::BadLength));
        assert_eq!(with_payload(0x04, 0, 1), Err(DropReason::BadLength));
        assert_eq!(with_payload(0x04, 4, 3), Ok(1));
        // Not a whole number of words.
        assert_eq!(with_payload(0x04, 5, 0), Err(DropReason::BadLength));
        assert_eq!(with_payload(0x04, 6, 1), Err(DropReason::BadLength));
        // Empty first, middle and last packets.
        for op in [
            0x00, 0x01, 0x02, 0x06, 0x07, 0x08, 0x0d, 0x0e, 0x0f, 0x21, 0x29,
        ] {
            assert_eq!(
                with_payload(op, 0, 0),
                Err(DropReason::BadLength),
                "{op:#x}"
            );
            assert_eq!(with_payload(op, 4, 3), Ok(1), "{op:#x}");
        }
        // Empty only packets are zero-length messages.
        for op in [0x04, 0x05, 0x0a, 0x10, 0x17, 0x24, 0x64, 0x65] {
            assert_eq!(with_payload(op, 0, 0), Ok(0), "{op:#x}");
        }
        // Larger than any MTU.
        assert_eq!(with_payload(0x04, MAX_PAYLOAD, 0), Ok(MAX_PAYLOAD));
        assert_eq!(
            with_payload(0x04, MAX_PAYLOAD + 4, 0),
            Err(DropReason::BadLength)
        );
        assert_eq!(
            with_payload(0x04, MAX_PAYLOAD + 4, 3),
            Err(DropReason::BadLength)
        );
        assert_eq!(with_payload(0x04, MAX_PAYLOAD, 3), Ok(MAX_PAYLOAD - 3));
    }

    #[test]
    fn icrc_detects_flipped_bits_ipv4() {
        let wire = build(0x0a, &payload(21));
        assert!(verify_icrc_ipv4(&IP4, &UDP, &wire));
        for bit in 0..wire.len() * 8 {
            let mut w = wire.clone();
            w[bit / 8] ^= 1 << (bit % 8);
            // Byte 4 of the BTH (FECN, BECN, reserved) is masked.
            assert_eq!(verify_icrc_ipv4(&IP4, &UDP, &w), bit / 8 == 4, "bit {bit}");
        }
        for bit in 0..IP4.len() * 8 {
            let mut ip = IP4;
            ip[bit / 8] ^= 1 << (bit % 8);
            // TOS, TTL and header checksum are masked.
            let masked = matches!(bit / 8, 1 | 8 | 10 | 11);
            assert_eq!(verify_icrc_ipv4(&ip, &UDP, &wire), masked, "bit {bit}");
        }
        for bit in 0..UDP.len() * 8 {
            let mut udp = UDP;
            udp[bit / 8] ^= 1 << (bit % 8);
            // Only the checksum is masked.
            assert_eq!(
                verify_icrc_ipv4(&IP4, &udp, &wire),
                bit / 8 >= 6,
                "bit {bit}"
            );
        }
        // ECN rewritten to CE and TTL decremented in flight.
        let mut ip = IP4;
        ip[1] |= 0x03;
        ip[8] -= 1;
        assert!(verify_icrc_ipv4(&ip, &UDP, &wire));
    }

    #[test]
    fn icrc_detects_flipped_bits_ipv6() {
        let ip = ip6();
        let mut body = body(0x65, &payload(9));
        let icrc = icrc_ipv6(&ip, &UDP, &body).unwrap();
        body.extend_from_slice(&icrc.to_le_bytes());
        let wire = body;
        assert!(verify_icrc_ipv6(&ip, &UDP, &wire));
        assert!(!verify_icrc_ipv4(&IP4, &UDP, &wire));
        for bit in 0..wire.len() * 8 {
            let mut w = wire.clone();
            w[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(verify_icrc_ipv6(&ip, &UDP, &w), bit / 8 == 4, "bit {bit}");
        }
        for bit in 0..ip.len() * 8 {
            let mut ip2 = ip;
            ip2[bit / 8] ^= 1 << (bit % 8);
            // Traffic class, flow label and hop limit are masked; the version is not.
            let masked = bit / 8 == 1 || bit / 8 == 2 || bit / 8 == 3 || bit / 8 == 7 || bit < 4;
            assert_eq!(verify_icrc_ipv6(&ip2, &UDP, &wire), masked, "bit {bit}");
        }
    }

    #[test]
    fn icrc_rejects_short_input() {
        for len in 0..16 {
            let data = vec![0u8; len];
            assert!(!verify_icrc_ipv4(&IP4, &UDP, &data));
            assert!(!verify_icrc_ipv6(&ip6(), &UDP, &data));
        }
        assert_eq!(icrc_ipv4(&IP4, &UDP, &[0; 11]), None);
        assert!(icrc_ipv4(&IP4, &UDP, &[0; 12]).is_some());
        assert!(icrc_ipv6(&ip6(), &UDP, &[0; 12]).is_some());
        // The smallest packet: a BTH and its ICRC.
        let wire = build(0x04, &[]);
        assert_eq!(wire.len(), 16);
        assert!(verify_icrc_ipv4(&IP4, &UDP, &wire));
    }
}
