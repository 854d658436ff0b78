// SPDX-License-Identifier: GPL-2.0

//! The RC requester: send WQEs become SEND, RDMA WRITE and RDMA READ packets, sent within a
//! window of unacknowledged PSNs so that go-back-N after a loss resends a bounded amount.
//!
//! UC QPs use it too, without READ and without ACKs: a UC WQE is done once its last packet is
//! out, and a loss costs the peer that message only.
//!
//! A WQE is copied out of the shared ring once, when it starts; every (re)transmission uses
//! that copy, so user space cannot change a message under way. WQEs start as the requester
//! reaches them, at most [`STARTED_MAX`] ahead of the completer and within the PSNs the window
//! may give out, so a deep send queue costs kernel memory only for what is under way. The
//! completer ([`super::comp`]) moves the window and retires WQEs.

use crate::{
    cc::{Pace, QpCc},
    counters::Counter,
    device::Ferroce,
    net::xmit::Xmit,
    proto::{
        opcode::{Opcode, Position},
        packet::{AtomicEth, BuildError, ExtHeaders, Feth, Ieth, Reth},
        psn::Psn,
        retry::Retries,
        window::{Entry, Kind, Started, Window, MAX_SPAN, WINDOW},
        wqe::{
            placement, selectivity, SendWqe, Sge, WcOpcode, WcStatus, WrOpcode, SEND_FENCE,
            SEND_INLINE, SEND_SOLICITED, SEND_WQE_HEADER, SGE_SIZE,
        },
    },
    qp::{tx::TX_BUDGET, Posts, QpCtx, QpInner, QpShared},
    rc::{bth, comp, path_mtu, timer},
    sge,
};
use core::sync::atomic::Ordering;
use kernel::{
    prelude::*,
    rdma::qp::{Qp, QpState, QpType},
    time::{Delta, Instant, Monotonic},
};

/// Largest RC message (`max_msg_sz`).
const MAX_MSG: u32 = 1 << 31;
/// Bytes an atomic reads and writes remotely, and brings back.
pub(crate) const ATOMIC_LEN: u32 = 8;
/// The responder ACKs every this many packets of a long message, so the window moves on.
const ACK_EVERY: u32 = 32;
/// The first wait after a local drop: at 10 Gb/s the time a thousand-packet queue takes to
/// send a tenth of itself; [`DROP_WAIT_MAX_US`] is that queue whole at 1 Gb/s, plus margin.
const DROP_WAIT_MIN_US: u32 = 100;
/// The longest wait after a local drop (see [`DROP_WAIT_MIN_US`]), and no more than a quarter
/// of the ACK timeout (see [`timer::drop_wait_max_us`]).
pub(crate) const DROP_WAIT_MAX_US: u32 = 20_000;
/// WQEs started and not yet completed, at most: twice what the largest window can have out
/// in one-packet messages, so sending never waits for one to start.
pub(crate) const STARTED_MAX: usize = 2 * WINDOW as usize;

/// A WQE that has started: its private copy, and where it stands in the window.
pub(crate) struct Sent {
    slot: KVec<u8>,
    imm: Option<u32>,
    pub(crate) len: u32,
    /// Payload bytes per packet when it started.
    pub(crate) mtu: u32,
    pub(crate) entry: Entry,
}

impl Started for Sent {
    fn entry(&self) -> &Entry {
        &self.entry
    }

    fn entry_mut(&mut self) -> &mut Entry {
        &mut self.entry
    }
}

