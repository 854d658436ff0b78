// SPDX-License-Identifier: GPL-2.0

//! Memory windows: R_Keys onto part of a region, bound and invalidated from a send queue
//! (IBA 10.6.7), type 1 (bound to the PD) and type 2B (bound to one QP).
//!
//! A window's key indices follow the regions' in one key space, so a key says which table it
//! is in. A bound window names its region by key and serial number, not by reference: a region
//! deregistered under it is found no more, and its pages are unpinned at once, as without the
//! window.

use crate::{
    device::Ferroce,
    frwr::FastError,
    limits,
    mr::{MrRef, MrTable},
    proto::wqe::{access, BindMw},
};
use kernel::{
    new_spinlock_bh,
    prelude::*,
    random,
    rdma::{mw::MwType, pd::Pd, pool::Pool},
    sync::{Arc, SpinLockBh},
};

/// The rights a window may grant (no zero-based windows).
const BINDABLE: u32 = access::LOCAL_WRITE | access::REMOTE;

/// Where a bound window lets peers in.
#[derive(Clone, Copy)]
struct Binding {
    mr_key: u32,
    mr_serial: u64,
    addr: u64,
    len: u64,
    access: u32,
    /// Type 2: the QP that bound it ([`crate::qp::QpShared::id`]), the only one that accepts
    /// its key.
    qp: Option<u64>,
}

/// A window as its lock holds it.
struct Bound {
    /// Its current key: a bind changes the low 8 bits.
    key: u32,
    /// `None` while unbound (a type 2 window is then free), or bound with length 0.
    to: Option<Binding>,
}

/// What the data path and the send queues need of a window.
#[pin_data]
pub(crate) struct MwState {
    pd: usize,
    ty: MwType,
    #[pin]
    bound: SpinLockBh<Bound>,
}

/// Why a window operation from a send queue fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MwError {
    /// No such window or region, or not of the QP's PD, or a stale key.
    NotFound,
    /// The window's type or state does not allow it.
    BadState,
    /// The region or the range does not allow the rights asked for.
    Refused,
}

/// A device's windows by key index, next to its regions.
#[pin_data]
pub(crate) struct MwTable {
    #[pin]
    windows: Pool<MwState>,
}

impl MwTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        let first = limits::DEVICE_LIMITS.max_mr + 1;
        pin_init!(Self {
            windows <- Pool::new(first..=first + limits::DEVICE_LIMITS.max_mw - 1),
        })
    }

    /// Whether `key` is a window's (else a region's).
    pub(crate) fn is_window_key(key: u32) -> bool {
        key >> 8 > limits::DEVICE_LIMITS.max_mr
    }

    fn get(&self, key: u32) -> Option<Arc<MwState>> {
        self.windows.get(key >> 8)
    }

    /// Stores `state` under a free index; returns the index.
    fn insert(&self, state: Arc<MwState>) -> Result<u32> {
        self.windows.alloc(state, GFP_KERNEL)
    }

    /// Takes the window of `key` out; once this returns, no packet or WQE finds it. Sleeps.
    fn remove(&self, key: u32) {
        if let Some(mw) = self.get(key) {
            mw.bound.lock().to = None;
        }
        drop(self.windows.remove(key >> 8));
    }
}

impl MwState {
    /// The region and range a peer's request for `len` bytes at `va` with `rights` reaches
    /// through the window of `key`, for the QP `qp` of `pd`.
    fn reach(
        &self,
        key: u32,
        pd: usize,
        qp: u64,
        va: u64,
        len: u32,
        rights: u32,
    ) -> Option<Binding> {
        let bound = self.bound.lock();
        let b = bound.to?;
        let inside =
            va >= b.addr && va.checked_add(u64::from(len))? <= b.addr.checked_add(b.len)?;
        let ok = bound.key == key
            && self.pd == pd
            && b.qp.is_none_or(|q| q == qp)
            && b.access & rights == rights
            && inside;
        ok.then_some(b)
    }
}

impl MrTable {
    /// The region and offset a peer's `rkey` (a region's or a window's), `va` and `len` name,
    /// if they may be used by the QP `qp` ([`crate::qp::QpShared::id`]) of `pd` with `rights`,
    /// over the whole range.
    pub(crate) fn remote(
        &self,
        pd: usize,
        qp: u64,
        rkey: u32,
        va: u64,
        len: u32,
        rights: u32,
    ) -> Option<(MrRef, usize)> {
        let mr = if MwTable::is_window_key(rkey) {
            let b = self
                .windows
                .get(rkey)?
                .reach(rkey, pd, qp, va, len, rights)?;
            let mr = self.get(b.mr_key)?;
            // The region it was bound to, not one that took its key since.
            if mr.serial != b.mr_serial {
                return None;
            }
            mr
        } else {
            let mr = self.get(rkey)?;
            if mr.pd != pd || mr.access & rights != rights {
                return None;
            }
            mr
        };
        let start = va.checked_sub(mr.iova)?;
        let start = usize::try_from(start).ok()?;
        let end = start.checked_add(len as usize)?;
        (end <= mr.mem.len()).then_some((mr, start))
    }

