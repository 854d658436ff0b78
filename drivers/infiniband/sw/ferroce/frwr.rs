// SPDX-License-Identifier: GPL-2.0

//! Fast registration (FRWR): regions of kernel PDs whose pages a consumer maps
//! (`ib_map_mr_sg()`), registers from its send queue (`IB_WR_REG_MR`) under a key whose low 8
//! bits it chooses, and invalidates by LOCAL_INV or a peer's SEND with invalidate.
//!
//! A fast region's entry in the MR table is a head that lives as long as the region; each
//! registration is an [`MrState`] of its own, immutable, which lookups of its key find while it
//! is valid. The data path holds a registration while it copies, as it holds any region.

use crate::{
    mr::{MrRef, MrState, MrTable, RegionMem},
    proto::wqe::{access, RegMr},
};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    new_spinlock_bh, new_spinlock_irq,
    prelude::*,
    rdma::virt_dma::VirtDma,
    sync::{Arc, SpinLockBh, SpinLockIrq},
};

/// The rights a registration may grant (no memory windows on fast regions).
const REGISTRABLE: u32 = access::LOCAL_WRITE | access::REMOTE;

/// Largest page size a mapping may use: 2^30 (the consumer chooses; `ib_sg_to_pages()` needs
/// the entries aligned to it).
const MAX_PAGE_SHIFT: u32 = 30;

/// Page sizes a mapping may use, as log2: 4 KiB to 1 GiB.
const PAGE_SHIFTS: core::ops::RangeInclusive<u32> = 12..=MAX_PAGE_SHIFT;

/// The part of a region's head that fast registration changes.
#[pin_data]
pub(crate) struct FastSlot {
    max_pages: usize,
    /// The page size of the mapping being staged (0 before the first).
    page_size: AtomicU32,
    /// The key of the last registration: invalidating it again is a no-op, as on hardware
    /// (a peer may have invalidated it first).
    last_key: AtomicU32,
    /// The pages the consumer mapped last, for the next registration. Mapping runs in the
    /// consumer's context, which may have interrupts off.
    #[pin]
    staged: SpinLockIrq<KVec<u64>>,
    /// The valid registration, if any.
    #[pin]
    current: SpinLockBh<Option<Arc<MrState>>>,
    mem: VirtDma,
}

impl FastSlot {
    /// A slot for up to `max_pages` pages, all allocated now: mapping allocates nothing.
    pub(crate) fn new(max_pages: u32, mem: VirtDma) -> Result<Arc<Self>> {
        let max_pages = max_pages as usize;
        let staged = KVec::with_capacity(max_pages, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                max_pages,
                page_size: AtomicU32::new(0),
                last_key: AtomicU32::new(0),
                staged <- new_spinlock_irq!(staged),
                current <- new_spinlock_bh!(None),
                mem,
            }),
            GFP_KERNEL,
        )
    }

    /// The registration of `key`, if it is valid, held: invalidation waits for the holder.
    pub(crate) fn current(&self, key: u32) -> Option<MrRef> {
        let current = self.current.lock();
        let state = current.as_ref().filter(|s| s.valid_for(key))?;
        // Counted under the lock that invalidation ends it under.
        Some(MrRef::hold(state.clone()))
    }

    /// Starts a new mapping with pages of `page_size` bytes: `EINVAL` unless a power of two
    /// from 4 KiB to 1 GiB (as C rxe refuses it at mapping time).
    pub(crate) fn map_begin(&self, page_size: u32) -> Result {
        if !page_size.is_power_of_two() || !PAGE_SHIFTS.contains(&page_size.trailing_zeros()) {
            return Err(EINVAL);
        }
        let mut staged = self.staged.lock();
        staged.clear();
        self.page_size.store(page_size, Ordering::Relaxed);
        Ok(())
    }

    /// Adds a page to the mapping: `EINVAL` unless aligned to its page size, `ENOMEM` once it
    /// holds `max_pages`.
    pub(crate) fn map_page(&self, addr: u64) -> Result {
        let mut staged = self.staged.lock();
        let page_size = u64::from(self.page_size.load(Ordering::Relaxed));
        if page_size == 0 || addr & (page_size - 1) != 0 {
            return Err(EINVAL);
        }
        if staged.len() >= self.max_pages {
            return Err(ENOMEM);
        }
        // Within the capacity reserved at creation: no allocation.
        staged.push(addr, GFP_ATOMIC)?;
        Ok(())
    }

    /// Ends the valid registration, if any: its key finds nothing from now on, and a message
    /// that holds it stops using it.
    pub(crate) fn invalidate_all(&self) {
        let ended = self.current.lock().take();
        if let Some(s) = ended {
            s.end();
            s.wait_unused();
        }
    }
}

/// Why a fast registration or invalidation fails (the WR completes with `LOC_QP_OP_ERR`, or the
/// peer's SEND with invalidate is NAKed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FastError {
    /// No fast region of the QP's PD has the key's index, or the key is stale.
    NotFound,
    /// Registered already (a region is invalidated before it is registered again), or its
    /// rights or mapping do not fit.
    Refused,
}

