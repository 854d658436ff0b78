// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's cryptographically secure generator.
//!
//! C header: [`include/linux/random.h`](srctree/include/linux/random.h)

/// A uniformly random `u8`. Any context; never blocks.
///
/// For values a remote party must not predict, such as the key bits of an RDMA memory region.
#[inline]
pub fn get_random_u8() -> u8 {
    // SAFETY: `get_random_u8` has no preconditions and may be called from any context.
    unsafe { crate::bindings::get_random_u8() }
}

/// A uniformly random `u32`. Any context; never blocks.
#[inline]
pub fn get_random_u32() -> u32 {
    // SAFETY: `get_random_u32` has no preconditions and may be called from any context.
    unsafe { crate::bindings::get_random_u32() }
}