    /// The region a peer's `rkey` names as a whole (a FLUSH of a whole region), if the QP's
    /// `pd` may use it with `rights`. Only a region's key does: windows are not bound with
    /// FLUSH rights (see `BINDABLE`).
    pub(crate) fn remote_whole(&self, pd: usize, rkey: u32, rights: u32) -> Option<MrRef> {
        if MwTable::is_window_key(rkey) {
            return None;
        }
        let mr = self.get(rkey)?;
        (mr.pd == pd && mr.access & rights == rights).then_some(mr)
    }

    /// The window of `key`'s index, if it is of `pd` (its whole key is checked under its lock).
    fn window_of(&self, key: u32, pd: usize) -> Result<Arc<MwState>, MwError> {
        self.windows
            .get(key)
            .filter(|mw| mw.pd == pd)
            .ok_or(MwError::NotFound)
    }

    /// Binds (or, with length 0, unbinds) the window a bind WQE of the QP `qp` of `pd` names.
    /// Checks as IBA C10-72 to C10-75 and o10-37.2.30 ask.
    pub(crate) fn bind(&self, pd: usize, qp: u64, w: &BindMw) -> Result<(), MwError> {
        let mw = self.window_of(w.mw_rkey, pd)?;
        if w.access & !BINDABLE != 0 {
            return Err(MwError::Refused);
        }
        let to = if w.len == 0 {
            None
        } else {
            let mr = self.get(w.mr_lkey).ok_or(MwError::NotFound)?;
            let writes = w.access & (access::REMOTE_WRITE | access::REMOTE_ATOMIC) != 0;
            let end = w.addr.checked_add(w.len).ok_or(MwError::Refused)?;
            let mr_end = mr
                .iova
                .checked_add(mr.mem.len() as u64)
                .ok_or(MwError::Refused)?;
            if mr.pd != pd {
                return Err(MwError::NotFound);
            }
            if mr.access & access::MW_BIND == 0
                || (writes && mr.access & access::LOCAL_WRITE == 0)
                || w.addr < mr.iova
                || end > mr_end
            {
                return Err(MwError::Refused);
            }
            Some(Binding {
                mr_key: w.mr_lkey,
                mr_serial: mr.serial,
                addr: w.addr,
                len: w.len,
                access: w.access,
                qp: (mw.ty == MwType::Type2).then_some(qp),
            })
        };
        let mut bound = mw.bound.lock();
        if bound.key != w.mw_rkey {
            return Err(MwError::NotFound);
        }
        // A type 2 window is bound from free, to something: invalidation frees it.
        if mw.ty == MwType::Type2 && (bound.to.is_some() || to.is_none()) {
            return Err(MwError::BadState);
        }
        bound.key = (bound.key & !0xff) | (w.new_rkey & 0xff);
        bound.to = to;
        Ok(())
    }

    /// Invalidates the type 2 window or the fast region of `rkey`, for the QP `qp` of `pd`:
    /// locally (LOCAL_INV, `remote` false) or by a peer's SEND with invalidate, which only the
    /// QP a window is bound to takes (and only a region with remote rights).
    pub(crate) fn invalidate(
        &self,
        pd: usize,
        qp: u64,
        rkey: u32,
        remote: bool,
    ) -> Result<(), MwError> {
        if !MwTable::is_window_key(rkey) {
            return self.fast_invalidate(pd, rkey, remote).map_err(|e| match e {
                FastError::NotFound => MwError::NotFound,
                FastError::Refused => MwError::BadState,
            });
        }
        let mw = self.window_of(rkey, pd)?;
        let mut bound = mw.bound.lock();
        if bound.key != rkey {
            return Err(MwError::NotFound);
        }
        let Some(b) = bound.to else {
            return Err(MwError::BadState);
        };
        if mw.ty != MwType::Type2 || (remote && b.qp != Some(qp)) {
            return Err(MwError::BadState);
        }
        bound.to = None;
        Ok(())
    }
}

/// The driver data of one window: its key in the device's table.
pub(crate) struct FerroceMw {
    table: Arc<MrTable>,
    key: u32,
}

impl FerroceMw {
    pub(crate) fn alloc(pd: &Pd<Ferroce>, ty: MwType) -> Result<(u32, impl PinInit<Self, Error>)> {
        let table = pd.device().data().mrs.clone();
        let tag = u32::from(random::get_random_u8());
        // The key is set once the index is known; until then no key finds the window (a
        // lookup compares the whole key, and no key is 0).
        let state = Arc::pin_init(
            pin_init!(MwState {
                pd: pd.id(),
                ty,
                bound <- new_spinlock_bh!(Bound { key: 0, to: None }),
            }),
            GFP_KERNEL,
        )?;
        let probe = state.clone();
        let index = table.windows.insert(state)?;
        let key = index << 8 | tag;
        probe.bound.lock().key = key;
        Ok((key, Ok(Self { table, key })))
    }
}

impl Drop for FerroceMw {
    fn drop(&mut self) {
        self.table.windows.remove(self.key);
    }
}