impl Sent {
    pub(crate) fn wqe(&self) -> SendWqe<'_> {
        SendWqe::new(&self.slot)
    }

    /// Its SGEs: as many as it names and its slot (a ring slot's copy) holds.
    pub(crate) fn sges(&self) -> impl Iterator<Item = Option<Sge>> + Clone + '_ {
        let slot = &self.slot[..];
        let room = slot.len().saturating_sub(SEND_WQE_HEADER) / SGE_SIZE;
        let num = (self.wqe().num_sge() as usize).min(room);
        (0..num).map(move |i| SendWqe::new(slot).sge(i))
    }

    pub(crate) fn kind(&self) -> Kind {
        self.entry.kind()
    }

    pub(crate) fn wc_opcode(&self) -> WcOpcode {
        match self.kind() {
            Kind::Send | Kind::SendInv => WcOpcode::Send,
            Kind::Local => self
                .wqe()
                .opcode()
                .map_or(WcOpcode::Send, WrOpcode::completion),
            Kind::Write => WcOpcode::RdmaWrite,
            Kind::Read => WcOpcode::RdmaRead,
            Kind::CompareSwap => WcOpcode::CompSwap,
            Kind::FetchAdd => WcOpcode::FetchAdd,
            Kind::AtomicWrite => WcOpcode::AtomicWrite,
            Kind::Flush => WcOpcode::Flush,
        }
    }
}

/// The requester's state, under the QP's lock: started WQEs and the PSN window over them.
#[derive(Default)]
pub(crate) struct Requester {
    /// Ring position of the next WQE to start.
    next: u32,
    /// Started WQEs not yet completed, oldest first (at the ring's consumer index).
    pub(crate) flight: KVec<Sent>,
    /// A WQE failed: start no more until the QP is flushed.
    pub(crate) stopped: bool,
    /// The next WQE waits to start until completions make room (see [`STARTED_MAX`]).
    pub(crate) held: bool,
    /// A long WRITE is under way: until the flight empties, the QP's stream work sends it
    /// all, so that its packets leave from one CPU at a time (answers that open the window
    /// wake it instead of sending); from two CPUs at once they overtake each other between the
    /// CPUs' receive backlogs.
    pub(crate) streaming: bool,
    pub(crate) win: Window,
    /// Timeouts and RNR NAKs left before the oldest WQE fails.
    pub(crate) retries: Retries,
    /// The timer runs for an RNR NAK, not for a missing ACK.
    pub(crate) rnr_wait: bool,
    /// A sequence NAK sent the requester back to `una`, and no answer moved it since: another
    /// NAK for `una` asks for what is on its way again, and is ignored (see `comp::on_ack`).
    pub(crate) nak_resending: bool,
    /// The stack dropped a request as it was queued: nothing goes out until an answer shows
    /// the queue moving, or this time comes (see [`on_local_drop`]). The ACK timeout runs on.
    pub(crate) drop_until: Option<Instant<Monotonic>>,
    /// Waits after a local drop since the last answer: each doubles the next.
    pub(crate) drop_waits: u8,
    /// When the timer is due: progress moves it on without touching the armed timer, which
    /// then finds it in the future and waits the rest.
    pub(crate) due: Option<Instant<Monotonic>>,
    /// A timeout was put off once because packets waited in the backlog (the answer may be
    /// there); the next one counts, whatever waits.
    pub(crate) put_off: bool,
}

impl Requester {
    /// Forgets everything in flight (the QP is being flushed); new WQEs start at `cons`. Only
    /// through `QpShared::reset_requester`, which ends the stream's mirror flag with it.
    pub(crate) fn reset(&mut self, cons: u32) {
        self.flight.clear();
        self.next = cons;
        self.stopped = false;
        self.held = false;
        self.streaming = false;
        self.rnr_wait = false;
        self.nak_resending = false;
        self.drop_until = None;
        self.drop_waits = 0;
        self.due = None;
        self.put_off = false;
    }

    /// Whether the requester waits to go back: an RNR NAK's delay, or the wait after a local
    /// drop, runs (the timer sends again after it).
    pub(crate) fn waits(&self) -> bool {
        self.rnr_wait || self.drop_until.is_some()
    }

    /// Whether a READ in flight wants to ask again for responses it is missing.
    pub(crate) fn asks(&self) -> bool {
        self.flight.iter().any(|s| s.entry.asking())
    }

