// SPDX-License-Identifier: GPL-2.0

//! The RC and UC responder's rules: where a request's PSN stands (IBA 9.7.5.1.1 for RC, 9.8.3
//! for UC), the opcode sequence and packet lengths of a SEND or RDMA WRITE (9.7.5.1 and 9.8.3),
//! and how a refused request is answered (9.7.5.2).

use super::{
    aeth::{Nak, Syndrome},
    opcode::Position,
    psn::Psn,
    wqe::WcStatus,
};

/// Where an RC request's PSN stands against the one the responder expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sequence {
    /// The expected PSN: the request is taken.
    Expected,
    /// Before it: the requester is resending. A READ is answered again from its resource, any
    /// other request gets an ACK if it asks for one.
    Duplicate,
    /// After it: a request was lost. `nak`: send a sequence NAK for the expected PSN; only the
    /// first such request of a gap gets one, and only within [`NAK_REACH`]; the rest are dropped.
    Ahead { nak: bool },
}

/// How far ahead of the expected PSN a request may be and still draw a sequence NAK. A real gap
/// is NAKed by the first request after it, so only a gap this long goes past: lost requests
/// (or a lost READ request) spanning 64 Ki PSNs, 64 MiB at MTU 1024; the requester's ACK
/// timeout finds those. Most requests that someone who knew the QPN and not the PSN forged
/// fall further: their NAK would make the requester send again all it has in flight.
pub(crate) const NAK_REACH: i32 = 1 << 16;

/// What a UC responder does with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UcStep {
    /// It starts a message: whatever was under way is over.
    Start,
    /// It goes on with the message under way.
    Continue,
    /// It belongs to a message already lost.
    Skip,
}

/// The responder's memory of gaps: whether it NAKed the current one (RC), whether the UC
/// message under way was lost.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sequencer {
    nak_sent: bool,
    dropping: bool,
}

impl Sequencer {
    /// Places an RC request at `psn`; `expected` is the QP's `rq_psn`.
    pub(crate) fn rc(&mut self, psn: Psn, expected: Psn) -> Sequence {
        match psn.diff(expected) {
            d if d > NAK_REACH => Sequence::Ahead { nak: false },
            d if d > 0 => Sequence::Ahead {
                nak: !core::mem::replace(&mut self.nak_sent, true),
            },
            d if d < 0 => Sequence::Duplicate,
            _ => {
                self.nak_sent = false;
                Sequence::Expected
            }
        }
    }

    /// Places a UC packet at `pos` with `psn`; `expected` is the QP's `rq_psn`. Nothing is
    /// resent on UC: a gap loses the message under way (its receive WQE takes the next SEND),
    /// and the next message starts at its first packet. Returns the step and whether there was
    /// a gap; the next expected PSN is the one after `psn` either way.
    pub(crate) fn uc(&mut self, psn: Psn, expected: Psn, pos: Position) -> (UcStep, bool) {
        let gap = psn != expected;
        if gap {
            self.dropping = true;
        }
        let step = if pos.starts() {
            self.dropping = false;
            UcStep::Start
        } else if self.dropping {
            UcStep::Skip
        } else {
            UcStep::Continue
        };
        (step, gap)
    }

    /// A UC message was refused: its other packets go too.
    pub(crate) fn lose_message(&mut self) {
        self.dropping = true;
    }
}

/// Why a request in sequence was refused; the requester hears it as an RNR NAK or a NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No receive WQE posted: try again later.
    NotReady,
    /// No memory to take the receive WQE or keep the READ: try again later too.
    NoMem,
    /// Malformed for where it stands: bad opcode sequence, length or headers.
    Invalid,
    /// The rkey, range or QP access rights do not allow it.
    Access,
    /// A SEND its receive WQE could not take (too long, or bad buffers); the WQE completed
    /// with this status.
    Receive(WcStatus),
    /// A UC SEND longer than its receive WQE: dropped, and the WQE waits for the next SEND.
    TooLong,
}

