// SPDX-License-Identifier: GPL-2.0

//! The RC requester's window: which PSNs are out, what an ACK, NAK or read response from the
//! peer means for each started WQE, and what to send again (IBA 9.7.5, go-back-N).
//!
//! Started WQEs are [`Entry`]s, oldest first, each owning a PSN range; the [`Window`] holds the
//! PSNs `una` (oldest not yet answered) <= `nxt` (next to transmit) <= `end` (next to assign),
//! and `sent_end`, past the newest PSN sent. Every response is first placed against that range:
//! one beyond what was sent answers nothing (forged or corrupt) and one before `una` is old.
//!
//! Reordering is tolerated: each READ counts its own responses, so a response that overtakes
//! another READ's tail lands where it belongs, and a READ seen short asks for its missing
//! responses once (not every READ after it from the start).

use super::{
    opcode::{Opcode, Position},
    psn::Psn,
    wqe::WcStatus,
};

/// PSNs the requester sends beyond the oldest unanswered one, at most. Go-back-N resends up to
/// this many after a loss.
pub(crate) const WINDOW: u32 = 256;
/// PSNs that may be given out from the oldest unanswered one on: under half the PSN space, so
/// every comparison among them stays right.
pub(crate) const MAX_SPAN: u32 = (1 << 23) - 1;
/// The smallest window: where an ACK timeout leaves it.
const MIN_WINDOW: u32 = 8;
/// PSNs the window grows by for each window's worth answered, once past the slow start.
const WINDOW_GROWTH: u32 = 8;
/// Read responses that arrive past a READ's first missing one before it asks for them again:
/// a path may reorder a little (packets of one flow sent from two CPUs), and asking at the
/// first out-of-order response would make the peer send everything from there twice.
pub(crate) const REORDER_SLACK: u32 = 16;

/// What a started WQE asks the peer to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Send,
    /// A SEND whose last packet asks the responder to invalidate a key (IETH).
    SendInv,
    Write,
    Read,
    /// An atomic compare and swap.
    CompareSwap,
    /// An atomic fetch and add.
    FetchAdd,
    /// An ATOMIC WRITE: 8 bytes out, a zero-length read response back.
    AtomicWrite,
    /// A FLUSH: no bytes out, a zero-length read response back once the peer placed them.
    Flush,
    /// Done in the send queue itself (a memory window bind, a local invalidate): no PSN, no
    /// packet.
    Local,
}

impl Kind {
    /// Whether only responses of its own answer it (a READ's data, an atomic's original value):
    /// an ACK past it means they were lost, and it asks again.
    pub(crate) const fn awaits_response(self) -> bool {
        matches!(
            self,
            Kind::Read | Kind::CompareSwap | Kind::FetchAdd | Kind::AtomicWrite | Kind::Flush
        )
    }

    /// Whether it holds one of the peer's `max_rd_atomic` credits while outstanding: READs and
    /// atomics do; a FLUSH does not (C rxe counts none for it, and a responder keeps it beyond
    /// the resources it granted).
    pub(crate) const fn takes_credit(self) -> bool {
        self.awaits_response() && !matches!(self, Kind::Flush)
    }

    /// Whether read responses answer it.
    pub(crate) const fn reads(self) -> bool {
        matches!(self, Kind::Read | Kind::AtomicWrite | Kind::Flush)
    }

    /// Whether one empty read response answers it.
    pub(crate) const fn empty_read(self) -> bool {
        matches!(self, Kind::AtomicWrite | Kind::Flush)
    }

    /// Whether it is an atomic.
    pub(crate) const fn is_atomic(self) -> bool {
        matches!(self, Kind::CompareSwap | Kind::FetchAdd)
    }

    /// The RC opcode of a SEND's or WRITE's packet at `pos`, with immediate data or not (the
    /// immediate rides on the last packet); a READ's or an atomic's request is one packet.
    /// `None` for a local WQE, which sends nothing.
    pub(crate) const fn opcode(self, pos: Position, imm: bool) -> Option<Opcode> {
        Some(match (self, pos, imm) {
            (Kind::Local, _, _) => return None,
            (Kind::Read, _, _) => Opcode::RcReadRequest,
            (Kind::CompareSwap, _, _) => Opcode::RcCompareSwap,
            (Kind::FetchAdd, _, _) => Opcode::RcFetchAdd,
            (Kind::AtomicWrite, _, _) => Opcode::RcAtomicWrite,
            (Kind::Flush, _, _) => Opcode::RcFlush,
            (Kind::Send | Kind::SendInv, Position::First, _) => Opcode::RcSendFirst,
            (Kind::Send | Kind::SendInv, Position::Middle, _) => Opcode::RcSendMiddle,
            (Kind::SendInv, Position::Last, _) => Opcode::RcSendLastInv,
            (Kind::SendInv, Position::Only, _) => Opcode::RcSendOnlyInv,
            (Kind::Send, Position::Last, false) => Opcode::RcSendLast,
            (Kind::Send, Position::Last, true) => Opcode::RcSendLastImm,
            (Kind::Send, Position::Only, false) => Opcode::RcSendOnly,
            (Kind::Send, Position::Only, true) => Opcode::RcSendOnlyImm,
            (Kind::Write, Position::First, _) => Opcode::RcWriteFirst,
            (Kind::Write, Position::Middle, _) => Opcode::RcWriteMiddle,
            (Kind::Write, Position::Last, false) => Opcode::RcWriteLast,
            (Kind::Write, Position::Last, true) => Opcode::RcWriteLastImm,
            (Kind::Write, Position::Only, false) => Opcode::RcWriteOnly,
            (Kind::Write, Position::Only, true) => Opcode::RcWriteOnlyImm,
        })
    }
}

/// One started WQE as the window sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    kind: Kind,
    first: Psn,
    /// PSNs it takes: its packets, or for a READ its responses. 0 for one that failed before
    /// anything was sent.
    npkts: u32,
    /// SEND/WRITE: packets answered, from the first; READ: responses received, in order.
    done: u32,
    status: WcStatus,
    /// READ: the response it last asked for again, so a gap is asked about once.
    asked: Option<u32>,
    /// READ: ask for the missing responses now (a gap, or a later answer that passed it).
    ask: bool,
    /// READ: responses seen past the first missing one since the last that landed.
    passed: u32,
}

impl Entry {
    /// A WQE whose `npkts` PSNs start at `first`.
    pub(crate) fn new(kind: Kind, first: Psn, npkts: u32) -> Self {
        Self {
            kind,
            first,
            npkts,
            done: 0,
            status: WcStatus::Success,
            asked: None,
            ask: false,
            passed: 0,
        }
    }