    /// Entering RTS: the retry budgets, and the window starts at `sq_psn`.
    pub(crate) fn start(&mut self, retry_cnt: u8, rnr_retry: u8, sq_psn: u32) {
        self.retries = Retries::new(retry_cnt, rnr_retry);
        if self.flight.is_empty() {
            self.win = Window::starting_at(Psn::new(sq_psn));
        }
    }
}

/// Longest RDMA WRITE a doorbell sends itself, from the poster's CPU; a longer one starts a
/// stream (measured with `make bench`, see Documentation/infiniband/ferroce.rst).
const SEND_AT_ONCE_MAX: u32 = 16 * 1024;

/// Whether a doorbell leaves the sending to the QP's stream work: a stream is under way, or the
/// next WQE to start is a long RDMA WRITE, by what user space wrote in it. Not a SEND: its
/// receiver busy-polls for the completions, and a stream would take that CPU from it; a READ's
/// request is one packet, whatever its length.
pub(crate) fn leaves_to_work(cx: &mut QpCtx<'_>) -> bool {
    let long = || {
        cx.shared
            .sq
            .send_hint_at(cx.inner.sq_cons, cx.inner.req.next)
            .is_some_and(|(op, len)| {
                len > SEND_AT_ONCE_MAX
                    && matches!(op, Some(WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm))
            })
    };
    // In SQD nothing starts, so a stream would not end until the QP is back in RTS.
    let starts = cx.inner.attr.state == QpState::Rts;
    if !cx.inner.req.streaming && starts && may_stream(cx) && long() {
        set_streaming(cx, true);
        cx.counters().inc(Counter::StreamsStarted);
    }
    cx.inner.req.streaming
}

/// Whether the QP may stream: a user RC QP. A kernel consumer's QP stays on the QP's work (its
/// queue has a rescuer). A UC QP's flight empties as each message goes, so it would move
/// between CPUs at every long message, with packets of the last one still in the other CPU's
/// receive backlog: UC cannot resend what they overtake.
fn may_stream(cx: &QpCtx<'_>) -> bool {
    cx.shared.qp_type() == QpType::Rc && cx.shared.posts == Posts::User
}

/// Whether WQEs are posted that the requester has not started.
pub(crate) fn has_unstarted(cx: &QpCtx<'_>) -> bool {
    cx.shared
        .sq
        .is_posted_at(cx.inner.sq_cons, cx.inner.req.next)
}

/// A stream starts or ends (see [`Requester::streaming`]).
pub(crate) fn set_streaming(cx: &mut QpCtx<'_>, on: bool) {
    cx.inner.req.streaming = on;
    cx.shared.streaming.store(on, Ordering::Release);
}

/// Starts posted WQEs, oldest first, as many as may be under way (none in SQD), and sends what
/// the window and one budget allow. Returns whether the budget ran out with more to send (the QP's work
/// goes on).
pub(crate) fn push(cx: &mut QpCtx<'_>) -> bool {
    let mtu = path_mtu(cx);
    cx.inner.req.held = false;
    // In SQD the QP finishes what it started and starts nothing.
    let starts = cx.inner.attr.state == QpState::Rts;
    while starts && !cx.inner.req.stopped {
        if cx.inner.req.flight.len() >= STARTED_MAX {
            cx.inner.req.held = true;
            break;
        }
        // Only WQEs between the consumer index and the producer's: the flight never holds more
        // than the ring, whatever the process writes.
        let slot = match cx.shared.sq.copy_at(cx.inner.sq_cons, cx.inner.req.next) {
            Ok(Some(slot)) => slot,
            Ok(None) => break,
            // No memory now: the work tries again.
            Err(_) => return true,
        };
        if waits_for_earlier(&SendWqe::new(&slot), &cx.inner.req.flight) {
            cx.inner.req.held = true;
            break;
        }
        // Room first: a bind or invalidate takes effect in `prepare`, and must not be done
        // again because the WQE could not be kept.
        if cx.inner.req.flight.reserve(1, GFP_ATOMIC).is_err() {
            return true;
        }
        let sent = match prepare(cx.qp, cx.shared, slot, mtu, &mut cx.inner.req.win) {
            Ok(Some(sent)) => sent,
            // Its PSNs would run too far ahead of the oldest unanswered: answers make room.
            Ok(None) => {
                cx.inner.req.held = true;
                break;
            }
            Err((slot, status)) => {
                cx.inner.req.stopped = true;
                // Its completion names its opcode, if it had one.
                let kind = kind(&SendWqe::new(&slot), cx.shared).map_or(Kind::Send, |(k, _)| k);
                Sent {
                    slot,
                    imm: None,
                    len: 0,
                    mtu,
                    entry: Entry::refused(kind, cx.inner.req.win.end(), status),
                }
            }
        };
        // Reserved above: this does not fail.
        if cx.inner.req.flight.push(sent, GFP_ATOMIC).is_err() {
            return true;
        }
        cx.inner.req.next = cx.shared.sq.next(cx.inner.req.next);
        cx.inner.attr.sq_psn = cx.inner.req.win.end().get();
    }
    comp::complete(cx);
    pump(cx)
}

