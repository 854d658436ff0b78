// SPDX-License-Identifier: GPL-2.0

//! Public entry points into the protocol files, for code outside this crate.

use crate::proto::{
    bth::Bth,
    icrc,
    opcode::Position,
    opcode::{ExtHdr, OpInfo, Opcode},
    packet::{self, Aeth, AtomicAckEth, AtomicEth, Deth, DropReason, ExtHeaders, Feth, Ieth, Reth},
    psn::Psn,
    read::ReadResource,
    responder::{request_fits, Refusal, Sequence, Sequencer, UcStep, UnderWay},
    window::{Entry, Kind, Place, ReadOutcome, Window},
    wqe::WcStatus,
};

/// ICRC of a RoCEv2-over-IPv4 packet; `rest` is everything after the BTH, up to the ICRC.
pub fn icrc_ipv4(ip: &[u8; 20], udp: &[u8; 8], bth: &[u8; 12], rest: &[u8]) -> u32 {
    let mut c = icrc::Icrc::ipv4(ip, udp, bth);
    c.update(rest);
    c.finish()
}

/// Raw CRC-32 register update (no inversion), the primitive under the ICRC.
pub fn crc32_raw(crc: u32, data: &[u8]) -> u32 {
    icrc::crc32_update(crc, data)
}

/// Builds a BTH from its main fields into `out`.
pub fn bth_build(opcode: u8, dest_qpn: u32, psn: u32, ack_req: bool, out: &mut [u8; 12]) {
    Bth {
        ack_req,
        ..Bth::new(opcode, dest_qpn, Psn::new(psn))
    }
    .write(out);
}

/// Parses a BTH; returns (opcode, destination QPN, PSN) or `None` if malformed.
pub fn bth_parse(buf: &[u8]) -> Option<(u8, u32, u32)> {
    Bth::parse(buf)
        .ok()
        .map(|b| (b.opcode, b.dest_qpn, b.psn.get()))
}

/// IPv4 header that [`build_packet`] computes ICRCs over and [`fuzz_parse`] checks them with.
pub const SAMPLE_IPV4: [u8; 20] = [
    0x45, 0x02, 0x00, 0x3c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0xab, 0xcd, 192, 0, 2, 1, 192, 0,
    2, 2,
];

/// UDP header that goes with [`SAMPLE_IPV4`].
pub const SAMPLE_UDP: [u8; 8] = [0xc0, 0x01, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00];

/// Every opcode byte the parser knows, in table order.
pub fn known_opcodes() -> Vec<u8> {
    Opcode::ALL.iter().map(|&op| op as u8).collect()
}

/// Whether packets with `opcode` carry payload; `None` if the opcode is unknown.
pub fn opcode_has_payload(opcode: u8) -> Option<bool> {
    OpInfo::lookup(opcode).map(|i| i.has_payload())
}

/// Names of the reasons a packet is dropped for, in counter order.
pub fn drop_reason_names() -> Vec<&'static str> {
    DropReason::ALL.iter().map(|r| r.name()).collect()
}

/// Extension headers with arbitrary but recognisable values, all present.
fn sample_ext() -> ExtHeaders {
    ExtHeaders {
        reth: Some(Reth {
            va: 0x0000_7f00_1234_5000,
            rkey: 0x0000_1234,
            dma_len: 8192,
        }),
        aeth: Some(Aeth {
            syndrome: 0x1f,
            msn: 0x00_0102,
        }),
        deth: Some(Deth {
            qkey: 0x8001_0000,
            src_qpn: 0x00_0042,
        }),
        imm: Some(0x0102_0304),
        atomic: Some(AtomicEth {
            va: 0x0000_7f00_1234_5008,
            rkey: 0x0000_1234,
            swap_add: 1,
            compare: 0,
        }),
        atomic_ack: Some(AtomicAckEth { orig: 41 }),
        ieth: Some(Ieth { rkey: 0x0000_5678 }),
        feth: Some(Feth {
            placement: 1,
            selectivity: 0,
        }),
    }
}

