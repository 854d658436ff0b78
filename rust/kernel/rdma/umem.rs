// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory of a memory region (`struct ib_umem`), with CPU access for a software
//! provider that copies to and from it.
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)

use super::{device::Device, ops::Driver};
use crate::{
    bindings,
    error::{from_err_ptr, to_result},
    prelude::*,
};
use core::{ptr::NonNull, sync::atomic::AtomicU64};

/// User pages pinned for the life of a memory region.
///
/// # Invariants
///
/// `umem` is a live umem we own; `pages` are its pages in order, pinned while `umem` lives (for
/// writing if `writable`); the region starts `offset` bytes into the first page and is `len`
/// bytes long.
pub struct UserMem {
    umem: NonNull<bindings::ib_umem>,
    pages: KVVec<NonNull<bindings::page>>,
    offset: usize,
    len: usize,
    writable: bool,
}

impl UserMem {
    /// Pins `len` bytes of the caller's memory at `addr`; `access` is `IB_ACCESS_*`, and a
    /// writable region is pinned for writing.
    pub fn pin<T: Driver>(dev: &Device<T>, addr: u64, len: u64, access: u32) -> Result<Self> {
        let addr_ul = usize::try_from(addr).map_err(|_| EINVAL)?;
        let len_sz = usize::try_from(len).map_err(|_| EINVAL)?;
        let access = c_int::try_from(access).map_err(|_| EINVAL)?;
        // SAFETY: `dev` is a live device; no bundle is passed, so `addr` is a plain address in
        // the calling process, which the core validates and pins.
        let umem = from_err_ptr(unsafe {
            bindings::ib_umem_get_attr_or_va(
                dev.as_raw(),
                core::ptr::null(),
                0,
                addr,
                len_sz,
                access,
            )
        })?;
        // SAFETY: `from_err_ptr` returned a valid pointer.
        let umem = unsafe { NonNull::new_unchecked(umem) };
        // SAFETY: `umem` is live; the core set `writable` when it pinned the pages for writing
        // (any access a write may come through), and never changes it.
        let writable = unsafe { umem.as_ref().writable() } != 0;
        let mut this = Self {
            umem,
            pages: KVVec::new(),
            offset: addr_ul % bindings::PAGE_SIZE,
            len: len_sz,
            writable,
        };
        this.collect_pages()?;
        Ok(this)
    }

