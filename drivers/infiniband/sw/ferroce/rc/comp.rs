// SPDX-License-Identifier: GPL-2.0

//! The RC completer: ACKs, NAKs and read responses move the requester's window (see
//! [`crate::proto::window`]) and retire its WQEs in order; a sequence NAK or a timeout sends
//! again from the first unanswered PSN (go-back-N), an RNR NAK after the peer's timer, until the
//! retry budgets run out.
//!
//! A response is placed against what was sent before it is believed: one for a PSN never sent
//! is dropped and counted, one for a PSN answered already is ignored.

use crate::{
    counters::Counter,
    cq::FerroceCq,
    net::recv::{Packet, QpDrop},
    proto::{
        aeth::{Nak, Syndrome},
        opcode::{OpKind, Position},
        psn::Psn,
        retry::Retries,
        timeouts::rnr_delay_us,
        window::{read_response_fits, Kind, Place, ReadOutcome},
        wqe::{Completion, WcStatus, SEND_SIGNALED},
    },
    qp::{QpCtx, QpInner},
    rc::{
        req,
        timer::{arm, arm_ack, rearm, stop_timer, touch_ack, until},
    },
    sge,
};
use kernel::prelude::*;

/// A read response at `psn` that lands nothing but answers what was last asked for again (see
/// [`crate::proto::window::Window::shows_work`]) shows the responder at work, answering again
/// a READ asked for while its first responses were on the way: the timeout starts over, the
/// retry budget does not refill. Without this, a responder busy resending a long READ looks
/// dead to every READ queued behind it, and the retries run out (issue 15's READ under spray).
/// A blind forger must hit the PSNs asked again to use it.
fn landed_nothing(cx: &mut QpCtx<'_>, psn: Psn) {
    if cx.inner.req.win.shows_work(psn) {
        touch_ack(cx);
    }
}

/// The timer fired: send again from the oldest unanswered PSN, or fail the oldest WQE once the
/// retries are spent.
pub(crate) fn on_timer(cx: &mut QpCtx<'_>) {
    // The pacer's wake-up, once due, is done: what runs after this paces again.
    if cx.inner.cc.wake_at.is_some_and(|w| until(w).is_none()) {
        cx.inner.cc.wake_at = None;
    }
    // So is the wait after a local drop: the requester went back to the packet dropped then,
    // and sends from it now. It spends no retry: nothing was lost on the way.
    let wait_over = cx.inner.req.drop_until.is_some_and(|t| until(t).is_none());
    if wait_over {
        cx.inner.req.drop_until = None;
    }
    let timed_out = cx.inner.req.due.is_some_and(|due| until(due).is_none());
    if !timed_out {
        // Stopped since this fire, moved on by progress, or another deadline: the timer waits
        // for what is left (the ACK timer is armed afresh when something is pending).
        rearm(cx);
        if wait_over && !cx.inner.req.rnr_wait && cx.inner.attr.state.can_send() {
            resend(cx);
        }
        return;
    }
    if !cx.inner.attr.state.can_send() || !cx.inner.req.flight.iter().any(|s| s.entry.pending()) {
        cx.inner.req.drop_until = None;
        stop_timer(cx);
        return;
    }
    if cx.shared.backlog_pending() && !core::mem::replace(&mut cx.inner.req.put_off, true) {
        // The answer may be among the packets still waiting for this QP: not a timeout yet,
        // once (a peer that keeps the backlog busy must not keep the timer from counting). A
        // wait after a local drop goes on.
        let rnr = cx.inner.req.rnr_wait;
        arm_ack(cx);
        cx.inner.req.rnr_wait = rnr;
        return;
    }
    stop_timer(cx);
    // A timeout sends again from `una` now, waiting or not.
    cx.inner.req.drop_until = None;
    let counters = cx.counters();
    if cx.inner.req.rnr_wait {
        cx.inner.req.rnr_wait = false;
        if !cx.inner.req.retries.rnr() {
            counters.inc(Counter::RetryRnrExceededErr);
            fail_front(cx.inner, WcStatus::RnrRetryExcErr);
            complete(cx);
            return;
        }
    } else {
        if !cx.inner.req.retries.retry() {
            counters.inc(Counter::RetryExceededErr);
            fail_front(cx.inner, WcStatus::RetryExcErr);
            complete(cx);
            return;
        }
        counters.inc(Counter::CompleterRetryErr);
        cx.inner.req.win.timed_out();
    }
    let req = &mut cx.inner.req;
    req.win.rewind(&mut req.flight);
    resend(cx);
}

