// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{device::Device, object::CoreObject, ops::Driver};
use crate::{bindings, prelude::*};

type Object<T> = CoreObject<bindings::ib_pd, <T as Driver>::Pd>;

/// The size the core allocates for one object (`ops.size_ib_pd`).
pub(crate) const fn alloc_size<T: Driver>() -> usize {
    Object::<T>::ALLOC_SIZE
}

/// Runs [`Driver::alloc_pd`] into an object the core allocated.
///
/// # Safety
///
/// `pd` is a zeroed allocation of [`alloc_size`] bytes whose `device` is a [`Device<T>`].
pub(crate) unsafe fn init<T: Driver>(pd: *mut bindings::ib_pd) -> Result {
    // SAFETY: The core sets `device` before calling the provider.
    let dev = unsafe { Device::<T>::from_raw((*pd).device) };
    // SAFETY: Per the safety requirement.
    unsafe { Object::<T>::init(pd, T::alloc_pd(dev)) }
}

/// Drops the provider data before the core frees the object.
///
/// # Safety
///
/// `pd` was initialised by [`init`] and this is the last use of its data.
pub(crate) unsafe fn drop_data<T: Driver>(pd: *mut bindings::ib_pd) {
    // SAFETY: Per the safety requirement.
    unsafe { Object::<T>::drop_data(pd) };
}
