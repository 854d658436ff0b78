// SPDX-License-Identifier: GPL-2.0

//! Driver-specific command data from and to user space (`struct ib_udata`).
//!
//! C header: [`include/rdma/uverbs_ioctl.h`](srctree/include/rdma/uverbs_ioctl.h)

use crate::{
    bindings,
    prelude::*,
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice}, //
};
use core::marker::PhantomData;

/// The provider part of one uverbs command: its input and output buffers in user memory, and
/// the user context the command runs in.
///
/// # Invariants
///
/// `raw` is the `driver_udata` of a live `uverbs_attr_bundle` whose `context` is `ctx`, valid
/// for `'a`.
pub struct Udata<'a> {
    raw: *mut bindings::ib_udata,
    ctx: *mut bindings::ib_ucontext,
    _p: PhantomData<&'a mut bindings::ib_udata>,
}

impl<'a> Udata<'a> {
    /// Returns the udata of a command, or `None` for a kernel caller (no bundle).
    ///
    /// # Safety
    ///
    /// `attrs` is NULL or a bundle the core passes to a create callback, valid for `'a`.
    pub(crate) unsafe fn from_attrs(attrs: *mut bindings::uverbs_attr_bundle) -> Option<Self> {
        if attrs.is_null() {
            return None;
        }
        // SAFETY: `attrs` is not NULL, so it is the core's bundle for this create callback, valid
        // for `'a` (this function's `# Safety`); `driver_udata` and `context` are in its `hdr`.
        let (raw, ctx) = unsafe {
            let hdr = &raw mut (*attrs).__bindgen_anon_1.hdr;
            (&raw mut (*hdr).driver_udata, (*hdr).context)
        };
        // INVARIANT: Per the safety requirement.
        Some(Self {
            raw,
            ctx,
            _p: PhantomData,
        })
    }

    /// Returns the udata of a command that passes a bare `ib_udata` (e.g. resize).
    ///
    /// # Safety
    ///
    /// `udata` is NULL or the `driver_udata` of a live bundle, valid for `'a`.
    pub(crate) unsafe fn from_raw(udata: *mut bindings::ib_udata) -> Option<Self> {
        if udata.is_null() {
            return None;
        }
        // SAFETY: `udata` is not NULL, so it is the `driver_udata` of a bundle live for `'a` (this
        // function's `# Safety`): stepping back to the bundle stays in it; `context` is readable.
        let ctx = unsafe {
            let attrs = crate::container_of!(
                udata,
                bindings::uverbs_attr_bundle,
                __bindgen_anon_1.hdr.driver_udata
            );
            (*attrs).__bindgen_anon_1.hdr.context
        };
        // INVARIANT: As above.
        Some(Self {
            raw: udata,
            ctx,
            _p: PhantomData,
        })
    }

    /// Length of the command's driver input.
    pub fn inlen(&self) -> usize {
        // SAFETY: By the type invariant `raw` is valid.
        unsafe { (*self.raw).inlen }
    }

    /// Room for the driver response.
    pub fn outlen(&self) -> usize {
        // SAFETY: By the type invariant `raw` is valid.
        unsafe { (*self.raw).outlen }
    }

    /// Writes the driver response; `EINVAL` if user space left less room than it needs.
    pub fn write<T: AsBytes>(&mut self, value: &T) -> Result {
        let len = core::mem::size_of::<T>();
        if self.outlen() < len {
            return Err(EINVAL);
        }
        // SAFETY: By the type invariant `raw` is valid.
        let out = unsafe { (*self.raw).outbuf };
        UserSlice::new(UserPtr::from_ptr(out), len)
            .writer()
            .write(value)
    }

    /// Reads the command's driver input; `EINVAL` if user space passed less than it needs.
    pub fn read<T: FromBytes>(&self) -> Result<T> {
        let len = core::mem::size_of::<T>();
        if self.inlen() < len {
            return Err(EINVAL);
        }
        // SAFETY: By the type invariant `raw` is valid.
        let inp = unsafe { (*self.raw).inbuf };
        UserSlice::new(UserPtr::from_ptr(inp.cast_mut()), len)
            .reader()
            .read()
    }

    /// The user context (NULL if the command has none).
    pub(crate) fn ucontext(&self) -> *mut bindings::ib_ucontext {
        self.ctx
    }
}
