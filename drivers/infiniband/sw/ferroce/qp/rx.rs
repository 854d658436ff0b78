// SPDX-License-Identifier: GPL-2.0

//! Packets for a QP: taken at once in softirq, or from its backlog by its work, and handed to
//! its transport after the checks every transport shares (ICRC, P_Key, the connected peer).

use super::{QpCtx, QpInner, QpShared};
use crate::{
    cc,
    counters::{Counter, Counters},
    device::Ferroce,
    limits,
    net::recv::{drop_counter, Packet, QpDrop, Reject, RxHeaders},
    proto::{
        bth::pkey_matches,
        dcqcn,
        opcode::{OpKind, Transport},
        packet::DropReason,
    },
    rc, ud,
};
use core::sync::atomic::Ordering;
use kernel::{
    net::skbuff::SkBuff,
    prelude::*,
    rdma::qp::{Qp, QpType},
    sync::Arc,
};

/// Bytes of packets a QP's backlog holds (packets from QPs of its own device wait there);
/// past it they are dropped, and a reliable sender sends them again.
const RX_BACKLOG_BYTES: usize = 4 << 20;
/// Packets it holds: small ones cost more memory than their length says.
const RX_BACKLOG_PKTS: u32 = 4096;

/// Frees a packet as delivered, or counts why it was dropped.
pub(super) fn consume_or_count(skb: SkBuff, res: Result<(), Reject>, counters: &Counters) {
    match res {
        Ok(()) => skb.consume(),
        Err(r) => {
            counters.inc(drop_counter(r));
            drop(skb);
        }
    }
}

impl QpShared {
    /// Takes a packet addressed to this QP, in softirq, at once. It waits in the QP's
    /// backlog, for the QP's work, if it comes from a QP of the same device (`looped`: taking it
    /// at once could recurse), or if packets wait there already, or READ responses are still
    /// going out (what was asked after a READ is answered after it; only a duplicate READ
    /// request, which asks for responses again, is taken at once).
    pub(crate) fn receive(
        this: &Arc<Self>,
        skb: SkBuff,
        hdr: RxHeaders,
        looped: bool,
        counters: &Counters,
    ) {
        if looped {
            // Not inside the link: the sender may hold its own, of the same lock class.
            this.backlog(skb, counters);
            return;
        }
        let res = this.link.with(move |qp| {
            let res = {
                let mut inner = this.inner.lock();
                // A duplicate READ overtakes the backlog: what waits there may wait for the very
                // responses it asks for again.
                let waits = !this.rx.is_empty() || inner.resp.resources.answering();
                if waits && !hdr.rewinds_read(&inner) {
                    None
                } else {
                    Some(this.take(qp, &mut inner, &skb, &hdr, counters))
                }
            };
            // Decided and queued in one hold of the link, which the QP's work holds while it
            // drains the backlog. (A destroy cannot come between: the table's removal waits
            // out an RCU grace period, and this runs with softirqs off.)
            match res {
                Some(res) => {
                    this.flush_or_leave(counters);
                    consume_or_count(skb, res, counters);
                }
                None => this.backlog(skb, counters),
            }
        });
        if res.is_none() {
            // Being destroyed: the packet went with the closure.
            counters.inc(Counter::DropBadState);
        }
    }

    /// Queues a packet for the QP's work, within the backlog's bound.
    fn backlog(self: &Arc<Self>, skb: SkBuff, counters: &Counters) {
        let len = skb.len() as usize;
        if self.rx.len() >= RX_BACKLOG_PKTS {
            counters.inc(Counter::DropBacklog);
            return;
        }
        if self.rx_bytes.fetch_add(len, Ordering::Relaxed) + len > RX_BACKLOG_BYTES {
            self.rx_bytes.fetch_sub(len, Ordering::Relaxed);
            counters.inc(Counter::DropBacklog);
            return;
        }
        self.rx.push(skb);
        self.kick();
    }

    /// Checks one packet's ICRC, then hands it to the QP's transport, under the lock.
    pub(super) fn take(
        self: &Arc<Self>,
        qp: &Qp<Ferroce>,
        inner: &mut QpInner,
        skb: &SkBuff,
        hdr: &RxHeaders,
        counters: &Counters,
    ) -> Result<(), Reject> {
        if !hdr.verify_icrc(skb) {
            return Err(Reject::Packet(DropReason::BadIcrc));
        }
        let pkt = Packet::new(skb, hdr);
        let mut cx = QpCtx {
            qp,
            shared: self,
            inner,
        };
        Self::dispatch(&mut cx, &pkt, counters).map_err(Reject::Qp)
    }

    fn dispatch(cx: &mut QpCtx<'_>, pkt: &Packet<'_>, counters: &Counters) -> Result<(), QpDrop> {
        let state = cx.inner.attr.state;
        // The one P_Key of the port (index 0) is every QP's.
        if !pkey_matches(pkt.bth.pkey, limits::DEFAULT_PKEY) {
            return Err(QpDrop::BadPkey);
        }
        // A connected QP takes packets from its peer, to its own address, only.
        if matches!(cx.shared.qp_type, QpType::Rc | QpType::Uc)
            && state.can_receive()
            && !cx
                .inner
                .path(cx.qp.qpn())
                .is_some_and(|p| p.answers(pkt.hdr.ip()))
        {
            return Err(QpDrop::BadAddress);
        }
        if pkt.info.kind == OpKind::Cnp {
            cc::on_cnp(cx, counters);
            return Ok(());
        }
        // A CE mark counts, and gets a CNP, once the packet passed the checks that make it the
        // peer's, of the QP's transport, to a QP in a state to take it.
        let ce = dcqcn::is_ce(pkt.hdr.ip());
        match cx.shared.qp_type {
            // The datagram responder counts (and answers) a mark once the Q_Key matched.
            QpType::Ud | QpType::Gsi => ud::recv::receive(cx, pkt, counters),
            QpType::Rc => {
                if pkt.info.transport != Transport::Rc {
                    return Err(QpDrop::BadState);
                }
                if pkt.info.is_response() {
                    if !state.can_send() {
                        return Err(QpDrop::BadState);
                    }
                    if ce {
                        cc::on_ce(cx, pkt, counters);
                    }
                    // C rxe's name for responses handed to the completer.
                    counters.inc(Counter::AckDeferred);
                    rc::comp::on_response(cx, pkt).inspect(|()| {
                        counters.inc(Counter::RcvdPkts);
                        // Read responses carry data, counted as sent by the peer.
                        counters.add(Counter::RcvdBytes, pkt.payload.len() as u64);
                    })
                } else {
                    if !state.can_receive() {
                        return Err(QpDrop::BadState);
                    }
                    if ce {
                        cc::on_ce(cx, pkt, counters);
                    }
                    rc::resp::on_request(cx, pkt, counters)
                }
            }
            QpType::Uc => {
                if pkt.info.transport != Transport::Uc || !state.can_receive() {
                    return Err(QpDrop::BadState);
                }
                if ce {
                    cc::on_ce(cx, pkt, counters);
                }
                rc::resp::on_uc_request(cx, pkt, counters)
            }
        }
    }
}