/// Sends from `nxt` again. The pump arms the deadline for what it sends again (or could not
/// send); what the pacer holds back gets none until it goes. A stream's work sends it again,
/// alone.
fn resend(cx: &mut QpCtx<'_>) {
    if cx.inner.req.streaming {
        cx.shared.kick_stream();
    } else if req::pump(cx) {
        cx.shared.kick_send();
    }
}

/// Retires finished WQEs from the front, in order; the first failure moves the QP to the error
/// state, which flushes the rest.
pub(crate) fn complete(cx: &mut QpCtx<'_>) {
    let (qp, shared, counters) = (cx.qp, cx.shared, cx.counters());
    let inner = &mut *cx.inner;
    let mut retired = 0;
    let mut failed = false;
    for sent in inner.req.flight.iter().take_while(|s| s.entry.finished()) {
        retired += 1;
        let status = sent.entry.status();
        if status == WcStatus::Success && matches!(sent.kind(), Kind::Send | Kind::SendInv) {
            counters.inc(Counter::RdmaSends);
        }
        // The slot is the producer's again before its completion shows: a process that posts
        // on seeing it must find room (ibv_rc_pingpong's one-WR send queue does).
        let _ = shared.sq.advance(&mut inner.sq_cons);
        let signaled = shared.sig_all() || sent.wqe().send_flags() & SEND_SIGNALED != 0;
        if signaled || status != WcStatus::Success {
            let mut c =
                Completion::of_send_queue(sent.wqe().wr_id(), status, sent.wc_opcode(), qp.qpn());
            if sent.kind().awaits_response() {
                c.byte_len = sent.len;
            }
            // A full CQ loses the completion: its consumer fell behind.
            let _ = FerroceCq::post(qp, qp.send_cq(), &c, false);
        }
        if status != WcStatus::Success {
            failed = true;
            break;
        }
    }
    // The retired prefix goes in one pass (one by one, each would move all the rest); a call
    // that retires nothing (most responses of a long READ) walks nothing.
    if retired > 0 {
        let mut seen = 0;
        inner.req.flight.retain(|_| {
            seen += 1;
            seen > retired
        });
    }
    if failed {
        cx.fail();
        return;
    }
    if cx.inner.req.flight.is_empty() {
        // Nothing to send again: no wait either.
        cx.inner.req.drop_until = None;
        stop_timer(cx);
        if cx.inner.req.streaming && !req::has_unstarted(cx) {
            req::set_streaming(cx, false);
        }
    }
    // Room for WQEs that waited to start (a retired WQE frees a place and its PSNs): the QP's
    // work, or in a stream the stream's, starts them.
    if retired > 0 && cx.inner.req.held {
        cx.inner.req.held = false;
        cx.shared.kick_send();
    }
}

/// The retries ran out: the oldest unfinished WQE fails with `status`; no more start.
fn fail_front(inner: &mut QpInner, status: WcStatus) {
    let req = &mut inner.req;
    req.win.fail_oldest(&mut req.flight, status);
    req.stopped = true;
}