/// Whether a WQE waits for the WQEs before it: a LOCAL_INV until they all completed (their
/// memory is in use until then, IBA 10.6.5), a fenced WQE until no READ or atomic before it is
/// outstanding (IBA 10.8.3.3). Completions bring the QP's work back (`held`).
fn waits_for_earlier(w: &SendWqe<'_>, flight: &[Sent]) -> bool {
    if flight.is_empty() {
        return false;
    }
    w.opcode() == Some(WrOpcode::LocalInv)
        || (w.send_flags() & SEND_FENCE != 0 && flight.iter().any(|s| s.kind().awaits_response()))
}

/// What a WQE asks for, and its immediate data; `None` for opcodes the QP's transport does not
/// take.
fn kind(w: &SendWqe<'_>, qp: &QpShared) -> Option<(Kind, Option<u32>)> {
    let uc = qp.is_uc();
    // What an RC QP takes; UC: all but READ and atomics. Fast registration is for kernel
    // consumers (no user WQE has the opcode; one that claims it is refused).
    Some(match w.opcode()? {
        WrOpcode::RegMr if qp.posts == Posts::KernelRing => (Kind::Local, None),
        WrOpcode::Send => (Kind::Send, None),
        WrOpcode::SendWithImm => (Kind::Send, Some(w.imm())),
        WrOpcode::SendWithInv if !uc => (Kind::SendInv, None),
        WrOpcode::BindMw | WrOpcode::LocalInv => (Kind::Local, None),
        WrOpcode::RdmaWrite => (Kind::Write, None),
        WrOpcode::RdmaWriteWithImm => (Kind::Write, Some(w.imm())),
        WrOpcode::RdmaRead if !uc => (Kind::Read, None),
        WrOpcode::AtomicCmpAndSwp if !uc => (Kind::CompareSwap, None),
        WrOpcode::AtomicFetchAndAdd if !uc => (Kind::FetchAdd, None),
        WrOpcode::AtomicWrite if !uc => (Kind::AtomicWrite, None),
        WrOpcode::Flush if !uc => (Kind::Flush, None),
        _ => return None,
    })
}

