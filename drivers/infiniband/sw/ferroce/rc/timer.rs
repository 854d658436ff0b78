// SPDX-License-Identifier: GPL-2.0

//! The QP's one timer, for the earliest of three deadlines: the ACK timeout of what is sent
//! and unanswered (or the delay an RNR NAK asked for), the end of the wait after a local
//! drop, and the pacer's next departure. Progress moves a deadline without touching the armed
//! timer; when it fires, the completer ([`super::comp::on_timer`]) finds the deadline moved on
//! and waits the rest.

use super::req::DROP_WAIT_MAX_US;
use crate::{
    proto::timeouts::ack_timeout_us,
    qp::{QpCtx, QpInner},
};
use kernel::time::{hrtimer::HrTimerPointer, Delta, Instant, Monotonic};

/// The shortest ACK timeout ferroce waits, whatever the QP asks: below it, a slow machine
/// would resend what is merely queued.
const MIN_ACK_TIMEOUT_US: u64 = 10_000;

/// Starts the QP's ACK (or RNR) timer `us` from now, replacing an armed one.
pub(super) fn arm(cx: &mut QpCtx<'_>, us: u64) {
    let delay = Delta::from_micros(i64::try_from(us).unwrap_or(i64::MAX));
    cx.inner.req.due = Some(Instant::now() + delay);
    rearm(cx);
}

/// Arms the QP's one timer for the earliest of the ACK deadline, the end of a wait after a
/// local drop and the pacer's wake-up (see [`wake_paced`]), or stops it if there is none.
/// Dropping the old handle cancels it (waiting for a running callback, which only queues work).
pub(super) fn rearm(cx: &mut QpCtx<'_>) {
    let deadlines = [
        cx.inner.req.due,
        cx.inner.req.drop_until,
        cx.inner.cc.wake_at,
    ];
    let earliest =
        deadlines
            .into_iter()
            .flatten()
            .reduce(|a, b| if (b - a).is_negative() { b } else { a });
    let Some(at) = earliest else {
        cx.inner.timer = None;
        return;
    };
    let delay = until(at).unwrap_or(Delta::from_micros(1));
    cx.inner.timer = None;
    cx.inner.timer = Some(cx.shared.clone().start(delay));
}

/// The time left until `at`; `None` once it has come.
pub(super) fn until(at: Instant<Monotonic>) -> Option<Delta> {
    let left = at - Instant::now();
    (!left.is_negative() && !left.is_zero()).then_some(left)
}

/// The ACK timeout of the QP, if it has one.
fn ack_timeout(inner: &QpInner) -> Option<u64> {
    ack_timeout_us(inner.attr.timeout).map(|us| us.max(MIN_ACK_TIMEOUT_US))
}

/// The longest wait after a local drop: [`DROP_WAIT_MAX_US`], and a quarter of the ACK timeout
/// at most, so that a wait does not run into it and spend a retry.
pub(super) fn drop_wait_max_us(inner: &QpInner) -> u32 {
    let quarter = ack_timeout(inner).map_or(u64::MAX, |us| us / 4);
    u32::try_from(quarter.min(u64::from(DROP_WAIT_MAX_US))).unwrap_or(DROP_WAIT_MAX_US)
}

/// (Re)starts the ACK timeout, if the QP has one.
pub(crate) fn arm_ack(cx: &mut QpCtx<'_>) {
    cx.inner.req.rnr_wait = false;
    match ack_timeout(cx.inner) {
        Some(us) => arm(cx, us),
        None => stop_timer(cx),
    }
}

/// The peer made progress: the ACK timeout starts over. The armed timer is left alone (cheap
/// per packet): when it fires it finds the new deadline and waits the rest. With everything
/// sent answered there is no deadline until more goes out ([`super::req::pump`] arms it):
/// a paced QP's next packet may be further away than the ACK timeout.
pub(super) fn touch_ack(cx: &mut QpCtx<'_>) {
    if cx.inner.req.rnr_wait {
        return;
    }
    if !cx.inner.req.win.awaits_answer() {
        stop_timer(cx);
        return;
    }
    // An armed timer fires no later than the deadline it was armed for, or the pacer's.
    match (ack_timeout(cx.inner), cx.inner.req.due.is_some()) {
        (Some(us), true) => {
            let delay = Delta::from_micros(i64::try_from(us).unwrap_or(i64::MAX));
            cx.inner.req.due = Some(Instant::now() + delay);
        }
        (Some(_), false) => arm_ack(cx),
        (None, _) => stop_timer(cx),
    }
}

/// After a [`Pace::Wait`], arms the QP's timer for when its pacer lets the next packet go:
/// the work then paces again. Kept until then whatever the ACK timer does.
///
/// [`Pace::Wait`]: crate::cc::Pace::Wait
pub(crate) fn wake_paced(cx: &mut QpCtx<'_>) {
    let Some(at) = cx.inner.cc.take_wake() else {
        return;
    };
    let earlier = cx.inner.cc.wake_at.is_none_or(|w| (at - w).is_negative());
    if earlier {
        cx.inner.cc.wake_at = Some(at);
        rearm(cx);
    }
}

/// No more deadline; the timer stays armed for the pacer's wake-up, if one is due.
pub(super) fn stop_timer(cx: &mut QpCtx<'_>) {
    cx.inner.req.due = None;
    rearm(cx);
}