    /// A WQE that failed before it took any PSN (a bad WQE in the ring).
    pub(crate) fn refused(kind: Kind, at: Psn, status: WcStatus) -> Self {
        Self {
            status,
            ..Self::new(kind, at, 0)
        }
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    pub(crate) fn first(&self) -> Psn {
        self.first
    }

    pub(crate) fn npkts(&self) -> u32 {
        self.npkts
    }

    /// The PSN after its own.
    pub(crate) fn end(&self) -> Psn {
        self.first.add(self.npkts)
    }

    /// Responses received (READ) or packets answered (SEND, WRITE).
    #[cfg(ferroce_host)]
    pub(crate) fn done(&self) -> u32 {
        self.done
    }

    pub(crate) fn status(&self) -> WcStatus {
        self.status
    }

    /// Whether it still waits for the peer.
    pub(crate) fn pending(&self) -> bool {
        self.status == WcStatus::Success && self.done < self.npkts
    }

    /// Whether it is over, answered or failed: it may complete.
    pub(crate) fn finished(&self) -> bool {
        !self.pending()
    }

    /// The first PSN of it not answered yet.
    pub(crate) fn missing(&self) -> Psn {
        self.first.add(self.done)
    }

    /// Whether `psn` is one of its PSNs.
    pub(crate) fn holds(&self, psn: Psn) -> bool {
        let i = psn.diff(self.first);
        // CAST: `i` is checked non-negative.
        i >= 0 && (i as u32) < self.npkts
    }

    /// Fails it with `status` (a NAK, a local error, retries spent).
    pub(crate) fn fail(&mut self, status: WcStatus) {
        if self.status == WcStatus::Success {
            self.status = status;
        }
    }

    /// A UC WQE: every packet up to `next` went out, which is all UC waits for.
    pub(crate) fn sent_through(&mut self, next: Psn) {
        let n = next.diff(self.first).clamp(0, self.npkts as i32);
        // CAST: Clamped to `0..=npkts`.
        self.done = self.done.max(n as u32);
    }

    /// READ: whether it wants to ask for missing responses (see [`Entry::take_ask`]).
    pub(crate) fn asking(&self) -> bool {
        self.ask && self.pending()
    }

    /// READ: the missing responses to ask for now, if it should ask (once per gap).
    pub(crate) fn take_ask(&mut self) -> Option<u32> {
        if !core::mem::take(&mut self.ask) || !self.pending() {
            return None;
        }
        Some(self.done)
    }

    /// READ: asks for its missing responses, unless it already asked from there.
    fn want_missing(&mut self) {
        if self.kind.awaits_response() && self.pending() && self.asked != Some(self.done) {
            self.asked = Some(self.done);
            self.ask = true;
        }
    }

    /// READ: a response later than its first missing one arrived; after [`REORDER_SLACK`] of
    /// them the missing ones count as lost.
    fn passed_by(&mut self) {
        if self.kind.awaits_response() && self.pending() {
            self.passed += 1;
            if self.passed >= REORDER_SLACK {
                self.want_missing();
            }
        }
    }

    /// The peer answered everything of it through `psn` (an ACK or an implied one). A READ or
    /// an atomic cannot be answered so: its response was lost, and it asks again.
    fn answered_through(&mut self, psn: Psn) {
        if !self.pending() || psn.before(self.first) {
            return;
        }
        if self.kind.awaits_response() {
            self.want_missing();
            return;
        }
        let n = psn
            .diff(self.first)
            .saturating_add(1)
            .clamp(0, self.npkts as i32);
        // CAST: Clamped to `0..=npkts`.
        self.done = self.done.max(n as u32);
    }
}

/// What the window works on: a started WQE, the driver's with its copy and buffers, or a bare
/// [`Entry`] (the tests').
pub(crate) trait Started {
    fn entry(&self) -> &Entry;
    fn entry_mut(&mut self) -> &mut Entry;
}

impl Started for Entry {
    fn entry(&self) -> &Entry {
        self
    }

    fn entry_mut(&mut self) -> &mut Entry {
        self
    }
}

/// Where a response's PSN lies against what was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Within what was sent and not yet answered (or, for an ACK, the last PSN answered).
    Current,
    /// Before `una`: answered already; a duplicate or a late one.
    Old,
    /// At or past `sent_end`: nothing sent has that PSN.
    Beyond,
}

/// What a read response means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadOutcome {
    /// The next response of the READ at `idx` in flight: it is response `index` of it.
    Next { idx: usize, index: u32 },
    /// One received already.
    Duplicate,
    /// Responses before it went missing: the READ at `idx` asks for them (if it has not).
    Gap { idx: usize },
    /// For no READ in flight.
    NotOurs,
}

/// The requester's PSNs: `una` <= `nxt` <= `end`, and `una` <= `sent_end` <= `end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    una: Psn,
    nxt: Psn,
    end: Psn,
    sent_end: Psn,
    /// The read response PSNs last asked for again (from, to): answers in it that land nothing
    /// show the responder at work on what was asked (see [`Window::shows_work`]).
    again: Option<(Psn, Psn)>,
    /// How far `nxt` may run ahead of `una` (see [`Window::lost`]).
    cwnd: u32,
    /// Below it the window doubles per window answered; above it, it grows slowly.
    ssthresh: u32,
    /// PSNs answered towards the next slow growth step.
    grown: u32,
    /// `sent_end` when the window last shrank: losses among the PSNs before it belong to that
    /// episode and shrink it no more.
    recover: Psn,
}

impl Default for Window {
    fn default() -> Self {
        Self::starting_at(Psn::default())
    }
}

impl Window {
    /// An empty window whose first PSN is `psn`.
    pub(crate) fn starting_at(psn: Psn) -> Self {
        Self {
            una: psn,
            nxt: psn,
            end: psn,
            sent_end: psn,
            again: None,
            cwnd: WINDOW,
            ssthresh: WINDOW,
            grown: 0,
            recover: psn,
        }
    }

    pub(crate) fn una(&self) -> Psn {
        self.una
    }

    #[cfg(ferroce_host)]
    pub(crate) fn nxt(&self) -> Psn {
        self.nxt
    }

    /// The next PSN to assign (the QP's `sq_psn`).
    pub(crate) fn end(&self) -> Psn {
        self.end
    }

    /// Gives `npkts` PSNs to a new WQE; returns the first.
    pub(crate) fn assign(&mut self, npkts: u32) -> Psn {
        let first = self.end;
        self.end = self.end.add(npkts);
        first
    }

    /// Whether a WQE of `npkts` packets may have its PSNs now: from `una` to past its last
    /// they must stay within [`MAX_SPAN`]. Otherwise it waits for answers; one longer than
    /// that never fits.
    pub(crate) fn admits(&self, npkts: u32) -> bool {
        // CAST: `end` is at most `MAX_SPAN` ahead of `una`, never behind.
        let span = self.end.diff(self.una) as u32;
        span.saturating_add(npkts) <= MAX_SPAN
    }

    /// Whether the window lets `nxt` go out.
    pub(crate) fn may_send(&self) -> bool {
        // CAST: `cwnd <= WINDOW`.
        self.nxt.before(self.end) && self.nxt.diff(self.una) < self.cwnd as i32
    }

    /// How far the requester may run ahead of `una` now.
    #[cfg(ferroce_host)]
    pub(crate) fn cwnd(&self) -> u32 {
        self.cwnd
    }

    /// Whether the packet at `psn` asks for an ACK to keep the window moving: one in every
    /// quarter window of PSNs does, so a window smaller than a message still slides when an
    /// ACK is lost. (A whole window needs none beyond the requester's every 32 packets.)
    pub(crate) fn wants_ack(&self, psn: Psn) -> bool {
        if self.cwnd >= WINDOW {
            return false;
        }
        psn.get() % (self.cwnd / 4).max(1) == 0
    }

    /// A sequence NAK at `psn` said a packet was lost (or overtaken): the window halves, once
    /// per episode (a loss among what was sent before the last shrink is the same one). Go-back-N
    /// resends what followed a loss, so a window that stays large under loss multiplies the
    /// traffic; the answered PSNs let it grow again.
    pub(crate) fn lost(&mut self, psn: Psn) {
        if !psn.before(self.recover) {
            self.new_episode();
            self.cwnd = self.ssthresh;
        }
    }

