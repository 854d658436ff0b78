// SPDX-License-Identifier: GPL-2.0

//! Network namespaces (`struct net`) and per-namespace state (`struct pernet_operations`).
//!
//! C headers: [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h),
//! [`include/net/netns/generic.h`](srctree/include/net/netns/generic.h)

use crate::{
    bindings,
    error::{from_result, to_result},
    prelude::*,
    sync::aref::{ARef, AlwaysRefCounted},
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    ptr::NonNull,
    sync::atomic::{AtomicBool, Ordering},
};

/// A network namespace.
///
/// # Invariants
///
/// The wrapped `net` is alive (its reference count is non-zero, or a pernet callback is running
/// for it) for as long as a reference to this type exists.
#[repr(transparent)]
pub struct Namespace(Opaque<bindings::net>);

impl Namespace {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` is a namespace that stays alive for `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::net) -> &'a Self {
        // SAFETY: Transparent wrapper; the caller guarantees validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// Takes a reference on `ptr` unless the namespace is already being dismantled.
    ///
    /// # Safety
    ///
    /// The memory of `ptr` is valid (e.g. read from a netdev under RCU).
    pub(crate) unsafe fn try_get(ptr: *mut bindings::net) -> Option<ARef<Self>> {
        // SAFETY: The caller guarantees `ptr` points to a `net`; this fails on a zero count.
        let net = NonNull::new(unsafe { bindings::maybe_get_net(ptr) })?;
        // SAFETY: We own the reference just taken.
        Some(unsafe { ARef::from_raw(net.cast()) })
    }

    /// Returns the raw pointer.
    pub fn as_raw(&self) -> *mut bindings::net {
        self.0.get()
    }

    /// Whether the initial user namespace owns this namespace: the host's administrator made
    /// it, not an unprivileged user in a user namespace of their own.
    pub fn is_init_user_owned(&self) -> bool {
        // SAFETY: By the type invariant the namespace is alive; `user_ns` is set for good at
        // creation. `init_user_ns` is a static.
        core::ptr::eq(
            unsafe { (*self.as_raw()).user_ns },
            &raw const bindings::init_user_ns,
        )
    }

    /// Returns the per-namespace data of `T`, or `None` while `T` is not registered.
    ///
    /// The borrow must end before `T`'s [`PernetRegistration`] is dropped; callers are the
    /// registering module's own paths, which its teardown order fences (the registration goes
    /// last).
    pub fn data<T: Pernet>(&self) -> Option<&T::Data> {
        let id = T::ID.get()?;
        // SAFETY: `T` is registered, so every live namespace has an initialised slot for `id`
        // until `T`'s exit for it has run; the type invariant keeps `self` short of that.
        let slot = unsafe { bindings::net_generic(self.as_raw(), id) };
        // SAFETY: The slot holds an initialised `T::Data` (see `PernetRegistration`).
        Some(unsafe { &*slot.cast::<T::Data>() })
    }
}

impl PartialEq for Namespace {
    fn eq(&self, other: &Self) -> bool {
        core::ptr::eq(self.as_raw(), other.as_raw())
    }
}

impl Eq for Namespace {}

