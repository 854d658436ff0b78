// SPDX-License-Identifier: GPL-2.0

//! Queue memory shared with user space: `vmalloc_user` buffers that a user context maps through
//! the uverbs file (`rdma_user_mmap_entry`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::udata::Udata;
use crate::{bindings, error::to_result, prelude::*};
use core::{ptr::NonNull, sync::atomic::AtomicU32};

/// Where user space finds a [`SharedMem`]: `mmap(size, offset)` on the uverbs file.
#[derive(Clone, Copy, Debug, Default)]
pub struct MmapInfo {
    /// The `mmap` offset.
    pub offset: u64,
    /// The length to map.
    pub size: u32,
}

/// The mmap entry and the memory it maps; freed in `mmap_free` once neither the provider nor an
/// `mmap` in progress uses it. User mappings hold their own page references.
#[repr(C)]
struct Entry {
    rdma: bindings::rdma_user_mmap_entry,
    addr: NonNull<u8>,
    len: usize,
}

/// Zeroed memory that the kernel and, if mapped, one user process share.
///
/// User space may write any byte at any time, so the kernel reads it only through the copying
/// and atomic accessors here and treats every value as untrusted.
///
/// # Invariants
///
/// `entry` is a live `Entry` whose `addr` is a `vmalloc_user` area of `len` bytes. If `mapped`,
/// the entry is in its user context's mmap table and is freed by `mmap_free`; otherwise it is
/// ours alone.
pub struct SharedMem {
    entry: NonNull<Entry>,
    mapped: bool,
}

impl SharedMem {
    /// Allocates `len` zeroed bytes; with `udata`, also lets its user context map them.
    pub fn new(len: usize, udata: Option<&Udata<'_>>) -> Result<(Self, MmapInfo)> {
        if len == 0 {
            return Err(EINVAL);
        }
        let size = u32::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: Any length is accepted; the result is zeroed or NULL.
        let addr = NonNull::new(unsafe { bindings::vmalloc_user_noprof(len as c_ulong) })
            .ok_or(ENOMEM)?
            .cast::<u8>();
        let entry = match KBox::new(
            Entry {
                // SAFETY: All-zero is the state `rdma_user_mmap_entry_insert` expects.
                rdma: unsafe { core::mem::zeroed() },
                addr,
                len,
            },
            GFP_KERNEL,
        ) {
            Ok(e) => NonNull::from(KBox::leak(e)),
            Err(e) => {
                // SAFETY: `addr` came from `vmalloc_user` above and is not shared.
                unsafe { bindings::vfree(addr.as_ptr().cast()) };
                return Err(e.into());
            }
        };
        // INVARIANT: Not inserted yet: ours alone.
        let mut this = Self {
            entry,
            mapped: false,
        };
        let Some(udata) = udata else {
            return Ok((this, MmapInfo::default()));
        };
        let ctx = udata.ucontext();
        if ctx.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: `ctx` is the live user context of the command; the entry is zeroed and stays
        // put until `mmap_free`.
        to_result(unsafe {
            bindings::rdma_user_mmap_entry_insert(ctx, &raw mut (*entry.as_ptr()).rdma, len)
        })?;
        // INVARIANT: Inserted: `mmap_free` frees it after `drop` removes it.
        this.mapped = true;
        // SAFETY: Inserted above; `start_pgoff` is set.
        let pgoff = unsafe { (*entry.as_ptr()).rdma.start_pgoff };
        let offset = u64::try_from(pgoff).map_err(|_| EINVAL)? << bindings::PAGE_SHIFT;
        Ok((this, MmapInfo { offset, size }))
    }

    fn entry(&self) -> &Entry {
        // SAFETY: By the type invariant the entry is live while `self` is.
        unsafe { self.entry.as_ref() }
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.entry().len
    }

    /// Whether the memory is empty (never: `new` refuses zero).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn in_bounds(&self, offset: usize, len: usize) -> Result {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// The 32-bit word at `offset` (4-byte aligned), for lock-free index exchange with user space.
    pub fn u32_at(&self, offset: usize) -> Result<&AtomicU32> {
        self.in_bounds(offset, 4)?;
        if offset % 4 != 0 {
            return Err(EINVAL);
        }
        // SAFETY: In bounds and aligned (vmalloc memory is page aligned); the memory lives as long
        // as `self`. Concurrent user access is through the same word, atomically or not: the
        // value may be anything, which callers handle.
        Ok(unsafe { AtomicU32::from_ptr(self.entry().addr.as_ptr().add(offset).cast()) })
    }

    /// Copies `data` into the memory at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result {
        self.in_bounds(offset, data.len())?;
        // SAFETY: In bounds; `data` cannot overlap memory only reachable through `self`. User
        // space may race with the copy, which only garbles bytes it owns.
        unsafe {
            core::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.entry().addr.as_ptr().add(offset),
                data.len(),
            )
        };
        Ok(())
    }

    /// Copies the memory at `offset` into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result {
        self.in_bounds(offset, out.len())?;
        // SAFETY: As for `write`; what user space wrote is just bytes to the caller.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.entry().addr.as_ptr().add(offset),
                out.as_mut_ptr(),
                out.len(),
            )
        };
        Ok(())
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        let entry = self.entry.as_ptr();
        if self.mapped {
            // SAFETY: By the type invariant the entry is inserted; removing it drops our
            // reference and `mmap_free` frees it when the last one goes.
            unsafe { bindings::rdma_user_mmap_entry_remove(&raw mut (*entry).rdma) };
        } else {
            // SAFETY: By the type invariant the entry is ours alone.
            unsafe { free_entry(entry) };
        }
    }
}

// SAFETY: The memory is plain bytes, usable from any thread.
unsafe impl Send for SharedMem {}

// SAFETY: Shared access only copies or uses atomics.
unsafe impl Sync for SharedMem {}

/// # Safety
///
/// `entry` came from `SharedMem::new` and nothing uses it any more.
unsafe fn free_entry(entry: *mut Entry) {
    // SAFETY: `entry` is the leaked `KBox<Entry>` of `SharedMem::new`, `addr` its `vmalloc_user`
    // area, and nothing uses either any more (this function's `# Safety`). User mappings
    // hold their own page references, which `vfree` only drops.
    unsafe {
        bindings::vfree((*entry).addr.as_ptr().cast());
        drop(KBox::from_raw(entry));
    }
}

/// `ops.mmap`: maps the entry at the VMA's offset.
///
/// # Safety
///
/// Called by the core with a live user context and VMA.
pub(crate) unsafe extern "C" fn mmap(
    ctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: `ctx` and `vma` are live (this function's `# Safety`: `ib_uverbs_mmap()` holds them);
    // the core checks `VM_SHARED` and the VMA's length against the entry's.
    let rdma = unsafe { bindings::rdma_user_mmap_entry_get(ctx, vma) };
    if rdma.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: Every entry of a provider using this module is an `Entry` with `rdma` first; the
    // reference taken above keeps it and its memory alive.
    let ret = unsafe {
        let entry = rdma.cast::<Entry>();
        bindings::remap_vmalloc_range(vma, (*entry).addr.as_ptr().cast(), 0)
    };
    // SAFETY: Drops the reference taken above.
    unsafe { bindings::rdma_user_mmap_entry_put(rdma) };
    ret
}

/// `ops.mmap_free`: the last reference to an entry is gone.
///
/// # Safety
///
/// Called by the core once per inserted entry.
pub(crate) unsafe extern "C" fn mmap_free(rdma: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: As in `mmap`, `rdma` is the first field of an `Entry` no one uses any more.
    unsafe { free_entry(rdma.cast()) };
}
