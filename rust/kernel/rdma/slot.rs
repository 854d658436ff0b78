// SPDX-License-Identifier: GPL-2.0

//! Context slots: how a C callback that carries no context (`rdma_link_ops.newlink`,
//! `ib_client.add`) reaches the context of the registration it belongs to.

use crate::prelude::*;
use core::{
    ptr,
    sync::atomic::{AtomicPtr, Ordering},
};

/// The slot, in a `static` of the driver, for the context of one registration at a time.
///
/// # Invariants
///
/// Non-NULL only between a registration's [`Self::claim`] and its [`Self::release`], and then
/// it points to the context pinned in that registration.
pub struct ContextSlot<C>(AtomicPtr<C>);

impl<C> ContextSlot<C> {
    /// An empty slot.
    pub const fn new() -> Self {
        Self(AtomicPtr::new(ptr::null_mut()))
    }

    /// Points the slot at `ctx`; `EEXIST` if another registration holds it.
    ///
    /// # Safety
    ///
    /// `ctx` is pinned and stays alive until [`Self::release`], which the caller calls before
    /// it goes.
    pub(crate) unsafe fn claim(&self, ctx: *mut C) -> Result {
        // INVARIANT: Per the function's contract `ctx` is pinned and alive until `release`.
        self.0
            .compare_exchange(ptr::null_mut(), ctx, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| EEXIST)
    }

    /// Empties the slot.
    pub(crate) fn release(&self) {
        self.0.store(ptr::null_mut(), Ordering::Release);
    }

    /// The context, if a registration holds the slot.
    ///
    /// # Safety
    ///
    /// The caller runs where the registration cannot release the slot meanwhile: in one of
    /// its callbacks, which its unregistration waits for.
    pub(crate) unsafe fn get(&self) -> Option<&C> {
        // SAFETY: By the type invariant a non-NULL pointer is a live, pinned context; per the
        // function's contract it stays so while the reference is used.
        unsafe { self.0.load(Ordering::Acquire).as_ref() }
    }
}

impl<C> Default for ContextSlot<C> {
    fn default() -> Self {
        Self::new()
    }
}
