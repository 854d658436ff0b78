// SPDX-License-Identifier: GPL-2.0

//! Memory windows (`struct ib_mw`): remote keys onto part of a registered region, bound and
//! invalidated by work requests (IBA 10.6.7).
//!
//! The core allocates the object and checks the type; the provider gives the window its first
//! R_Key. Binding and invalidation happen in the provider's send queue.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{object::CoreObject, ops::Driver, pd::Pd};
use crate::{bindings, prelude::*};

type Object<T> = CoreObject<bindings::ib_mw, <T as Driver>::Mw>;

/// The size the core allocates for one object (`ops.size_ib_mw`).
pub(crate) const fn alloc_size<T: Driver>() -> usize {
    Object::<T>::ALLOC_SIZE
}

/// The kind of a memory window (`enum ib_mw_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwType {
    /// Bound by `ibv_bind_mw`, to the PD: any QP of the PD may use its key.
    Type1,
    /// Bound by a work request, to the QP that posted it, which alone accepts its key; it can
    /// be invalidated, locally or by a peer's SEND with invalidate.
    Type2,
}

impl MwType {
    fn from_raw(t: bindings::ib_mw_type) -> Result<Self> {
        match t {
            bindings::ib_mw_type_IB_MW_TYPE_1 => Ok(Self::Type1),
            bindings::ib_mw_type_IB_MW_TYPE_2 => Ok(Self::Type2),
            _ => Err(EINVAL),
        }
    }
}

/// `ops.alloc_mw`: runs [`Driver::alloc_mw`] into the object the core allocated and records
/// the window's first R_Key.
///
/// # Safety
///
/// `mw` is a zeroed allocation of [`alloc_size`] bytes with `device`, `pd` and `type` set, for
/// a device of `T`, not yet shared.
pub(crate) unsafe fn alloc<T: Driver>(mw: *mut bindings::ib_mw) -> Result {
    // SAFETY: `ib_uverbs_alloc_mw()` sets `pd` (a PD of this device, so made by `pd::init`,
    // which it holds for the call) and `type` before calling the provider.
    let (pd, ty) = unsafe { (Pd::<T>::from_raw((*mw).pd), (*mw).type_) };
    let (rkey, data) = T::alloc_mw(pd, MwType::from_raw(ty)?)?;
    // SAFETY: `mw` is a zeroed allocation of `alloc_size::<T>()` bytes (this function's
    // `# Safety`); the core `kfree`s it on error and otherwise only after `dealloc_mw`.
    unsafe { Object::<T>::init(mw, data)? };
    // SAFETY: Not shared yet (this function's `# Safety`); the core reports it to user space.
    unsafe { (*mw).rkey = rkey };
    Ok(())
}

/// `ops.dealloc_mw`: drops the provider data before the core frees the object.
///
/// # Safety
///
/// `mw` was initialised by [`alloc`] and this is the last use of its data.
pub(crate) unsafe fn drop_data<T: Driver>(mw: *mut bindings::ib_mw) {
    // SAFETY: `mw` was initialised by `alloc` and this is the last use of its data (this
    // function's `# Safety`), as `Object::drop_data` requires.
    unsafe { Object::<T>::drop_data(mw) };
}
