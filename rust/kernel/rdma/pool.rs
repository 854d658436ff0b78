// SPDX-License-Identifier: GPL-2.0

//! Numbered objects of one kind (queue pairs, memory regions), found by number from any context.
//!
//! A provider names its objects by numbers that arrive in packets and work requests (QPNs, key
//! indices) and must find them on every packet, often in softirq context. A [`Pool`] hands out
//! numbers cyclically from a range (as C rxe's `rxe_pool` does, so a number is not reused at
//! once) and looks them up without a lock, under RCU: removal waits for a grace period before it
//! gives the object back, so a lookup never takes a reference to an object being freed.
//!
//! C header: [`include/linux/xarray.h`](srctree/include/linux/xarray.h)

use crate::{
    bindings,
    error::to_result,
    prelude::*,
    sync::{rcu, Arc, ArcBorrow},
    types::Opaque,
};
use core::{marker::PhantomData, ops::RangeInclusive};

/// Objects of type `T` by number.
///
/// # Invariants
///
/// `xa` is an initialised allocating XArray. Every entry is a pointer from `Arc::into_raw` of an
/// `Arc<T>` that the entry owns; an entry's reference is dropped only after it is erased (or
/// replaced) and an RCU grace period has passed.
///
/// # Examples
///
/// ```
/// use kernel::{prelude::*, rdma::pool::Pool, sync::Arc};
///
/// let pool = KBox::pin_init(Pool::<u64>::new(16..=31), GFP_KERNEL)?;
/// let n = pool.alloc(Arc::new(7, GFP_KERNEL)?, GFP_KERNEL)?;
/// assert!((16..=31).contains(&n));
/// assert_eq!(pool.get(n).map(|v| *v), Some(7));
/// assert_eq!(*pool.replace(n, Arc::new(8, GFP_KERNEL)?, GFP_KERNEL)?, 7);
/// assert_eq!(pool.get(n).map(|v| *v), Some(8));
/// assert_eq!(pool.remove(n).map(|v| *v), Some(8));
/// assert!(pool.get(n).is_none());
/// assert_eq!(pool.replace(n, Arc::new(9, GFP_KERNEL)?, GFP_KERNEL).err(), Some(ENOENT));
/// # Ok::<(), Error>(())
/// ```
#[pin_data(PinnedDrop)]
pub struct Pool<T: Send + Sync> {
    #[pin]
    xa: Opaque<bindings::xarray>,
    /// Where the cyclic allocation goes on from (`xa_alloc_cyclic`'s `next`), under `xa`'s lock.
    next: Opaque<u32>,
    range: RangeInclusive<u32>,
    _t: PhantomData<Arc<T>>,
}

// SAFETY: The XArray is internally synchronised; entries are `Arc<T>` with `T: Send + Sync`.
unsafe impl<T: Send + Sync> Send for Pool<T> {}
// SAFETY: As above: every method is safe to call concurrently.
unsafe impl<T: Send + Sync> Sync for Pool<T> {}

