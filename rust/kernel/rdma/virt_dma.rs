// SPDX-License-Identifier: GPL-2.0

//! Kernel memory as a software RDMA device reaches it. A device without a DMA device
//! (`ib_uses_virt_dma()`) is given kernel virtual addresses where hardware is given bus
//! addresses (`ib_dma_map_*()` return them), and the region a kernel PD's `local_dma_lkey` names
//! spans all of them: the software counterpart of a DMA engine.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{bindings, prelude::*};
use core::sync::atomic::AtomicU64;

/// Access to kernel memory by virt-DMA address, for the data path of a kernel PD's DMA region.
///
/// Only the core's `get_dma_mr` call makes one (see [`super::ops::Driver::get_dma_mr`]): the
/// core asks for it for kernel PDs only, whose QPs only kernel consumers post to. A provider
/// uses it with addresses those consumers posted, as hardware would DMA to them; what such an
/// address names is the consumer's, mapped until its WR completes. Whatever address it is given,
/// it touches only pages `virt_addr_valid()` accepts (the linear map, and on x86-64 the kernel
/// image), one page at a time: anything else is `EFAULT`. Like a DMA engine, it cannot tell a
/// consumer's buffer from other kernel memory: which addresses it is given is the provider's
/// responsibility. A copy reaches what the original does.
#[derive(Clone)]
pub struct VirtDma(());

impl VirtDma {
    /// The token the `get_dma_mr` glue hands to the provider.
    pub(super) fn new() -> Self {
        Self(())
    }

    /// Calls `f(mapping, done, n)` for each page-sized piece of `[addr, addr + len)`.
    fn for_each_piece(
        &self,
        addr: u64,
        len: usize,
        mut f: impl FnMut(*mut u8, usize, usize),
    ) -> Result {
        let len64 = u64::try_from(len).map_err(|_| EFAULT)?;
        addr.checked_add(len64).ok_or(EFAULT)?;
        let page_size = bindings::PAGE_SIZE as u64;
        let mut done = 0usize;
        while done < len {
            // CAST: `done < len`, which fits in u64 (checked above).
            let at = addr + done as u64;
            let in_page = (at % page_size) as usize;
            let n = (bindings::PAGE_SIZE - in_page).min(len - done);
            // SAFETY: Only computes a `struct page` pointer, or NULL for an address outside the
            // linear map.
            let page = unsafe { bindings::rdma_virt_dma_page(at) };
            if page.is_null() {
                return Err(EFAULT);
            }
            // SAFETY: `page` is a page of the linear map (checked above), so a valid `struct
            // page`; the local mapping is undone before the next piece and `f` touches only
            // `[in_page, in_page + n)` of it, within the page.
            unsafe {
                let va = bindings::kmap_local_page(page).cast::<u8>();
                f(va.add(in_page), done, n);
                bindings::kunmap_local(va.cast());
            }
            done += n;
        }
        Ok(())
    }

    /// Copies kernel memory at `addr` into `out`.
    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result {
        let dst = out.as_mut_ptr();
        self.for_each_piece(addr, out.len(), |va, at, n| {
            // SAFETY: `va` maps `n` bytes (see `for_each_piece`); `out[at..at + n]` is in bounds
            // by construction. The memory is a consumer's buffer (type doc): plain bytes.
            unsafe { core::ptr::copy_nonoverlapping(va, dst.add(at), n) }
        })
    }

    /// Copies `data` into kernel memory at `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result {
        self.for_each_piece(addr, data.len(), |va, at, n| {
            // SAFETY: As for `read`: the consumer posted this memory for the device to write.
            unsafe { core::ptr::copy_nonoverlapping(data.as_ptr().add(at), va, n) }
        })
    }

    /// Runs `f` on the 8 bytes at `addr` as one atomic word, for an RDMA atomic: `EINVAL`
    /// unless they are 8-byte aligned (so within one page).
    pub fn with_atomic_u64<R>(&self, addr: u64, f: impl FnOnce(&AtomicU64) -> R) -> Result<R> {
        if addr % 8 != 0 {
            return Err(EINVAL);
        }
        let mut f = Some(f);
        let mut res = None;
        self.for_each_piece(addr, 8, |va, _, _| {
            if let Some(f) = f.take() {
                // SAFETY: `va` maps the 8 bytes, 8-byte aligned (checked above), for the call;
                // the reference does not outlive `f`.
                res = Some(f(unsafe { &*va.cast::<AtomicU64>() }));
            }
        })?;
        res.ok_or(EFAULT)
    }
}