    /// The ACK timer fired with nothing answered: the window starts again from its smallest.
    pub(crate) fn timed_out(&mut self) {
        self.new_episode();
        self.cwnd = MIN_WINDOW;
    }

    /// A loss episode starts: past half the current window, growth slows.
    fn new_episode(&mut self) {
        self.ssthresh = (self.cwnd / 2).max(MIN_WINDOW);
        self.grown = 0;
        self.recover = self.sent_end;
    }

    /// `n` more PSNs were answered.
    fn grow(&mut self, n: u32) {
        if self.cwnd < self.ssthresh {
            self.cwnd = self.cwnd.saturating_add(n).min(self.ssthresh);
            return;
        }
        self.grown = self.grown.saturating_add(n.saturating_mul(WINDOW_GROWTH));
        while self.grown >= self.cwnd && self.cwnd < WINDOW {
            self.grown -= self.cwnd;
            self.cwnd += 1;
        }
        if self.cwnd >= WINDOW {
            self.grown = 0;
        }
    }

    /// Whether anything assigned is still to be sent.
    pub(crate) fn unsent(&self) -> bool {
        self.nxt != self.end
    }

    /// Whether a packet that went out (since the last go-back-N) is still unanswered: what
    /// the ACK timer waits for. Packets not sent yet, or to be sent again (a paced QP's, held
    /// back), need no timer until they go.
    pub(crate) fn awaits_answer(&self) -> bool {
        self.una != self.nxt
    }

    /// Everything before `next` went out.
    pub(crate) fn sent(&mut self, next: Psn) {
        if next.diff(self.nxt) > 0 && next.diff(self.end) <= 0 {
            self.nxt = next;
        }
        if self.nxt.diff(self.sent_end) > 0 {
            self.sent_end = self.nxt;
        }
    }

    /// Nothing to send at or after `nxt` (what is left failed or was answered).
    pub(crate) fn skip_to_end(&mut self) {
        self.sent(self.end);
    }

    /// Marks as sent what the window allows, at most `budget` packets (a READ request counts
    /// one), as the requester's send loop does; for the tests and fuzzers, which send nothing.
    #[cfg(ferroce_host)]
    pub(crate) fn send_allowed(&mut self, entries: &[Entry], mut budget: u32) {
        while self.may_send() && budget > 0 {
            let Some((idx, i)) = self.next_to_send(entries) else {
                self.skip_to_end();
                break;
            };
            let e = &entries[idx];
            let next = if e.kind.awaits_response() {
                e.end()
            } else {
                e.first.add(i + 1)
            };
            self.sent(next);
            budget -= 1;
        }
    }

    /// Where an ACK's PSN (the last one it answers) lies.
    pub(crate) fn place_ack(&self, psn: Psn) -> Place {
        if psn.diff(self.sent_end) >= 0 {
            Place::Beyond
        } else if psn.diff(self.una) < -1 {
            Place::Old
        } else {
            Place::Current
        }
    }

    /// Read responses `from..to` were asked for again.
    pub(crate) fn asked_again(&mut self, from: Psn, to: Psn) {
        self.again = Some(match self.again {
            None => (from, to),
            Some((f, t)) => (
                if from.before(f) { from } else { f },
                if t.before(to) { to } else { t },
            ),
        });
    }

    /// Whether a read response that lands nothing (old, a duplicate, past a gap) answers what
    /// was last asked for again: the responder is at work on it (a READ asked again while its
    /// first responses were on the way is answered again whole). A response forged at a PSN
    /// nobody asked for again shows nothing.
    pub(crate) fn shows_work(&self, psn: Psn) -> bool {
        self.again
            .is_some_and(|(from, to)| !psn.before(from) && psn.before(to))
    }

    /// Where a NAK's or read response's PSN (a request it answers) lies.
    pub(crate) fn place(&self, psn: Psn) -> Place {
        if psn.diff(self.sent_end) >= 0 {
            Place::Beyond
        } else if psn.before(self.una) {
            Place::Old
        } else {
            Place::Current
        }
    }

    /// An ACK answered everything through `psn` (already placed [`Place::Current`]).
    pub(crate) fn ack(&mut self, entries: &mut [impl Started], psn: Psn) {
        for e in entries.iter_mut().map(Started::entry_mut) {
            if psn.before(e.first) {
                break;
            }
            e.answered_through(psn);
        }
        self.settle(entries);
    }

    /// A NAK for the request at `psn`: everything before it was answered (IBA C9-114 ff.).
    /// A sequence or RNR NAK sends again from `psn`; [`Window::fail_at`] handles the others.
    pub(crate) fn nak(&mut self, entries: &mut [impl Started], psn: Psn) {
        self.ack(entries, psn.add(Psn::MASK));
        if !psn.before(self.una) && psn.diff(self.sent_end) < 0 {
            self.nxt = psn;
            self.asked_again(psn, self.sent_end);
        }
    }

    /// The local stack dropped the request at `psn` as it was queued (a full qdisc), and the
    /// requests after it were held back: they are sent again from there, and the window halves
    /// as for a loss. One sent again and answered meanwhile only sends again from `una`, where
    /// the held back start. Returns whether it went back (not if sending resumes there or
    /// before already).
    pub(crate) fn dropped(&mut self, psn: Psn) -> bool {
        let answered = psn.before(self.una);
        let from = if answered { self.una } else { psn };
        if from.diff(self.sent_end) >= 0 || !from.before(self.nxt) {
            return false;
        }
        self.nxt = from;
        self.asked_again(from, self.sent_end);
        if !answered {
            self.lost(from);
        }
        true
    }

    /// The retries ran out: the oldest WQE still pending fails with `status` (the QP then
    /// goes to the error state, which flushes the rest). Returns whether one did.
    pub(crate) fn fail_oldest(&mut self, entries: &mut [impl Started], status: WcStatus) -> bool {
        let hit = entries
            .iter_mut()
            .map(Started::entry_mut)
            .find(|e| e.pending());
        let failed = hit.is_some();
        if let Some(e) = hit {
            e.fail(status);
        }
        failed
    }

    /// A NAK that fails the request at `psn` (invalid request, remote access, remote
    /// operational error): what came before was answered, the WQE holding `psn` fails.
    /// Returns whether one did.
    pub(crate) fn fail_at(
        &mut self,
        entries: &mut [impl Started],
        psn: Psn,
        status: WcStatus,
    ) -> bool {
        self.ack(entries, psn.add(Psn::MASK));
        let hit = entries
            .iter_mut()
            .map(Started::entry_mut)
            .find(|e| e.pending() && e.holds(psn));
        let failed = hit.is_some();
        if let Some(e) = hit {
            e.fail(status);
        }
        self.settle(entries);
        failed
    }

    /// A read response with `psn` (already placed [`Place::Current`]).
    pub(crate) fn read_response(&mut self, entries: &mut [impl Started], psn: Psn) -> ReadOutcome {
        self.response(entries, psn, Kind::reads)
    }

