// SPDX-License-Identifier: GPL-2.0

//! Asynchronous events (`struct ib_event`) of QPs, CQs and SRQs, handed to the handler the core
//! set on the object: uverbs queues them for the process, a kernel consumer's handler runs.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{bindings, ffi::c_void};

/// An object's `event_handler`.
pub(crate) type Handler = Option<unsafe extern "C" fn(*mut bindings::ib_event, *mut c_void)>;

/// Calls `handler`, if the object has one, with an event of `kind` on `element` of `device`.
///
/// # Safety
///
/// `handler` and `context` are a live object's `event_handler` and context, which the core set
/// before the object's create callback and does not change after; `device` and `element` name
/// that object. The caller may be in any context: the core's and uverbs' handlers allow it.
pub(crate) unsafe fn raise(
    handler: Handler,
    device: *mut bindings::ib_device,
    element: bindings::ib_event__bindgen_ty_1,
    kind: bindings::ib_event_type,
    context: *mut c_void,
) {
    if let Some(handler) = handler {
        let mut ev = bindings::ib_event {
            device,
            element,
            event: kind,
        };
        // SAFETY: The object's own handler, with its context and an event about it (this
        // function's `# Safety`).
        unsafe { handler(&mut ev, context) };
    }
}