/// Pages of a registration: `pages[i]` holds bytes `[i << shift, (i + 1) << shift)` of the
/// mapping, which starts `first` bytes into the first page; the region is `len` bytes.
pub(crate) struct PageMem {
    mem: VirtDma,
    pages: KVec<u64>,
    shift: u32,
    first: usize,
    len: usize,
}

impl PageMem {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Calls `f(address, done, n)` for each piece of `[offset, offset + len)` within one page.
    fn for_each(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(u64, usize, usize) -> Result,
    ) -> Result {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {}
            _ => return Err(EINVAL),
        }
        let page_size = 1usize << self.shift;
        let mut done = 0;
        while done < len {
            let pos = self.first + offset + done;
            let (index, in_page) = (pos >> self.shift, pos & (page_size - 1));
            let n = (page_size - in_page).min(len - done);
            let page = *self.pages.get(index).ok_or(EINVAL)?;
            f(page + in_page as u64, done, n)?;
            done += n;
        }
        Ok(())
    }

    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) -> Result {
        let len = out.len();
        self.for_each(offset, len, |addr, at, n| {
            self.mem.read(addr, &mut out[at..at + n])
        })
    }

    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> Result {
        self.for_each(offset, data.len(), |addr, at, n| {
            self.mem.write(addr, &data[at..at + n])
        })
    }

    /// The virt-DMA address of byte `offset`, for an atomic's aligned word.
    pub(crate) fn addr_of(&self, offset: usize) -> Result<u64> {
        let mut addr = None;
        self.for_each(offset, 1, |a, _, _| {
            addr = Some(a);
            Ok(())
        })?;
        addr.ok_or(EINVAL)
    }

    pub(crate) fn dma(&self) -> &VirtDma {
        &self.mem
    }
}

impl MrTable {
    /// Registers the fast region a REG_MR of a QP of `pd` names, with the pages mapped into it.
    pub(crate) fn fast_register(&self, pd: usize, r: &RegMr) -> Result<(), FastError> {
        let head = self.head(r.key).ok_or(FastError::NotFound)?;
        let slot = head.fast.as_ref().ok_or(FastError::NotFound)?;
        if head.pd != pd {
            return Err(FastError::NotFound);
        }
        // A range past the end of the address space would wrap a peer's addresses.
        if r.access & !REGISTRABLE != 0
            || !PAGE_SHIFTS.contains(&r.page_shift)
            || r.length == 0
            || r.iova.checked_add(r.length).is_none()
        {
            return Err(FastError::Refused);
        }
        let page_size = 1u64 << r.page_shift;
        let first = r.iova & (page_size - 1);
        let mut current = slot.current.lock();
        if current.as_ref().is_some_and(|s| s.live()) {
            return Err(FastError::Refused);
        }
        let pages = {
            let staged = slot.staged.lock();
            let mut pages =
                KVec::with_capacity(staged.len(), GFP_ATOMIC).map_err(|_| FastError::Refused)?;
            pages
                .extend_from_slice(&staged, GFP_ATOMIC)
                .map_err(|_| FastError::Refused)?;
            pages
        };
        // The mapping must hold the whole range.
        let held = (pages.len() as u64).checked_shl(r.page_shift).unwrap_or(0);
        let len = usize::try_from(r.length).map_err(|_| FastError::Refused)?;
        if first.checked_add(r.length).is_none_or(|end| end > held) {
            return Err(FastError::Refused);
        }
        let mem = PageMem {
            mem: slot.mem.clone(),
            pages,
            shift: r.page_shift,
            // CAST: Below the page size, at most 2^30.
            first: first as usize,
            len,
        };
        let state = self
            .state_atomic(pd, r.access, r.iova, RegionMem::Pages(mem), r.key)
            .map_err(|_| FastError::Refused)?;
        *current = Some(state);
        slot.last_key.store(r.key, Ordering::Relaxed);
        Ok(())
    }

    /// Invalidates the fast region of `key` for a QP of `pd`: locally (LOCAL_INV), or for a
    /// peer (`remote`), which a region without remote rights does not allow.
    pub(crate) fn fast_invalidate(
        &self,
        pd: usize,
        key: u32,
        remote: bool,
    ) -> Result<(), FastError> {
        let head = self.head(key).ok_or(FastError::NotFound)?;
        let slot = head.fast.as_ref().ok_or(FastError::NotFound)?;
        if head.pd != pd {
            return Err(FastError::NotFound);
        }
        let ended = {
            let mut current = slot.current.lock();
            let valid = current.as_ref().filter(|s| s.valid_for(key));
            match valid {
                Some(state) if remote && state.access & access::REMOTE == 0 => {
                    return Err(FastError::Refused)
                }
                Some(state) => state.end(),
                // Already invalid (a peer's SEND with invalidate came first): done, as on
                // hardware, for the key it had.
                None if !remote && slot.last_key.load(Ordering::Relaxed) == key => return Ok(()),
                None => return Err(FastError::NotFound),
            }
            current.take()
        };
        // Holders that found it valid finish their copies first: once the invalidation
        // completes, the consumer may reuse the pages.
        if let Some(state) = ended {
            state.wait_unused();
        }
        Ok(())
    }
}
