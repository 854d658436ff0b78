// SPDX-License-Identifier: GPL-2.0

//! Memory regions: pinned user memory, or for kernel PDs all kernel memory, with keys that work
//! requests and peers name it by.
//!
//! A key is `index << 8 | tag`: the index finds the region in the device's table, the random
//! tag makes a key hard to guess from the index (C rxe's key has as many random bits).

use crate::{
    frwr::{FastSlot, PageMem},
    limits,
    mw::MwTable,
};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::{
    prelude::*,
    random,
    rdma::{
        mr::{MrKeys, MrRequest, MrRereg},
        pd::Pd,
        pool::Pool,
        umem::UserMem,
        virt_dma::VirtDma,
    },
    sync::Arc,
};

use crate::{device::Ferroce, proto::wqe::access};

/// A region as the data path holds it while it copies: looked up, used and dropped within one
/// hold of a QP's lock (softirqs off, an RCU read-side section), never kept across packets.
/// Deregistration removes the region and waits for an RCU grace period, so its reference is the
/// last one and unpinning (which sleeps) happens there, in process context. A fast
/// registration counts its holders: invalidation, which has no grace period, waits for them,
/// so that once its completion is posted nothing touches the pages (see `frwr.rs`).
pub(crate) struct MrRef(Arc<MrState>);

impl MrRef {
    /// Holds `state`; a fast registration's holders are counted (its lock or the table's
    /// ensures it was valid when the count went up).
    pub(crate) fn hold(state: Arc<MrState>) -> Self {
        if state.counts_users() {
            state.users.fetch_add(1, Ordering::Acquire);
        }
        Self(state)
    }
}

impl core::ops::Deref for MrRef {
    type Target = MrState;

    fn deref(&self) -> &MrState {
        &self.0
    }
}

impl Drop for MrRef {
    fn drop(&mut self) {
        if self.0.counts_users() {
            self.0.users.fetch_sub(1, Ordering::Release);
        }
    }
}

/// What the data path needs of a region.
pub(crate) struct MrState {
    /// The PD it belongs to ([`Pd::id`]).
    pub(crate) pd: usize,
    pub(crate) access: u32,
    pub(crate) iova: u64,
    pub(crate) mem: RegionMem,
    /// Which registration this is, among all of the device's: a window bound to it names it
    /// by key and serial, and a later region with the same key is not it.
    pub(crate) serial: u64,
    /// Set once, when the region enters the table.
    pub(crate) lkey: AtomicU32,
    /// Cleared when the region is deregistered (or, registered fast, invalidated): a message
    /// under way that holds it stops writing (or reading) it then.
    live: AtomicBool,
    /// A fast region's head: its registrations (see `frwr.rs`).
    pub(crate) fast: Option<Arc<FastSlot>>,
    /// A fast registration's holders ([`MrRef`]).
    users: AtomicU32,
}

impl MrState {
    /// Whether the region is still registered. Checked by the data path, under a QP's lock
    /// (softirqs off, an RCU read-side section): deregistration clears it, then waits for an
    /// RCU grace period, so once `ibv_dereg_mr` returns nothing touches the memory.
    pub(crate) fn live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    /// Whether the region is live under `key` (a registration's key, which a fast region's
    /// changes).
    pub(crate) fn valid_for(&self, key: u32) -> bool {
        self.lkey.load(Ordering::Acquire) == key && self.live()
    }

    /// Ends the region (deregistered or invalidated): nothing uses it from now on.
    pub(crate) fn end(&self) {
        self.live.store(false, Ordering::Release);
    }

    /// Whether holders are counted: a fast registration's.
    fn counts_users(&self) -> bool {
        matches!(self.mem, RegionMem::Pages(_))
    }

    /// Waits until no [`MrRef`] holds the region (after [`Self::end`], under no lock a holder
    /// may take). Holders copy with softirqs off and take no lock that waits for this: the
    /// wait is short.
    pub(crate) fn wait_unused(&self) {
        while self.users.load(Ordering::Acquire) != 0 {
            core::hint::spin_loop();
        }
    }
}

/// The memory a region spans.
pub(crate) enum RegionMem {
    /// Pinned user pages; shared with the states that replace this one when the region is
    /// reregistered.
    User(Arc<UserMem>),
    /// All kernel memory, by virt-DMA address (the region's offsets are the addresses): the
    /// region of a kernel PD's `local_dma_lkey`, which only kernel QPs of that PD can name.
    Kernel(VirtDma),
    /// One fast registration's pages (`frwr.rs`).
    Pages(PageMem),
    /// None: a fast region's head, which lookups never return.
    None,
}