/// Checks a WQE copy, and the memory its SGEs name, and gives it its PSNs (`None`: not yet,
/// see [`Window::admits`]); a bad one comes back with its completion status, so a scribbled
/// ring fails its own WQE before anything goes on the wire.
fn prepare(
    qp: &Qp<Ferroce>,
    shared: &QpShared,
    slot: KVec<u8>,
    mtu: u32,
    win: &mut Window,
) -> Result<Option<Sent>, (KVec<u8>, WcStatus)> {
    let slot_len = shared.sq.slot_len();
    let w = SendWqe::new(&slot);
    let Some((kind, imm)) = kind(&w, shared) else {
        return Err((slot, WcStatus::LocQpOpErr));
    };
    if kind == Kind::Local {
        return match local(qp, shared, &w) {
            Ok(()) => Ok(Some(Sent {
                slot,
                imm,
                len: 0,
                mtu,
                entry: Entry::new(kind, win.end(), 0),
            })),
            Err(status) => Err((slot, status)),
        };
    }
    let room = slot_len - SEND_WQE_HEADER;
    let len = if kind == Kind::AtomicWrite {
        // Its 8 bytes ride in the WQE; it names no local memory.
        if w.atomic_write_value().is_none() {
            return Err((slot, WcStatus::LocLenErr));
        }
        ATOMIC_LEN
    } else if kind == Kind::Flush {
        // It names no local memory; a placement or level no verb has is refused here.
        let f = w.flush();
        let known = placement::GLOBAL | placement::PERSISTENT;
        if f.placement == 0 || f.placement & !known != 0 || f.selectivity > selectivity::REGION {
            return Err((slot, WcStatus::LocQpOpErr));
        }
        0
    } else if w.send_flags() & SEND_INLINE != 0 {
        // A READ's or an atomic's data comes back: it needs buffers.
        if kind.awaits_response() || w.length() as usize > room {
            return Err((slot, WcStatus::LocLenErr));
        }
        w.length()
    } else {
        let num = w.num_sge() as usize;
        if num.saturating_mul(SGE_SIZE) > room {
            return Err((slot, WcStatus::LocLenErr));
        }
        // The message is what the SGEs add up to; the WQE's own total is not trusted.
        let mrs = &qp.device().data().mrs;
        let total = match sge::check(
            mrs,
            shared.pd,
            (0..num).map(|i| w.sge(i)),
            kind.awaits_response(),
        ) {
            Ok(total) => total,
            Err(status) => return Err((slot, status)),
        };
        match u32::try_from(total) {
            // An atomic's buffer takes the 8-byte original value.
            Ok(t) if kind.is_atomic() && t >= ATOMIC_LEN => ATOMIC_LEN,
            Ok(_) if kind.is_atomic() => return Err((slot, WcStatus::LocLenErr)),
            Ok(t) if t <= MAX_MSG => t,
            _ => return Err((slot, WcStatus::LocLenErr)),
        }
    };
    let npkts = len.div_ceil(mtu).max(1);
    if npkts > MAX_SPAN {
        // 2 GiB at a 256-byte MTU: more packets than PSNs can tell apart.
        return Err((slot, WcStatus::LocLenErr));
    }
    if !win.admits(npkts) {
        return Ok(None);
    }
    Ok(Some(Sent {
        slot,
        imm,
        len,
        mtu,
        entry: Entry::new(kind, win.assign(npkts), npkts),
    }))
}

/// Does a local WQE, when it starts: a bind takes effect before any later WQE is sent; it does
/// not wait for earlier ones to be sent or answered (C rxe does it when its requester reaches
/// the WQE, after the earlier ones were sent).
fn local(qp: &Qp<Ferroce>, shared: &QpShared, w: &SendWqe<'_>) -> Result<(), WcStatus> {
    let mrs = &qp.device().data().mrs;
    match w.opcode() {
        Some(WrOpcode::BindMw) => mrs
            .bind(shared.pd, shared.id, &w.bind_mw())
            .map_err(|_| WcStatus::MwBindErr),
        Some(WrOpcode::LocalInv) => mrs
            .invalidate(shared.pd, shared.id, w.invalidate_rkey(), false)
            .map_err(|_| WcStatus::LocQpOpErr),
        Some(WrOpcode::RegMr) => mrs
            .fast_register(shared.pd, &w.reg_mr())
            .map_err(|_| WcStatus::LocQpOpErr),
        _ => Err(WcStatus::LocQpOpErr),
    }
}

