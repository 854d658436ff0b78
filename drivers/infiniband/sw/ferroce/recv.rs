// SPDX-License-Identifier: GPL-2.0

//! The receive path: from the UDP socket's encapsulation hook to a validated packet.
//!
//! Everything here comes from the wire and is untrusted: lengths are checked before any field is
//! read, the ICRC before anything is acted on, and every drop is counted by reason.

use crate::{
    counters::{Counter, Counters},
    device::{Ferroce, FerroceDevice},
    proto::{
        icrc::{IPV4_HDR_LEN, IPV6_HDR_LEN, UDP_HDR_LEN},
        packet::{self, DropReason, Packet},
    },
    qp::{QpShared, QpTable},
};
use kernel::{
    impl_has_work,
    net::{
        skbuff::{SkBuff, SkbQueue},
        udp_tunnel::EncapRecv,
    },
    new_work,
    prelude::*,
    rdma::device::Device,
    sync::Arc,
    workqueue::{Work, WorkItem},
};

/// Received packets a device holds for its work queue before it drops new ones.
const RX_BACKLOG: u32 = 4096;

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
        let data = dev.data();
        if skb.linearize().is_err() {
            data.counters.inc(Counter::DropNoMem);
            return;
        }
        RxQueue::take(data, skb);
    }
}

/// A device's received packets on their way from softirq to its work queue.
#[pin_data]
pub(crate) struct RxQueue {
    #[pin]
    skbs: SkbQueue,
    #[pin]
    work: Work<RxQueue>,
    qps: Arc<QpTable>,
    counters: Arc<Counters>,
}

impl_has_work! {
    impl HasWork<Self> for RxQueue { self.work }
}

impl RxQueue {
    /// Queues a linear packet (`data` at its UDP header) for `dev`'s work queue: one from the
    /// socket, or one a QP of the device sent to the device's own address.
    pub(crate) fn take(dev: &FerroceDevice, skb: SkBuff) {
        // A bounded backlog: past it the data path is behind, and older packets would only
        // reach QPs after their peers' timers fired.
        if dev.rx.skbs.len() >= RX_BACKLOG {
            dev.counters.inc(Counter::DropBacklog);
            return;
        }
        // Everything else runs in process context, in batches: QP state sleeps-locks, and
        // checking the ICRC there keeps softirq time short.
        dev.rx.skbs.push(skb);
        let _ = dev.wq.enqueue(dev.rx.clone());
    }

    pub(crate) fn new(qps: Arc<QpTable>, counters: Arc<Counters>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                skbs <- SkbQueue::new(),
                work <- new_work!("ferroce::RxQueue::work"),
                qps,
                counters,
            }),
            GFP_KERNEL,
        )
    }

    /// Whether received packets wait for the work queue.
    pub(crate) fn busy(&self) -> bool {
        !self.skbs.is_empty()
    }

    /// Validates one packet and hands it to its QP.
    fn deliver(&self, skb: SkBuff) {
        let res = match classify(&skb) {
            Ok((ip, pkt)) => match self.qps.get(pkt.bth.dest_qpn) {
                Some(qp) => QpShared::receive(&qp, &pkt, ip, &self.counters).map_err(Reject::Qp),
                None => Err(Reject::Qpn),
            },
            Err(r) => Err(r),
        };
        match res {
            Ok(()) => skb.consume(),
            Err(r) => {
                self.counters.inc(drop_counter(r));
                drop(skb);
            }
        }
    }
}

impl WorkItem for RxQueue {
    type Pointer = Arc<Self>;

    fn run(this: Arc<Self>) {
        // Whatever arrives while this runs is taken too; a push after the last pop queues the
        // work again.
        while let Some(skb) = this.skbs.pop() {
            this.deliver(skb);
        }
    }
}

/// Why a packet is dropped: a flaw in the packet itself, or no one to take it.
enum Reject {
    Packet(DropReason),
    /// No queue pair with that number.
    Qpn,
    /// The QP refused it.
    Qp(QpDrop),
}

/// Why a QP refuses a valid packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpDrop {
    /// Not for this QP's transport, or the QP is not in a receiving state.
    BadState,
    /// A UD packet whose Q_Key does not match.
    BadQkey,
    /// No receive WQE posted (UD drops; RC answers with an RNR NAK).
    NoRecvWqe,
    /// An RC response for a PSN this QP has not sent.
    BadPsn,
}

fn drop_counter(d: Reject) -> Counter {
    match d {
        Reject::Qpn => Counter::DropBadQpn,
        Reject::Qp(QpDrop::BadState) => Counter::DropBadState,
        Reject::Qp(QpDrop::BadQkey) => Counter::DropBadQkey,
        Reject::Qp(QpDrop::NoRecvWqe) => Counter::DropNoRecvWqe,
        Reject::Qp(QpDrop::BadPsn) => Counter::DropBadPsn,
        Reject::Packet(r) => match r {
            DropReason::Truncated => Counter::DropTruncated,
            DropReason::BadHeader => Counter::DropBadHeader,
            DropReason::UnknownOpcode => Counter::DropUnknownOpcode,
            DropReason::BadLength => Counter::DropBadLength,
            DropReason::BadIcrc => Counter::DropIcrc,
        },
    }
}

/// Checks one linear packet, from its IP header on; returns its IP header and parsed packet.
fn classify(skb: &SkBuff) -> Result<(&[u8], Packet<'_>), Reject> {
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
    Ok((ip, pkt))
}
