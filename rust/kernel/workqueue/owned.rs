// SPDX-License-Identifier: GPL-2.0

//! A work queue that its owner allocates and destroys (`alloc_workqueue`).
//!
//! A module that queues work on the system queues cannot wait for just its own items before its
//! code goes away; destroying its own queue drains it.

use super::Queue;
use crate::{bindings, prelude::*};
use core::{ops::Deref, ptr::NonNull};

/// Work items run on unbound workers, on any CPU (`WQ_UNBOUND`).
pub const WQ_UNBOUND: u32 = bindings::wq_flags_WQ_UNBOUND;
/// Work items run on the CPU that queued them (`WQ_PERCPU`).
pub const WQ_PERCPU: u32 = bindings::wq_flags_WQ_PERCPU;
/// Work items run at high priority (`WQ_HIGHPRI`).
pub const WQ_HIGHPRI: u32 = bindings::wq_flags_WQ_HIGHPRI;
/// The queue keeps a rescuer thread, so that its items make progress under memory pressure
/// (`WQ_MEM_RECLAIM`); a queue that memory reclaim may wait on (a block device's I/O path)
/// must have one, and only such a queue may be flushed from another that has one.
pub const WQ_MEM_RECLAIM: u32 = bindings::wq_flags_WQ_MEM_RECLAIM;

/// An owned work queue; dropping it waits for every queued item, then frees it.
///
/// # Invariants
///
/// The pointer is a work queue from `alloc_workqueue` that only this object destroys.
pub struct OwnedQueue(NonNull<bindings::workqueue_struct>);

// SAFETY: Work queues may be used and destroyed from any thread.
unsafe impl Send for OwnedQueue {}
// SAFETY: Queueing is thread-safe.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    /// Allocates a queue named `name` (shown by the workers) with `WQ_*` `flags`.
    pub fn new(name: &CStr, flags: u32) -> Result<Self> {
        Self::alloc(name, flags, 0)
    }

    /// Allocates a queue that runs one item at a time, in the order queued
    /// (`alloc_ordered_workqueue`).
    pub fn new_ordered(name: &CStr) -> Result<Self> {
        Self::alloc(
            name,
            bindings::wq_flags_WQ_UNBOUND | bindings::wq_flags___WQ_ORDERED,
            1,
        )
    }

    fn alloc(name: &CStr, flags: u32, max_active: c_int) -> Result<Self> {
        // SAFETY: The format takes one string argument, which outlives the call (the queue
        // copies its name).
        let wq = unsafe {
            bindings::alloc_workqueue_noprof(
                c"%s".as_char_ptr(),
                flags,
                max_active,
                name.as_char_ptr(),
            )
        };
        // INVARIANT: A non-NULL result is a new queue that we own.
        NonNull::new(wq).map(Self).ok_or(ENOMEM)
    }
}

impl OwnedQueue {
    /// Waits for every item queued before the call (not for ones queued after).
    pub fn flush(&self) {
        // SAFETY: By the type invariant the queue is alive.
        unsafe { bindings::__flush_workqueue(self.0.as_ptr()) };
    }

    /// Waits until no item is queued or running, including items that running ones queue.
    ///
    /// Only running items may queue new ones meanwhile (the kernel warns about others).
    pub fn drain(&self) {
        // SAFETY: By the type invariant the queue is alive.
        unsafe { bindings::drain_workqueue(self.0.as_ptr()) };
    }
}

impl Deref for OwnedQueue {
    type Target = Queue;

    fn deref(&self) -> &Queue {
        // SAFETY: By the type invariant the queue lives until `drop`, which needs `&mut self`.
        unsafe { Queue::from_raw(self.0.as_ptr()) }
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the queue; `destroy_workqueue` drains it first.
        unsafe { bindings::destroy_workqueue(self.0.as_ptr()) };
    }
}
