// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{device::Device, event, object::CoreObject, ops::Driver, udata::Udata};
use crate::{bindings, prelude::*};

type Object<T> = CoreObject<bindings::ib_cq, <T as Driver>::Cq>;

/// The size the core allocates for one object (`ops.size_ib_cq`).
pub(crate) const fn alloc_size<T: Driver>() -> usize {
    Object::<T>::ALLOC_SIZE
}

/// What a consumer asks for when creating a CQ (`struct ib_cq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct CqAttr {
    /// Minimum number of entries.
    pub cqe: u32,
    /// The completion vector (CPU hint); the core checked it against the device's count.
    pub comp_vector: u32,
    /// `IB_UVERBS_CQ_FLAGS_*`.
    pub flags: u32,
}

/// What [`Driver::req_notify_cq`] is asked (`enum ib_cq_notify_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotifyFlags(u32);

impl NotifyFlags {
    /// Whether only solicited completions should raise the event.
    pub fn solicited_only(self) -> bool {
        self.0 & bindings::ib_cq_notify_flags::IB_CQ_SOLICITED_MASK.0
            == bindings::ib_cq_notify_flags::IB_CQ_SOLICITED.0
    }

    /// Whether the caller wants to know if completions are already waiting.
    pub fn report_missed(self) -> bool {
        self.0 & bindings::ib_cq_notify_flags::IB_CQ_REPORT_MISSED_EVENTS.0 != 0
    }
}

/// A completion queue of provider `T`, as its callbacks see it.
#[repr(transparent)]
pub struct Cq<T: Driver>(Object<T>);

impl<T: Driver> Cq<T> {
    /// # Safety
    ///
    /// `cq` was initialised by [`init`] and is not destroyed during `'a`.
    pub(crate) unsafe fn from_raw<'a>(cq: *mut bindings::ib_cq) -> &'a Self {
        // SAFETY: Transparent over the object; per the safety requirement it is live.
        unsafe { &*core::ptr::from_ref(Object::<T>::from_c(cq)).cast::<Self>() }
    }

    /// The provider's data.
    pub fn data(&self) -> &T::Cq {
        self.0.get()
    }

    /// Records the CQ's real size, which the core reports to the consumer.
    ///
    /// Resizes of one CQ may run concurrently (the core looks the CQ up shared): call it under
    /// the lock that orders them.
    pub fn set_cqe(&self, cqe: u32) {
        let cq = self.0.c_ptr();
        // SAFETY: `cqe` is an `int` the provider owns; writers are serialised by the caller and
        // the core reads it once the command is done.
        unsafe {
            core::ptr::write_volatile(
                &raw mut (*cq).cqe,
                c_int::try_from(cqe).unwrap_or(c_int::MAX),
            )
        };
    }

    /// Tells the consumer that completions are waiting (its `comp_handler`).
    ///
    /// Call it at most once per arming by [`Driver::req_notify_cq`]; any context. (Kernel CQs,
    /// whose handler the core sets only after create, are not supported yet.)
    pub fn raise_completion_event(&self) {
        let cq = self.0.c_ptr();
        // SAFETY: The core set `comp_handler` and `cq_context` before create and keeps them while
        // the CQ lives; the handler may be called from any context.
        unsafe {
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
    }
}

impl<T: Driver> Cq<T> {
    /// Tells the consumer that the CQ overflowed and a completion was lost
    /// (`IB_EVENT_CQ_ERR`). Any context.
    pub fn raise_error_event(&self) {
        let cq = self.0.c_ptr();
        let kind = bindings::ib_event_type_IB_EVENT_CQ_ERR;
        // SAFETY: The CQ is live (`&self`); the core sets `device`, `event_handler` and
        // `cq_context` before create (uverbs and `__ib_alloc_cq()`) and never changes them.
        unsafe {
            let element = bindings::ib_event__bindgen_ty_1 { cq };
            event::raise(
                (*cq).event_handler,
                (*cq).device,
                element,
                kind,
                (*cq).cq_context,
            )
        };
    }
}

/// Runs [`Driver::create_cq`] into an object the core allocated.
///
/// # Safety
///
/// `cq` is a zeroed allocation of [`alloc_size`] bytes with `device` set to a [`Device<T>`];
/// `attr` is valid; `attrs` is NULL or the command's bundle.
pub(crate) unsafe fn init<T: Driver>(
    cq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> Result {
    // SAFETY: `cq->device` is our `Device<T>`, alive while the core is in this callback; `attr` is
    // the core's valid init attribute; `attrs` is NULL or the command's bundle, live for the
    // call (this function's `# Safety`), as `Udata::from_attrs` needs.
    let (dev, attr, mut udata) = unsafe {
        (
            Device::<T>::from_raw((*cq).device),
            CqAttr {
                cqe: (*attr).cqe,
                comp_vector: (*attr).comp_vector,
                flags: (*attr).flags,
            },
            Udata::from_attrs(attrs),
        )
    };
    let (cqe, data) = T::create_cq(dev, &attr, udata.as_mut())?;
    // SAFETY: `cq` is a zeroed allocation of `alloc_size::<T>()` bytes (this function's
    // `# Safety`); the core `kfree`s it on error and otherwise only after `destroy_cq`.
    // Until we return it is ours alone, so writing `cqe` does not race.
    unsafe {
        Object::<T>::init(cq, data)?;
        (*cq).cqe = c_int::try_from(cqe).unwrap_or(c_int::MAX);
    }
    Ok(())
}

/// `ops.resize_user_cq`.
///
/// # Safety
///
/// `cq` was initialised by [`init`]; `udata` is the command's.
pub(crate) unsafe fn resize<T: Driver>(
    cq: *mut bindings::ib_cq,
    cqe: u32,
    udata: *mut bindings::ib_udata,
) -> Result {
    // SAFETY: `cq` came from `init` and the core holds it (`uobj_get_obj_read()`) for the call;
    // `udata` is the command's `driver_udata` (this function's `# Safety`).
    let (this, udata) = unsafe { (Cq::<T>::from_raw(cq), Udata::from_raw(udata)) };
    let mut udata = udata.ok_or(EINVAL)?;
    T::resize_cq(this, cqe, &mut udata)
}

/// `ops.req_notify_cq`: returns whether completions were missed (1) or not (0).
///
/// # Safety
///
/// `cq` was initialised by [`init`].
pub(crate) unsafe fn req_notify<T: Driver>(
    cq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> Result<bool> {
    // SAFETY: `cq` came from `init` (this function's `# Safety`), and callers of
    // `ib_req_notify_cq()` keep the CQ alive for the call, which `this` does not outlive.
    let this = unsafe { Cq::<T>::from_raw(cq) };
    T::req_notify_cq(this, NotifyFlags(flags.0))
}

/// Drops the provider data before the core frees the object.
///
/// # Safety
///
/// `cq` was initialised by [`init`] and this is the last use of its data.
pub(crate) unsafe fn drop_data<T: Driver>(cq: *mut bindings::ib_cq) {
    // SAFETY: `cq` was initialised by `init` and this is the last use of its data (this
    // function's `# Safety`), as `Object::drop_data` requires.
    unsafe { Object::<T>::drop_data(cq) };
}
