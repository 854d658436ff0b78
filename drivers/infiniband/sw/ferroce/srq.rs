// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: receive WQEs that every QP attached to the queue draws from, one per
//! message, as the message's first packet arrives.
//!
//! User space posts into a ring shared with rdma-core's rxe provider, without a system call.
//! A QP copies the WQE it takes and keeps it until the message completes (see `rc::resp`): from
//! then on the WQE is the QP's, and a QP that fails completes it with a flush error rather than
//! losing it (one a QP holds when it is destroyed goes with it, uncompleted, as a receive
//! queue's WQEs do). Kernel consumers cannot make SRQs yet: their WQEs would need a list of their own,
//! and their QPs on one would be RC ones, which ferroce does not offer them.

use crate::{
    device::Ferroce,
    limits,
    proto::wqe::{RECV_WQE_HEADER, SGE_SIZE},
    qp::ring::WorkRing,
    queue::{mminfo, MMINFO_SIZE},
};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    new_mutex, new_spinlock_bh,
    prelude::*,
    rdma::{
        pd::Pd,
        srq::{Srq, SrqAttr, SrqAttrMask},
        udata::Udata,
    },
    sync::{Arc, Mutex, SpinLockBh},
    uaccess::{UserPtr, UserSlice},
};

/// `struct rxe_create_srq_resp`: the ring's `struct mminfo`, then `srq_num` and a reserved word.
const CREATE_SRQ_RESP_SIZE: usize = MMINFO_SIZE + 8;

/// The next `srq_num` reported to user space (it names an SRQ only in XRC, which ferroce does
/// not have; unique all the same).
static NEXT_SRQ_NUM: AtomicU32 = AtomicU32::new(1);

/// What changes under the SRQ's lock.
struct SrqState {
    ring: WorkRing,
    /// The kernel's consumer index (the shared copy is only written: user space may scribble
    /// on it).
    cons: u32,
    /// The armed limit (0: disarmed).
    limit: u32,
}

/// The driver data of a shared receive queue.
#[pin_data]
pub(crate) struct FerroceSrq {
    /// Its PD: the keys in its WQEs are that PD's.
    pub(crate) pd: usize,
    max_sge: u32,
    _place: SrqPlace,
    /// QPs take WQEs in softirq.
    #[pin]
    state: SpinLockBh<SrqState>,
    /// One resize at a time (the core runs modifies of one SRQ concurrently): the `mminfo`
    /// user space is told is the ring that ends up in place.
    #[pin]
    resizing: Mutex<()>,
}