    /// An atomic ACK with `psn` (already placed [`Place::Current`]): the original value of the
    /// atomic at `psn`, which it answers whole (`index` 0).
    pub(crate) fn atomic_response(
        &mut self,
        entries: &mut [impl Started],
        psn: Psn,
    ) -> ReadOutcome {
        self.response(entries, psn, Kind::is_atomic)
    }

    /// A response with `psn` for an entry of a kind `ours` takes.
    fn response(
        &mut self,
        entries: &mut [impl Started],
        psn: Psn,
        ours: impl Fn(Kind) -> bool,
    ) -> ReadOutcome {
        let Some(idx) = entries
            .iter()
            .map(Started::entry)
            .position(|e| ours(e.kind) && e.holds(psn))
        else {
            return ReadOutcome::NotOurs;
        };
        let (before, rest) = entries.split_at_mut(idx);
        let Some(e) = rest.first_mut().map(Started::entry_mut) else {
            return ReadOutcome::NotOurs;
        };
        // The responder answers in order: a response of this READ or atomic answers every SEND
        // and WRITE before it, and any earlier READ or atomic still short lost its answer (or
        // it comes late).
        for b in before.iter_mut().map(Started::entry_mut) {
            if b.kind.awaits_response() {
                b.passed_by();
            } else {
                b.answered_through(e.first.add(Psn::MASK));
            }
        }
        if !e.pending() {
            return ReadOutcome::Duplicate;
        }
        let d = psn.diff(e.missing());
        if d < 0 {
            return ReadOutcome::Duplicate;
        }
        if d > 0 {
            e.passed_by();
            return ReadOutcome::Gap { idx };
        }
        ReadOutcome::Next { idx, index: e.done }
    }

    /// Response `index` of the READ at `idx` landed.
    pub(crate) fn read_landed(&mut self, entries: &mut [impl Started], idx: usize, index: u32) {
        if let Some(e) = entries.get_mut(idx).map(Started::entry_mut) {
            if e.kind.awaits_response() && e.pending() && e.done == index {
                e.done += 1;
                e.passed = 0;
                if e.asked.is_some_and(|a| a < e.done) {
                    e.asked = None;
                }
            }
        }
        self.settle(entries);
    }

    /// The timer fired with nothing answered: go back to `una` and ask everything again.
    pub(crate) fn rewind(&mut self, entries: &mut [impl Started]) {
        for e in entries.iter_mut().map(Started::entry_mut) {
            e.asked = None;
            e.ask = false;
            e.passed = 0;
        }
        self.nxt = self.una;
        self.again = Some((self.una, self.sent_end));
    }

    /// Moves `una` to the first PSN not answered; returns whether it moved.
    pub(crate) fn settle(&mut self, entries: &[impl Started]) -> bool {
        let una = entries
            .iter()
            .map(Started::entry)
            .find(|e| e.pending())
            .map_or(self.sent_end, Entry::missing);
        let n = una.diff(self.una);
        if n <= 0 {
            return false;
        }
        // CAST: `n > 0`.
        self.grow(n as u32);
        self.una = una;
        if self.recover.before(una) {
            // Kept within half the PSN space of `una`, so a loss after a long clean run is
            // still a new episode.
            self.recover = una;
        }
        if una == self.sent_end {
            // Everything answered: nothing waits for what was asked again.
            self.again = None;
        }
        if self.nxt.before(una) {
            self.nxt = una;
        }
        true
    }

    /// The entry that holds `nxt`, and which of its packets (a READ: from which response to
    /// ask); `None` if nothing pending holds it.
    pub(crate) fn next_to_send(&self, entries: &[impl Started]) -> Option<(usize, u32)> {
        let idx = entries
            .iter()
            .map(Started::entry)
            .position(|e| e.pending() && e.end().diff(self.nxt) > 0)?;
        let e = entries.get(idx)?.entry();
        // A READ asks for what it misses: the responses before `done` landed.
        let i = if e.kind.awaits_response() {
            e.done
        } else {
            // CAST: `max(0)`: `nxt` may lie before the entry (in a gap of finished ones).
            self.nxt.diff(e.first).max(0) as u32
        };
        Some((idx, i))
    }
}