    fn collect_pages(&mut self) -> Result {
        let needed = (self.offset + self.len).div_ceil(bindings::PAGE_SIZE);
        // One allocation (vmalloc'd if large): a 1 GiB region has 256Ki pages.
        self.pages.reserve(needed, GFP_KERNEL)?;
        let umem = self.umem.as_ptr();
        // SAFETY: `umem` is live; its table lists the pinned pages.
        unsafe {
            let sgt = &raw mut (*umem).sgt_append.sgt;
            let mut iter: bindings::sg_page_iter = core::mem::zeroed();
            bindings::__sg_page_iter_start(&mut iter, (*sgt).sgl, (*sgt).orig_nents, 0);
            while bindings::__sg_page_iter_next(&mut iter) {
                let page = NonNull::new(bindings::sg_page_iter_page(&mut iter)).ok_or(EINVAL)?;
                self.pages.push(page, GFP_KERNEL)?;
            }
        }
        if self.pages.len() < needed {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// The region's length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether a reregistration may give the region the rights `access` (`IB_ACCESS_*`)
    /// without new memory: `EACCES` if they write and the pages were pinned read-only, as
    /// every provider answers (`ib_umem_check_rereg`).
    pub fn check_rereg_access(&self, access: u32) -> Result {
        let access = c_int::try_from(access).map_err(|_| EINVAL)?;
        // CAST: A flag the C enum defines as a small positive value.
        let flags = bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS as c_int;
        // SAFETY: `umem` is live (type invariant); the call only reads it.
        to_result(unsafe { bindings::ib_umem_check_rereg(self.umem.as_ptr(), flags, access) })
    }

    /// Calls `f` with each mapped piece of `[offset, offset + len)`, in order.
    fn for_each_piece(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(*mut u8, usize, usize),
    ) -> Result {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {}
            _ => return Err(EINVAL),
        }
        let mut done = 0;
        while done < len {
            let pos = self.offset + offset + done;
            let (index, in_page) = (pos / bindings::PAGE_SIZE, pos % bindings::PAGE_SIZE);
            let n = (bindings::PAGE_SIZE - in_page).min(len - done);
            let page = self.pages.get(index).ok_or(EINVAL)?;
            // SAFETY: `page` is pinned while `self` lives; the local mapping is undone before the
            // next iteration and `f` only touches `[in_page, in_page + n)` of it.
            unsafe {
                let va = bindings::kmap_local_page(page.as_ptr()).cast::<u8>();
                f(va.add(in_page), done, n);
                bindings::kunmap_local(va.cast());
            }
            done += n;
        }
        Ok(())
    }

    /// Runs `f` on the 8 bytes at `offset` as one atomic 64-bit word, for an RDMA atomic:
    /// `EINVAL` unless they lie in the region and are 8-byte aligned in memory (so within one
    /// page), `EPERM` unless the region was pinned for writing. Concurrent atomics on the word,
    /// from any CPU, are serialised by the hardware; plain copies into it (an RDMA WRITE through
    /// [`Self::write`], the process's stores) are not, as on any RDMA device.
    ///
    /// # Examples
    ///
    /// A responder's fetch and add (`mem` a region, `at` an offset a peer named):
    ///
    /// ```ignore
    /// use core::sync::atomic::Ordering;
    ///
    /// let orig = mem.with_atomic_u64(at, |w| w.fetch_add(1, Ordering::SeqCst))?;
    /// ```
    pub fn with_atomic_u64<R>(&self, offset: usize, f: impl FnOnce(&AtomicU64) -> R) -> Result<R> {
        if !self.writable {
            return Err(EPERM);
        }
        match offset.checked_add(8) {
            Some(end) if end <= self.len => {}
            _ => return Err(EINVAL),
        }
        let pos = self.offset + offset;
        if pos % 8 != 0 {
            return Err(EINVAL);
        }
        let (index, in_page) = (pos / bindings::PAGE_SIZE, pos % bindings::PAGE_SIZE);
        let page = self.pages.get(index).ok_or(EINVAL)?;
        // SAFETY: `page` is pinned for writing (checked above) while `self` lives; the local
        // mapping lives until `kunmap_local` below, and the reference does not outlive `f`. The
        // word is 8-byte aligned (checked above; pages are) and lies within the page. The
        // process may access it too: through an atomic, the kernel only ever sees whole values.
        unsafe {
            let va = bindings::kmap_local_page(page.as_ptr()).cast::<u8>();
            let res = f(&*va.add(in_page).cast::<AtomicU64>());
            bindings::kunmap_local(va.cast());
            Ok(res)
        }
    }

    /// Copies `data` into the region at `offset`; `EPERM` unless it was pinned for writing.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result {
        if !self.writable {
            return Err(EPERM);
        }
        self.for_each_piece(offset, data.len(), |va, at, n| {
            // SAFETY: `va` maps `n` bytes; `data[at..at + n]` is in bounds by construction.
            unsafe { core::ptr::copy_nonoverlapping(data.as_ptr().add(at), va, n) }
        })
    }

    /// Copies the region at `offset` into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result {
        let dst = out.as_mut_ptr();
        self.for_each_piece(offset, out.len(), |va, at, n| {
            // SAFETY: As for `write`. The process may change its memory meanwhile: just bytes.
            unsafe { core::ptr::copy_nonoverlapping(va, dst.add(at), n) }
        })
    }
}

impl Drop for UserMem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the umem; its pages are unpinned here.
        unsafe { bindings::ib_umem_release(self.umem.as_ptr()) };
    }
}

// SAFETY: Pinned pages may be accessed and released from any thread.
unsafe impl Send for UserMem {}

// SAFETY: Shared access only copies through local mappings.
unsafe impl Sync for UserMem {}
