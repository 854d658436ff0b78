// SPDX-License-Identifier: GPL-2.0

//! Provider counters shown by `rdma statistic` and sysfs `hw_counters` (`struct rdma_hw_stats`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{bindings, prelude::*};

/// How long the core may serve cached counter values, in milliseconds.
pub const DEFAULT_LIFESPAN_MS: u64 = bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as u64;

/// The description of one counter (`struct rdma_stat_desc`); the core keeps a pointer to a
/// provider's table, so tables are `static`.
#[repr(transparent)]
pub struct StatDesc(bindings::rdma_stat_desc);

impl StatDesc {
    /// A counter that is always on.
    // `CStrExt::as_char_ptr` is not `const`; the pointer is `name`'s, cast to `c_char` as it does.
    #[allow(clippy::disallowed_methods)]
    pub const fn new(name: &'static CStr) -> Self {
        Self(bindings::rdma_stat_desc {
            name: name.as_ptr().cast(),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }

    /// Returns the counter's name.
    pub fn name(&self) -> &CStr {
        // SAFETY: `name` came from a `&'static CStr` in `new`.
        unsafe { CStr::from_char_ptr(self.0.name) }
    }
}

// SAFETY: The description is immutable and points only to `'static` data.
unsafe impl Sync for StatDesc {}

/// Allocates the counter set that `alloc_hw_port_stats` returns.
pub(crate) fn alloc(descs: &'static [StatDesc]) -> *mut bindings::rdma_hw_stats {
    let Ok(n) = c_int::try_from(descs.len()) else {
        return core::ptr::null_mut();
    };
    // SAFETY: `descs` is a `'static` array of `n` transparent `rdma_stat_desc`s.
    unsafe {
        bindings::rdma_alloc_hw_stats_struct(
            descs.as_ptr().cast(),
            n,
            DEFAULT_LIFESPAN_MS as c_ulong,
        )
    }
}

/// Returns the values array of `stats`.
///
/// # Safety
///
/// `stats` came from [`alloc`] and the core holds its lock for the duration of `'a`.
pub(crate) unsafe fn values<'a>(stats: *mut bindings::rdma_hw_stats) -> &'a mut [u64] {
    // SAFETY: `stats` came from `alloc`, so `rdma_alloc_hw_stats_struct` sized `value` for
    // `num_counters` `u64`s; the core's lock on `stats` keeps others off them for `'a`
    // (this function's `# Safety`).
    unsafe {
        let n = usize::try_from((*stats).num_counters).unwrap_or(0);
        core::slice::from_raw_parts_mut((&raw mut (*stats).value).cast::<u64>(), n)
    }
}
