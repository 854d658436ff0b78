// SPDX-License-Identifier: GPL-2.0

//! A QP's way out: its route to the connected peer, kept while it holds, and its outbox, sent
//! in order once the QP's lock is dropped.

use super::{QpCtx, QpShared};
use crate::{
    counters::{Counter, Counters},
    device::Ferroce,
    net::xmit::{TxPath, Xmit},
    proto::{
        build::{rc_request_psn, Path},
        psn::Psn,
    },
};
use core::sync::atomic::{fence, Ordering};
use kernel::{
    prelude::*,
    rdma::qp::{Qp, QpType},
    sync::Arc,
};

/// Packets a QP builds in one hold of its lock, from a doorbell or its work, before it lets the
/// packets go and others take the lock; the work goes on with the rest.
pub(crate) const TX_BUDGET: u32 = 64;

/// No request dropped: outside the 24-bit PSNs.
pub(crate) const NO_DROP: u32 = u32::MAX;

impl QpCtx<'_> {
    /// Runs `f` with a way to send to the connected peer (RC, UC): the kept one, or one looked
    /// up again if the path changed or its route no longer holds. `None` if there is no route.
    pub(crate) fn with_peer<R>(&mut self, f: impl FnOnce(&mut Self, &Xmit<'_>) -> R) -> Option<R> {
        let (qp, shared) = (self.qp, self.shared);
        let path = self.dev().cc.mark(self.inner.path(qp.qpn())?);
        let to = match self.inner.peer.take() {
            Some(t) if t.is_current(&path) => t,
            _ => TxPath::new(qp.device(), path).ok()?,
        };
        let res = f(self, &Xmit::new(qp.device(), &to, &shared.tx));
        self.inner.peer = Some(to);
        Some(res)
    }
}

impl QpShared {
    /// A way to send datagrams along `path`, into this QP's outbox.
    pub(crate) fn with_path<R>(
        &self,
        qp: &Qp<Ferroce>,
        path: Path,
        f: impl FnOnce(&Xmit<'_>) -> R,
    ) -> Result<R> {
        let to = TxPath::new(qp.device(), path)?;
        Ok(f(&Xmit::new(qp.device(), &to, &self.tx)))
    }

    /// Sends what waits in the outbox, in order. Called once the QP's lock is dropped; if
    /// another context is sending already, it takes these packets too.
    ///
    /// An RC request that a qdisc drops as it is queued (`ENOBUFS`) is noted for the
    /// requester, which goes back to it (see [`crate::rc::req::pump`]); until it does, the
    /// requests after it are withdrawn (the responder would discard them, out of sequence, and
    /// they would only crowd the full queue). Other packets go regardless: ACKs and read
    /// responses, which the peer asks for again if lost, and UC and UD packets, whose loss is
    /// theirs to bear.
    pub(crate) fn flush_tx(self: &Arc<Self>, counters: &Counters) {
        let is_rc = self.qp_type == QpType::Rc;
        let mut dropped = false;
        while !self.tx.is_empty() {
            // Orders our push (or the other sender's release below) before reading `tx_busy`:
            // either we see it free, or its owner sees our packet.
            fence(Ordering::SeqCst);
            if self
                .tx_busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                break;
            }
            while let Some(skb) = self.tx.pop() {
                let psn = match is_rc {
                    true => skb
                        .network_and_data()
                        .and_then(|(ip, _)| rc_request_psn(ip)),
                    false => None,
                };
                if psn
                    .zip(self.tx_dropped())
                    .is_some_and(|(p, d)| !p.before(d))
                {
                    // Withdrawn: the requester sends it again.
                    continue;
                }
                match skb.send_routed() {
                    Ok(()) => {}
                    Err(e) => {
                        counters.inc(Counter::SendErr);
                        if let Some(psn) = psn.filter(|_| e == ENOBUFS) {
                            dropped |= self.note_drop(psn);
                        }
                    }
                }
            }
            self.tx_busy.store(false, Ordering::Release);
            fence(Ordering::SeqCst);
            // A packet queued after the last pop but before the store is sent by the loop.
        }
        if dropped {
            self.kick_send();
        }
    }

    /// The earliest request dropped since the requester last went back, if any.
    fn tx_dropped(&self) -> Option<Psn> {
        drop_psn(self.tx_drop.load(Ordering::Acquire))
    }

    /// Notes that the request at `psn` was dropped; returns whether none was before (the
    /// requester must hear of it).
    fn note_drop(&self, psn: Psn) -> bool {
        let mut seen = self.tx_drop.load(Ordering::Relaxed);
        loop {
            if seen != NO_DROP && !psn.before(Psn::new(seen)) {
                return false;
            }
            match self.tx_drop.compare_exchange(
                seen,
                psn.get(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return seen == NO_DROP,
                Err(now) => seen = now,
            }
        }
    }

    /// Takes the drop noted for the requester, under the QP's lock: the requests it builds
    /// from here on go out.
    pub(crate) fn take_tx_drop(&self) -> Option<Psn> {
        drop_psn(self.tx_drop.swap(NO_DROP, Ordering::AcqRel))
    }
}

/// The PSN a `tx_drop` value holds, if any.
fn drop_psn(value: u32) -> Option<Psn> {
    (value != NO_DROP).then(|| Psn::new(value))
}
