// SPDX-License-Identifier: GPL-2.0

//! Public entry points into the protocol files, for code outside this crate.

use crate::proto::{bth::Bth, icrc, psn::Psn};

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
        opcode,
        solicited: false,
        mig_req: false,
        pad: 0,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qpn,
        ack_req,
        psn: Psn::new(psn),
    }
    .write(out);
}

/// Parses a BTH; returns (opcode, destination QPN, PSN) or `None` if malformed.
pub fn bth_parse(buf: &[u8]) -> Option<(u8, u32, u32)> {
    Bth::parse(buf).ok().map(|b| (b.opcode, b.dest_qpn, b.psn.get()))
}