/// Takes an ACK, NAK, read response or atomic ACK for this QP's requests.
pub(crate) fn on_response(cx: &mut QpCtx<'_>, pkt: &Packet<'_>) -> Result<(), QpDrop> {
    let una = cx.inner.req.win.una();
    let nak = pkt
        .ext
        .aeth
        .and_then(|a| Syndrome::from_u8(a.syndrome))
        .is_some_and(|s| !s.is_ack());
    let landed = match pkt.info.kind {
        OpKind::Ack => on_ack(cx, pkt)?,
        OpKind::ReadResponse => on_read_response(cx, pkt)?,
        OpKind::AtomicAck => on_atomic_ack(cx, pkt)?,
        _ => return Err(QpDrop::BadState),
    };
    if landed || cx.inner.req.win.una() != una {
        // Progress: the budgets refill and the timeout starts over.
        let (r, rnr) = (cx.inner.attr.retry_cnt, cx.inner.attr.rnr_retry);
        cx.inner.req.retries = Retries::new(r, rnr);
        cx.inner.req.put_off = false;
        // After a local drop an answer that moves the window shows the queue moving on:
        // sending goes on now (the timer, armed for the wait's end, then finds nothing to do).
        // Not a NAK: requests that left past the dropped one before the requester went back to
        // it draw one. Not a read response that only lands data: it says nothing of the queue.
        if !nak && cx.inner.req.win.una() != una {
            cx.inner.req.drop_waits = 0;
            cx.inner.req.drop_until = None;
        }
        // The resend a sequence NAK asked for is answered (or, landing a READ's data, shown
        // under way): the next NAK is news again.
        if !nak {
            cx.inner.req.nak_resending = false;
        }
        touch_ack(cx);
    }
    complete(cx);
    if cx.inner.req.rnr_wait || !cx.inner.attr.state.can_send() {
        return Ok(());
    }
    // A stream's packets all leave from its work (see `Requester::streaming`), woken by an
    // answer that moved the window or left something to send (a NAK's go-back-N, a READ's
    // missing responses to ask for again).
    if cx.inner.req.streaming {
        let req = &cx.inner.req;
        if landed || req.win.una() != una || req.win.unsent() || req.asks() {
            cx.shared.kick_stream();
        }
    } else if req::pump(cx) {
        cx.shared.kick_send();
    }
    Ok(())
}

/// An ACK or NAK. Returns `false`: it moves `una` (or not), it lands nothing.
fn on_ack(cx: &mut QpCtx<'_>, pkt: &Packet<'_>) -> Result<bool, QpDrop> {
    let psn = pkt.bth.psn;
    let aeth = pkt.ext.aeth.ok_or(QpDrop::BadState)?;
    let syndrome = Syndrome::from_u8(aeth.syndrome).ok_or(QpDrop::BadState)?;
    let counters = cx.counters();
    let place = if syndrome.is_ack() {
        cx.inner.req.win.place_ack(psn)
    } else {
        cx.inner.req.win.place(psn)
    };
    match place {
        // Answers nothing this QP sent: forged, or corrupt.
        Place::Beyond => return Err(QpDrop::BadPsn),
        // A duplicate or late answer: nothing to do.
        Place::Old => return Ok(false),
        Place::Current => {}
    }
    let req = &mut cx.inner.req;
    let mut restart = false;
    match syndrome {
        Syndrome::Ack => req.win.ack(&mut req.flight, psn),
        Syndrome::RnrNak { timer } => {
            counters.inc(Counter::RcvdRnrErr);
            req.win.nak(&mut req.flight, psn);
            // Resend when the peer's timer says; `on_timer` does it.
            req.rnr_wait = true;
            arm(cx, u64::from(rnr_delay_us(timer)));
        }
        Syndrome::Nak(Nak::PsnSequence) => {
            counters.inc(Counter::RcvdSeqErr);
            // After an RNR NAK or a local drop the requester goes back already, and the
            // requests it sent after that one draw this NAK: it spends nothing.
            let waiting = req.waits();
            // One that answers nothing new is an attempt without progress, as a timeout is:
            // it spends a retry, and the ACK timeout starts over from the resend. Only the
            // first since the last progress: a responder NAKs a gap once, until the request
            // it expects arrives, so a second one for `una` asks again for what is on its way.
            if psn == req.win.una() && !waiting {
                if req.nak_resending {
                    return Ok(false);
                }
                if !req.retries.retry() {
                    counters.inc(Counter::RetryExceededErr);
                    fail_front(cx.inner, WcStatus::RetryExcErr);
                    return Ok(false);
                }
                restart = true;
            }
            req.nak_resending = !waiting;
            req.win.nak(&mut req.flight, psn);
            req.win.lost(psn);
        }
        Syndrome::Nak(nak) => {
            match nak {
                Nak::InvalidRequest => counters.inc(Counter::ReqRemoteInvalidRequest),
                Nak::RemoteAccess => counters.inc(Counter::ReqRemoteAccessErrors),
                _ => {}
            }
            let status = nak.status().unwrap_or(WcStatus::RemOpErr);
            if req.win.fail_at(&mut req.flight, psn, status) {
                req.stopped = true;
            }
        }
    }
    if restart {
        touch_ack(cx);
    }
    Ok(false)
}

