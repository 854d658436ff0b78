// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's cryptographically secure generator.
//!
//! C header: [`include/linux/random.h`](srctree/include/linux/random.h)

/// A uniformly random `u8`, for values a remote party must not predict (such as the key bits of
/// an RDMA memory region).
///
/// Never blocks; callable from process, softirq and hard-IRQ context (it takes a local lock of
/// its own, so not from NMI, nor on PREEMPT_RT with a raw spinlock held).
#[inline]
pub fn get_random_u8() -> u8 {
    // SAFETY: `get_random_u8` has no memory-safety preconditions.
    unsafe { crate::bindings::get_random_u8() }
}