/// A packet (UDP payload) of `opcode` carrying `payload`, with sample extension header values and
/// its ICRC over [`SAMPLE_IPV4`] and [`SAMPLE_UDP`]. `None` for an unknown opcode. The result
/// need not parse: an opcode may not allow the payload given.
pub fn build_packet(opcode: u8, psn: u32, payload: &[u8]) -> Option<Vec<u8>> {
    let pad = packet::pad_len(payload.len());
    let bth = Bth {
        pad,
        ack_req: true,
        ..Bth::new(opcode, 0x11, Psn::new(psn))
    };
    let mut out = vec![0; 64];
    let n = packet::write_headers(&bth, &sample_ext(), &mut out).ok()?;
    out.truncate(n);
    out.extend_from_slice(payload);
    out.resize(out.len() + usize::from(pad), 0);
    let icrc = packet::icrc_ipv4(&SAMPLE_IPV4, &SAMPLE_UDP, &out)?;
    out.extend_from_slice(&icrc.to_le_bytes());
    Some(out)
}

/// Runs the receive path's parsing on `data`, a UDP payload, and panics if an invariant breaks.
///
/// Returns the header length, or the name of the drop reason. A packet that parses but whose ICRC
/// over [`SAMPLE_IPV4`] and [`SAMPLE_UDP`] is wrong gives `"bad_icrc"`, as the driver drops it
/// after parsing. The ICRC is also checked over headers taken from `data` itself, so that any
/// input reaches it.
pub fn fuzz_parse(data: &[u8]) -> Result<usize, &'static str> {
    let ip4: [u8; 20] = core::array::from_fn(|i| data.get(i).copied().unwrap_or(0x45));
    let ip6: [u8; 40] = core::array::from_fn(|i| data.get(i).copied().unwrap_or(0x60));
    let udp: [u8; 8] = core::array::from_fn(|i| data.get(i + 8).copied().unwrap_or(0));
    let v4 = packet::verify_icrc_ipv4(&ip4, &udp, data);
    let _ = packet::verify_icrc_ipv6(&ip6, &udp, data);
    if data.len() < 16 {
        assert!(!v4);
    }

    let p = match packet::parse(data) {
        Ok(p) => p,
        Err(r) => {
            assert_ne!(r, DropReason::BadIcrc, "parse cannot see the ICRC");
            if data.len() < 16 {
                assert_eq!(r, DropReason::Truncated);
            }
            return Err(r.name());
        }
    };
    let info = p.info;
    let pad = usize::from(p.bth.pad);
    assert!(p.hdr_len >= 12 && p.hdr_len == info.hdr_len && p.hdr_len % 4 == 0);
    assert_eq!(p.hdr_len + p.payload.len() + pad + 4, data.len());
    assert_eq!(data.len() % 4, 0);
    assert!(core::ptr::eq(
        p.payload.as_ptr(),
        data[p.hdr_len..].as_ptr()
    ));
    assert!(p.payload.len() <= packet::MAX_PAYLOAD);
    assert!(info.has_payload() || (p.payload.is_empty() && pad == 0));
    assert_eq!(p.bth.opcode, info.opcode as u8);
    assert_eq!(Ok(p.bth), Bth::parse(data));
    let tail: [u8; 4] = data[data.len() - 4..].try_into().unwrap();
    assert_eq!(p.icrc_wire, u32::from_le_bytes(tail));
    let ext = &p.ext;
    assert_eq!(ext.reth.is_some(), info.has(ExtHdr::Reth));
    assert_eq!(ext.aeth.is_some(), info.has(ExtHdr::Aeth));
    assert_eq!(ext.deth.is_some(), info.has(ExtHdr::Deth));
    assert_eq!(ext.imm.is_some(), info.has(ExtHdr::ImmDt));
    assert_eq!(ext.atomic.is_some(), info.has(ExtHdr::AtomicEth));
    assert_eq!(ext.atomic_ack.is_some(), info.has(ExtHdr::AtomicAckEth));
    assert_eq!(ext.ieth.is_some(), info.has(ExtHdr::Ieth));
    assert_eq!(ext.feth.is_some(), info.has(ExtHdr::Feth));

    // Writing the parsed headers back gives a packet that parses the same; only reserved bits
    // may differ from the input.
    let mut again = data.to_vec();
    assert_eq!(
        packet::write_headers(&p.bth, &p.ext, &mut again),
        Ok(p.hdr_len)
    );
    assert_eq!(packet::parse(&again), Ok(p));

    if !packet::verify_icrc_ipv4(&SAMPLE_IPV4, &SAMPLE_UDP, data) {
        return Err(DropReason::BadIcrc.name());
    }
    Ok(p.hdr_len)
}

