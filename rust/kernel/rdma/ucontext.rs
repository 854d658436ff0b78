// SPDX-License-Identifier: GPL-2.0

//! User contexts (`struct ib_ucontext`): one per open of the uverbs device.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{device::Device, object::CoreObject, ops::Driver};
use crate::{bindings, prelude::*};

type Object<T> = CoreObject<bindings::ib_ucontext, <T as Driver>::Ucontext>;

/// The size the core allocates for one object (`ops.size_ib_ucontext`).
pub(crate) const fn alloc_size<T: Driver>() -> usize {
    Object::<T>::ALLOC_SIZE
}

/// Runs [`Driver::alloc_ucontext`] into an object the core allocated.
///
/// # Safety
///
/// `ctx` is a zeroed allocation of [`alloc_size`] bytes whose `device` is a [`Device<T>`].
pub(crate) unsafe fn init<T: Driver>(ctx: *mut bindings::ib_ucontext) -> Result {
    // SAFETY: The core sets `device` before calling the provider.
    let dev = unsafe { Device::<T>::from_raw((*ctx).device) };
    // SAFETY: `ctx` is a zeroed allocation of `alloc_size::<T>()` bytes (this function's
    // `# Safety`); the core `kfree`s it on error, else only after `dealloc_ucontext`.
    unsafe { Object::<T>::init(ctx, T::alloc_ucontext(dev)) }
}

/// Returns the provider data of a live user context.
///
/// # Safety
///
/// `ctx` was initialised by [`init`], is not yet passed to [`drop_data`], and stays so for `'a`.
pub(crate) unsafe fn data<'a, T: Driver>(ctx: *mut bindings::ib_ucontext) -> &'a T::Ucontext {
    // SAFETY: `ctx` was initialised by `init`, is not yet passed to `drop_data`, and stays so
    // for `'a` (this function's `# Safety`): what `Object::data` requires.
    unsafe { Object::<T>::data(ctx) }
}

/// Drops the provider data before the core frees the object.
///
/// # Safety
///
/// `ctx` was initialised by [`init`] and this is the last use of its data.
pub(crate) unsafe fn drop_data<T: Driver>(ctx: *mut bindings::ib_ucontext) {
    // SAFETY: `ctx` was initialised by `init` and this is the last use of its data (this
    // function's `# Safety`), as `Object::drop_data` requires.
    unsafe { Object::<T>::drop_data(ctx) };
}
