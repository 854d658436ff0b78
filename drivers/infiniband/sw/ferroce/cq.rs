// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of `ib_uverbs_wc` entries shared with rdma-core's rxe provider,
//! which polls it without system calls.

use crate::{
    device::Ferroce,
    limits,
    proto::wqe::{Completion, WcStatus, WC_WITH_INV},
    queue::{mminfo, Ring, MMINFO_SIZE},
};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    rdma::{
        cq::{Cq, CqAttr, NotifyFlags},
        mmap::MmapInfo,
        qp::{Qp, QpLink},
        udata::Udata,
        wr::{Wc, WcSink, WC_WITH_INVALIDATE, WC_WITH_NETWORK_HDR_TYPE},
    },
    sync::{Arc, SpinLockIrq},
};

use crate::proto::wqe::UVERBS_WC_SIZE;

/// Not armed: completions raise no event.
const DISARMED: u32 = 0;
/// Armed for the next solicited completion.
const ARMED_SOLICITED: u32 = 1;
/// Armed for the next completion.
const ARMED_NEXT: u32 = 2;

/// The CQ ring; the kernel produces, user space consumes.
struct CqRing(Ring);

impl CqRing {
    /// Allocates a ring for `entries` CQEs; with `udata`, it is mappable.
    fn new(entries: u32, udata: Option<&Udata<'_>>) -> Result<(Self, MmapInfo)> {
        let (ring, info) = Ring::new(
            entries,
            UVERBS_WC_SIZE,
            limits::DEVICE_LIMITS.max_cqe,
            udata,
        )?;
        Ok((Self(ring), info))
    }

    fn producer(&self) -> Result<&AtomicU32> {
        self.0.producer()
    }

    fn consumer(&self) -> Result<&AtomicU32> {
        self.0.consumer()
    }

    /// CQEs waiting for the consumer. The consumer index is user-written: only its masked value
    /// is used.
    fn pending(&self) -> Result<u32> {
        let prod = self.producer()?.load(Ordering::Relaxed);
        let cons = self.consumer()?.load(Ordering::Acquire);
        Ok(self.0.geo.count(prod, cons))
    }

    /// Appends one CQE; `ENOSPC` if the consumer has not made room.
    fn push(&self, cqe: &[u8; UVERBS_WC_SIZE]) -> Result {
        let prod = self.producer()?.load(Ordering::Relaxed);
        let cons = self.consumer()?.load(Ordering::Acquire);
        if self.0.geo.is_full(prod, cons) {
            return Err(ENOSPC);
        }
        self.0.mem.write(self.0.geo.slot_offset(prod), cqe)?;
        // Publishes the CQE: the consumer reads the slot after seeing the index.
        self.producer()?
            .store(self.0.geo.next(prod), Ordering::Release);
        Ok(())
    }

    /// Moves the waiting CQEs of `old` to the start of `self`.
    fn take_entries_from(&self, old: &CqRing) -> Result {
        let cons = old.consumer()?.load(Ordering::Acquire);
        let n = old.pending()?;
        if n > self.0.geo.capacity() {
            return Err(EINVAL);
        }
        let mut cqe = [0u8; UVERBS_WC_SIZE];
        for i in 0..n {
            old.0
                .mem
                .read(old.0.geo.slot_offset(cons.wrapping_add(i)), &mut cqe)?;
            self.0.mem.write(self.0.geo.slot_offset(i), &cqe)?;
        }
        self.producer()?.store(n, Ordering::Release);
        Ok(())
    }
}

/// A kernel consumer's completion, with the QP it names.
struct KernelEntry {
    wc: Wc,
    qp: Arc<QpLink<Ferroce>>,
}

/// A kernel consumer's CQ: completions wait here for `poll_cq`, oldest first.
struct KernelCq {
    slots: KVec<Option<KernelEntry>>,
    head: usize,
    len: usize,
}

impl KernelCq {
    fn new(entries: u32) -> Result<Self> {
        let n = entries.clamp(1, limits::DEVICE_LIMITS.max_cqe) as usize;
        let mut slots = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            head: 0,
            len: 0,
        })
    }

    fn push(&mut self, e: KernelEntry) -> Result {
        let n = self.slots.len();
        if self.len == n {
            return Err(ENOSPC);
        }
        self.slots[(self.head + self.len) % n] = Some(e);
        self.len += 1;
        Ok(())
    }

    fn pop(&mut self) -> Option<KernelEntry> {
        if self.len == 0 {
            return None;
        }
        let e = self.slots[self.head].take();
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        e
    }
}

/// Where a CQ keeps its completions.
enum CqStore {
    /// The ring shared with rdma-core's rxe provider.
    User(CqRing),
    Kernel(KernelCq),
}

/// A completion queue.
#[pin_data]
pub(crate) struct FerroceCq {
    /// Kernel consumers poll and arm from any context, hence the interrupt-safe lock.
    #[pin]
    ring: SpinLockIrq<CqStore>,
    armed: AtomicU32,
    /// It overflowed and its consumer was told (`IB_EVENT_CQ_ERR`); told again only once a
    /// completion fits again.
    overflowed: AtomicBool,
}