/// Drives the RC engine's decisions with events taken from `data`, as a peer that crafts packets
/// (any PSN, any syndrome, any READ length, MTU and key) and a local process that posts any WQEs
/// could make them see, and panics if an invariant breaks: the requester's window keeps
/// `una <= nxt <= end` and never counts more done than a WQE holds, whatever answers come; the
/// responder's sequencer NAKs each RC gap once and drops a UC message from its gap to the next
/// first packet; a READ resource never answers outside its range, its PSNs or its resend budget.
pub fn fuzz_rc(data: &[u8]) {
    let mut bytes = data.iter().copied();
    let mut next = || bytes.next().unwrap_or(0);
    let start = Psn::new(u32::from_le_bytes([next(), next(), next(), 0]));
    let mut w = Window::starting_at(start);
    let mut e: Vec<Entry> = Vec::new();
    // The responder: the sequencer, and what it must say.
    let mut seq = Sequencer::default();
    let mut expected = start;
    let mut gap_naked = false;
    let mut uc_lost = false;
    // A READ of any length up to 2^31 bytes, any MTU, any key.
    let read_len = u32::from_le_bytes([next(), next(), next(), next()]) & 0x7fff_ffff;
    let mtu = 256u32 << (next() % 5);
    let rkey = u32::from(next());
    let reth = Reth {
        va: 0xffff_0000_0000,
        rkey,
        dma_len: read_len,
    };
    let mut read = ReadResource::new(start, reth, mtu, 1, 0);
    let npkts = u64::from(read.npkts());
    assert_eq!(npkts, u64::from(read_len.div_ceil(mtu).max(1)));
    let mut read_sent = 0u64;
    while !data.is_empty() {
        let (op, arg) = (next(), u32::from(next()));
        if op == 0 && arg == 0 {
            break;
        }
        // A PSN near the window: up to 64 before `una` to 191 after it.
        let near = w.una().add(arg).add(Psn::MASK - 63);
        match op % 14 {
            0 if e.len() < 32 => {
                let kinds = [
                    Kind::Send,
                    Kind::Write,
                    Kind::Read,
                    Kind::CompareSwap,
                    Kind::FetchAdd,
                    Kind::AtomicWrite,
                ];
                let kind = kinds[(arg % 6) as usize];
                let one = kind.is_atomic() || kind == Kind::AtomicWrite;
                let n = if one { 1 } else { 1 + arg % 40 };
                e.push(Entry::new(kind, w.assign(n), n));
            }
            1 => w.send_allowed(&e, arg),
            2 if w.place_ack(near) == Place::Current => w.ack(&mut e, near),
            3 if w.place(near) == Place::Current => w.nak(&mut e, near),
            4 if w.place(near) == Place::Current => {
                let outcome = if arg & 1 == 0 {
                    w.read_response(&mut e, near)
                } else {
                    w.atomic_response(&mut e, near)
                };
                if let ReadOutcome::Next { idx, index } = outcome {
                    assert!(e[idx].kind().awaits_response());
                    assert!(e[idx].kind().is_atomic() == (arg & 1 == 1));
                    assert!(e[idx].kind().reads() == (arg & 1 == 0));
                    w.read_landed(&mut e, idx, index);
                }
            }
            5 if arg & 1 == 1 => {
                w.fail_oldest(&mut e, WcStatus::RetryExcErr);
            }
            5 if w.place(near) == Place::Current => {
                w.fail_at(&mut e, near, WcStatus::RemOpErr);
            }
            6 => w.rewind(&mut e),
            7 => {
                for x in e.iter_mut() {
                    if let Some(from) = x.take_ask() {
                        assert!(from < x.npkts(), "asks past the READ");
                        w.asked_again(x.first().add(from), x.end());
                    }
                }
            }
            8 => {
                while e.first().is_some_and(Entry::finished) {
                    e.remove(0);
                }
            }
            9 => {
                let psn = expected.add(arg).add(Psn::MASK - 127);
                let d = psn.diff(expected);
                match seq.rc(psn, expected) {
                    Sequence::Expected => {
                        assert_eq!(d, 0);
                        gap_naked = false;
                        expected = expected.add(1 + arg % 3);
                    }
                    Sequence::Duplicate => assert!(d < 0),
                    Sequence::Ahead { nak } => {
                        assert!(d > 0);
                        assert_eq!(nak, !gap_naked, "a gap is NAKed once");
                        gap_naked = true;
                    }
                }
            }
            10 => {
                let psn = expected.add(arg % 4).add(Psn::MASK);
                let pos = [
                    Position::First,
                    Position::Middle,
                    Position::Last,
                    Position::Only,
                ][(arg >> 2 & 3) as usize];
                if arg & 0x80 != 0 {
                    seq.lose_message();
                    uc_lost = true;
                }
                let (step, gap) = seq.uc(psn, expected, pos);
                assert_eq!(gap, psn != expected);
                uc_lost |= gap;
                let want = if pos.starts() {
                    uc_lost = false;
                    UcStep::Start
                } else if uc_lost {
                    UcStep::Skip
                } else {
                    UcStep::Continue
                };
                assert_eq!(step, want);
                expected = psn.add(1);
            }
            11 => {
                let under =
                    [UnderWay::Nothing, UnderWay::Send, UnderWay::Write][(arg % 3) as usize];
                let pos = Position::of(arg >> 2 & 3, 3 + (arg >> 4 & 1));
                let len = (arg as usize) << 4;
                if request_fits(under, arg & 2 != 0, pos, len, mtu) {
                    assert_eq!(pos.starts(), under == UnderWay::Nothing);
                    assert!(len <= mtu as usize && (pos.ends() || len == mtu as usize));
                }
                let r = [
                    Refusal::NotReady,
                    Refusal::NoMem,
                    Refusal::Invalid,
                    Refusal::Access,
                ][(arg % 4) as usize];
                assert!(!r.syndrome(arg as u8 & 0x1f).is_ack());
                assert_eq!(
                    r.fails_qp(),
                    matches!(r, Refusal::Invalid | Refusal::Access)
                );
            }
            12 => {
                // A duplicate READ request, from anywhere near the READ, with any key.
                let psn = start.add(arg.wrapping_mul(37) % 64).add(Psn::MASK - 8);
                let key = if arg & 1 == 0 { rkey } else { arg };
                let ours = read.rewind(psn, key);
                let i = psn.diff(start);
                assert_eq!(ours, key == rkey && i >= 0 && u64::from(i as u32) < npkts);
            }
            _ => {
                for _ in 0..arg % 16 {
                    let Some(r) = read.next_response() else {
                        break;
                    };
                    let i = r.psn.diff(start);
                    assert!(
                        i >= 0 && u64::from(i as u32) < npkts,
                        "a response outside the READ"
                    );
                    assert!(r.len <= mtu, "a response longer than the MTU");
                    assert!(r.va >= reth.va);
                    assert!(r.va - reth.va + u64::from(r.len) <= u64::from(read_len));
                    read.sent();
                    read_sent += 1;
                }
            }
        }
        assert!(w.una().diff(w.nxt()) <= 0, "una passed nxt");
        assert!(w.nxt().diff(w.end()) <= 0, "nxt passed end");
        for x in &e {
            assert!(x.done() <= x.npkts(), "more done than sent");
            if x.pending() {
                assert!(x.end().diff(w.una()) > 0, "a pending WQE before una");
            }
        }
    }
    // Each response sent once, plus at most 8 times over again, plus the slack.
    assert!(
        read_sent <= npkts + npkts * 8 + 1024,
        "READ resent past its budget"
    );
}
