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

/// A protection domain of provider `T`, as its callbacks see it.
#[repr(transparent)]
pub struct Pd<T: Driver>(Object<T>);

impl<T: Driver> Pd<T> {
    /// # Safety
    ///
    /// `pd` was initialised by [`init`] and is not deallocated during `'a`.
    pub(crate) unsafe fn from_raw<'a>(pd: *mut bindings::ib_pd) -> &'a Self {
        // SAFETY: Transparent over the object; per the safety requirement it is live.
        unsafe { &*core::ptr::from_ref(Object::<T>::from_c(pd)).cast::<Self>() }
    }

    /// The provider's data.
    pub fn data(&self) -> &T::Pd {
        self.0.get()
    }

    /// The device the PD belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: The core set `device` at allocation; the device outlives its PDs.
        unsafe { Device::<T>::from_raw((*self.0.c_ptr()).device) }
    }

    /// A value identifying this PD among the live ones (its address).
    pub fn id(&self) -> usize {
        self.0.c_ptr() as usize
    }
}

/// Runs [`Driver::alloc_pd`] into an object the core allocated.
///
/// # Safety
///
/// `pd` is a zeroed allocation of [`alloc_size`] bytes whose `device` is a [`Device<T>`].
pub(crate) unsafe fn init<T: Driver>(pd: *mut bindings::ib_pd) -> Result {
    // SAFETY: The core sets `device` before calling the provider.
    let dev = unsafe { Device::<T>::from_raw((*pd).device) };
    // SAFETY: `pd` is a zeroed allocation of `alloc_size::<T>()` bytes (this function's
    // `# Safety`); the core `kfree`s it on error and otherwise only after `dealloc_pd`.
    unsafe { Object::<T>::init(pd, T::alloc_pd(dev)) }
}

/// Drops the provider data before the core frees the object.
///
/// # Safety
///
/// `pd` was initialised by [`init`] and this is the last use of its data.
pub(crate) unsafe fn drop_data<T: Driver>(pd: *mut bindings::ib_pd) {
    // SAFETY: `pd` was initialised by `init` and this is the last use of its data (this
    // function's `# Safety`), as `Object::drop_data` requires.
    unsafe { Object::<T>::drop_data(pd) };
}
