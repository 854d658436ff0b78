// SPDX-License-Identifier: GPL-2.0

//! The RC completer: ACKs, NAKs and read responses move the requester's window and retire its
//! WQEs in order; a sequence NAK or a timeout sends again from the first missing PSN
//! (go-back-N), an RNR NAK after the peer's timer, until the retry budgets run out.

use crate::{
    counters::Counter,
    cq::FerroceCq,
    device::Ferroce,
    proto::{
        opcode::OpKind,
        packet::Packet,
        psn::Psn,
        timeouts::{ack_timeout_us, rnr_delay_us},
        wqe::{Completion, WcStatus, SEND_SIGNALED, SEND_WQE_HEADER, SGE_SIZE},
    },
    qp::{QpInner, QpShared},
    rc::{self, Kind},
    recv::QpDrop,
    sge,
};
use kernel::{
    prelude::*,
    rdma::qp::{Qp, QpState},
    sync::Arc,
    time::{hrtimer::HrTimerPointer, Delta, Instant},
};

/// AETH syndromes (IBTA 9.7.5.1): the top three bits, and NAK codes.
const AETH_ACK: u8 = 0;
const AETH_RNR_NAK: u8 = 1;
const AETH_NAK: u8 = 3;
const NAK_PSN_SEQ: u8 = 0;
const NAK_INVALID_REQUEST: u8 = 1;
const NAK_REMOTE_ACCESS: u8 = 2;

/// The shortest ACK timeout ferroce waits, whatever the QP asks: below it, a slow machine
/// would resend what is merely queued.
const MIN_ACK_TIMEOUT_US: u64 = 10_000;
/// `rnr_retry` 7: retry forever.
const RNR_RETRY_FOREVER: u8 = 7;

/// (Re)starts the QP's timer, `us` from now.
fn arm(shared: &Arc<QpShared>, inner: &mut QpInner, us: u64) {
    let delay = Delta::from_micros(i64::try_from(us).unwrap_or(i64::MAX));
    // Dropping the old handle cancels it (waiting for a running callback, which only queues
    // work).
    inner.timer = None;
    inner.req.due = Some(Instant::now() + delay);
    inner.timer = Some(shared.clone().start(delay));
}

/// (Re)starts the ACK timeout, if the QP has one.
pub(crate) fn arm_ack(shared: &Arc<QpShared>, inner: &mut QpInner) {
    inner.req.rnr_wait = false;
    match ack_timeout_us(inner.attr.timeout) {
        Some(us) => arm(shared, inner, us.max(MIN_ACK_TIMEOUT_US)),
        None => stop_timer(inner),
    }
}

fn stop_timer(inner: &mut QpInner) {
    inner.timer = None;
    inner.req.due = None;
}

/// The timer fired: send again from the oldest unacknowledged PSN, or fail the oldest WQE once
/// the retries are spent.
pub(crate) fn on_timer(qp: &Qp<Ferroce>, shared: &Arc<QpShared>, inner: &mut QpInner) {
    match inner.req.due {
        Some(due) if !(Instant::now() - due).is_negative() => {}
        // Re-armed or stopped since this fire.
        _ => return,
    }
    stop_timer(inner);
    if !matches!(inner.attr.state, QpState::Rts | QpState::Sqd)
        || !inner.req.flight.iter().any(rc::Sent::pending)
    {
        return;
    }
    let data = qp.device().data();
    if data.rx.busy() {
        // The answer may be among the packets still waiting: not a timeout yet.
        let rnr = inner.req.rnr_wait;
        arm_ack(shared, inner);
        inner.req.rnr_wait = rnr;
        return;
    }
    let counters = &data.counters;
    if inner.req.rnr_wait {
        inner.req.rnr_wait = false;
        if inner.req.rnr_retries == 0 {
            counters.inc(Counter::RetryRnrExceededErr);
            fail_front(inner, WcStatus::RnrRetryExcErr);
            complete(qp, shared, inner);
            return;
        }
        if inner.req.rnr_retries != RNR_RETRY_FOREVER {
            inner.req.rnr_retries -= 1;
        }
    } else {
        if inner.req.retries == 0 {
            counters.inc(Counter::RetryExceededErr);
            fail_front(inner, WcStatus::RetryExcErr);
            complete(qp, shared, inner);
            return;
        }
        inner.req.retries -= 1;
        counters.inc(Counter::CompleterRetryErr);
    }
    inner.req.nxt = inner.req.una;
    inner.req.reread = None;
    rc::pump(qp, shared, inner);
    if inner.timer.is_none() {
        arm_ack(shared, inner);
    }
}

