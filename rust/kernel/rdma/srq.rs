// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`): receive WQEs that every QP attached to the queue
//! draws from, each as its next message arrives (IBA 10.2.9).
//!
//! The core allocates the object, counts the QPs attached (it refuses to destroy an SRQ in use),
//! and for user space hands the limit event to the process's async event queue. User space
//! posts through the provider's own means (a shared ring), so `post_srq_recv`, for kernel
//! consumers, is not offered yet.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{event, object::CoreObject, ops::Driver, pd::Pd, udata::Udata};
use crate::{bindings, prelude::*};

type Object<T> = CoreObject<bindings::ib_srq, <T as Driver>::Srq>;

/// The size the core allocates for one object (`ops.size_ib_srq`).
pub(crate) const fn alloc_size<T: Driver>() -> usize {
    Object::<T>::ALLOC_SIZE
}

/// An SRQ's size and limit (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttr {
    /// Most receive WQEs it holds.
    pub max_wr: u32,
    /// Most SGEs in one WQE.
    pub max_sge: u32,
    /// Armed limit (0: disarmed): once fewer WQEs than this are left, the limit event is raised,
    /// once, and the limit disarms.
    pub srq_limit: u32,
}

impl SrqAttr {
    fn from_raw(a: &bindings::ib_srq_attr) -> Self {
        Self {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        }
    }

    fn write_to(&self, a: &mut bindings::ib_srq_attr) {
        a.max_wr = self.max_wr;
        a.max_sge = self.max_sge;
        a.srq_limit = self.srq_limit;
    }
}

/// Which [`SrqAttr`] fields a modify changes (`enum ib_srq_attr_mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqAttrMask(u32);

impl SrqAttrMask {
    /// Resize to `max_wr`.
    pub const MAX_WR: Self = Self(bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR);
    /// Arm the limit at `srq_limit`.
    pub const LIMIT: Self = Self(bindings::ib_srq_attr_mask_IB_SRQ_LIMIT);

    /// Whether every bit of `bits` is set.
    pub fn has(self, bits: Self) -> bool {
        self.0 & bits.0 == bits.0
    }
}

/// A shared receive queue of provider `T`, as its callbacks see it.
#[repr(transparent)]
pub struct Srq<T: Driver>(Object<T>);

impl<T: Driver> Srq<T> {
    /// # Safety
    ///
    /// `srq` was initialised by [`create`] and is not destroyed during `'a`.
    pub(crate) unsafe fn from_raw<'a>(srq: *mut bindings::ib_srq) -> &'a Self {
        // SAFETY: Transparent over the object; per the safety requirement it is live.
        unsafe { &*core::ptr::from_ref(Object::<T>::from_c(srq)).cast::<Self>() }
    }

    /// The provider's data.
    pub fn data(&self) -> &T::Srq {
        self.0.get()
    }

    /// Tells the consumer that fewer WQEs than its armed limit are left
    /// (`IB_EVENT_SRQ_LIMIT_REACHED`). Any context; once per arming.
    pub fn raise_limit_event(&self) {
        let srq = self.0.c_ptr();
        let kind = bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED;
        // SAFETY: The SRQ is live (`&self`); `ib_create_srq_user()` sets `device`,
        // `event_handler` and `srq_context` before create and nothing changes them.
        unsafe {
            let element = bindings::ib_event__bindgen_ty_1 { srq };
            event::raise(
                (*srq).event_handler,
                (*srq).device,
                element,
                kind,
                (*srq).srq_context,
            )
        };
    }
}

/// `ops.create_srq`: runs [`Driver::create_srq`] into the object the core allocated, and
/// reports the real size back.
///
/// # Safety
///
/// `srq` is a zeroed allocation of [`alloc_size`] bytes with `device` and `pd` set, for a device
/// of `T`, not yet shared; `init` is valid; `udata` is NULL or the command's `driver_udata`.
pub(crate) unsafe fn create<T: Driver>(
    srq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> Result {
    // SAFETY: `init` is the creator's and ours for the call; `udata` is NULL or the command's
    // `driver_udata` (uverbs `create_srq` passes `&attrs->driver_udata`), as
    // `Udata::from_raw` needs (this function's `# Safety`).
    let (init, mut udata) = unsafe { (&mut *init, Udata::from_raw(udata)) };
    // XRC and tag-matching SRQs need objects this abstraction does not have.
    if init.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
        return Err(EOPNOTSUPP);
    }
    // SAFETY: `ib_create_srq_user()` sets `pd` (a PD of this device, so made by `pd::init`,
    // which it holds for the call) before calling the provider.
    let pd = unsafe { Pd::<T>::from_raw((*srq).pd) };
    let asked = SrqAttr::from_raw(&init.attr);
    let (attr, data) = T::create_srq(pd, &asked, udata.as_mut())?;
    // SAFETY: `srq` is a zeroed allocation of `alloc_size::<T>()` bytes (this function's
    // `# Safety`); the core `kfree`s it on error and otherwise only after `destroy_srq`.
    unsafe { Object::<T>::init(srq, data)? };
    attr.write_to(&mut init.attr);
    Ok(())
}

/// `ops.modify_srq`.
///
/// # Safety
///
/// `srq` was initialised by [`create`]; `attr` is valid; `udata` is NULL or the command's
/// `driver_udata`.
pub(crate) unsafe fn modify<T: Driver>(
    srq: *mut bindings::ib_srq,
    attr: *const bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    udata: *mut bindings::ib_udata,
) -> Result {
    // SAFETY: Per this function's `# Safety`; the core holds the SRQ for the call.
    let (this, attr, mut udata) = unsafe {
        (
            Srq::<T>::from_raw(srq),
            SrqAttr::from_raw(&*attr),
            Udata::from_raw(udata),
        )
    };
    T::modify_srq(this, &attr, SrqAttrMask(mask), udata.as_mut())
}

/// `ops.query_srq`.
///
/// # Safety
///
/// `srq` was initialised by [`create`]; `attr` is valid for writes.
pub(crate) unsafe fn query<T: Driver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
) -> Result {
    // SAFETY: Per this function's `# Safety`; the core holds the SRQ for the call and `attr` is
    // the caller's, ours for the call.
    let (this, attr) = unsafe { (Srq::<T>::from_raw(srq), &mut *attr) };
    T::query_srq(this)?.write_to(attr);
    Ok(())
}

/// `ops.destroy_srq`: drops the provider data before the core frees the object.
///
/// # Safety
///
/// `srq` was initialised by [`create`] and this is the last use of its data.
pub(crate) unsafe fn drop_data<T: Driver>(srq: *mut bindings::ib_srq) {
    // SAFETY: `srq` was initialised by `create` and this is the last use of its data (this
    // function's `# Safety`), as `Object::drop_data` requires.
    unsafe { Object::<T>::drop_data(srq) };
}
