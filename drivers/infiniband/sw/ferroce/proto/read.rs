// SPDX-License-Identifier: GPL-2.0

//! An RC responder's resources for RDMA READs and atomics (IBA 9.7.5.1.3, 9.7.5.1.4 and C9-148
//! ff.): what each READ asked for, which response goes out next, and how a duplicate request
//! (its responses were lost) rewinds it, within a budget; what each atomic found, so that a
//! duplicate gets the same answer and the operation is not done twice. The kernel keeps them in
//! PSN order, reads and changes the memory and sends.

use super::{opcode::Opcode, opcode::Position, packet::Reth, psn::Psn};

/// How many times over a READ's responses are sent again for duplicate requests, at most (plus
/// [`RESEND_SLACK`]): a lossy link needs a few; a host that replays a request, say from a
/// spoofed address, must not turn one READ into endless traffic.
const RESEND_LIMIT: u64 = 8;
const RESEND_SLACK: u64 = 1024;

/// One READ being answered, or answered lately.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReadResource {
    /// The PSN of its first response.
    first: Psn,
    npkts: u32,
    mtu: u32,
    len: u32,
    va: u64,
    rkey: u32,
    /// The protection domain the kernel checks the rkey against, per response.
    pd: usize,
    /// The MSN its responses carry.
    msn: u32,
    /// The next response to send; `npkts` once all went out.
    next: u32,
    /// Responses sent again for duplicates, bounded by [`RESEND_LIMIT`].
    resent: u64,
}

/// One read response to send: from `va`, `len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) opcode: Opcode,
    pub(crate) psn: Psn,
    pub(crate) va: u64,
    pub(crate) len: u32,
    pub(crate) rkey: u32,
    pub(crate) pd: usize,
    /// The MSN of its AETH; a middle response carries none.
    pub(crate) aeth_msn: Option<u32>,
}

impl ReadResource {
    /// A READ request at `psn`, answered in packets of `mtu` bytes, whose responses carry `msn`.
    /// A path MTU is at least 256 bytes; a zero one is taken as one byte, so nothing here can
    /// divide by zero (a panic path the compiler would keep).
    pub(crate) const fn new(psn: Psn, reth: Reth, mtu: u32, msn: u32, pd: usize) -> Self {
        let mtu = if mtu == 0 { 1 } else { mtu };
        let npkts = reth.dma_len.div_ceil(mtu);
        Self {
            first: psn,
            // A zero-length READ has one response.
            npkts: if npkts == 0 { 1 } else { npkts },
            mtu,
            len: reth.dma_len,
            va: reth.va,
            rkey: reth.rkey,
            pd,
            msn,
            next: 0,
            resent: 0,
        }
    }

    /// The PSNs its responses take.
    pub(crate) const fn npkts(&self) -> u32 {
        self.npkts
    }

    /// Whether responses are still to go out.
    pub(crate) const fn answering(&self) -> bool {
        self.next < self.npkts
    }

    /// The next response to send, if any.
    pub(crate) const fn next_response(&self) -> Option<Response> {
        if !self.answering() {
            return None;
        }
        let i = self.next;
        let off = i * self.mtu;
        let len = self.len - off;
        let pos = Position::of(i, self.npkts);
        let opcode = match pos {
            Position::Only => Opcode::RcReadResponseOnly,
            Position::First => Opcode::RcReadResponseFirst,
            Position::Last => Opcode::RcReadResponseLast,
            Position::Middle => Opcode::RcReadResponseMiddle,
        };
        Some(Response {
            opcode,
            psn: self.first.add(i),
            va: self.va.wrapping_add(off as u64),
            len: if len < self.mtu { len } else { self.mtu },
            rkey: self.rkey,
            pd: self.pd,
            aeth_msn: if matches!(pos, Position::Middle) {
                None
            } else {
                Some(self.msn)
            },
        })
    }

    /// The next response went out.
    pub(crate) fn sent(&mut self) {
        if self.answering() {
            self.next += 1;
        }
    }

