// SPDX-License-Identifier: GPL-2.0

//! A QP's send or receive ring, shared with rdma-core's rxe provider: user space produces, the
//! kernel consumes, and nothing user space writes moves the kernel outside what it posted. A
//! kernel QP's rings are mapped by no process: kernel consumers produce ([`super::kernel_ring`]).

use crate::{
    cq::FerroceCq,
    device::Ferroce,
    limits,
    proto::wqe::{self, Completion, WrOpcode},
    queue::Ring,
};
use core::sync::atomic::Ordering;
use kernel::{
    prelude::*,
    rdma::{
        mmap::{MmapInfo, SharedMem},
        qp::Qp,
        udata::Udata,
    },
};

/// A send or receive ring; user space produces, the kernel consumes.
pub(crate) struct WorkRing(Ring);

impl WorkRing {
    pub(crate) fn new(
        entries: u32,
        elem: usize,
        udata: Option<&Udata<'_>>,
    ) -> Result<(Self, MmapInfo)> {
        // The provider needs a slot even for a queue of zero WRs.
        let (ring, info) = Ring::new(entries.max(1), elem, limits::DEVICE_LIMITS.max_qp_wr, udata)?;
        Ok((Self(ring), info))
    }

    /// Bytes per slot.
    pub(crate) fn slot_len(&self) -> usize {
        1usize << self.0.geo.log2_elem()
    }

    /// Most WQEs a ring holds.
    pub(crate) fn capacity(&self) -> u32 {
        self.0.geo.capacity()
    }

    /// How many WQEs user space has posted after `cons`, the kernel's consumer index (at most
    /// a ring's worth, whatever it wrote).
    pub(crate) fn posted(&self, cons: u32) -> Result<u32> {
        let prod = self.0.producer()?.load(Ordering::Acquire);
        Ok(self.0.geo.count(prod, cons))
    }

    /// Copies the WQE at `cons` into `out` (a slot's length); `false` if none is posted there.
    pub(crate) fn peek(&self, cons: u32, out: &mut [u8]) -> Result<bool> {
        self.peek_at(cons, cons, out)
    }

    /// Copies the WQE at `pos` into `out`, if user space has posted it: `pos` must lie between
    /// the kernel's consumer index `cons` and the producer index. Whatever the process writes
    /// there, nothing before `cons` or a ring's worth after it is ever taken.
    pub(crate) fn peek_at(&self, cons: u32, pos: u32, out: &mut [u8]) -> Result<bool> {
        if self.0.geo.count(pos, cons) >= self.posted(cons)? {
            return Ok(false);
        }
        self.0.mem.read(self.0.geo.slot_offset(pos), out)?;
        Ok(true)
    }

    /// Whether user space has posted a WQE at `pos` (see [`Self::peek_at`]).
    pub(crate) fn is_posted_at(&self, cons: u32, pos: u32) -> bool {
        self.posted(cons)
            .is_ok_and(|posted| self.0.geo.count(pos, cons) < posted)
    }

    /// The opcode and message length written into the send WQE at `pos`, read in place: a
    /// hint for where to send it from, which the process may change before the WQE is copied
    /// and checked.
    pub(crate) fn send_hint_at(&self, cons: u32, pos: u32) -> Option<(Option<WrOpcode>, u32)> {
        if !self.is_posted_at(cons, pos) {
            return None;
        }
        let slot = self.0.geo.slot_offset(pos);
        let (mut op, mut len) = ([0u8; 4], [0u8; 4]);
        self.0.mem.read(slot + wqe::off::OPCODE, &mut op).ok()?;
        self.0
            .mem
            .read(slot + wqe::off::DMA_LENGTH, &mut len)
            .ok()?;
        Some((
            WrOpcode::from_raw(u32::from_ne_bytes(op)),
            u32::from_ne_bytes(len),
        ))
    }