/// An atomic ACK: the original value lands in the atomic's local buffer. Returns whether it
/// landed.
fn on_atomic_ack(cx: &mut QpCtx<'_>, pkt: &Packet<'_>) -> Result<bool, QpDrop> {
    let psn = pkt.bth.psn;
    let orig = pkt.ext.atomic_ack.ok_or(QpDrop::BadState)?.orig;
    // Its AETH says ACK: an atomic ACK that NAKs is no answer.
    let aeth = pkt.ext.aeth.ok_or(QpDrop::BadState)?;
    if !Syndrome::from_u8(aeth.syndrome).is_some_and(Syndrome::is_ack) {
        return Err(QpDrop::BadState);
    }
    match cx.inner.req.win.place(psn) {
        Place::Beyond => return Err(QpDrop::BadPsn),
        Place::Old => return Ok(false),
        Place::Current => {}
    }
    let req = &mut cx.inner.req;
    let (idx, index) = match req.win.atomic_response(&mut req.flight, psn) {
        ReadOutcome::Next { idx, index } => (idx, index),
        ReadOutcome::Gap { .. } | ReadOutcome::Duplicate => return Ok(false),
        // At the PSN of anything but an atomic: it answers nothing this QP asked.
        ReadOutcome::NotOurs => return Err(QpDrop::BadPsn),
    };
    let Some(sent) = req.flight.get_mut(idx) else {
        return Ok(false);
    };
    let mrs = &cx.qp.device().data().mrs;
    // The value in host order, as the process reads its 8-byte buffer.
    let value = orig.to_ne_bytes();
    if let Err(status) = sge::scatter_bytes(mrs, cx.shared.pd, sent.sges(), 0, &value) {
        sent.entry.fail(status);
        req.stopped = true;
        return Ok(false);
    }
    req.win.read_landed(&mut req.flight, idx, index);
    Ok(true)
}

/// A read response lands in the READ's local buffers. Returns whether it landed.
fn on_read_response(cx: &mut QpCtx<'_>, pkt: &Packet<'_>) -> Result<bool, QpDrop> {
    let psn = pkt.bth.psn;
    match cx.inner.req.win.place(psn) {
        Place::Beyond => return Err(QpDrop::BadPsn),
        Place::Old => {
            landed_nothing(cx, psn);
            return Ok(false);
        }
        Place::Current => {}
    }
    let req = &mut cx.inner.req;
    let (idx, index) = match req.win.read_response(&mut req.flight, psn) {
        ReadOutcome::Next { idx, index } => (idx, index),
        // A gap asked for the missing responses (once); a duplicate is nothing new.
        ReadOutcome::Gap { .. } | ReadOutcome::Duplicate => {
            landed_nothing(cx, psn);
            return Ok(false);
        }
        // At the PSN of a SEND or WRITE, or of no WQE: it answers nothing this QP asked.
        ReadOutcome::NotOurs => return Err(QpDrop::BadPsn),
    };
    let Some(sent) = req.flight.get_mut(idx) else {
        return Ok(false);
    };
    let pos = pkt.info.position;
    if sent.kind().empty_read() {
        // Answered by one empty response; it lands nothing.
        if pos != Position::Only || !pkt.payload.is_empty() {
            return Err(QpDrop::BadLength);
        }
        req.win.read_landed(&mut req.flight, idx, index);
        return Ok(true);
    }
    // A response that does not fit where it lands (wrong place in the stream, or a length
    // that would leave part of the buffer unwritten) is not taken: the READ asks again.
    if !read_response_fits(
        index,
        sent.entry.npkts(),
        pos.starts(),
        pos.ends(),
        pkt.payload.len(),
        sent.mtu,
        sent.len,
    ) {
        return Err(QpDrop::BadLength);
    }
    let off = index as usize * sent.mtu as usize;
    let mrs = &cx.qp.device().data().mrs;
    if let Err(status) = sge::scatter(mrs, cx.shared.pd, sent.sges(), off, &pkt.payload) {
        sent.entry.fail(status);
        req.stopped = true;
        return Ok(false);
    }
    req.win.read_landed(&mut req.flight, idx, index);
    Ok(true)
}