    /// Its memory went away: it is answered no further (the requester's timer reports it).
    pub(crate) fn abandon(&mut self) {
        self.next = self.npkts;
    }

    /// A duplicate READ request at `psn` for `rkey`: if it names one of this READ's responses,
    /// they go out again from there, unless that would pass the resend budget. Returns whether
    /// the request is this READ's; a request that names none reads nothing.
    pub(crate) fn rewind(&mut self, psn: Psn, rkey: u32) -> bool {
        let i = psn.diff(self.first);
        // CAST: `i` is checked non-negative.
        if rkey != self.rkey || i < 0 || i as u32 >= self.npkts {
            return false;
        }
        // CAST: As above.
        let from = i as u32;
        let again = u64::from(self.next.saturating_sub(from));
        if self.resent + again <= u64::from(self.npkts) * RESEND_LIMIT + RESEND_SLACK {
            self.resent += again;
            self.next = self.next.min(from);
        }
        true
    }
}

/// An atomic the responder did: a duplicate request for it (its ACK was lost) is answered with
/// the same original value, and changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AtomicResult {
    psn: Psn,
    rkey: u32,
    va: u64,
    orig: u64,
    msn: u32,
}

impl AtomicResult {
    /// The atomic at `psn` on `rkey`/`va` found `orig`; its ACK carries `msn`.
    pub(crate) const fn new(psn: Psn, rkey: u32, va: u64, orig: u64, msn: u32) -> Self {
        Self {
            psn,
            rkey,
            va,
            orig,
            msn,
        }
    }

    /// The answer again, `(orig, msn)`, for a duplicate at `psn` naming the same word; `None`
    /// if it is not this atomic's.
    pub(crate) const fn replay(&self, psn: Psn, rkey: u32, va: u64) -> Option<(u64, u32)> {
        if psn.get() == self.psn.get() && rkey == self.rkey && va == self.va {
            Some((self.orig, self.msn))
        } else {
            None
        }
    }
}

/// One responder resource: a READ, or an atomic's saved answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resource {
    Read(ReadResource),
    Atomic(AtomicResult),
}

impl Resource {
    /// Whether responses are still to go out (an atomic's went out at once).
    pub(crate) const fn answering(&self) -> bool {
        match self {
            Resource::Read(r) => r.answering(),
            Resource::Atomic(_) => false,
        }
    }
}

