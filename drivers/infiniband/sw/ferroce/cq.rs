// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of `ib_uverbs_wc` entries shared with rdma-core's rxe provider,
//! which polls it without system calls.

use crate::{device::Ferroce, limits, proto::ring};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    new_spinlock,
    prelude::*,
    rdma::{
        cq::{Cq, CqAttr, NotifyFlags},
        mmap::{MmapInfo, SharedMem},
        udata::Udata,
    },
    sync::SpinLock,
};

/// Size of `struct ib_uverbs_wc`, the CQE user space reads.
const UVERBS_WC_SIZE: usize = 48;

/// Size of `struct rxe_create_cq_resp` and `struct rxe_resize_cq_resp`: one `struct mminfo`.
const MMINFO_SIZE: usize = 16;

/// Not armed: completions raise no event.
const DISARMED: u32 = 0;
/// Armed for the next solicited completion.
const ARMED_SOLICITED: u32 = 1;
/// Armed for the next completion.
const ARMED_NEXT: u32 = 2;

/// One ring: the shared memory and its shape.
struct CqRing {
    mem: SharedMem,
    geo: ring::Geometry,
}

impl CqRing {
    /// Allocates a ring for `entries` CQEs and fills its header; with `udata`, it is mappable.
    fn new(entries: u32, udata: Option<&Udata<'_>>) -> Result<(Self, MmapInfo)> {
        let geo = ring::Geometry::new(entries, UVERBS_WC_SIZE, limits::DEVICE_LIMITS.max_cqe)
            .ok_or(EINVAL)?;
        let (mem, info) = SharedMem::new(geo.bytes().ok_or(EINVAL)?, udata)?;
        mem.u32_at(ring::LOG2_ELEM_SIZE_OFFSET)?
            .store(geo.log2_elem(), Ordering::Relaxed);
        mem.u32_at(ring::INDEX_MASK_OFFSET)?
            .store(geo.mask(), Ordering::Relaxed);
        Ok((Self { mem, geo }, info))
    }

    fn producer(&self) -> Result<&AtomicU32> {
        self.mem.u32_at(ring::PRODUCER_OFFSET)
    }

    fn consumer(&self) -> Result<&AtomicU32> {
        self.mem.u32_at(ring::CONSUMER_OFFSET)
    }

    /// CQEs waiting for the consumer. The consumer index is user-written: only its masked value
    /// is used.
    fn pending(&self) -> Result<u32> {
        let prod = self.producer()?.load(Ordering::Relaxed);
        let cons = self.consumer()?.load(Ordering::Acquire);
        Ok(self.geo.count(prod, cons))
    }

    /// Moves the waiting CQEs of `old` to the start of `self`.
    fn take_entries_from(&self, old: &CqRing) -> Result {
        let cons = old.consumer()?.load(Ordering::Acquire);
        let n = old.pending()?;
        if n > self.geo.capacity() {
            return Err(EINVAL);
        }
        let mut cqe = [0u8; UVERBS_WC_SIZE];
        for i in 0..n {
            old.mem
                .read(old.geo.slot_offset(cons.wrapping_add(i)), &mut cqe)?;
            self.mem.write(self.geo.slot_offset(i), &cqe)?;
        }
        self.producer()?.store(n, Ordering::Release);
        Ok(())
    }
}

fn mminfo_bytes(info: &MmapInfo) -> [u8; MMINFO_SIZE] {
    let mut out = [0u8; MMINFO_SIZE];
    out[..8].copy_from_slice(&info.offset.to_ne_bytes());
    out[8..12].copy_from_slice(&info.size.to_ne_bytes());
    out
}

/// A completion queue.
#[pin_data]
pub(crate) struct FerroceCq {
    #[pin]
    ring: SpinLock<CqRing>,
    armed: AtomicU32,
}

impl FerroceCq {
    /// Creates a user CQ and tells user space where to map it.
    pub(crate) fn create(
        attr: &CqAttr,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(u32, impl PinInit<Self, Error>)> {
        if attr.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        // Kernel consumers need kernel verbs (QPs, polling) that do not exist yet.
        let udata = udata.ok_or(EOPNOTSUPP)?;
        if udata.outlen() < MMINFO_SIZE {
            return Err(EINVAL);
        }
        let (ring, info) = CqRing::new(attr.cqe, Some(udata))?;
        udata.write(&mminfo_bytes(&info))?;
        let cqe = ring.geo.capacity();
        Ok((
            cqe,
            try_pin_init!(Self {
                ring <- new_spinlock!(ring),
                armed: AtomicU32::new(DISARMED),
            }),
        ))
    }

    /// Replaces the ring by one of at least `cqe` entries, keeping the waiting CQEs.
    pub(crate) fn resize(cq: &Cq<Ferroce>, cqe: u32, udata: &mut Udata<'_>) -> Result<u32> {
        if udata.outlen() < MMINFO_SIZE {
            return Err(EINVAL);
        }
        let this = cq.data();
        // Allocate and answer outside the lock: on a later failure user space ignores the answer.
        let (new, info) = CqRing::new(cqe, Some(udata))?;
        let capacity = new.geo.capacity();
        udata.write(&mminfo_bytes(&info))?;
        let old = {
            let mut ring = this.ring.lock();
            // Fails if more CQEs wait than the new ring holds.
            new.take_entries_from(&ring)?;
            core::mem::replace(&mut *ring, new)
        };
        drop(old);
        Ok(capacity)
    }

    /// Arms the completion event.
    pub(crate) fn req_notify(&self, flags: NotifyFlags) -> Result<bool> {
        let want = if flags.solicited_only() {
            ARMED_SOLICITED
        } else {
            ARMED_NEXT
        };
        // "Next completion" wins over "next solicited" until the event fires.
        self.armed.fetch_max(want, Ordering::AcqRel);
        if flags.report_missed() {
            Ok(self.ring.lock().pending()? > 0)
        } else {
            Ok(false)
        }
    }
}