/// Transmits from `nxt` while the window and one budget allow, after asking again for the
/// missing responses of READs seen short. Arms the ACK timer if it is idle. Returns whether
/// the budget ran out with more to send.
pub(crate) fn pump(cx: &mut QpCtx<'_>) -> bool {
    if let Some(psn) = cx.shared.take_tx_drop() {
        on_local_drop(cx, psn);
    }
    let asks = cx.inner.req.asks();
    let mut more = false;
    // After an RNR NAK nothing goes out before its delay ends, after a local drop nothing
    // before the queue had time to drain (the timer then sends again).
    let waits = cx.inner.req.waits();
    if (cx.inner.req.win.unsent() || asks) && !waits {
        more = cx
            .with_peer(|cx, xmit| {
                send_asks(cx.inner, xmit);
                send_window(cx, xmit)
            })
            .unwrap_or(false);
        if cx.shared.is_uc() {
            // What went out whole is done.
            comp::complete(cx);
        }
    }
    // No deadline: the timer is idle, or armed for the pacer only. It is for packets sent and
    // unanswered, and for packets the stack refused (the timer tries again); not for those the
    // pacer holds back, whose time at a low rate may be longer than the ACK timeout.
    let stalled = cx.inner.req.win.unsent() && !cx.inner.cc.holds_back();
    if cx.inner.req.due.is_none() && (cx.inner.req.win.awaits_answer() || stalled) {
        timer::arm_ack(cx);
    }
    timer::wake_paced(cx);
    more
}

/// The stack dropped the request at `psn` as it was queued (a qdisc full: of this QP's packets,
/// or of others'). Sending again at once would only be dropped again: the requester goes back
/// to `psn` with half its window and waits. An answer that moves the window ends the wait (the
/// queue moved on; see [`comp::on_response`]); otherwise the timer does, after a wait that
/// doubles while drops come without answers. The ACK timeout runs meanwhile: a queue that
/// drops everything fails the WQE once the retries run out, as a lossy path would.
fn on_local_drop(cx: &mut QpCtx<'_>, psn: Psn) {
    let longest = timer::drop_wait_max_us(cx.inner);
    let req = &mut cx.inner.req;
    let went_back = req.win.dropped(psn);
    if !went_back || req.rnr_wait || req.drop_until.is_some() {
        return;
    }
    // Past 2^8 times the first, every wait is the longest.
    let us = (DROP_WAIT_MIN_US << req.drop_waits).min(longest);
    req.drop_waits = (req.drop_waits + 1).min(8);
    req.drop_until = Some(Instant::now() + Delta::from_micros(i64::from(us)));
    timer::rearm(cx);
}

/// Asks again for the missing responses of each READ the completer saw short, and only those:
/// the READs after it may be fine, and asking for them again would double their traffic.
fn send_asks(inner: &mut QpInner, xmit: &Xmit<'_>) {
    let attr = inner.attr;
    let req = &mut inner.req;
    for sent in req.flight.iter_mut() {
        if let Some(from) = sent.entry.take_ask() {
            req.win
                .asked_again(sent.entry.first().add(from), sent.entry.end());
            // A lost request is asked again by the timer.
            let _ = send_request(xmit, &attr, sent, from);
        }
    }
}