impl FerroceSrq {
    pub(crate) fn create(
        pd: &Pd<Ferroce>,
        attr: &SrqAttr,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(SrqAttr, impl PinInit<Self, Error>)> {
        let lim = &limits::DEVICE_LIMITS;
        if attr.max_wr == 0 || attr.max_wr > lim.max_srq_wr || attr.max_sge > lim.max_srq_sge {
            return Err(EINVAL);
        }
        let udata = udata.ok_or(EOPNOTSUPP)?;
        if udata.outlen() < CREATE_SRQ_RESP_SIZE {
            return Err(EINVAL);
        }
        let max_sge = attr.max_sge.max(1);
        // CAST: At most 27 SGEs.
        let elem = RECV_WQE_HEADER + max_sge as usize * SGE_SIZE;
        let (ring, info) = WorkRing::new(attr.max_wr, elem, Some(udata))?;
        let max_wr = ring.capacity();
        let mut resp = [0u8; CREATE_SRQ_RESP_SIZE];
        resp[..MMINFO_SIZE].copy_from_slice(&mminfo(&info));
        let num = NEXT_SRQ_NUM.fetch_add(1, Ordering::Relaxed);
        resp[MMINFO_SIZE..MMINFO_SIZE + 4].copy_from_slice(&num.to_ne_bytes());
        udata.write(&resp)?;
        let place = SrqPlace::take(&pd.device().data().srqs)?;
        let real = SrqAttr {
            max_wr,
            max_sge,
            // The limit is armed by modify only (`ibv_create_srq` ignores it).
            srq_limit: 0,
        };
        let pd = pd.id();
        let init = try_pin_init!(Self {
            pd,
            max_sge,
            _place: place,
            state <- new_spinlock_bh!(
                SrqState {
                    ring,
                    cons: 0,
                    limit: 0
                },
                "ferroce::FerroceSrq::state"
            ),
            resizing <- new_mutex!((), "ferroce::FerroceSrq::resizing"),
        });
        Ok((real, init))
    }

    /// Resizes the queue (`MAX_WR`: WQEs posted move along) or arms its limit.
    pub(crate) fn modify(
        srq: &Srq<Ferroce>,
        attr: &SrqAttr,
        mask: SrqAttrMask,
        udata: Option<&mut Udata<'_>>,
    ) -> Result {
        let this = srq.data();
        let max = limits::DEVICE_LIMITS.max_srq_wr;
        let resize = mask.has(SrqAttrMask::MAX_WR);
        let arm = mask.has(SrqAttrMask::LIMIT);
        if (resize && (attr.max_wr == 0 || attr.max_wr > max)) || (arm && attr.srq_limit > max) {
            return Err(EINVAL);
        }
        let _one = this.resizing.lock();
        // A user resize: the new ring, made and announced before the lock, as for CQs. Its
        // `struct mminfo` goes where `struct rxe_modify_srq_cmd` points (rxe's ABI); if the
        // resize fails, user space keeps the old ring.
        let mut spare = match (resize, udata) {
            (false, _) => None,
            (true, None) => return Err(EINVAL),
            (true, Some(udata)) => {
                let at: u64 = udata.read()?;
                // CAST: At most 27 SGEs.
                let elem = RECV_WQE_HEADER + this.max_sge as usize * SGE_SIZE;
                let (ring, info) = WorkRing::new(attr.max_wr, elem, Some(udata))?;
                let at = usize::try_from(at).map_err(|_| EFAULT)?;
                UserSlice::new(UserPtr::from_addr(at), MMINFO_SIZE)
                    .writer()
                    .write_slice(&mminfo(&info))?;
                Some(ring)
            }
        };
        let res = this.state.lock().apply(attr, mask, &mut spare);
        // The ring that lost, old or refused, is freed outside the lock: freeing may sleep.
        drop(spare);
        res
    }

    pub(crate) fn query(srq: &Srq<Ferroce>) -> Result<SrqAttr> {
        let this = srq.data();
        let st = this.state.lock();
        Ok(SrqAttr {
            max_wr: st.ring.capacity(),
            max_sge: this.max_sge,
            srq_limit: st.limit,
        })
    }

    /// Takes a copy of the oldest WQE user space posted, for a QP's next message: `None` if
    /// none is posted, `ENOMEM` if no copy could be made. Once fewer than the armed limit are
    /// left, the limit event goes out, once.
    pub(crate) fn take(srq: &Srq<Ferroce>) -> Result<Option<KVec<u8>>> {
        let (slot, hit) = {
            let mut st = srq.data().state.lock();
            let SrqState { ring, cons, .. } = &mut *st;
            let Some(slot) = ring.copy_at(*cons, *cons)? else {
                return Ok(None);
            };
            // Only the shared copy of the index can fail to be written; the kernel's moved on.
            let _ = ring.advance(cons);
            let left = ring.posted(*cons).unwrap_or(0);
            (slot, st.fire_limit(left))
        };
        if hit {
            srq.raise_limit_event();
        }
        Ok(Some(slot))
    }
}

impl SrqState {
    /// A modify: `new` is a resize's new ring, swapped in for the old one if the WQEs posted
    /// fit. Neither the size nor a limit can be set so that the limit exceeds the size.
    fn apply(&mut self, attr: &SrqAttr, mask: SrqAttrMask, new: &mut Option<WorkRing>) -> Result {
        let limit = if mask.has(SrqAttrMask::LIMIT) {
            attr.srq_limit
        } else {
            self.limit
        };
        // As C rxe: a resize asks for at least the limit, which is no more than the ring holds.
        let small = mask.has(SrqAttrMask::MAX_WR) && attr.max_wr < limit;
        let size = new.as_ref().unwrap_or(&self.ring).capacity();
        if small || limit > size {
            return Err(EINVAL);
        }
        if let Some(new) = new.as_mut() {
            new.take_posted(&self.ring, self.cons)?;
            self.cons = 0;
            core::mem::swap(&mut self.ring, new);
        }
        self.limit = limit;
        Ok(())
    }

    /// Whether `left` WQEs fall below the armed limit: then it disarms.
    fn fire_limit(&mut self, left: u32) -> bool {
        let hit = self.limit != 0 && left < self.limit;
        if hit {
            self.limit = 0;
        }
        hit
    }
}

/// A place among the device's SRQs (at most `max_srq`), given back on drop.
struct SrqPlace(Arc<AtomicU32>);

impl SrqPlace {
    fn take(count: &Arc<AtomicU32>) -> Result<Self> {
        if count.fetch_add(1, Ordering::Relaxed) >= limits::DEVICE_LIMITS.max_srq {
            count.fetch_sub(1, Ordering::Relaxed);
            return Err(ENOMEM);
        }
        Ok(Self(count.clone()))
    }
}

impl Drop for SrqPlace {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
