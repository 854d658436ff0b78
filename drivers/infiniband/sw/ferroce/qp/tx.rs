// SPDX-License-Identifier: GPL-2.0

//! A QP's way out: its route to the connected peer, kept while it holds, and its outbox, sent
//! in order once the QP's lock is dropped.

use super::{QpCtx, QpShared};
use crate::{
    counters::{Counter, Counters},
    device::Ferroce,
    net::xmit::{TxPath, Xmit},
    proto::build::Path,
};
use core::sync::atomic::{fence, Ordering};
use kernel::{prelude::*, rdma::qp::Qp};

/// Packets a QP builds in one hold of its lock, from a doorbell or its work, before it lets the
/// packets go and others take the lock; the work goes on with the rest.
pub(crate) const TX_BUDGET: u32 = 64;

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
    pub(crate) fn flush_tx(&self, counters: &Counters) {
        while !self.tx.is_empty() {
            // Orders our push (or the other sender's release below) before reading `tx_busy`:
            // either we see it free, or its owner sees our packet.
            fence(Ordering::SeqCst);
            if self
                .tx_busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                return;
            }
            while let Some(skb) = self.tx.pop() {
                if skb.send_routed().is_err() {
                    counters.inc(Counter::SendErr);
                }
            }
            self.tx_busy.store(false, Ordering::Release);
            fence(Ordering::SeqCst);
            // A packet queued after the last pop but before the store is sent by the loop.
        }
    }
}
