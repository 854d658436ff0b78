// SPDX-License-Identifier: GPL-2.0

//! A spinlock that keeps softirqs off on its CPU while it is held (`spin_lock_bh`).
//!
//! For state that softirqs (received packets, say) and process context share: a holder in
//! process context cannot be interrupted by a softirq that wants the same lock, and, unlike with
//! [`super::spinlock::SpinLockIrq`], hard interrupts stay on, so the holder may call into the
//! networking stack (which runs with softirqs off, not with interrupts off).
//!
//! C header: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h)

use super::{Backend, Guard};
use crate::bindings;

/// Creates a [`SpinLockBh`] initialiser with the given name and a newly-created lock class.
///
/// It uses the name if one is given, otherwise it generates one based on the file name and line
/// number.
#[macro_export]
macro_rules! new_spinlock_bh {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::sync::SpinLockBh::new(
            $inner, $crate::optional_name!($($name)?), $crate::static_lock_class!())
    };
}
pub use new_spinlock_bh;

/// A spinlock held with softirqs disabled on the local CPU.
///
/// # Examples
///
/// ```
/// use kernel::sync::{new_spinlock_bh, SpinLockBh};
///
/// let counter = KBox::pin_init(new_spinlock_bh!(0u32), GFP_KERNEL)?;
/// *counter.lock() += 1;
/// assert_eq!(*counter.lock(), 1);
/// # Ok::<(), Error>(())
/// ```
pub type SpinLockBh<T> = super::Lock<T, SpinLockBhBackend>;

/// A kernel `spinlock_t` lock backend that disables softirqs while the lock is held.
pub struct SpinLockBhBackend;

/// A [`Guard`] acquired from locking a [`SpinLockBh`].
pub type SpinLockBhGuard<'a, T> = Guard<'a, T, SpinLockBhBackend>;

// SAFETY: The underlying kernel `spinlock_t` object ensures mutual exclusion. `relock` uses the
// default implementation that always calls the same locking method.
unsafe impl Backend for SpinLockBhBackend {
    type State = bindings::spinlock_t;
    type GuardState = ();

    #[inline]
    unsafe fn init(
        ptr: *mut Self::State,
        name: *const crate::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: The safety requirements ensure that `ptr` is valid for writes, and `name` and
        // `key` are valid for read indefinitely.
        unsafe { bindings::__spin_lock_init(ptr, name, key) }
    }

    #[inline]
    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The safety requirements of this function ensure that `ptr` points to valid
        // memory, and that it has been initialised before.
        unsafe { bindings::spin_lock_bh(ptr) }
    }

    #[inline]
    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The safety requirements of this function ensure that `ptr` is valid and that the
        // caller is the owner of the spinlock, taken with `spin_lock_bh`.
        unsafe { bindings::spin_unlock_bh(ptr) }
    }

    #[inline]
    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: The `ptr` pointer is guaranteed to be valid and initialized before use.
        let result = unsafe { bindings::spin_trylock_bh(ptr) };
        (result != 0).then_some(())
    }

    #[inline]
    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: The `ptr` pointer is guaranteed to be valid and initialized before use.
        unsafe { bindings::spin_assert_is_held(ptr) }
    }
}