    /// A private copy of the WQE at `pos` (see [`Self::peek_at`]), so that user space cannot
    /// change it under way: `None` if none is posted there (or the ring cannot be read),
    /// `ENOMEM` if no copy could be made. The check comes first: a packet finding no receive
    /// posted counts as that, whatever memory is short.
    pub(crate) fn copy_at(&self, cons: u32, pos: u32) -> Result<Option<KVec<u8>>> {
        if !self
            .posted(cons)
            .is_ok_and(|n| self.0.geo.count(pos, cons) < n)
        {
            return Ok(None);
        }
        let mut slot = KVec::new();
        slot.resize(self.slot_len(), 0u8, GFP_ATOMIC)?;
        // Posted, checked above: read it without asking the producer index again.
        let read = self.0.mem.read(self.0.geo.slot_offset(pos), &mut slot);
        Ok(read.is_ok().then_some(slot))
    }

    /// The ring position after `pos`.
    pub(crate) fn next(&self, pos: u32) -> u32 {
        self.0.geo.next(pos)
    }

    /// Retires the WQE at `*cons`: the slot is the producer's again.
    pub(crate) fn advance(&self, cons: &mut u32) -> Result {
        *cons = self.0.geo.next(*cons);
        self.0.consumer()?.store(*cons, Ordering::Release);
        Ok(())
    }

    /// Appends a WQE for a kernel consumer, the only producer of a kernel QP's ring (callers
    /// serialise): `fill` writes it into the first slot's length of `buf`. `ENOMEM` if the ring
    /// is full (as C rxe answers).
    pub(crate) fn produce(&self, buf: &mut [u8], fill: impl FnOnce(&mut [u8]) -> Result) -> Result {
        let slot = buf.get_mut(..self.slot_len()).ok_or(EINVAL)?;
        let prod = self.0.producer()?.load(Ordering::Relaxed);
        let cons = self.0.consumer()?.load(Ordering::Acquire);
        if self.0.geo.is_full(prod, cons) {
            return Err(ENOMEM);
        }
        fill(slot)?;
        self.0.mem.write(self.0.geo.slot_offset(prod), slot)?;
        // Publishes the WQE: the engine reads the slot after seeing the index.
        self.0
            .producer()?
            .store(self.0.geo.next(prod), Ordering::Release);
        Ok(())
    }

    /// Drops what is posted: `cons`, the kernel's consumer index, moves to the producer's.
    pub(crate) fn discard(&self, cons: &mut u32) -> Result {
        // Where `count(prod, cons)` steps of `next` lead: the masked producer index.
        *cons = self.0.producer()?.load(Ordering::Acquire) & self.0.geo.mask();
        self.0.consumer()?.store(*cons, Ordering::Release);
        Ok(())
    }

    /// Moves the WQEs posted in `old` after `cons` to the start of this new ring, which user
    /// space has not seen yet; `EINVAL` if they do not fit.
    pub(crate) fn take_posted(&self, old: &WorkRing, cons: u32) -> Result {
        let n = old.posted(cons)?;
        if n > self.capacity() || old.slot_len() != self.slot_len() {
            return Err(EINVAL);
        }
        let mut slot = KVec::new();
        slot.resize(self.slot_len(), 0u8, GFP_ATOMIC)?;
        let mut from = cons;
        for i in 0..n {
            old.0.mem.read(old.0.geo.slot_offset(from), &mut slot)?;
            self.0.mem.write(self.0.geo.slot_offset(i), &slot)?;
            from = old.next(from);
        }
        self.0.producer()?.store(n, Ordering::Release);
        Ok(())
    }

    /// Completes every WQE user space has posted, oldest first, with what `complete` makes of
    /// it, into `cq`. `cons` is the kernel's own consumer index: the shared copy is only
    /// written, since user space may scribble on it. Stops early if the CQ is full.
    pub(super) fn flush(
        &self,
        cons: &mut u32,
        qp: &Qp<Ferroce>,
        to_send_cq: bool,
        mut complete: impl FnMut(&SharedMem, usize) -> Result<Completion>,
    ) -> Result {
        // Masked: a garbage producer index flushes at most a ring's worth of garbage WQEs.
        for _ in 0..self.posted(*cons)? {
            let c = complete(&self.0.mem, self.0.geo.slot_offset(*cons))?;
            let target = if to_send_cq {
                qp.send_cq()
            } else {
                qp.recv_cq()
            };
            FerroceCq::post(qp, target, &c, true)?;
            *cons = self.0.geo.next(*cons);
            self.0.consumer()?.store(*cons, Ordering::Release);
        }
        Ok(())
    }
}