impl RegionMem {
    /// Bytes the region spans.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::User(m) => m.len(),
            Self::Kernel(_) => usize::MAX,
            Self::Pages(m) => m.len(),
            Self::None => 0,
        }
    }

    /// Copies the region at `offset` into `out`.
    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) -> Result {
        match self {
            Self::User(m) => m.read(offset, out),
            Self::Kernel(k) => k.read(offset as u64, out),
            Self::Pages(m) => m.read(offset, out),
            Self::None => Err(EINVAL),
        }
    }

    /// Copies `data` into the region at `offset`.
    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> Result {
        match self {
            Self::User(m) => m.write(offset, data),
            Self::Kernel(k) => k.write(offset as u64, data),
            Self::Pages(m) => m.write(offset, data),
            Self::None => Err(EINVAL),
        }
    }

    /// Runs `f` on the aligned 8 bytes at `offset` as one atomic word.
    pub(crate) fn with_atomic_u64<R>(
        &self,
        offset: usize,
        f: impl FnOnce(&AtomicU64) -> R,
    ) -> Result<R> {
        match self {
            Self::User(m) => m.with_atomic_u64(offset, f),
            Self::Kernel(k) => k.with_atomic_u64(offset as u64, f),
            Self::Pages(m) => m.dma().with_atomic_u64(m.addr_of(offset)?, f),
            Self::None => Err(EINVAL),
        }
    }
}

/// A device's regions and memory windows by key index, found from any context (packets name
/// them by rkey).
#[pin_data]
pub(crate) struct MrTable {
    #[pin]
    regions: Pool<MrState>,
    #[pin]
    pub(crate) windows: MwTable,
    /// The next region's serial number.
    serial: AtomicU64,
}

impl MrTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // Index 0 is never allocated, so no key is 0.
            regions <- Pool::new(1..=limits::DEVICE_LIMITS.max_mr),
            windows <- MwTable::new(),
            serial: AtomicU64::new(0),
        })
    }

    /// A new region's state, with the next serial; not in the table yet.
    fn state(
        &self,
        pd: &Pd<Ferroce>,
        rights: u32,
        iova: u64,
        mem: RegionMem,
    ) -> Result<Arc<MrState>> {
        self.new_state(pd.id(), rights, iova, mem, None, 0, GFP_KERNEL)
    }

    /// A fast registration's state, under `key` (from the data path: no sleeping).
    pub(crate) fn state_atomic(
        &self,
        pd: usize,
        rights: u32,
        iova: u64,
        mem: RegionMem,
        key: u32,
    ) -> Result<Arc<MrState>> {
        self.new_state(pd, rights, iova, mem, None, key, GFP_ATOMIC)
    }

    #[allow(clippy::too_many_arguments)]
    fn new_state(
        &self,
        pd: usize,
        rights: u32,
        iova: u64,
        mem: RegionMem,
        fast: Option<Arc<FastSlot>>,
        key: u32,
        gfp: kernel::alloc::Flags,
    ) -> Result<Arc<MrState>> {
        Ok(Arc::new(
            MrState {
                pd,
                access: rights,
                iova,
                mem,
                serial: self.serial.fetch_add(1, Ordering::Relaxed),
                lkey: AtomicU32::new(key),
                live: AtomicBool::new(true),
                fast,
                users: AtomicU32::new(0),
            },
            gfp,
        )?)
    }

    /// Stores `state` under a free index, and records its key; returns the key.
    fn insert(&self, state: Arc<MrState>) -> Result<u32> {
        // Random, so a host that saw one key cannot guess the next; the index is allocated
        // cyclically, so a freed key is not soon valid again.
        let tag = u32::from(random::get_random_u8());
        // Until the key is stored, lookups miss it (no key is 0: index 0 is never allocated).
        let key_of = |index: u32| index << 8 | tag;
        let probe = state.clone();
        let index = self.regions.alloc(state, GFP_KERNEL)?;
        probe.lkey.store(key_of(index), Ordering::Release);
        Ok(key_of(index))
    }

    /// Finds the region of `key` (a stale or forged key, or a region being deregistered, finds
    /// nothing). Any context; see [`MrRef`] for how long the result may be held.
    pub(crate) fn get(&self, key: u32) -> Option<MrRef> {
        let state = self.regions.get(key >> 8)?;
        if let Some(fast) = &state.fast {
            return fast.current(key);
        }
        state.valid_for(key).then(|| MrRef::hold(state))
    }

    /// The entry at `key`'s index, whatever its key: a fast region's head.
    pub(crate) fn head(&self, key: u32) -> Option<Arc<MrState>> {
        self.regions.get(key >> 8)
    }

    /// Puts `state` in the place of the region of `key`; once this returns, no packet or WR
    /// uses the old state. Sleeps.
    fn replace(&self, key: u32, state: Arc<MrState>) -> Result {
        state.lkey.store(key, Ordering::Release);
        // The old state's last reference, dropped after the grace period: its pages, if they
        // are not the new state's too, are unpinned here, in process context.
        drop(self.regions.replace(key >> 8, state, GFP_KERNEL)?);
        Ok(())
    }

    /// Takes the region of `key` out; once this returns, no packet or WR finds or uses it.
    /// Sleeps.
    fn remove(&self, key: u32) {
        // By index: a fast region's key may have changed since.
        if let Some(state) = self.head(key) {
            state.end();
            if let Some(fast) = &state.fast {
                fast.invalidate_all();
            }
        }
        // Only this region's own drop removes its key.
        let removed = self.regions.remove(key >> 8);
        // Unpinning sleeps: the last reference may be this one.
        drop(removed);
    }
}

