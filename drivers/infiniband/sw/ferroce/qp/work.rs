// SPDX-License-Identifier: GPL-2.0

//! A QP's work, on its device's queue: what its timer asks for, kernel consumers' sends, what a
//! budget cut short, and its backlog, a bounded batch at a time.

use super::{rx::consume_or_count, QpInner, QpShared};
use crate::{
    device::Ferroce,
    net::recv::{Reject, RxHeaders},
    rc, ud,
};
use core::sync::atomic::Ordering;
use kernel::{
    rdma::qp::{Qp, QpType},
    sync::{Arc, ArcBorrow},
    time::hrtimer::{HrTimerCallback, HrTimerCallbackContext, HrTimerRestart},
    workqueue::WorkItem,
};

/// Packets the QP's work takes from its backlog before it lets other work run.
const RX_BATCH: usize = 64;

impl HrTimerCallback for QpShared {
    type Pointer<'a> = Arc<Self>;

    /// In interrupt context: the work does the rest. The handle in `QpInner::timer` keeps a
    /// reference while this runs, so the one dropped here is never the last.
    fn run(this: ArcBorrow<'_, Self>, _ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        let _ = this.wq.enqueue(Arc::<Self>::from(this));
        HrTimerRestart::NoRestart
    }
}

impl WorkItem for QpShared {
    type Pointer = Arc<Self>;

    fn run(this: Arc<Self>) {
        let again = this
            .link
            .with(|qp| {
                let counters = &qp.device().data().counters;
                let more = {
                    let mut inner = this.inner.lock();
                    if this.kernel {
                        this.kq.run_sends(qp, &this, &mut inner);
                    }
                    rc::comp::on_timer(qp, &this, &mut inner);
                    this.resume(qp, &mut inner)
                };
                this.flush_tx(counters);
                // Packets held back behind READ responses: the responses' progress (`more`)
                // brings the work back, not the packets (no route: nothing would go out).
                let mut held = false;
                // A bounded batch: a busy backlog must not keep other QPs' work waiting.
                for _ in 0..RX_BATCH {
                    let (skb, res) = {
                        let mut inner = this.inner.lock();
                        let Some(skb) = this.rx.pop() else {
                            break;
                        };
                        let res = match RxHeaders::parse(&skb) {
                            Err(reason) => Err(Reject::Packet(reason)),
                            // READ responses go out before what was asked after them; a
                            // duplicate READ, which asks for them again, is taken at once.
                            Ok(hdr)
                                if inner.resp.reads.answering() && !hdr.rewinds_read(&inner) =>
                            {
                                this.rx.push_front(skb);
                                held = true;
                                break;
                            }
                            Ok(hdr) => this.take(qp, &mut inner, &skb, &hdr, counters),
                        };
                        this.rx_bytes
                            .fetch_sub(skb.len() as usize, Ordering::Relaxed);
                        (skb, res)
                    };
                    this.flush_tx(counters);
                    consume_or_count(skb, res, counters);
                }
                more || (!held && !this.rx.is_empty())
            })
            .unwrap_or(false);
        if again {
            this.kick();
        }
    }
}

impl QpShared {
    /// Goes on with what a budget cut short: READ responses (a responder answers from RTR on),
    /// then sending (RC, UC, UD). Returns whether more is left for the next run.
    fn resume(self: &Arc<Self>, qp: &Qp<Ferroce>, inner: &mut QpInner) -> bool {
        if self.kernel {
            return false;
        }
        let state = inner.attr.state;
        let mut more = false;
        if self.qp_type == QpType::Rc && state.can_receive() {
            more |= rc::read::resume(qp, self, inner);
        }
        if state.can_send() {
            more |= match self.qp_type {
                QpType::Rc | QpType::Uc => rc::req::push(qp, self, inner),
                QpType::Ud => ud::send::push(qp, self, inner),
                QpType::Gsi => false,
            };
        }
        more
    }
}
