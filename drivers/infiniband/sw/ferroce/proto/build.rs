// SPDX-License-Identifier: GPL-2.0

//! Building whole RoCEv2-over-IPv4 packets: IP and UDP headers, BTH and extension headers,
//! payload, pad and ICRC.

use super::{
    bth::Bth,
    icrc::{ICRC_LEN, IPV4_HDR_LEN, UDP_HDR_LEN},
    opcode::OpInfo,
    packet::{icrc_ipv4, pad_len, write_headers, BuildError, ExtHeaders},
    ROCE_V2_UDP_PORT,
};

/// Where an IPv4 packet goes and how it is marked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ipv4Path {
    pub(crate) saddr: [u8; 4],
    pub(crate) daddr: [u8; 4],
    /// DSCP and ECN.
    pub(crate) tos: u8,
    pub(crate) ttl: u8,
    pub(crate) sport: u16,
}

/// The length of the IPv4 packet of `opcode` carrying `payload_len` bytes.
pub(crate) fn ipv4_packet_len(opcode: u8, payload_len: usize) -> Option<usize> {
    let info = OpInfo::lookup(opcode)?;
    let pad = usize::from(pad_len(payload_len));
    [
        IPV4_HDR_LEN,
        UDP_HDR_LEN,
        info.hdr_len,
        payload_len,
        pad,
        ICRC_LEN,
    ]
    .iter()
    .try_fold(0usize, |a, &b| a.checked_add(b))
}

/// Writes the whole packet into `out`, which must be [`ipv4_packet_len`] long. The IP header
/// checksum is left 0 (the stack fills it; the ICRC masks it); the ID is 0 with DF set, as RFC
/// 6864 allows for atomic datagrams.
pub(crate) fn build_ipv4(
    path: &Ipv4Path,
    bth: &Bth,
    ext: &ExtHeaders,
    payload: &[u8],
    out: &mut [u8],
) -> Result<(), BuildError> {
    let len = ipv4_packet_len(bth.opcode, payload.len()).ok_or(BuildError::UnknownOpcode)?;
    if out.len() != len {
        return Err(BuildError::NoRoom);
    }
    let tot_len = u16::try_from(len).map_err(|_| BuildError::NoRoom)?;
    let udp_len = tot_len - IPV4_HDR_LEN as u16;
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
    let (udp, body) = rest.split_at_mut(UDP_HDR_LEN);
    udp[0..2].copy_from_slice(&path.sport.to_be_bytes());
    udp[2..4].copy_from_slice(&ROCE_V2_UDP_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    let mut bth = *bth;
    bth.pad = pad_len(payload.len());
    let hdr_len = write_headers(&bth, ext, body)?;
    let (hdrs_and_payload, icrc) = body.split_at_mut(body.len() - ICRC_LEN);
    hdrs_and_payload
        .get_mut(hdr_len..hdr_len + payload.len())
        .ok_or(BuildError::NoRoom)?
        .copy_from_slice(payload);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        packet::{parse, verify_icrc_ipv4, Deth},
        psn::Psn,
    };

    #[test]
    fn ud_send_round_trips_through_the_parser() {
        let path = Ipv4Path {
            saddr: [10, 0, 0, 1],
            daddr: [10, 0, 0, 2],
            tos: 0x02,
            ttl: 64,
            sport: udp_sport(flow_label(17, 0x123)),
        };
        let bth = Bth {
            opcode: 0x64,
            solicited: false,
            mig_req: false,
            pad: 0,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qpn: 0x123,
            ack_req: false,
            psn: Psn::new(5),
        };
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
        let mut out = [0u8; 68];
        build_ipv4(&path, &bth, &ext, &payload, &mut out[..len]).unwrap();
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
            build_ipv4(&path, &bth, &ext, &payload, &mut out[..len - 1]),
            Err(BuildError::NoRoom)
        ));
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
