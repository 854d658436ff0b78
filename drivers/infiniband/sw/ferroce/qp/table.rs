// SPDX-License-Identifier: GPL-2.0

//! A device's QPs by number.

use super::QpShared;
use crate::proto::bth::MULTICAST_QPN;
use kernel::{prelude::*, rdma::pool::Pool, sync::Arc};

/// User QPs are numbered from here to the multicast QPN (excluded); lower ones are reserved
/// (QP0, QP1).
const FIRST_QPN: u32 = 16;
/// QP numbers are 24 bits.
pub(super) const QPN_LIMIT: u32 = 1 << 24;

/// A device's QPs by number, found without a lock (packets arrive in softirq).
#[pin_data]
pub(crate) struct QpTable {
    #[pin]
    qps: Pool<QpShared>,
}

impl QpTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            qps <- Pool::new(FIRST_QPN..=MULTICAST_QPN - 1),
        })
    }

    /// Stores `shared` under a free QP number, or under `fixed` (QP1); returns the number.
    pub(super) fn insert(&self, fixed: Option<u32>, shared: Arc<QpShared>) -> Result<u32> {
        match fixed {
            Some(qpn) => self.qps.insert(qpn, shared, GFP_KERNEL).map(|()| qpn),
            None => self.qps.alloc(shared, GFP_KERNEL),
        }
    }

    /// The QP numbered `qpn`. Any context.
    pub(crate) fn get(&self, qpn: u32) -> Option<Arc<QpShared>> {
        self.qps.get(qpn)
    }

    /// Takes the QP out; once this returns no packet finds it. Sleeps.
    pub(super) fn remove(&self, qpn: u32) {
        let removed = self.qps.remove(qpn);
        // Freeing rings may sleep: here, not in a lookup's context.
        drop(removed);
    }
}