/// Retires finished WQEs from the front, in order; the first failure moves the QP to the error
/// state, which flushes the rest.
pub(crate) fn complete(qp: &Qp<Ferroce>, shared: &Arc<QpShared>, inner: &mut QpInner) {
    let mut failed = false;
    while inner.req.flight.first().is_some_and(|s| !s.pending()) {
        let Ok(sent) = inner.req.flight.remove(0) else {
            break;
        };
        let signaled = shared.sig_all() || sent.wqe().send_flags() & SEND_SIGNALED != 0;
        if signaled || sent.status != WcStatus::Success {
            let mut c = Completion::of_send_queue(
                sent.wqe().wr_id(),
                sent.status,
                sent.wc_opcode(),
                qp.qpn(),
            );
            if sent.kind == Kind::Read {
                c.byte_len = sent.len;
            }
            let _ = FerroceCq::post(qp, qp.send_cq(), &c, false);
        }
        let _ = shared.sq.advance(&mut inner.sq_cons);
        if sent.status != WcStatus::Success {
            failed = true;
            break;
        }
    }
    if failed {
        shared.fail(qp, inner);
    } else if inner.req.flight.is_empty() {
        stop_timer(inner);
    }
}

/// The peer answered up to (not including) `una`: the window moves, the budgets refill and the
/// timeout starts over.
fn advance(shared: &Arc<QpShared>, inner: &mut QpInner, una: Psn) {
    if una.diff(inner.req.una) <= 0 || una.diff(Psn::new(inner.attr.sq_psn)) > 0 {
        return;
    }
    inner.req.una = una;
    if inner.req.nxt.before(una) {
        inner.req.nxt = una;
    }
    let (r, rnr) = (inner.attr.retry_cnt, inner.attr.rnr_retry);
    inner.req.set_retries(r, rnr);
    if !inner.req.rnr_wait {
        arm_ack(shared, inner);
    }
}