/// Whether a read response of `payload_len` bytes fits where it lands: response `index` of a
/// READ of `len` bytes in `npkts` responses of `mtu` bytes, as a first, middle, last or only one
/// (IBA 9.7.5.1: all but the last carry exactly one MTU).
pub(crate) fn read_response_fits(
    index: u32,
    npkts: u32,
    starts: bool,
    ends: bool,
    payload_len: usize,
    mtu: u32,
    len: u32,
) -> bool {
    let last = index + 1 == npkts;
    if starts != (index == 0) || ends != last {
        return false;
    }
    let off = u64::from(index) * u64::from(mtu);
    let want = (u64::from(len).saturating_sub(off)).min(u64::from(mtu));
    payload_len as u64 == want
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::opcode::{ExtHdr, OpInfo, OpKind, Transport};

    #[test]
    fn request_opcodes_say_what_their_wqe_asks() {
        use Position::*;
        for kind in [Kind::Send, Kind::Write] {
            for pos in [First, Middle, Last, Only] {
                for imm in [false, true] {
                    let op = kind.opcode(pos, imm).unwrap();
                    let info = OpInfo::lookup(op as u8).unwrap();
                    assert_eq!(info.transport, Transport::Rc, "{op:?}");
                    assert_eq!(info.position, pos, "{op:?}");
                    let want = if kind == Kind::Send {
                        OpKind::Send
                    } else {
                        OpKind::Write
                    };
                    assert_eq!(info.kind, want, "{op:?}");
                    // The immediate rides on the last packet only; a WRITE names its region
                    // in its first.
                    assert_eq!(info.has_imm(), imm && pos.ends(), "{op:?}");
                    assert_eq!(info.has(ExtHdr::Reth), kind == Kind::Write && pos.starts());
                }
            }
        }
        assert_eq!(Kind::Read.opcode(Only, false), Some(Opcode::RcReadRequest));
    }

    #[test]
    fn a_read_response_at_a_write_psn_is_not_ours() {
        let (mut w, mut e) = sent(Psn::MASK - 1, &[(Kind::Write, 2), (Kind::Read, 2)]);
        assert_eq!(
            w.read_response(&mut e, psn(Psn::MASK)),
            ReadOutcome::NotOurs
        );
        assert_eq!(
            w.read_response(&mut e, psn(0)),
            ReadOutcome::Next { idx: 1, index: 0 }
        );
    }

    #[test]
    fn a_read_asks_only_while_it_is_pending() {
        let n = REORDER_SLACK + 4;
        let (mut w, mut e) = sent(0, &[(Kind::Read, n)]);
        assert!(!e[0].asking());
        past_gap(&mut w, &mut e, 1, n);
        assert!(e[0].asking());
        e[0].fail(WcStatus::RemOpErr);
        assert!(!e[0].asking());
        assert_eq!(e[0].take_ask(), None);
    }

    #[test]
    fn atomics_are_answered_by_their_own_ack_only() {
        use Kind::*;
        let (mut w, mut e) = sent(Psn::MASK, &[(Send, 1), (CompareSwap, 1), (FetchAdd, 1)]);
        // A read response at an atomic's PSN, an atomic ACK at a SEND's: not theirs.
        assert_eq!(w.read_response(&mut e, psn(0)), ReadOutcome::NotOurs);
        assert_eq!(
            w.atomic_response(&mut e, psn(Psn::MASK)),
            ReadOutcome::NotOurs
        );
        // The first atomic's ACK answers the SEND before it.
        assert_eq!(
            w.atomic_response(&mut e, psn(0)),
            ReadOutcome::Next { idx: 1, index: 0 }
        );
        assert!(e[0].finished() && e[1].pending());
        w.read_landed(&mut e, 1, 0);
        assert!(e[1].finished());
        assert_eq!(w.una(), psn(1));
        assert_eq!(w.atomic_response(&mut e, psn(0)), ReadOutcome::Duplicate);
        // A plain ACK past the second atomic: its original value was lost; it asks again,
        // once, for the same PSN (the responder replays it).
        let (mut w, mut e) = sent(7, &[(FetchAdd, 1), (Write, 2)]);
        w.ack(&mut e, psn(9));
        assert!(e[0].pending() && e[1].finished());
        assert_eq!(e[0].take_ask(), Some(0));
        assert_eq!(e[0].take_ask(), None);
        assert_eq!(w.next_to_send(&e), None);
        w.rewind(&mut e);
        assert_eq!(w.next_to_send(&e), Some((0, 0)));
        assert_eq!(
            CompareSwap.opcode(Position::Only, false),
            Some(Opcode::RcCompareSwap)
        );
        assert_eq!(
            FetchAdd.opcode(Position::Only, false),
            Some(Opcode::RcFetchAdd)
        );
    }

    #[test]
    fn retries_run_out_on_the_oldest_pending_wqe_only() {
        let (mut w, mut e) = sent(
            Psn::MASK,
            &[(Kind::Send, 1), (Kind::Write, 2), (Kind::Read, 1)],
        );
        w.ack(&mut e, psn(Psn::MASK));
        assert!(e[0].finished() && e[0].status() == WcStatus::Success);
        assert!(w.fail_oldest(&mut e, WcStatus::RetryExcErr));
        assert_eq!(e[1].status(), WcStatus::RetryExcErr);
        assert!(e[1].finished() && e[2].pending());
        // Nothing pending: nothing fails.
        let mut none: [Entry; 0] = [];
        assert!(!w.fail_oldest(&mut none, WcStatus::RetryExcErr));
    }

    #[test]
    fn nothing_left_to_send_skips_to_the_end() {
        let mut w = Window::starting_at(psn(Psn::MASK - 2));
        let e = [Entry::refused(Kind::Send, w.end(), WcStatus::LocLenErr)];
        let end = w.assign(5);
        assert_eq!(w.next_to_send(&e), None);
        w.skip_to_end();
        assert_eq!(w.nxt(), end.add(5));
        assert!(!w.unsent());
    }

    /// A window with `entries` started back to back from `start`, all sent.
    fn sent(start: u32, specs: &[(Kind, u32)]) -> (Window, Vec<Entry>) {
        let mut w = Window::starting_at(Psn::new(start));
        let entries: Vec<Entry> = specs
            .iter()
            .map(|&(k, n)| Entry::new(k, w.assign(n), n))
            .collect();
        w.sent(w.end());
        (w, entries)
    }

    fn psn(p: u32) -> Psn {
        Psn::new(p)
    }

    #[test]
    fn psns_are_given_out_within_half_the_psn_space() {
        // Across the wrap: `una` just below it.
        let start = Psn::MASK - 10;
        let mut w = Window::starting_at(psn(start));
        assert!(w.admits(MAX_SPAN));
        assert!(!w.admits(MAX_SPAN + 1), "never fits, even alone");
        let mut e = vec![Entry::new(
            Kind::Write,
            w.assign(MAX_SPAN - 100),
            MAX_SPAN - 100,
        )];
        assert!(w.admits(100));
        assert!(!w.admits(101));
        e.push(Entry::new(Kind::Write, w.assign(100), 100));
        assert!(!w.admits(1));
        assert!(w.admits(0), "a local WQE takes no PSN");
        // Every PSN given out still compares after `una`.
        assert!(w.una().before(w.end()));
        // Answers free PSNs.
        w.sent(w.end());
        w.ack(&mut e, psn(start).add(999));
        assert!(w.admits(1000));
        assert!(!w.admits(1001));
    }

    #[test]
    fn only_what_went_out_awaits_an_answer() {
        let mut w = Window::starting_at(psn(0xff_fffe));
        let mut e = vec![Entry::new(Kind::Write, w.assign(4), 4)];
        assert!(w.unsent() && !w.awaits_answer(), "assigned, not sent");
        w.sent(psn(0));
        assert!(w.unsent() && w.awaits_answer());
        w.ack(&mut e, psn(0xff_ffff));
        assert!(
            w.unsent() && !w.awaits_answer(),
            "all that went out is answered"
        );
        w.sent(w.end());
        assert!(!w.unsent() && w.awaits_answer());
        w.ack(&mut e, psn(1));
        assert!(!w.awaits_answer() && e[0].finished());
    }

    #[test]
    fn what_is_to_go_again_awaits_no_answer_until_it_goes() {
        let (mut w, mut e) = sent(100, &[(Kind::Send, 4)]);
        assert!(w.awaits_answer());
        // A sequence NAK at 101: 101.. go again, from the pacer's time on.
        w.nak(&mut e, psn(101));
        assert!(w.unsent() && !w.awaits_answer());
        w.sent(psn(102));
        assert!(w.awaits_answer());
        // A timeout: all from `una` go again.
        w.timed_out();
        w.rewind(&mut e);
        assert!(w.unsent() && !w.awaits_answer());
    }

    #[test]
    fn acks_retire_whole_and_partial_wqes() {
        let (mut w, mut e) = sent(100, &[(Kind::Send, 1), (Kind::Write, 4), (Kind::Send, 2)]);
        assert_eq!(w.place_ack(psn(102)), Place::Current);
        w.ack(&mut e, psn(102));
        assert!(e[0].finished() && e[1].pending());
        assert_eq!((e[1].done(), w.una()), (2, psn(103)));
        w.ack(&mut e, psn(106));
        assert!(e.iter().all(Entry::finished));
        assert_eq!(w.una(), psn(107));
    }

    #[test]
    fn acks_outside_what_was_sent_are_placed_apart() {
        let (mut w, mut e) = sent(100, &[(Kind::Send, 4)]);
        w.ack(&mut e, psn(101));
        // The last PSN answered already: a duplicate ACK, still current; older ones are old.
        assert_eq!(w.place_ack(psn(101)), Place::Current);
        assert_eq!(w.place_ack(psn(100)), Place::Old);
        assert_eq!(w.place_ack(psn(104)), Place::Beyond);
        assert_eq!(w.place_ack(psn(100 + (1 << 22))), Place::Beyond);
        // A NAK names a request: the one at `una` or later.
        assert_eq!(w.place(psn(101)), Place::Old);
        assert_eq!(w.place(psn(102)), Place::Current);
    }

    #[test]
    fn only_what_was_asked_again_shows_the_responder_at_work() {
        let (mut w, mut e) = sent(0xff_fff0, &[(Kind::Read, 64), (Kind::Read, 4)]);
        // Nothing asked again: no response shows anything.
        assert!(!w.shows_work(psn(0xff_fff0)));
        for i in 0..10 {
            w.read_landed(&mut e, 0, i);
        }
        w.rewind(&mut e);
        // Asked again from `una` to what was sent, across the wrap.
        assert!(w.shows_work(psn(0xff_fffa)) && w.shows_work(psn(0x33)));
        assert!(!w.shows_work(psn(0xff_fff9)) && !w.shows_work(psn(0x34)));
        assert!(!w.shows_work(psn(0x34 + (1 << 21))), "a forged far PSN");
        // The first READ completes; its responses sent again still show work.
        for i in 10..64 {
            w.read_landed(&mut e, 0, i);
        }
        assert!(w.una() == psn(0x30) && w.shows_work(psn(0xff_fffa)));
        // Everything answered: nothing is asked again any more.
        for i in 0..4 {
            w.read_landed(&mut e, 1, i);
        }
        assert!(!w.shows_work(psn(0x31)));
        w.asked_again(psn(5), psn(9));
        w.asked_again(psn(2), psn(6));
        assert!(w.shows_work(psn(2)) && w.shows_work(psn(8)) && !w.shows_work(psn(9)));
    }

    #[test]
    fn nothing_sent_means_every_response_is_beyond() {
        let w = Window::starting_at(psn(7));
        assert_eq!(w.place_ack(psn(7)), Place::Beyond);
        assert_eq!(w.place(psn(6)), Place::Old);
        assert_eq!(w.place(psn(7)), Place::Beyond);
    }

    #[test]
    fn sequence_nak_answers_what_is_before_and_goes_back() {
        let (mut w, mut e) = sent(0, &[(Kind::Send, 3), (Kind::Write, 3)]);
        w.nak(&mut e, psn(4));
        assert!(e[0].finished());
        assert_eq!((e[1].done(), w.una(), w.nxt()), (1, psn(4), psn(4)));
        assert!(w.may_send());
        assert_eq!(w.next_to_send(&e), Some((1, 1)));
    }

    #[test]
    fn a_nak_for_an_old_psn_does_not_go_back() {
        let (mut w, mut e) = sent(0, &[(Kind::Send, 3), (Kind::Send, 3)]);
        w.ack(&mut e, psn(3));
        w.nak(&mut e, psn(1));
        assert_eq!((w.una(), w.nxt()), (psn(4), psn(6)));
    }

    #[test]
    fn fatal_nak_fails_the_wqe_that_holds_its_psn() {
        let (mut w, mut e) = sent(0, &[(Kind::Send, 2), (Kind::Write, 2), (Kind::Send, 1)]);
        assert!(w.fail_at(&mut e, psn(3), WcStatus::RemAccessErr));
        assert!(e[0].finished() && e[0].status() == WcStatus::Success);
        assert_eq!(e[1].status(), WcStatus::RemAccessErr);
        assert!(e[2].pending());
        // A second one for the same WQE changes nothing.
        assert!(!w.fail_at(&mut e, psn(3), WcStatus::RemInvReqErr));
        assert_eq!(e[1].status(), WcStatus::RemAccessErr);
    }

    #[test]
    fn read_responses_land_in_order() {
        let (mut w, mut e) = sent(10, &[(Kind::Read, 3)]);
        for i in 0..3 {
            assert_eq!(
                w.read_response(&mut e, psn(10 + i)),
                ReadOutcome::Next { idx: 0, index: i }
            );
            w.read_landed(&mut e, 0, i);
        }
        assert!(e[0].finished());
        assert_eq!(w.una(), psn(13));
        assert_eq!(w.read_response(&mut e, psn(11)), ReadOutcome::Duplicate);
        assert_eq!(w.read_response(&mut e, psn(13)), ReadOutcome::NotOurs);
    }

    #[test]
    fn a_send_with_invalidate_names_the_key_on_its_last_packet_and_local_wqes_send_nothing() {
        use Position::*;
        let ops = [First, Middle, Last, Only].map(|p| Kind::SendInv.opcode(p, false).unwrap());
        use Opcode::*;
        assert_eq!(
            ops,
            [RcSendFirst, RcSendMiddle, RcSendLastInv, RcSendOnlyInv]
        );
        for op in ops {
            let info = op.info();
            assert_eq!(info.has(ExtHdr::Ieth), info.position.ends(), "{op:?}");
        }
        assert_eq!(Kind::Local.opcode(Only, false), None);
        // A local WQE takes no PSN and is over at once; what follows is sent as if it were not.
        let mut w = Window::starting_at(psn(5));
        let mut e = vec![Entry::new(Kind::Local, w.assign(0), 0)];
        e.push(Entry::new(Kind::Send, w.assign(1), 1));
        assert!(e[0].finished() && !e[0].holds(psn(5)));
        assert_eq!(w.next_to_send(&e), Some((1, 0)));
        w.sent(psn(6));
        w.ack(&mut e, psn(5));
        assert!(e[1].finished());
    }

    #[test]
    fn an_atomic_write_is_answered_by_a_read_response_only() {
        let op = Kind::AtomicWrite.opcode(Position::Only, false).unwrap();
        let info = OpInfo::lookup(op as u8).unwrap();
        assert_eq!((info.kind, info.hdr_len), (OpKind::AtomicWrite, 28));
        assert!(info.has_payload() && info.requires_ack());
        let (mut w, mut e) = sent(
            Psn::MASK,
            &[(Kind::Send, 2), (Kind::AtomicWrite, 1), (Kind::FetchAdd, 1)],
        );
        // An atomic ACK at its PSN is not its answer.
        assert_eq!(w.atomic_response(&mut e, psn(1)), ReadOutcome::NotOurs);
        // Its empty read response answers it and the SEND before it.
        assert_eq!(
            w.read_response(&mut e, psn(1)),
            ReadOutcome::Next { idx: 1, index: 0 }
        );
        w.read_landed(&mut e, 1, 0);
        assert!(e[0].finished() && e[1].finished() && !e[2].finished());
        assert_eq!(w.read_response(&mut e, psn(1)), ReadOutcome::Duplicate);
        // An ACK past it before its answer: the answer was lost, it asks again.
        let (mut w, mut e) = sent(0, &[(Kind::AtomicWrite, 1), (Kind::Send, 1)]);
        w.ack(&mut e, psn(1));
        assert!(!e[0].finished());
    }

    #[test]
    fn a_flush_is_answered_by_an_empty_read_response() {
        let op = Kind::Flush.opcode(Position::Only, false).unwrap();
        let info = OpInfo::lookup(op as u8).unwrap();
        assert_eq!((info.kind, info.hdr_len), (OpKind::Flush, 32));
        assert!(!info.has_payload() && info.requires_ack());
        assert!(Kind::Flush.awaits_response() && Kind::Flush.empty_read());
        assert!(!Kind::Flush.takes_credit() && Kind::AtomicWrite.takes_credit());
        let (mut w, mut e) = sent(0, &[(Kind::Write, 2), (Kind::Flush, 1)]);
        // An ACK of the WRITE before it does not finish it.
        w.ack(&mut e, psn(1));
        assert!(e[0].finished() && !e[1].finished());
        assert_eq!(
            w.read_response(&mut e, psn(2)),
            ReadOutcome::Next { idx: 1, index: 0 }
        );
        w.read_landed(&mut e, 1, 0);
        assert!(e[1].finished());
    }

    /// Feeds responses `from..to` of the READ at `idx` that do not land (they lie past a gap).
    fn past_gap(w: &mut Window, e: &mut [Entry], from: u32, to: u32) {
        for p in from..to {
            assert!(matches!(
                w.read_response(e, psn(p)),
                ReadOutcome::Gap { .. }
            ));
        }
    }

    #[test]
    fn a_read_gap_asks_once_after_the_reorder_slack() {
        let n = REORDER_SLACK + 40;
        let (mut w, mut e) = sent(0, &[(Kind::Read, n)]);
        assert_eq!(
            w.read_response(&mut e, psn(0)),
            ReadOutcome::Next { idx: 0, index: 0 }
        );
        w.read_landed(&mut e, 0, 0);
        // Response 1 is late: a few after it are reordering, not loss.
        past_gap(&mut w, &mut e, 2, 1 + REORDER_SLACK);
        assert_eq!(e[0].take_ask(), None);
        past_gap(&mut w, &mut e, 1 + REORDER_SLACK, 2 + REORDER_SLACK);
        assert_eq!(e[0].take_ask(), Some(1));
        // The rest of the old stream: no second request.
        past_gap(&mut w, &mut e, 2 + REORDER_SLACK, 4 + 2 * REORDER_SLACK);
        assert_eq!(e[0].take_ask(), None);
        // The new stream fills the gap; a later gap asks again, from there.
        for i in 1..10 {
            w.read_landed(&mut e, 0, i);
        }
        past_gap(&mut w, &mut e, 11, 11 + REORDER_SLACK);
        assert_eq!(e[0].take_ask(), Some(10));
    }

    #[test]
    fn a_late_read_response_lands_without_asking() {
        let (mut w, mut e) = sent(0, &[(Kind::Read, 8)]);
        past_gap(&mut w, &mut e, 1, 4);
        assert_eq!(
            w.read_response(&mut e, psn(0)),
            ReadOutcome::Next { idx: 0, index: 0 }
        );
        w.read_landed(&mut e, 0, 0);
        assert_eq!(e[0].take_ask(), None);
    }

    #[test]
    fn a_later_read_answered_first_asks_for_the_earlier_tail_only() {
        let (mut w, mut e) = sent(0, &[(Kind::Read, 4), (Kind::Read, 64)]);
        for i in 0..2 {
            w.read_landed(&mut e, 0, i);
        }
        // READ 2's responses overtake READ 1's last two; past the slack, READ 1 asks.
        for i in 0..REORDER_SLACK {
            assert_eq!(
                w.read_response(&mut e, psn(4 + i)),
                ReadOutcome::Next { idx: 1, index: i }
            );
            w.read_landed(&mut e, 1, i);
        }
        assert_eq!(e[0].take_ask(), Some(2));
        assert_eq!(e[1].take_ask(), None);
        // The late tail still lands.
        assert_eq!(
            w.read_response(&mut e, psn(2)),
            ReadOutcome::Next { idx: 0, index: 2 }
        );
    }

    #[test]
    fn an_ack_past_a_short_read_asks_for_its_tail_and_answers_what_follows() {
        let (mut w, mut e) = sent(0, &[(Kind::Read, 2), (Kind::Send, 1)]);
        w.ack(&mut e, psn(2));
        assert!(e[0].pending() && e[1].finished());
        assert_eq!(e[0].take_ask(), Some(0));
        assert_eq!(w.una(), psn(0));
    }

    #[test]
    fn read_responses_answer_the_sends_before_them() {
        let (mut w, mut e) = sent(0, &[(Kind::Send, 2), (Kind::Read, 1)]);
        assert_eq!(
            w.read_response(&mut e, psn(2)),
            ReadOutcome::Next { idx: 1, index: 0 }
        );
        assert!(e[0].finished());
    }

    #[test]
    fn timeout_goes_back_to_una_and_reads_ask_from_what_they_have() {
        let (mut w, mut e) = sent(0, &[(Kind::Send, 2), (Kind::Read, 4)]);
        w.ack(&mut e, psn(1));
        w.read_landed(&mut e, 1, 0);
        w.rewind(&mut e);
        assert_eq!(w.nxt(), w.una());
        assert_eq!(w.next_to_send(&e), Some((1, 1)));
    }

    #[test]
    fn after_a_timeout_every_read_asks_only_for_what_it_misses() {
        let (mut w, mut e) = sent(0, &[(Kind::Read, 4), (Kind::Read, 4)]);
        w.read_landed(&mut e, 0, 0);
        for p in 4..6 {
            assert!(matches!(
                w.read_response(&mut e, psn(p)),
                ReadOutcome::Next { .. }
            ));
            w.read_landed(&mut e, 1, p - 4);
        }
        w.rewind(&mut e);
        assert_eq!(w.next_to_send(&e), Some((0, 1)));
        w.sent(e[0].end());
        assert_eq!(w.next_to_send(&e), Some((1, 2)));
    }

    #[test]
    fn uc_entries_finish_when_sent() {
        let mut e = Entry::new(Kind::Send, psn(5), 3);
        e.sent_through(psn(7));
        assert!(e.pending());
        e.sent_through(psn(8));
        assert!(e.finished());
    }

    #[test]
    fn refused_wqes_finish_with_their_status() {
        let e = Entry::refused(Kind::Send, psn(1), WcStatus::LocQpOpErr);
        assert!(e.finished());
        assert_eq!((e.npkts(), e.status()), (0, WcStatus::LocQpOpErr));
    }

    #[test]
    fn the_window_bounds_what_goes_out() {
        let mut w = Window::starting_at(psn(0));
        let mut e = vec![Entry::new(Kind::Write, w.assign(300), 300)];
        assert_eq!(fill(&mut w, &e), WINDOW);
        w.ack(&mut e, psn(9));
        assert!(w.may_send());
    }

    /// Sends everything the window allows of `e[0]`; returns how many went out.
    fn fill(w: &mut Window, e: &[Entry]) -> u32 {
        let mut n = 0;
        while w.may_send() {
            let (_, i) = w.next_to_send(e).unwrap();
            w.sent(e[0].first().add(i + 1));
            n += 1;
        }
        n
    }

    #[test]
    fn a_loss_halves_the_window_once_per_episode() {
        let mut w = Window::starting_at(psn(0));
        let mut e = vec![Entry::new(Kind::Write, w.assign(4000), 4000)];
        assert_eq!(fill(&mut w, &e), WINDOW);
        // Two NAKs for losses among what was out: one halving (what they answer grows it a
        // little).
        w.nak(&mut e, psn(10));
        w.lost(psn(10));
        assert_eq!(w.cwnd(), WINDOW / 2);
        w.nak(&mut e, psn(40));
        w.lost(psn(40));
        assert!(
            (WINDOW / 2..WINDOW / 2 + 4).contains(&w.cwnd()),
            "{}",
            w.cwnd()
        );
        // Go-back-N resends no more than the smaller window.
        assert_eq!(fill(&mut w, &e), w.cwnd());
        // A loss among what was sent after the halving is a new episode.
        w.ack(&mut e, psn(250));
        fill(&mut w, &e);
        w.nak(&mut e, psn(300));
        let before = w.cwnd();
        w.lost(psn(300));
        assert_eq!(w.cwnd(), before / 2);
    }

    #[test]
    fn a_local_drop_goes_back_to_it_and_halves_the_window_once() {
        let mut w = Window::starting_at(psn(Psn::MASK - 4));
        let mut e = vec![Entry::new(Kind::Write, w.assign(4000), 4000)];
        assert_eq!(fill(&mut w, &e), WINDOW);
        let first = psn(Psn::MASK - 4);
        // Nothing beyond what went out.
        assert!(!w.dropped(first.add(WINDOW)));
        assert_eq!(w.cwnd(), WINDOW);
        w.ack(&mut e, first.add(9));
        // A drop across the PSN wrap: sending resumes there, with half the window.
        assert!(w.dropped(first.add(100)));
        assert_eq!(w.cwnd(), WINDOW / 2);
        assert_eq!(w.nxt(), first.add(100));
        assert!(w.unsent());
        // A later packet of the same burst: already behind where sending resumes.
        assert!(!w.dropped(first.add(150)));
        // An earlier one that was dropped too: further back, and no second halving.
        assert!(w.dropped(first.add(60)));
        assert_eq!((w.nxt(), w.cwnd()), (first.add(60), WINDOW / 2));
        // Only a window's worth goes out again.
        assert_eq!(fill(&mut w, &e), WINDOW / 2 - 50);
        // One sent again and answered meanwhile: back to `una`, where the held back start,
        // and no halving (a new episode otherwise).
        w.ack(&mut e, first.add(WINDOW - 1));
        fill(&mut w, &e);
        let cwnd = w.cwnd();
        assert!(w.dropped(first.add(5)));
        assert_eq!((w.nxt(), w.cwnd()), (first.add(WINDOW), cwnd));
        assert!(!w.dropped(first.add(5)), "resuming there already");
    }

    #[test]
    fn answers_grow_the_window_back_and_a_timeout_shrinks_it_most() {
        let mut w = Window::starting_at(psn(0));
        let mut e = vec![Entry::new(Kind::Write, w.assign(1 << 20), 1 << 20)];
        fill(&mut w, &e);
        w.timed_out();
        assert_eq!(w.cwnd(), MIN_WINDOW);
        w.rewind(&mut e);
        // Slow start up to half the old window, then slower growth up to the full one.
        let mut rounds = 0;
        while w.cwnd() < WINDOW {
            let before = w.cwnd();
            fill(&mut w, &e);
            let last = w.una().add(w.cwnd() - 1);
            w.ack(&mut e, last);
            assert!(w.cwnd() > before, "a window answered grows it");
            assert!(w.cwnd() <= (2 * before).min(WINDOW));
            rounds += 1;
        }
        assert!(rounds > 5 && rounds < 40, "{rounds} windows to grow back");
    }

    #[test]
    fn a_small_window_asks_for_acks_often_enough_to_slide() {
        let mut w = Window::starting_at(psn(0xff_fff0));
        let mut e = vec![Entry::new(Kind::Write, w.assign(4000), 4000)];
        assert!(
            (0..64).all(|i| !w.wants_ack(psn(i))),
            "a full window relies on messages"
        );
        // A window of 71 (its quarter divides no power of two): any quarter of it, across
        // the wrap too, holds a PSN that asks.
        fill(&mut w, &e);
        w.timed_out();
        w.rewind(&mut e);
        while w.cwnd() < 71 {
            fill(&mut w, &e);
            w.ack(&mut e, w.una());
        }
        assert_eq!(w.cwnd(), 71);
        for start in 0xff_ff00..0xff_ff00 + 512u32 {
            assert!(
                (0..71 / 4).any(|k| w.wants_ack(psn(start + k))),
                "from {start:#x}"
            );
        }
    }

    #[test]
    fn a_loss_after_a_long_clean_run_is_a_new_episode() {
        let mut w = Window::starting_at(psn(0));
        // More than half the PSN space answered without a loss, a WRITE after another.
        let mut e: Vec<Entry>;
        for _ in 0..9 {
            e = vec![Entry::new(Kind::Write, w.assign(1 << 20), 1 << 20)];
            while w.una() != e[0].end() {
                fill(&mut w, &e);
                let last = w.una().add(w.cwnd() - 1);
                w.ack(&mut e, last);
            }
        }
        e = vec![Entry::new(Kind::Write, w.assign(4000), 4000)];
        fill(&mut w, &e);
        let at = w.una().add(3);
        w.nak(&mut e, at);
        w.lost(at);
        assert_eq!(w.cwnd(), WINDOW / 2);
    }

    #[test]
    fn read_response_lengths() {
        // 2500 bytes in three responses of 1024.
        assert!(read_response_fits(0, 3, true, false, 1024, 1024, 2500));
        assert!(read_response_fits(1, 3, false, false, 1024, 1024, 2500));
        assert!(read_response_fits(2, 3, false, true, 452, 1024, 2500));
        // A short last one would leave the buffer part unwritten.
        assert!(!read_response_fits(2, 3, false, true, 400, 1024, 2500));
        // A middle one short, a first in the middle, a last too early.
        assert!(!read_response_fits(1, 3, false, false, 1000, 1024, 2500));
        assert!(!read_response_fits(1, 3, true, false, 1024, 1024, 2500));
        assert!(!read_response_fits(1, 3, false, true, 1024, 1024, 2500));
        // Zero-length READ: one empty ONLY response.
        assert!(read_response_fits(0, 1, true, true, 0, 1024, 0));
    }

    /// Deterministic xorshift, for the property tests below.
    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn invariants_hold_across_the_wrap_whatever_the_peer_says() {
        for start in [0u32, Psn::MASK - 40, 1 << 23, Psn::MASK] {
            let mut seed = 0x9e37_79b9_7f4a_7c15 ^ u64::from(start);
            let mut w = Window::starting_at(psn(start));
            let mut e: Vec<Entry> = Vec::new();
            for _ in 0..20_000 {
                match rng(&mut seed) % 8 {
                    0 if e.len() < 16 => {
                        let kind =
                            [Kind::Send, Kind::Write, Kind::Read][rng(&mut seed) as usize % 3];
                        let n = 1 + (rng(&mut seed) % 20) as u32;
                        e.push(Entry::new(kind, w.assign(n), n));
                    }
                    1 => {
                        w.send_allowed(&e, u32::MAX);
                    }
                    2 | 3 => {
                        // Any PSN near the window, answered by any kind of response.
                        let p = w
                            .una()
                            .add((rng(&mut seed) % 64) as u32)
                            .add(Psn::MASK - 31);
                        match rng(&mut seed) % 4 {
                            0 if w.place_ack(p) == Place::Current => w.ack(&mut e, p),
                            1 if w.place(p) == Place::Current => w.nak(&mut e, p),
                            2 if w.place(p) == Place::Current => {
                                if let ReadOutcome::Next { idx, index } = w.read_response(&mut e, p)
                                {
                                    w.read_landed(&mut e, idx, index);
                                }
                            }
                            _ => {}
                        }
                    }
                    4 => w.rewind(&mut e),
                    _ => {
                        while e.first().is_some_and(Entry::finished) {
                            e.remove(0);
                        }
                    }
                }
                assert!(
                    w.una().diff(w.nxt()) <= 0,
                    "una {:?} nxt {:?}",
                    w.una(),
                    w.nxt()
                );
                assert!(w.nxt().diff(w.end()) <= 0);
                assert!(w.una().diff(w.sent_end) <= 0);
                assert!(w.sent_end.diff(w.end()) <= 0);
                for x in &e {
                    assert!(x.done() <= x.npkts());
                    // Nothing pending lies before `una`.
                    if x.pending() {
                        assert!(x.missing().diff(w.una()) >= 0);
                    }
                }
            }
        }
    }
}
