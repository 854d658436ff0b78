// SPDX-License-Identifier: GPL-2.0

//! A ring shared with rdma-core's rxe provider (CQ, SQ or RQ): the memory, its shape, and the
//! `struct mminfo` that tells user space where to map it.

use crate::proto::ring;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    prelude::*,
    rdma::{
        mmap::{MmapInfo, SharedMem},
        udata::Udata,
    },
};

/// Size of `struct mminfo`.
pub(crate) const MMINFO_SIZE: usize = 16;

/// One ring in shared memory; the shape is the kernel's copy, never read back from the header.
pub(crate) struct Ring {
    pub(crate) mem: SharedMem,
    pub(crate) geo: ring::Geometry,
}

impl Ring {
    /// Allocates a ring of at least `entries` elements of `elem` bytes (at most `max` entries)
    /// and fills its header; with `udata`, its user context may map it.
    pub(crate) fn new(
        entries: u32,
        elem: usize,
        max: u32,
        udata: Option<&Udata<'_>>,
    ) -> Result<(Self, MmapInfo)> {
        let geo = ring::Geometry::new(entries, elem, max).ok_or(EINVAL)?;
        let (mem, info) = SharedMem::new(geo.bytes().ok_or(EINVAL)?, udata)?;
        mem.u32_at(ring::LOG2_ELEM_SIZE_OFFSET)?
            .store(geo.log2_elem(), Ordering::Relaxed);
        mem.u32_at(ring::INDEX_MASK_OFFSET)?
            .store(geo.mask(), Ordering::Relaxed);
        Ok((Self { mem, geo }, info))
    }

    /// The shared producer index (user-written for SQ and RQ: any value).
    pub(crate) fn producer(&self) -> Result<&AtomicU32> {
        self.mem.u32_at(ring::PRODUCER_OFFSET)
    }

    /// The shared consumer index (user-written for CQs: any value).
    pub(crate) fn consumer(&self) -> Result<&AtomicU32> {
        self.mem.u32_at(ring::CONSUMER_OFFSET)
    }
}

/// `struct mminfo { u64 offset; u32 size; u32 pad; }` in host order.
pub(crate) fn mminfo(info: &MmapInfo) -> [u8; MMINFO_SIZE] {
    let mut out = [0u8; MMINFO_SIZE];
    out[..8].copy_from_slice(&info.offset.to_ne_bytes());
    out[8..12].copy_from_slice(&info.size.to_ne_bytes());
    out
}