/// Takes an ACK, NAK or read response for this QP's requests.
pub(crate) fn on_response(
    qp: &Qp<Ferroce>,
    shared: &Arc<QpShared>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Result<(), QpDrop> {
    let psn = pkt.bth.psn;
    if psn.diff(inner.req.sent_end) >= 0 {
        return Err(QpDrop::BadPsn);
    }
    match pkt.info.kind {
        OpKind::Ack => {
            let aeth = pkt.ext.aeth.ok_or(QpDrop::BadState)?;
            match aeth.syndrome >> 5 {
                AETH_ACK => ack_through(shared, inner, psn),
                AETH_RNR_NAK => {
                    qp.device().data().counters.inc(Counter::RcvdRnrErr);
                    ack_through(shared, inner, psn.add(Psn::MASK));
                    // Resend when the peer's timer says; `on_timer` does it.
                    inner.req.rnr_wait = true;
                    arm(shared, inner, u64::from(rnr_delay_us(aeth.syndrome)));
                }
                AETH_NAK => {
                    ack_through(shared, inner, psn.add(Psn::MASK));
                    match aeth.syndrome & 0x1f {
                        NAK_PSN_SEQ => {
                            qp.device().data().counters.inc(Counter::RcvdSeqErr);
                            if !psn.before(inner.req.una) {
                                inner.req.nxt = psn;
                            }
                        }
                        code => {
                            let counters = &qp.device().data().counters;
                            let status = match code {
                                NAK_INVALID_REQUEST => {
                                    counters.inc(Counter::ReqRemoteInvalidRequest);
                                    WcStatus::RemInvReqErr
                                }
                                NAK_REMOTE_ACCESS => {
                                    counters.inc(Counter::ReqRemoteAccessErrors);
                                    WcStatus::RemAccessErr
                                }
                                _ => WcStatus::RemOpErr,
                            };
                            fail_front(inner, status);
                        }
                    }
                }
                _ => return Err(QpDrop::BadState),
            }
        }
        OpKind::ReadResponse => on_read_response(qp, shared, inner, pkt)?,
        _ => return Err(QpDrop::BadState),
    }
    complete(qp, shared, inner);
    if !inner.req.rnr_wait && matches!(inner.attr.state, QpState::Rts | QpState::Sqd) {
        rc::pump(qp, shared, inner);
    }
    Ok(())
}

/// The peer has everything through `psn`. SENDs and WRITEs that end there are done; a READ
/// that it passes lost responses, which are asked for again.
fn ack_through(shared: &Arc<QpShared>, inner: &mut QpInner, psn: Psn) {
    let mut una = None;
    for sent in inner.req.flight.iter_mut() {
        if !sent.pending() {
            continue;
        }
        if psn.before(sent.first_psn) {
            break;
        }
        if sent.kind == Kind::Read {
            // Everything before the READ is done; from its missing responses on is not.
            let missing = sent.first_psn.add(sent.read_pkts);
            una = Some(missing);
            inner.req.nxt = missing;
            break;
        }
        if psn.before(sent.last_psn()) {
            una = Some(psn.add(1));
            break;
        }
        sent.acked = true;
        una = Some(sent.end_psn());
    }
    if let Some(una) = una {
        advance(shared, inner, una);
    }
}

/// The oldest unfinished WQE failed with `status`.
fn fail_front(inner: &mut QpInner, status: WcStatus) {
    if let Some(sent) = inner.req.flight.iter_mut().find(|s| s.pending()) {
        sent.status = status;
    }
    inner.req.stopped = true;
}

/// A read response lands in the READ's local buffers.
fn on_read_response(
    qp: &Qp<Ferroce>,
    shared: &Arc<QpShared>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Result<(), QpDrop> {
    let psn = pkt.bth.psn;
    // Find the READ this answers. WQEs before it are done (responses come after their ACKs);
    // an earlier READ still missing responses lost them, and is asked again.
    let mut done_to = None;
    let mut target = None;
    for (i, sent) in inner.req.flight.iter().enumerate() {
        if !sent.pending() {
            continue;
        }
        if psn.before(sent.first_psn) {
            break;
        }
        if sent.kind == Kind::Read {
            if psn.diff(sent.last_psn()) <= 0 {
                target = Some(i);
            } else {
                inner.req.nxt = sent.first_psn.add(sent.read_pkts);
            }
            break;
        }
        if psn.diff(sent.last_psn()) <= 0 {
            break;
        }
        done_to = Some(i);
    }
    if let Some(last) = done_to {
        for sent in inner.req.flight.iter_mut().take(last + 1) {
            if sent.pending() {
                sent.acked = true;
            }
        }
        if let Some(end) = inner.req.flight.get(last).map(|s| s.end_psn()) {
            advance(shared, inner, end);
        }
    }
    let Some(sent) = target.and_then(|i| inner.req.flight.get_mut(i)) else {
        // A duplicate, or not ours.
        return Ok(());
    };
    let expected = sent.first_psn.add(sent.read_pkts);
    let d = psn.diff(expected);
    if d < 0 {
        return Ok(());
    }
    if d > 0 {
        // One went missing: ask again for the rest, once per READ. Later responses of the
        // old stream arrive with gaps too; asking on each would start a stream each. A loss in
        // the new stream waits for the timer.
        if inner.req.reread.is_none() {
            inner.req.reread = Some(expected);
            if let Some(i) = target {
                rc::reread(qp, inner, i);
            }
        }
        return Ok(());
    }
    let off = sent.read_pkts.saturating_mul(sent.mtu);
    let w = sent.wqe();
    let num = (w.num_sge() as usize).min((shared.sq.slot_len() - SEND_WQE_HEADER) / SGE_SIZE);
    let mrs = &qp.device().data().mrs;
    let fits = u64::from(off) + pkt.payload.len() as u64 <= u64::from(sent.len);
    let res = if fits {
        sge::scatter(
            mrs,
            shared.pd,
            (0..num).map(|i| w.sge(i)),
            off as usize,
            pkt.payload,
        )
    } else {
        Err(WcStatus::LocLenErr)
    };
    if let Err(status) = res {
        sent.status = status;
        inner.req.stopped = true;
        return Ok(());
    }
    sent.read_pkts += 1;
    let last = pkt.info.position.ends();
    if last {
        sent.acked = true;
        inner.req.reread = None;
    }
    let una = psn.add(1);
    advance(shared, inner, una);
    Ok(())
}