/// The driver data of one region: its key in the device's table.
pub(crate) struct FerroceMr {
    table: Arc<MrTable>,
    key: u32,
}

impl FerroceMr {
    pub(crate) fn register(
        pd: &Pd<Ferroce>,
        req: &MrRequest,
    ) -> Result<(MrKeys, impl PinInit<Self, Error>)> {
        if req.length == 0 || req.iova.checked_add(req.length).is_none() {
            return Err(EINVAL);
        }
        let dev = pd.device();
        let mem = Arc::new(
            UserMem::pin(dev, req.start, req.length, req.access)?,
            GFP_KERNEL,
        )?;
        let table = dev.data().mrs.clone();
        let state = table.state(pd, req.access, req.iova, RegionMem::User(mem))?;
        let key = table.insert(state)?;
        Ok((keys(key, req.access), Ok(Self { table, key })))
    }

    /// Moves the region to `pd` and gives it new access rights, as `change` asks, in place:
    /// the keys stay (the rkey is 0 without remote access), the memory too (rights that write
    /// memory pinned read-only are refused with `EACCES`). A new state replaces the old one
    /// in the table, so a packet sees one or the other; windows bound to the region stop
    /// giving access, as they would to a new region (as they do when it is deregistered).
    /// Sleeps.
    pub(crate) fn rereg(&self, pd: &Pd<Ferroce>, change: &MrRereg) -> Result<MrKeys> {
        let old = self.table.get(self.key).ok_or(EINVAL)?;
        let rights = change.access.unwrap_or(old.access);
        // Nothing changes (the core drops `IB_MR_REREG_PD` for the region's own PD): the
        // region, and the windows bound to it, stay as they are.
        if old.pd == pd.id() && old.access == rights {
            return Ok(keys(self.key, rights));
        }
        // Only user regions are reregistered.
        let RegionMem::User(mem) = &old.mem else {
            return Err(EINVAL);
        };
        mem.check_rereg_access(rights)?;
        let state = self
            .table
            .state(pd, rights, old.iova, RegionMem::User(mem.clone()))?;
        drop(old);
        self.table.replace(self.key, state)?;
        Ok(keys(self.key, rights))
    }
}

impl FerroceMr {
    /// The region a kernel PD's `local_dma_lkey` names: every kernel address, for the kernel
    /// QPs of `pd` alone (no user QP is of a kernel PD, and its key gives no remote access: an
    /// "unsafe global rkey" is refused). Its offsets are addresses: its iova is 0.
    pub(crate) fn dma(
        pd: &Pd<Ferroce>,
        access: u32,
        mem: VirtDma,
    ) -> Result<(MrKeys, impl PinInit<Self, Error>)> {
        if access & (access::REMOTE | access::FLUSH | access::MW_BIND) != 0 {
            return Err(EOPNOTSUPP);
        }
        let table = pd.device().data().mrs.clone();
        let state = table.state(pd, access, 0, RegionMem::Kernel(mem))?;
        let key = table.insert(state)?;
        Ok((keys(key, access), Ok(Self { table, key })))
    }
}

impl FerroceMr {
    /// A fast-registration region of the kernel PD `pd` for up to `max_pages` pages: no access
    /// until a REG_MR registers it. Its keys are one (as C rxe's), and change with each
    /// registration (the consumer chooses the low 8 bits).
    pub(crate) fn alloc_fast(
        pd: &Pd<Ferroce>,
        max_pages: u32,
        mem: VirtDma,
    ) -> Result<(MrKeys, impl PinInit<Self, Error>)> {
        if max_pages == 0 || max_pages > limits::DEVICE_LIMITS.max_fast_reg_page_list_len {
            return Err(EINVAL);
        }
        let table = pd.device().data().mrs.clone();
        let slot = FastSlot::new(max_pages, mem)?;
        let head = table.new_state(pd.id(), 0, 0, RegionMem::None, Some(slot), 0, GFP_KERNEL)?;
        let key = table.insert(head)?;
        Ok((
            MrKeys {
                lkey: key,
                rkey: key,
            },
            Ok(Self { table, key }),
        ))
    }

    /// The fast slot of this region (`EINVAL` for other regions).
    fn fast(&self) -> Result<Arc<FastSlot>> {
        self.table
            .head(self.key)
            .and_then(|h| h.fast.clone())
            .ok_or(EINVAL)
    }

    /// `ib_map_mr_sg()` starts mapping pages of `page_size` bytes into this fast region.
    pub(crate) fn map_begin(&self, page_size: u32) -> Result {
        self.fast()?.map_begin(page_size)
    }

    /// The next page of the mapping.
    pub(crate) fn map_page(&self, addr: u64) -> Result {
        self.fast()?.map_page(addr)
    }
}

impl Drop for FerroceMr {
    fn drop(&mut self) {
        self.table.remove(self.key);
    }
}

/// The keys of the region of `key` with `rights`: a region a peer may only FLUSH has a remote
/// key too.
fn keys(key: u32, rights: u32) -> MrKeys {
    let remote = rights & (access::REMOTE | access::FLUSH) != 0;
    MrKeys {
        lkey: key,
        rkey: if remote { key } else { 0 },
    }
}
