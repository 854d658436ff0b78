// SPDX-License-Identifier: GPL-2.0

//! Address handles (`struct ib_ah`): the path of UD sends.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{object::CoreObject, ops::Driver, pd::Pd, qp::AhAttr, udata::Udata};
use crate::{bindings, prelude::*};

type Object<T> = CoreObject<bindings::ib_ah, <T as Driver>::Ah>;

/// The size the core allocates for one object (`ops.size_ib_ah`).
pub(crate) const fn alloc_size<T: Driver>() -> usize {
    Object::<T>::ALLOC_SIZE
}

/// An address handle of provider `T`, as a work request names it.
#[repr(transparent)]
pub struct Ah<T: Driver>(Object<T>);

impl<T: Driver> Ah<T> {
    /// # Safety
    ///
    /// `ah` was initialised by [`create`] and is not destroyed during `'a`.
    pub(crate) unsafe fn from_raw<'a>(ah: *mut bindings::ib_ah) -> &'a Self {
        // SAFETY: Transparent over the object; per the safety requirement it is live.
        unsafe { &*core::ptr::from_ref(Object::<T>::from_c(ah)).cast::<Self>() }
    }

    /// The provider's data.
    pub fn data(&self) -> &T::Ah {
        self.0.get()
    }
}

/// `ops.create_ah` and `ops.create_user_ah`.
///
/// # Safety
///
/// `ah` is a zeroed allocation of [`alloc_size`] bytes with `device` and `pd` set, for a device
/// of `T`; `init` is valid, with its `sgid_attr` resolved; `udata` is NULL or the command's.
pub(crate) unsafe fn create<T: Driver>(
    ah: *mut bindings::ib_ah,
    init: *mut bindings::rdma_ah_init_attr,
    udata: *mut bindings::ib_udata,
) -> Result {
    // SAFETY: `ah->pd` is a PD of this device (this function's `# Safety`), so made by
    // `pd::init`, and held by the caller for the call; `init->ah_attr` is valid with
    // `sgid_attr` resolved; `udata` is NULL or the command's `driver_udata`.
    let (pd, attr, mut udata) = unsafe {
        (
            Pd::<T>::from_raw((*ah).pd),
            AhAttr::from_raw(&*(*init).ah_attr),
            Udata::from_raw(udata),
        )
    };
    let data = T::create_ah(pd, &attr, udata.as_mut())?;
    // SAFETY: `ah` is a zeroed allocation of `alloc_size::<T>()` bytes (this function's
    // `# Safety`); `_rdma_create_ah()` `kfree`s it on error, else only after `destroy_ah`.
    unsafe { Object::<T>::init(ah, data) }
}

/// `ops.query_ah`: the provider's answer, with the port of the AH's source GID.
///
/// # Safety
///
/// `ah` was initialised by [`create`] and is not destroyed during the call; `out` is valid for
/// writes.
pub(crate) unsafe fn query<T: Driver>(
    ah: *mut bindings::ib_ah,
    out: *mut bindings::rdma_ah_attr,
) -> Result {
    // SAFETY: `ah` was initialised by `create` and outlives the call (this function's
    // `# Safety`).
    let this = unsafe { Ah::<T>::from_raw(ah) };
    let attr = T::query_ah(this)?;
    // SAFETY: `ah` is live; the core set `sgid_attr` when it created it (a RoCE AH always has
    // one) and holds it until the AH is destroyed.
    let port = unsafe {
        match (*ah).sgid_attr.as_ref() {
            Some(sgid) => sgid.port_num,
            None => bindings::rdma_start_port((*ah).device),
        }
    };
    // Every field the provider does not answer reads as zero (the static rate, the rest of the
    // union), and no `sgid_attr`: the caller takes no reference to one.
    let mut answer: bindings::rdma_ah_attr = pin_init::zeroed();
    attr.write_to(&mut answer, port);
    // SAFETY: `out` is valid for writes (this function's `# Safety`).
    unsafe { out.write(answer) };
    Ok(())
}

/// Drops the provider data before the core frees the object.
///
/// # Safety
///
/// `ah` was initialised by [`create`] and this is the last use of its data.
pub(crate) unsafe fn drop_data<T: Driver>(ah: *mut bindings::ib_ah) {
    // SAFETY: `ah` was initialised by `create` and this is the last use of its data (this
    // function's `# Safety`), as `Object::drop_data` requires.
    unsafe { Object::<T>::drop_data(ah) };
}