impl FerroceCq {
    /// Creates a CQ; a user one tells user space where to map it.
    pub(crate) fn create(
        attr: &CqAttr,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(u32, impl PinInit<Self, Error>)> {
        if attr.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        let (store, cqe) = match udata {
            Some(udata) => {
                if udata.outlen() < MMINFO_SIZE {
                    return Err(EINVAL);
                }
                let (ring, info) = CqRing::new(attr.cqe, Some(udata))?;
                udata.write(&mminfo(&info))?;
                let cqe = ring.0.geo.capacity();
                (CqStore::User(ring), cqe)
            }
            None => {
                if attr.cqe > limits::DEVICE_LIMITS.max_cqe {
                    return Err(EINVAL);
                }
                let k = KernelCq::new(attr.cqe)?;
                // CAST: Bounded by `max_cqe`.
                let cqe = k.slots.len() as u32;
                (CqStore::Kernel(k), cqe)
            }
        };
        Ok((
            cqe,
            try_pin_init!(Self {
                ring <- new_spinlock_irq!(store),
                armed: AtomicU32::new(DISARMED),
                overflowed: AtomicBool::new(false),
            }),
        ))
    }

    /// Replaces the ring by one of at least `cqe` entries, keeping the waiting CQEs.
    pub(crate) fn resize(cq: &Cq<Ferroce>, cqe: u32, udata: &mut Udata<'_>) -> Result {
        if udata.outlen() < MMINFO_SIZE {
            return Err(EINVAL);
        }
        let this = cq.data();
        // Allocate and answer outside the lock: on a later failure user space ignores the answer.
        let (new, info) = CqRing::new(cqe, Some(udata))?;
        let capacity = new.0.geo.capacity();
        udata.write(&mminfo(&info))?;
        // Whichever ring loses is freed after the lock: freeing may sleep.
        let swapped = {
            let mut store = this.ring.lock();
            let CqStore::User(ring) = &mut *store else {
                return Err(EINVAL);
            };
            // Fails if more CQEs wait than the new ring holds.
            match new.take_entries_from(ring) {
                Ok(()) => {
                    cq.set_cqe(capacity);
                    Ok(core::mem::replace(ring, new))
                }
                Err(e) => Err((e, new)),
            }
        };
        match swapped {
            Ok(old) => {
                drop(old);
                Ok(())
            }
            Err((e, new)) => {
                drop(new);
                Err(e)
            }
        }
    }

    /// Adds a completion and raises the completion event if it was armed for it: "next" for
    /// any, "solicited" for a `solicited` one or an error.
    ///
    /// `ENOSPC` if the CQ is full (the consumer fell behind): the completion is lost, as on
    /// hardware, where the CQ would go to an error state, and the consumer hears of it by
    /// `IB_EVENT_CQ_ERR`, once until completions fit again.
    pub(crate) fn post(
        qp: &Qp<Ferroce>,
        cq: &Cq<Ferroce>,
        c: &Completion,
        solicited: bool,
    ) -> Result {
        let this = cq.data();
        // Taken before the lock: dropping an unused one must not happen under it.
        let link = qp.link();
        let pushed = match &mut *this.ring.lock() {
            CqStore::User(ring) => ring.push(&c.encode()),
            CqStore::Kernel(k) => k.push(KernelEntry {
                wc: kernel_wc(c),
                qp: link,
            }),
        };
        if let Err(e) = pushed {
            if e == ENOSPC && !this.overflowed.swap(true, Ordering::AcqRel) {
                cq.raise_error_event();
            }
            return Err(e);
        }
        this.overflowed.store(false, Ordering::Release);
        let fires = if solicited || c.status != WcStatus::Success {
            this.armed.swap(DISARMED, Ordering::AcqRel) != DISARMED
        } else {
            this.armed
                .compare_exchange(ARMED_NEXT, DISARMED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        };
        if fires {
            cq.raise_completion_event();
        }
        Ok(())
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
            Ok(match &*self.ring.lock() {
                CqStore::User(ring) => ring.pending()? > 0,
                CqStore::Kernel(k) => k.len > 0,
            })
        } else {
            Ok(false)
        }
    }

    /// A kernel consumer takes completions.
    pub(crate) fn poll(cq: &Cq<Ferroce>, sink: &mut WcSink<'_, Ferroce>) -> Result {
        let mut store = cq.data().ring.lock();
        let CqStore::Kernel(k) = &mut *store else {
            return Err(EINVAL);
        };
        while !sink.is_full() {
            let Some(e) = k.pop() else { break };
            sink.push(&e.wc, &e.qp);
        }
        Ok(())
    }
}

/// A completion as a kernel consumer sees it.
fn kernel_wc(c: &Completion) -> Wc {
    Wc {
        wr_id: c.wr_id,
        status: c.status as u32,
        // The kernel's `IB_WC_*` opcodes have the user ABI's values.
        opcode: c.opcode as u32,
        byte_len: c.byte_len,
        imm: u32::from_ne_bytes(c.imm_data.to_be_bytes()),
        src_qp: c.src_qp,
        // The user ABI's "with invalidate" bit is not the kernel's.
        wc_flags: (c.wc_flags & !WC_WITH_INV)
            | if c.wc_flags & WC_WITH_INV != 0 {
                WC_WITH_INVALIDATE
            } else {
                0
            }
            | if c.net_type != 0 {
                WC_WITH_NETWORK_HDR_TYPE
            } else {
                0
            },
        network_hdr_type: c.net_type,
    }
}