impl Refusal {
    /// The RC answer; `min_rnr_timer` is the QP's.
    pub(crate) const fn syndrome(self, min_rnr_timer: u8) -> Syndrome {
        match self {
            Refusal::NotReady | Refusal::NoMem => Syndrome::RnrNak {
                timer: min_rnr_timer,
            },
            Refusal::Invalid | Refusal::Receive(_) | Refusal::TooLong => {
                Syndrome::Nak(Nak::InvalidRequest)
            }
            Refusal::Access => Syndrome::Nak(Nak::RemoteAccess),
        }
    }

    /// Whether it is a class C error (IBA 9.9.3.1.2): after its NAK the QP goes to the error
    /// state, so a peer cannot go on trying keys and ranges.
    pub(crate) const fn fails_qp(self) -> bool {
        matches!(self, Refusal::Invalid | Refusal::Access)
    }
}

/// The message a responder has under way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnderWay {
    Nothing,
    Send,
    Write,
}

/// Whether a SEND (`write` false) or WRITE packet at `pos` with `len` payload bytes may come now:
/// a first or only packet starts a message when none is under way, a middle or last one goes on
/// with a message of its own kind; first and middle packets carry exactly one path MTU, last and
/// only ones at most one.
pub(crate) const fn request_fits(
    under: UnderWay,
    write: bool,
    pos: Position,
    len: usize,
    mtu: u32,
) -> bool {
    let mtu = mtu as usize;
    let sequence = match (pos.starts(), under) {
        (true, UnderWay::Nothing) => true,
        (true, _) => false,
        (false, UnderWay::Send) => !write,
        (false, UnderWay::Write) => write,
        (false, UnderWay::Nothing) => false,
    };
    let length = if pos.ends() { len <= mtu } else { len == mtu };
    sequence && length
}

#[cfg(test)]
mod tests {
    use super::*;
    use Position::*;
    use UnderWay::*;

    #[test]
    fn rc_sequence_naks_a_gap_once() {
        let mut s = Sequencer::default();
        let e = Psn::new(100);
        assert_eq!(s.rc(Psn::new(100), e), Sequence::Expected);
        assert_eq!(s.rc(Psn::new(99), e), Sequence::Duplicate);
        assert_eq!(s.rc(Psn::new(101), e), Sequence::Ahead { nak: true });
        assert_eq!(s.rc(Psn::new(105), e), Sequence::Ahead { nak: false });
        // A duplicate in between does not reopen the gap.
        assert_eq!(s.rc(Psn::new(90), e), Sequence::Duplicate);
        assert_eq!(s.rc(Psn::new(102), e), Sequence::Ahead { nak: false });
        // The expected one closes it: the next gap is NAKed again.
        assert_eq!(s.rc(Psn::new(100), e), Sequence::Expected);
        let e = Psn::new(101);
        assert_eq!(s.rc(Psn::new(103), e), Sequence::Ahead { nak: true });
    }

    #[test]
    fn rc_sequence_naks_only_within_reach() {
        let mut s = Sequencer::default();
        let e = Psn::new(Psn::MASK - 10);
        // Far ahead: dropped, and it spends no NAK of the gap.
        for far in [NAK_REACH as u32 + 1, 1 << 21, (1 << 23) - 1] {
            assert_eq!(s.rc(e.add(far), e), Sequence::Ahead { nak: false }, "{far}");
        }
        // Across the wrap, at the reach's edge: the first of the gap is NAKed.
        assert_eq!(
            s.rc(e.add(NAK_REACH as u32), e),
            Sequence::Ahead { nak: true }
        );
        assert_eq!(s.rc(e.add(1), e), Sequence::Ahead { nak: false });
    }