/// Whether a new READ may be taken while `answering` others are, `granted` being the QP's
/// `max_dest_rd_atomic` (none granted: no READ is taken, as C rxe).
pub(crate) const fn admits(answering: usize, granted: u8) -> bool {
    answering < granted as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(psn: u32, len: u32, mtu: u32) -> ReadResource {
        let reth = Reth {
            va: 0x1000,
            rkey: 0x77,
            dma_len: len,
        };
        ReadResource::new(Psn::new(psn), reth, mtu, 5, 3)
    }

    /// Every response of `r` in order: (opcode, psn, va, len, aeth).
    fn drain(r: &mut ReadResource) -> Vec<(Opcode, u32, u64, u32, Option<u32>)> {
        let mut out = Vec::new();
        while let Some(x) = r.next_response() {
            assert_eq!((x.rkey, x.pd), (0x77, 3));
            out.push((x.opcode, x.psn.get(), x.va, x.len, x.aeth_msn));
            r.sent();
        }
        out
    }

    #[test]
    fn responses_split_by_mtu_with_their_opcodes() {
        use Opcode::*;
        assert_eq!(
            drain(&mut read(10, 2500, 1024)),
            [
                (RcReadResponseFirst, 10, 0x1000, 1024, Some(5)),
                (RcReadResponseMiddle, 11, 0x1400, 1024, None),
                (RcReadResponseLast, 12, 0x1800, 452, Some(5)),
            ]
        );
        assert_eq!(
            drain(&mut read(0, 1024, 1024)),
            [(RcReadResponseOnly, 0, 0x1000, 1024, Some(5))]
        );
        // Zero bytes: one empty response.
        assert_eq!(
            drain(&mut read(7, 0, 4096)),
            [(RcReadResponseOnly, 7, 0x1000, 0, Some(5))]
        );
        // Two MTUs exactly: first and last, no middle.
        let ops: Vec<_> = drain(&mut read(1, 8192, 4096))
            .iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(ops, [RcReadResponseFirst, RcReadResponseLast]);
    }

    #[test]
    fn responses_wrap_the_psn_space() {
        let psns: Vec<_> = drain(&mut read(Psn::MASK - 1, 4 * 256, 256))
            .iter()
            .map(|r| r.1)
            .collect();
        assert_eq!(psns, [Psn::MASK - 1, Psn::MASK, 0, 1]);
    }

    #[test]
    fn a_duplicate_rewinds_to_what_it_names_only() {
        let mut r = read(Psn::MASK - 1, 4 * 256, 256);
        drain(&mut r);
        // The wrong key, before the first response, after the last: not this READ.
        assert!(!r.rewind(Psn::new(0), 0x78));
        assert!(!r.rewind(Psn::new(Psn::MASK - 2), 0x77));
        assert!(!r.rewind(Psn::new(2), 0x77));
        assert!(!r.answering());
        // Its third response (PSN 0, past the wrap): from there on.
        assert!(r.rewind(Psn::new(0), 0x77));
        let again: Vec<_> = drain(&mut r).iter().map(|x| x.1).collect();
        assert_eq!(again, [0, 1]);
        // A duplicate of a response not sent yet does not skip ahead.
        r.abandon();
        assert!(r.rewind(Psn::new(Psn::MASK - 1), 0x77));
        assert_eq!(r.next_response().map(|x| x.psn.get()), Some(Psn::MASK - 1));
        r.sent();
        assert!(r.rewind(Psn::new(1), 0x77));
        assert_eq!(r.next_response().map(|x| x.psn.get()), Some(Psn::MASK));
    }

    #[test]
    fn replayed_duplicates_stop_at_the_resend_budget() {
        let mut r = read(100, 4 * 1024, 1024);
        drain(&mut r);
        let mut resent = 0u64;
        for _ in 0..10_000 {
            assert!(r.rewind(Psn::new(100), 0x77));
            resent += drain(&mut r).len() as u64;
        }
        // 4 responses x 8, plus the slack, and not one more.
        assert_eq!(resent, 4 * RESEND_LIMIT + RESEND_SLACK);
        assert!(!r.answering());
    }

    #[test]
    fn abandoned_reads_send_nothing_more() {
        let mut r = read(0, 4096, 1024);
        r.sent();
        r.abandon();
        assert_eq!(r.next_response(), None);
        r.sent();
        assert_eq!(r.next_response(), None);
    }

    #[test]
    fn an_atomic_answers_its_own_duplicate_only() {
        let a = AtomicResult::new(Psn::new(Psn::MASK), 9, 0x1000, 41, 3);
        assert_eq!(a.replay(Psn::new(Psn::MASK), 9, 0x1000), Some((41, 3)));
        // Another PSN, key or word: not this atomic; it must not be done again either.
        assert_eq!(a.replay(Psn::new(0), 9, 0x1000), None);
        assert_eq!(a.replay(Psn::new(Psn::MASK), 8, 0x1000), None);
        assert_eq!(a.replay(Psn::new(Psn::MASK), 9, 0x1008), None);
        assert!(!Resource::Atomic(a).answering());
        assert!(Resource::Read(read(0, 10, 256)).answering());
    }

    #[test]
    fn reads_are_admitted_up_to_the_grant() {
        assert!(!admits(0, 0));
        assert!(admits(0, 1));
        assert!(!admits(1, 1));
        assert!(admits(15, 16));
        assert!(!admits(16, 16));
    }
}
