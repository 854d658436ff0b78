// SPDX-License-Identifier: GPL-2.0

//! The receive path: from the UDP socket's encapsulation hook to a validated packet.
//!
//! Everything here comes from the wire and is untrusted: lengths are checked before any field is
//! read, the ICRC before anything is acted on, and every drop is counted by reason.

use crate::{
    counters::Counter,
    device::Ferroce,
    proto::{
        icrc::{IPV4_HDR_LEN, IPV6_HDR_LEN, UDP_HDR_LEN},
        packet::{self, DropReason},
    },
};
use kernel::{
    net::{skbuff::SkBuff, udp_tunnel::EncapRecv},
    rdma::device::Device,
};

/// Receives the datagrams of every ferroce socket.
pub(crate) struct Receiver;

impl EncapRecv for Receiver {
    fn recv(mut skb: SkBuff) {
        // Only packets that arrive on a netdev with a ferroce device are ours (a VLAN upper of
        // such a netdev is not: links are refused on VLANs, and the lower device's port owns
        // only untagged traffic).
        let Some(dev) = skb.dev().and_then(Device::<Ferroce>::get_by_netdev) else {
            return;
        };
        let counters = &dev.data().counters;
        if skb.linearize().is_err() {
            counters.inc(Counter::DropNoMem);
            return;
        }
        match classify(&skb) {
            Ok(()) => {}
            Err(reason) => counters.inc(drop_counter(reason)),
        }
    }
}

/// Why a packet is dropped: a flaw in the packet itself, or no one to take it.
enum Reject {
    Packet(DropReason),
    /// No queue pair with that number (none exist yet).
    Qpn,
}

fn drop_counter(d: Reject) -> Counter {
    match d {
        Reject::Qpn => Counter::DropBadQpn,
        Reject::Packet(r) => match r {
            DropReason::Truncated => Counter::DropTruncated,
            DropReason::BadHeader => Counter::DropBadHeader,
            DropReason::UnknownOpcode => Counter::DropUnknownOpcode,
            DropReason::BadLength => Counter::DropBadLength,
            DropReason::BadIcrc => Counter::DropIcrc,
        },
    }
}

/// Checks one linear packet, from its IP header on.
fn classify(skb: &SkBuff) -> Result<(), Reject> {
    const BAD_HEADER: Reject = Reject::Packet(DropReason::BadHeader);
    let (bytes, udp_off) = skb.network_and_data().ok_or(BAD_HEADER)?;
    let (ip, rest) = bytes.split_at(udp_off);
    let (udp, payload) = rest
        .split_first_chunk::<UDP_HDR_LEN>()
        .ok_or(Reject::Packet(DropReason::Truncated))?;
    // Parse before the ICRC: a packet too short to carry one is truncated, not corrupt.
    let pkt = packet::parse(payload).map_err(Reject::Packet)?;
    // RoCEv2 carries no IPv4 options or IPv6 extension headers: the ICRC covers a fixed-size
    // IP header.
    let icrc_ok = match ip.first().map(|b| b >> 4) {
        Some(4) => {
            let ip: &[u8; IPV4_HDR_LEN] = ip.try_into().map_err(|_| BAD_HEADER)?;
            packet::verify_icrc_ipv4(ip, udp, payload)
        }
        Some(6) => {
            let ip: &[u8; IPV6_HDR_LEN] = ip.try_into().map_err(|_| BAD_HEADER)?;
            packet::verify_icrc_ipv6(ip, udp, payload)
        }
        _ => false,
    };
    if !icrc_ok {
        return Err(Reject::Packet(DropReason::BadIcrc));
    }
    // Queue pairs come next; until then every valid packet is for an unknown QPN.
    let _ = pkt.bth.dest_qpn;
    Err(Reject::Qpn)
}