    #[test]
    fn rc_sequence_across_the_wrap() {
        let mut s = Sequencer::default();
        let e = Psn::new(Psn::MASK);
        assert_eq!(s.rc(Psn::new(0), e), Sequence::Ahead { nak: true });
        assert_eq!(s.rc(Psn::new(Psn::MASK - 1), e), Sequence::Duplicate);
        assert_eq!(s.rc(Psn::new(Psn::MASK), e), Sequence::Expected);
        // Half the PSN space away is before (a duplicate), one less is ahead (past the reach
        // of a NAK).
        let e = Psn::new(0);
        assert_eq!(s.rc(Psn::new(1 << 23), e), Sequence::Duplicate);
        assert_eq!(
            s.rc(Psn::new((1 << 23) - 1), e),
            Sequence::Ahead { nak: false }
        );
    }

    #[test]
    fn uc_gap_loses_the_message_until_a_first() {
        let mut s = Sequencer::default();
        // (psn, expected, position, step, gap)
        let table = [
            (10, 10, First, UcStep::Start, false),
            (11, 11, Middle, UcStep::Continue, false),
            (13, 12, Middle, UcStep::Skip, true),
            (14, 14, Last, UcStep::Skip, false),
            (15, 15, Only, UcStep::Start, false),
            (17, 16, First, UcStep::Start, true),
            (18, 18, Last, UcStep::Continue, false),
            (0, Psn::MASK, Middle, UcStep::Skip, true),
            (1, 1, Only, UcStep::Start, false),
        ];
        for (psn, expected, pos, step, gap) in table {
            assert_eq!(
                s.uc(Psn::new(psn), Psn::new(expected), pos),
                (step, gap),
                "{psn} {expected} {pos:?}"
            );
        }
        s.lose_message();
        assert_eq!(s.uc(Psn::new(2), Psn::new(2), Last).0, UcStep::Skip);
        assert_eq!(s.uc(Psn::new(3), Psn::new(3), First).0, UcStep::Start);
    }

    #[test]
    fn refusals_are_answered_as_the_spec_says() {
        // (refusal, syndrome byte with min_rnr_timer 14, class C)
        let table = [
            (Refusal::NotReady, 0x2e, false),
            (Refusal::NoMem, 0x2e, false),
            (Refusal::Invalid, 0x61, true),
            (Refusal::Access, 0x62, true),
            (Refusal::Receive(WcStatus::LocLenErr), 0x61, false),
            (Refusal::TooLong, 0x61, false),
        ];
        for (r, byte, class_c) in table {
            assert_eq!(r.syndrome(14).to_u8(), byte, "{r:?}");
            assert_eq!(r.fails_qp(), class_c, "{r:?}");
        }
    }

    #[test]
    fn opcode_sequence() {
        // (under way, write, position, fits)
        let table = [
            (Nothing, false, Only, true),
            (Nothing, false, First, true),
            (Nothing, true, First, true),
            (Nothing, false, Middle, false),
            (Nothing, true, Last, false),
            (Send, false, Middle, true),
            (Send, false, Last, true),
            (Send, true, Middle, false),
            (Send, false, First, false),
            (Send, true, Only, false),
            (Write, true, Middle, true),
            (Write, true, Last, true),
            (Write, false, Last, false),
            (Write, true, First, false),
        ];
        for (under, write, pos, fits) in table {
            let len = if pos.ends() { 100 } else { 1024 };
            assert_eq!(
                request_fits(under, write, pos, len, 1024),
                fits,
                "{under:?} {write} {pos:?}"
            );
        }
    }

    #[test]
    fn packet_lengths() {
        assert!(request_fits(Nothing, false, First, 1024, 1024));
        assert!(!request_fits(Nothing, false, First, 1000, 1024));
        assert!(!request_fits(Send, false, Middle, 1028, 1024));
        assert!(request_fits(Send, false, Last, 1, 1024));
        assert!(!request_fits(Send, false, Last, 1025, 1024));
        assert!(request_fits(Nothing, true, Only, 0, 4096));
        assert!(!request_fits(Nothing, true, Only, 4096, 2048));
    }
}
