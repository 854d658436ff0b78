// SPDX-License-Identifier: GPL-2.0

//! Verbs objects that the RDMA core allocates: the C struct first, the provider's data after it.
//!
//! For `ib_pd`, `ib_ucontext`, `ib_cq`, `ib_qp` and the like the core `kzalloc`s
//! `ops.size_ib_*` bytes, calls the provider's create callback, and after the destroy callback
//! frees the memory itself (`INIT_RDMA_OBJ_SIZE` in C).

use crate::{prelude::*, types::Opaque};
use core::{alloc::Layout, mem::offset_of};

/// A core-allocated object: C struct `C` at offset 0, then the provider's `D`.
///
/// # Invariants
///
/// Once `init` has succeeded and until `drop_data`, `data` is initialised and pinned.
#[repr(C)]
#[pin_data]
pub(crate) struct CoreObject<C, D> {
    #[pin]
    c: Opaque<C>,
    #[pin]
    data: D,
}

impl<C, D> CoreObject<C, D> {
    /// The size to put in `ops.size_ib_*`: kmalloc returns memory aligned to at least the
    /// padded size's natural alignment for the small alignments used here.
    pub(crate) const ALLOC_SIZE: usize = {
        let layout = Layout::new::<Self>();
        assert!(layout.align() <= crate::bindings::ARCH_KMALLOC_MINALIGN);
        assert!(offset_of!(Self, c) == 0);
        layout.size()
    };

    fn data_ptr(c: *mut C) -> *mut D {
        // The C struct is at offset 0 of `Self`.
        let this = c.cast::<Self>();
        // SAFETY: `this` points into an allocation of `ALLOC_SIZE` bytes, so the field
        // projection stays in bounds.
        unsafe { &raw mut (*this).data }
    }

    /// Initialises the provider data in place.
    ///
    /// # Safety
    ///
    /// `c` points to a zeroed allocation of at least [`Self::ALLOC_SIZE`] bytes that stays put
    /// until the matching [`Self::drop_data`]. On error nothing needs dropping.
    pub(crate) unsafe fn init(c: *mut C, init: impl PinInit<D, Error>) -> Result {
        // SAFETY: `data_ptr(c)` lies in the zeroed, so uninitialised, `ALLOC_SIZE` bytes at `c`
        // (kmalloc'd, aligned as `ALLOC_SIZE` checks) that stay put until `drop_data`: pinned.
        // On error the slot is only freed, since `data` and `drop_data` need a successful `init`.
        unsafe { pin_init::raw_try_init(Self::data_ptr(c), init) }
    }

    /// Returns the provider data.
    ///
    /// # Safety
    ///
    /// `c` was initialised by [`Self::init`] and not yet passed to [`Self::drop_data`], and stays
    /// so for `'a`.
    pub(crate) unsafe fn data<'a>(c: *mut C) -> &'a D {
        // SAFETY: `c` was initialised by `init` and is not dropped during `'a` (this function's
        // `# Safety`), so `data` is a valid `D`; after `init` it is only ever borrowed shared.
        unsafe { &*Self::data_ptr(c) }
    }

    /// Returns the C struct.
    pub(crate) fn c_ptr(&self) -> *mut C {
        self.c.get()
    }

    /// Returns the provider data.
    pub(crate) fn get(&self) -> &D {
        &self.data
    }

    /// Returns the object around a C struct.
    ///
    /// # Safety
    ///
    /// As for [`Self::data`].
    pub(crate) unsafe fn from_c<'a>(c: *mut C) -> &'a Self {
        // SAFETY: The C struct is at offset 0; per the safety requirement the object is live.
        unsafe { &*c.cast::<Self>() }
    }

    /// Drops the provider data; the core frees the memory afterwards.
    ///
    /// # Safety
    ///
    /// `c` was initialised by [`Self::init`], and this is the last use of its data.
    pub(crate) unsafe fn drop_data(c: *mut C) {
        // SAFETY: `c` was initialised by `init`, so `data` is a valid `D`, and this is its last
        // use (this function's `# Safety`); the core frees the memory only afterwards, as
        // pinning requires.
        unsafe { core::ptr::drop_in_place(Self::data_ptr(c)) };
    }
}