impl<T: Send + Sync> Pool<T> {
    /// An empty pool that allocates numbers in `range`.
    pub fn new(range: RangeInclusive<u32>) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `rdma_pool_init` initialises an allocating XArray in place; the lock class
            // key is static, so it outlives the XArray.
            xa <- Opaque::ffi_init(|xa| unsafe {
                bindings::rdma_pool_init(xa, crate::sync::static_lock_class!().as_ptr())
            }),
            next: Opaque::new(*range.start()),
            range,
            _t: PhantomData,
        })
    }

    /// Stores `value` under the next free number of the range, after the one given last;
    /// returns the number. `EBUSY` when the range is full.
    pub fn alloc(&self, value: Arc<T>, gfp: crate::alloc::Flags) -> Result<u32> {
        let ptr = Arc::into_raw(value);
        let mut id = 0u32;
        let limit = bindings::xa_limit {
            min: *self.range.start(),
            max: *self.range.end(),
        };
        // SAFETY: `xa` is initialised (type invariant); `next` is only used by this call, under
        // the XArray's lock, which `xa_alloc_cyclic` takes.
        let ret = unsafe {
            bindings::xa_alloc_cyclic(
                self.xa.get(),
                &mut id,
                ptr.cast_mut().cast(),
                limit,
                self.next.get(),
                gfp.as_raw(),
            )
        };
        if ret < 0 {
            // SAFETY: Not stored: the reference is still ours.
            drop(unsafe { Arc::from_raw(ptr) });
            return Err(if ret == -(bindings::EBUSY as i32) {
                EBUSY
            } else {
                Error::from_errno(ret)
            });
        }
        // INVARIANT: The entry owns the reference `into_raw` gave up.
        Ok(id)
    }

    /// Stores `value` under `index`, which must be free (`EBUSY` otherwise).
    pub fn insert(&self, index: u32, value: Arc<T>, gfp: crate::alloc::Flags) -> Result {
        let ptr = Arc::into_raw(value);
        // SAFETY: `xa` is initialised; on success the entry owns the reference.
        let ret = unsafe {
            bindings::xa_insert(
                self.xa.get(),
                index as usize,
                ptr.cast_mut().cast(),
                gfp.as_raw(),
            )
        };
        if ret < 0 {
            // SAFETY: Not stored: the reference is still ours.
            drop(unsafe { Arc::from_raw(ptr) });
        }
        to_result(ret)
    }

    /// The object numbered `index`, if there is one. Takes no lock: any context may call it.
    pub fn get(&self, index: u32) -> Option<Arc<T>> {
        let _rcu = rcu::read_lock();
        // SAFETY: `xa` is initialised; `xa_load` may be called under RCU from any context.
        let ptr = unsafe { bindings::xa_load(self.xa.get(), index as usize) };
        if ptr.is_null() {
            return None;
        }
        // SAFETY: By the type invariant the entry is an `Arc<T>` whose reference is dropped no
        // earlier than a grace period after it is erased; we are inside a read-side critical
        // section that began before any such grace period ends, so the object is alive.
        let borrow = unsafe { ArcBorrow::from_raw(ptr.cast::<T>()) };
        Some(borrow.into())
    }

    /// Takes the object numbered `index` out of the pool. Once it returns, no lookup finds the
    /// object or still holds it without its own reference. Sleeps (for an RCU grace period).
    pub fn remove(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: `xa` is initialised.
        let ptr = unsafe { bindings::xa_erase(self.xa.get(), index as usize) };
        if ptr.is_null() {
            return None;
        }
        rcu::synchronize_rcu();
        // SAFETY: The entry owned this reference (type invariant); erased, it is ours now, and
        // the grace period above ended every lookup that could have seen the entry.
        Some(unsafe { Arc::from_raw(ptr.cast::<T>()) })
    }

    /// Puts `value` in the place of the object numbered `index` (`ENOENT` if there is none,
    /// `EBUSY` if it was removed or replaced meanwhile); returns the old object once no lookup
    /// still holds it without its own reference. Lookups find one or the other, never neither.
    /// The caller keeps other calls off `index` meanwhile: one that removed the object and
    /// stored another at the same address would see that one replaced (a reference count stays
    /// right either way). Sleeps (for an RCU grace period).
    pub fn replace(&self, index: u32, value: Arc<T>, gfp: crate::alloc::Flags) -> Result<Arc<T>> {
        let old = {
            let _rcu = rcu::read_lock();
            // SAFETY: `xa` is initialised; `xa_load` may be called under RCU from any context.
            unsafe { bindings::xa_load(self.xa.get(), index as usize) }
        };
        if old.is_null() {
            return Err(ENOENT);
        }
        let new = Arc::into_raw(value);
        // SAFETY: `xa` is initialised; the entry is exchanged only if it still is `old`, which
        // is then ours (type invariant), and `new`'s reference passes to the entry.
        let prev = unsafe {
            bindings::xa_cmpxchg(
                self.xa.get(),
                index as usize,
                old,
                new.cast_mut().cast(),
                gfp.as_raw(),
            )
        };
        if prev != old {
            // SAFETY: Not stored: the reference is still ours.
            drop(unsafe { Arc::from_raw(new) });
            // SAFETY: `xa_err` only inspects the value.
            let err = unsafe { bindings::xa_err(prev) };
            return Err(if err < 0 {
                Error::from_errno(err)
            } else {
                EBUSY
            });
        }
        rcu::synchronize_rcu();
        // SAFETY: The entry owned this reference (type invariant); replaced, it is ours now, and
        // the grace period above ended every lookup that could have seen it.
        Ok(unsafe { Arc::from_raw(old.cast::<T>()) })
    }

    /// The numbers this pool hands out.
    pub fn range(&self) -> &RangeInclusive<u32> {
        &self.range
    }
}

#[pinned_drop]
impl<T: Send + Sync> PinnedDrop for Pool<T> {
    fn drop(self: Pin<&mut Self>) {
        // Every entry left is released after one grace period for all of them.
        let mut index = 0usize;
        let mut left = KVec::<*const T>::new();
        loop {
            // SAFETY: `xa` is initialised; `index` is a valid cursor.
            let ptr = unsafe {
                bindings::xa_find(self.xa.get(), &mut index, usize::MAX, bindings::XA_PRESENT)
            };
            if ptr.is_null() {
                break;
            }
            // SAFETY: As above.
            unsafe { bindings::xa_erase(self.xa.get(), index) };
            if left.push(ptr.cast::<T>().cast_const(), GFP_KERNEL).is_err() {
                // No room to defer it: wait here for this one.
                rcu::synchronize_rcu();
                // SAFETY: Erased and past a grace period: the entry's reference is ours.
                drop(unsafe { Arc::from_raw(ptr.cast::<T>()) });
            }
        }
        if !left.is_empty() {
            rcu::synchronize_rcu();
        }
        for ptr in left {
            // SAFETY: Each was erased above, before the grace period: its reference is ours.
            drop(unsafe { Arc::from_raw(ptr) });
        }
        // SAFETY: Empty now; `xa_destroy` frees the XArray's internal nodes.
        unsafe { bindings::xa_destroy(self.xa.get()) };
    }
}
