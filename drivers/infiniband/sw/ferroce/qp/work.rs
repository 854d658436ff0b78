// SPDX-License-Identifier: GPL-2.0

//! A QP's work, on its device's queue: what its timer asks for, kernel consumers' sends, what a
//! budget cut short, and its backlog, a bounded batch at a time.

use super::{kernel_queues, rx::consume_or_count, Posts, QpCtx, QpShared};
use crate::{
    net::recv::{Reject, RxHeaders},
    rc, ud,
};
use core::sync::atomic::Ordering;
use kernel::{
    rdma::qp::{QpState, QpType},
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
        // Already queued: that run does what the timer asks.
        let _ = this.wq.enqueue::<_, 0>(Arc::<Self>::from(this));
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
                    let mut cx = QpCtx {
                        qp,
                        shared: &this,
                        inner: &mut inner,
                    };
                    if this.posts == Posts::KernelQueue {
                        kernel_queues::run_sends(&mut cx);
                    }
                    rc::comp::on_timer(&mut cx);
                    resume(&mut cx)
                };
                this.flush_or_leave(counters);
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
                                if inner.resp.resources.answering()
                                    && !hdr.rewinds_read(&inner) =>
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
                    this.flush_or_leave(counters);
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

/// Goes on with what a budget cut short: READ responses (a responder answers from RTR on),
/// then sending (RC, UC, UD). Returns whether more is left for the next run.
fn resume(cx: &mut QpCtx<'_>) -> bool {
    let state = cx.inner.attr.state;
    match cx.shared.posts {
        Posts::KernelQueue => return false,
        // What a kernel consumer posted in the error state completes flushed (`ib_drain_qp()`
        // waits for that), as the doorbell does for user space.
        Posts::KernelRing if state == QpState::Err => {
            // A full CQ loses completions: its consumer fell behind.
            let _ = cx.shared.flush(cx.qp, cx.inner);
            return false;
        }
        _ => {}
    }
    let qp_type = cx.shared.qp_type;
    let mut more = false;
    if qp_type == QpType::Rc && state.can_receive() {
        more |= rc::read::resume(cx);
    }
    if state.can_send() {
        more |= match qp_type {
            // A stream is sent by its own work, alone.
            QpType::Rc if cx.inner.req.streaming => {
                cx.shared.kick_stream();
                false
            }
            QpType::Rc | QpType::Uc => rc::req::push(cx),
            QpType::Ud => ud::send::push(cx),
            QpType::Gsi => false,
        };
    }
    more
}

/// The QP's stream (see [`rc::req::leaves_to_work`]): starts and sends its WQEs, and the
/// outbox, on an unbound worker, beside the CPU that posts them.
impl WorkItem<1> for QpShared {
    type Pointer = Arc<Self>;

    fn run(this: Arc<Self>) {
        let _ = this.link.with(|qp| {
            let more = {
                let mut inner = this.inner.lock();
                // The stream ended since this run was queued: whoever ended it sends now
                // (from here, its packets would leave from a second CPU).
                if !inner.req.streaming {
                    return;
                }
                let mut cx = QpCtx {
                    qp,
                    shared: &this,
                    inner: &mut inner,
                };
                cx.inner.attr.state.can_send() && rc::req::push(&mut cx)
            };
            this.flush_tx(&qp.device().data().counters);
            // Queued while the link is held: a destroy that revoked it waits for this, then
            // flushes the queue, and the run that follows finds the QP gone.
            if more {
                this.kick_send();
            }
        });
    }
}
