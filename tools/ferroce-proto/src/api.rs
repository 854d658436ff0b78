// SPDX-License-Identifier: GPL-2.0

//! Public entry points into the protocol files, for code outside this crate.

use crate::proto::{
    bth::Bth,
    icrc,
    opcode::{ExtHdr, OpInfo, Opcode},
    packet::{self, Aeth, AtomicAckEth, AtomicEth, Deth, DropReason, ExtHeaders, Ieth, Reth},
    psn::Psn,
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