// SAFETY: Instances of `Namespace` are reference counted (`get_net`/`put_net`).
unsafe impl AlwaysRefCounted for Namespace {
    fn inc_ref(&self) {
        // SAFETY: The existence of a shared reference means the refcount is non-zero.
        unsafe { bindings::get_net(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller guarantees the refcount is non-zero.
        unsafe { bindings::put_net(obj.cast().as_ptr()) };
    }
}

// SAFETY: `struct net` is used from any thread; this type only reads it.
unsafe impl Send for Namespace {}

// SAFETY: As for `Send`.
unsafe impl Sync for Namespace {}

/// The slot id the core assigns to a [`Pernet`] user; declare one `static` per user.
///
/// # Invariants
///
/// `id` holds the core's id whenever `registered` is true.
pub struct PernetId {
    id: Opaque<c_uint>,
    registered: AtomicBool,
    claimed: AtomicBool,
}

impl PernetId {
    /// Creates an unassigned id.
    pub const fn new() -> Self {
        Self {
            id: Opaque::new(0),
            registered: AtomicBool::new(false),
            claimed: AtomicBool::new(false),
        }
    }

    fn get(&self) -> Option<c_uint> {
        if !self.registered.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: The core wrote the id before `registered` was set (acquire above), and it
        // does not change while registered.
        Some(unsafe { *self.id.get() })
    }
}

impl Default for PernetId {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: The core writes `id` once at registration, before `registered` publishes it.
unsafe impl Sync for PernetId {}

/// State kept in every network namespace.
pub trait Pernet: Sized + 'static {
    /// The per-namespace data, created in every namespace and dropped when it goes.
    type Data: Send + Sync;

    /// The id slot; `static ID: PernetId = PernetId::new();` in the user.
    const ID: &'static PernetId;

    /// Creates the data for a new namespace (or for every existing one at registration).
    fn init(net: &Namespace) -> impl PinInit<Self::Data, Error>;

    /// Called as `net` is dismantled, before its data is dropped.
    fn exit(_net: &Namespace, _data: &Self::Data) {}
}

/// A registered [`Pernet`] user (`register_pernet_subsys`); unregisters on drop.
#[pin_data(PinnedDrop)]
pub struct PernetRegistration<T: Pernet> {
    #[pin]
    ops: Opaque<bindings::pernet_operations>,
    _t: PhantomData<T>,
}

// SAFETY: The ops are only touched by the core under its own lock.
unsafe impl<T: Pernet> Send for PernetRegistration<T> {}

// SAFETY: As for `Send`; no `&self` method exists.
unsafe impl<T: Pernet> Sync for PernetRegistration<T> {}

impl<T: Pernet> PernetRegistration<T> {
    /// Registers `T`: runs [`Pernet::init`] for every existing namespace and later ones.
    pub fn register() -> impl PinInit<Self, Error> {
        const {
            // The core kzallocs the slot: kmalloc's alignment must do for `T::Data`.
            assert!(core::mem::align_of::<T::Data>() <= bindings::ARCH_KMALLOC_MINALIGN);
        }
        try_pin_init!(Self {
            ops <- Opaque::try_ffi_init(|slot: *mut bindings::pernet_operations| {
                // Claims the id; a second registration of `T` fails here.
                if T::ID
                    .claimed
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
                {
                    return Err(EEXIST);
                }
                // SAFETY: `slot` is valid for writes; all-zero is a valid `pernet_operations`.
                unsafe {
                    slot.write(pin_init::zeroed());
                    (*slot).init = Some(Self::init_callback);
                    (*slot).exit = Some(Self::exit_callback);
                    (*slot).id = T::ID.id.get();
                    (*slot).size = core::mem::size_of::<T::Data>();
                }
                // SAFETY: `slot` is pinned until `drop` unregisters it.
                if let Err(e) = to_result(unsafe { bindings::register_pernet_subsys(slot) }) {
                    T::ID.claimed.store(false, Ordering::Release);
                    return Err(e);
                }
                T::ID.registered.store(true, Ordering::Release);
                Ok(())
            }),
            _t: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by the core only, for a namespace it is setting up, after `register` set `T::ID`.
    unsafe extern "C" fn init_callback(net: *mut bindings::net) -> c_int {
        from_result(|| {
            // SAFETY: The core is setting up `net` and assigned `T::ID` before calling us.
            let (id, net) = unsafe { (*T::ID.id.get(), Namespace::from_raw(net)) };
            // SAFETY: The core allocated a zeroed slot of `size_of::<T::Data>()` for `id`, which
            // stays put until after `exit`. kmalloc aligns it for any `T::Data` the kernel allows.
            let slot = unsafe { bindings::net_generic(net.as_raw(), id) }.cast::<T::Data>();
            // SAFETY: As above; on error the core frees the slot without calling `exit`.
            unsafe { pin_init::raw_try_init(slot, T::init(net))? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the core only, for a namespace whose `init_callback` succeeded.
    unsafe extern "C" fn exit_callback(net: *mut bindings::net) {
        // SAFETY: The core is dismantling `net`, whose `init` succeeded.
        let (id, net) = unsafe { (*T::ID.id.get(), Namespace::from_raw(net)) };
        // SAFETY: The slot holds the data `init_callback` made; nothing uses it after this.
        unsafe {
            let slot = bindings::net_generic(net.as_raw(), id).cast::<T::Data>();
            T::exit(net, &*slot);
            core::ptr::drop_in_place(slot);
        }
    }
}

#[pinned_drop]
impl<T: Pernet> PinnedDrop for PernetRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        T::ID.registered.store(false, Ordering::Release);
        // SAFETY: Registered in `register`; this runs `exit` for every namespace.
        unsafe { bindings::unregister_pernet_subsys(self.ops.get()) };
        T::ID.claimed.store(false, Ordering::Release);
    }
}