/// Sends from `nxt` within the window, at most [`TX_BUDGET`] packets; returns whether the
/// budget cut it short.
fn send_window(cx: &mut QpCtx<'_>, xmit: &Xmit<'_>) -> bool {
    let uc = cx.shared.is_uc();
    let attr = cx.inner.attr;
    let req = &mut cx.inner.req;
    let pace = &mut cx.inner.cc;
    let mut budget = TX_BUDGET;
    while req.win.may_send() {
        let Some((idx, i)) = req.win.next_to_send(&req.flight) else {
            // Nothing left to send at or after `nxt` (all answered or failed).
            req.win.skip_to_end();
            break;
        };
        if budget == 0 {
            return true;
        }
        budget -= 1;
        let Some(sent) = req.flight.get(idx) else {
            break;
        };
        // No more READs outstanding than the peer granted (IBA C9-148 ff.): it keeps state for
        // that many, and a READ it has no room for would fail the QP. The rest wait, in order;
        // with none granted, a READ waits until the ACK timeout fails it (C rxe sends none).
        // One answered but not yet completed still holds its credit: the responder may keep
        // its resource (an atomic's saved answer) until the requester moves past it, and an
        // earlier WQE's lost answer may still need it.
        if sent.kind().takes_credit() && !uc {
            let limit = usize::from(attr.max_rd_atomic);
            let outstanding = req.flight.get(..idx).map_or(0, |before| {
                before
                    .iter()
                    .filter(|s| s.kind().takes_credit() && s.entry.status() == WcStatus::Success)
                    .count()
            });
            if outstanding >= limit {
                break;
            }
        }
        let res = if sent.kind().awaits_response() {
            send_request(xmit, &attr, sent, i).map(|()| sent.entry.end())
        } else {
            let res = send_packet(cx.shared, &attr, xmit, &req.win, pace, sent, i);
            // UC is unreliable: a packet the stack refused is a packet lost. One the pacer
            // holds back is sent later.
            res.or_else(|e| if uc && e != EAGAIN { Ok(()) } else { Err(e) })
                .map(|()| sent.entry.first().add(i + 1))
        };
        match res {
            Ok(next) => {
                req.win.sent(next);
                if uc {
                    // No ACK will come: what is out is done.
                    if let Some(s) = req.flight.get_mut(idx) {
                        s.entry.sent_through(next);
                    }
                    req.win.settle(&req.flight);
                }
            }
            // Paced: an ACK asked for, or the timer (see `pump`), brings the QP back.
            Err(e) if e == EAGAIN => break,
            // The stack refused (no memory, no route): the timer tries again.
            Err(_) => break,
        }
    }
    false
}

/// Sends a READ's or an atomic's request: for a READ, asking for its responses from the
/// `from`th on; an atomic asks for its one answer (again: the responder replays it).
fn send_request(
    xmit: &Xmit<'_>,
    attr: &kernel::rdma::qp::QpAttr,
    sent: &Sent,
    from: u32,
) -> Result {
    match sent.kind() {
        Kind::Read => return send_read_request(xmit, attr, sent, from),
        Kind::AtomicWrite => return send_atomic_write(xmit, attr, sent),
        Kind::Flush => return send_flush(xmit, attr, sent),
        _ => {}
    }
    let w = sent.wqe();
    let op = sent.kind().opcode(Position::Only, false).ok_or(EINVAL)?;
    let mut bth = bth(attr, op, sent.entry.first());
    bth.ack_req = true;
    let (swap_add, compare) = match sent.kind() {
        Kind::CompareSwap => (w.atomic_swap(), w.atomic_compare_add()),
        _ => (w.atomic_compare_add(), 0),
    };
    let ext = ExtHeaders {
        atomic: Some(AtomicEth {
            va: w.atomic_remote_addr(),
            rkey: w.atomic_rkey(),
            swap_add,
            compare,
        }),
        ..ExtHeaders::default()
    };
    xmit.send(&bth, &ext, &[])
}

/// Sends an ATOMIC WRITE: its 8 bytes, whole, to the word its WQE names. A duplicate (its
/// answer was lost) is answered from the responder's resource, and does not store again.
fn send_atomic_write(xmit: &Xmit<'_>, attr: &kernel::rdma::qp::QpAttr, sent: &Sent) -> Result {
    let w = sent.wqe();
    // Checked when it started.
    let value = w.atomic_write_value().ok_or(EINVAL)?;
    let mut bth = bth(attr, Opcode::RcAtomicWrite, sent.entry.first());
    bth.ack_req = true;
    let ext = ExtHeaders {
        reth: Some(Reth {
            va: w.rdma_remote_addr(),
            rkey: w.rdma_rkey(),
            dma_len: ATOMIC_LEN,
        }),
        ..ExtHeaders::default()
    };
    xmit.send(&bth, &ext, &value)
}

/// Sends a FLUSH: no payload; its FETH says what placement, its RETH of what.
fn send_flush(xmit: &Xmit<'_>, attr: &kernel::rdma::qp::QpAttr, sent: &Sent) -> Result {
    let f = sent.wqe().flush();
    let mut bth = bth(attr, Opcode::RcFlush, sent.entry.first());
    bth.ack_req = true;
    let ext = ExtHeaders {
        feth: Some(Feth {
            placement: f.placement,
            selectivity: f.selectivity,
        }),
        reth: Some(Reth {
            va: f.va,
            rkey: f.rkey,
            dma_len: f.len,
        }),
        ..ExtHeaders::default()
    };
    xmit.send(&bth, &ext, &[])
}

