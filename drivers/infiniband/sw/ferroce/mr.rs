// SPDX-License-Identifier: GPL-2.0

//! Memory regions: pinned user memory with keys that work requests and peers name it by.
//!
//! A key is `index << 8 | tag`: the index finds the region in the device's table, the tag
//! (bumped each time an index is reused) makes a stale key miss.

use crate::limits;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    prelude::*,
    rdma::{
        mr::{MrKeys, MrRequest},
        pd::Pd,
        umem::UserMem,
    },
    sync::Arc,
    xarray::{AllocKind, XArray},
};

use crate::device::Ferroce;

/// The key of kernel PDs' DMA region: index 0, which no registration gets.
const DMA_LKEY: u32 = 0;

/// `IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC`.
const REMOTE_ACCESS: u32 = 0x2 | 0x4 | 0x8;

/// A region as the data path holds it while it copies.
pub(crate) type MrRef = Arc<MrState>;

/// What the data path needs of a region; shared with work in flight, so a deregistered region's
/// pages stay pinned until that work is done.
pub(crate) struct MrState {
    /// The PD it belongs to ([`Pd::id`]).
    pub(crate) pd: usize,
    pub(crate) access: u32,
    pub(crate) iova: u64,
    pub(crate) mem: UserMem,
    /// Set once, when the region enters the table.
    pub(crate) lkey: AtomicU32,
}

/// A device's regions by key index.
#[pin_data]
pub(crate) struct MrTable {
    #[pin]
    regions: XArray<Arc<MrState>>,
    /// Where the search for a free index starts; also the source of tags.
    cursor: AtomicU32,
}

impl MrTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            regions <- XArray::new(AllocKind::Alloc1),
            cursor: AtomicU32::new(0),
        })
    }

    /// Picks a key whose index is free now.
    fn free_key(&self) -> Result<u32> {
        let max = limits::DEVICE_LIMITS.max_mr;
        let regions = self.regions.lock();
        let start = self.cursor.fetch_add(1, Ordering::Relaxed);
        (0..max)
            .map(|i| start.wrapping_add(i))
            .find(|n| regions.get((n % max + 1) as usize).is_none())
            .map(|n| (n % max + 1) << 8 | (n & 0xff))
            .ok_or(ENOMEM)
    }

    /// Stores `state` under a free key, which it records; returns the key.
    fn insert(&self, state: Arc<MrState>) -> Result<u32> {
        loop {
            let key = self.free_key()?;
            let index = (key >> 8) as usize;
            let mut regions = self.regions.lock();
            if regions.get(index).is_some() {
                // Taken between the two locks: try another key.
                continue;
            }
            state.lkey.store(key, Ordering::Relaxed);
            // Atomic: a sleeping store would drop the lock, and another insert could take the
            // index meanwhile.
            let res = regions.store(index, state, GFP_ATOMIC);
            drop(regions);
            // A failed store hands `state` back; unpinning it sleeps, so after the lock.
            return res.map(|_| key).map_err(|e| e.error);
        }
    }

    /// Finds the region of `key` (a stale or forged key finds nothing).
    pub(crate) fn get(&self, key: u32) -> Option<Arc<MrState>> {
        let regions = self.regions.lock();
        let state = regions.get((key >> 8) as usize)?;
        (state.lkey.load(Ordering::Relaxed) == key).then(|| state.into())
    }

    fn remove(&self, key: u32) {
        let index = (key >> 8) as usize;
        let removed = {
            let mut regions = self.regions.lock();
            if regions
                .get(index)
                .is_some_and(|s| s.lkey.load(Ordering::Relaxed) == key)
            {
                regions.remove(index)
            } else {
                None
            }
        };
        // Unpinning sleeps: after the lock.
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
        let mem = UserMem::pin(dev, req.start, req.length, req.access)?;
        let table = dev.data().mrs.clone();
        let state = Arc::new(
            MrState {
                pd: pd.id(),
                access: req.access,
                iova: req.iova,
                mem,
                lkey: AtomicU32::new(0),
            },
            GFP_KERNEL,
        )?;
        let key = table.insert(state)?;
        let rkey = if req.access & REMOTE_ACCESS != 0 {
            key
        } else {
            0
        };
        Ok((MrKeys { lkey: key, rkey }, Ok(Self { table, key })))
    }
}

impl FerroceMr {
    /// The region a kernel PD's `local_dma_lkey` names. Kernel SGEs under it are checked and
    /// accessed by the abstraction (`kernel::rdma::wr`); the key is never in the table, so no
    /// user WQE and no packet can use it. Remote access (an "unsafe global rkey") is refused.
    pub(crate) fn dma(
        pd: &Pd<Ferroce>,
        access: u32,
    ) -> Result<(MrKeys, impl PinInit<Self, Error>)> {
        if access & REMOTE_ACCESS != 0 {
            return Err(EOPNOTSUPP);
        }
        let table = pd.device().data().mrs.clone();
        // Index 0 is never allocated: `free_key` starts at 1.
        let keys = MrKeys {
            lkey: DMA_LKEY,
            rkey: 0,
        };
        Ok((
            keys,
            Ok::<_, Error>(Self {
                table,
                key: DMA_LKEY,
            }),
        ))
    }
}

impl Drop for FerroceMr {
    fn drop(&mut self) {
        self.table.remove(self.key);
    }
}