/// Asks for a READ's responses from the `from`th on.
fn send_read_request(
    xmit: &Xmit<'_>,
    attr: &kernel::rdma::qp::QpAttr,
    sent: &Sent,
    from: u32,
) -> Result {
    let w = sent.wqe();
    let done = from.saturating_mul(sent.mtu).min(sent.len);
    let mut bth = bth(attr, Opcode::RcReadRequest, sent.entry.first().add(from));
    bth.ack_req = true;
    let ext = ExtHeaders {
        reth: Some(Reth {
            va: w.rdma_remote_addr().wrapping_add(u64::from(done)),
            rkey: w.rdma_rkey(),
            dma_len: sent.len - done,
        }),
        ..ExtHeaders::default()
    };
    xmit.send(&bth, &ext, &[])
}

/// Sends packet `i` of a SEND or WRITE, its payload copied from the WQE or its SGEs straight
/// into the packet; on a UC QP with the UC opcode and no ACK request.
fn send_packet(
    shared: &QpShared,
    attr: &kernel::rdma::qp::QpAttr,
    xmit: &Xmit<'_>,
    win: &Window,
    pace: &mut QpCc,
    sent: &Sent,
    i: u32,
) -> Result {
    let uc = shared.is_uc();
    let w = sent.wqe();
    let flags = w.send_flags();
    let off = (i * sent.mtu) as usize;
    let n = (sent.len as usize - off).min(sent.mtu as usize);
    let fill = |dst: &mut [u8]| {
        if flags & SEND_INLINE != 0 {
            let data = w
                .inline_data(sent.len as usize)
                .ok_or(BuildError::Payload)?;
            dst.copy_from_slice(data.get(off..off + n).ok_or(BuildError::Payload)?);
        } else {
            let mrs = &xmit.device().data().mrs;
            let num = w.num_sge() as usize;
            // The SGEs were checked for length; only a region deregistered since can fail.
            sge::gather_at(mrs, shared.pd, (0..num).map(|j| w.sge(j)), off, dst)
                .map_err(|_| BuildError::Payload)?;
        }
        Ok(())
    };
    let pos = Position::of(i, sent.entry.npkts());
    let last = pos.ends();
    let rc_op = sent.kind().opcode(pos, sent.imm.is_some()).ok_or(EINVAL)?;
    let op = if uc {
        rc_op.to_uc().ok_or(EINVAL)?
    } else {
        rc_op
    };
    let psn = sent.entry.first().add(i);
    let wire_len = xmit.wire_len(op as u8, n).ok_or(EINVAL)?;
    let (depart, ask_ack) = match pace.pace(&xmit.device().data().cc, attr.rate_limit, wire_len) {
        Pace::Now => (None, false),
        Pace::At { depart, ask_ack } => (Some(depart), ask_ack),
        Pace::Wait => return Err(EAGAIN),
    };
    let mut bth = bth(attr, op, psn);
    bth.ack_req = !uc && (last || (i + 1) % ACK_EVERY == 0 || win.wants_ack(psn) || ask_ack);
    bth.solicited = last && flags & SEND_SOLICITED != 0;
    let ext = ExtHeaders {
        reth: (sent.kind() == Kind::Write && pos.starts()).then(|| Reth {
            va: w.rdma_remote_addr(),
            rkey: w.rdma_rkey(),
            dma_len: sent.len,
        }),
        imm: if last { sent.imm } else { None },
        ieth: (sent.kind() == Kind::SendInv && last).then(|| Ieth {
            rkey: w.invalidate_rkey(),
        }),
        ..ExtHeaders::default()
    };
    xmit.send_at(&bth, &ext, n, fill, depart)
}
