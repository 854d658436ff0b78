// SPDX-License-Identifier: GPL-2.0

//! RDMA link types (`struct rdma_link_ops`): `rdma link add NAME type TYPE netdev DEV`.
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)

use super::slot::ContextSlot;
use crate::{
    bindings,
    error::from_result,
    net::netdevice::NetDevice,
    prelude::*,
    types::Opaque, //
};
use core::marker::PhantomData;

/// Creates links of one type.
pub trait LinkOps: 'static {
    /// The link type name, e.g. `c"rxe"`. The module should also declare the alias
    /// `rdma-link-<type>` so that `rdma link add` loads it.
    const TYPE: &'static CStr;

    /// What every new link may use, owned by the [`LinkRegistration`] (e.g. a debugfs root).
    type Context: Send + Sync;

    /// Where `newlink` finds the context: the C callback carries none.
    const CONTEXT: &'static ContextSlot<Self::Context>;

    /// Creates a device called `name` over `netdev`. Runs in process context without `RTNL`,
    /// with the caller's `CAP_NET_ADMIN` checked; may sleep.
    fn newlink(ctx: &Self::Context, name: &CStr, netdev: &NetDevice) -> Result;
}

/// A registered link type.
///
/// # Invariants
///
/// `ops` is registered with the RDMA netlink core from construction until drop.
#[pin_data(PinnedDrop)]
pub struct LinkRegistration<T: LinkOps> {
    #[pin]
    ctx: T::Context,
    #[pin]
    ops: Opaque<bindings::rdma_link_ops>,
    _t: PhantomData<T>,
}

// SAFETY: The core only touches `ops` under its own `link_ops_rwsem`; `ctx` is `Send`.
unsafe impl<T: LinkOps> Send for LinkRegistration<T> {}

// SAFETY: `&LinkRegistration` exposes `&T::Context` only, which is `Sync`.
unsafe impl<T: LinkOps> Sync for LinkRegistration<T> {}

impl<T: LinkOps> LinkRegistration<T> {
    /// Registers the link type, with `ctx` for its `newlink`. A type that is already
    /// registered is refused with `EEXIST`: by this module (its slot is taken), or by the
    /// core, after its warning (another module has the type).
    pub fn register(ctx: impl PinInit<T::Context, Error>) -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            ctx <- ctx,
            ops <- Opaque::try_ffi_init(move |slot: *mut bindings::rdma_link_ops| {
                // SAFETY: `ctx` is initialised (fields initialise in order) and pinned in `Self`.
                let ctx = unsafe { &raw mut (*this.as_ptr()).ctx };
                // A second registration of the type finds the slot taken; the slot keeps
                // pointing to the first one's context.
                // SAFETY: `ctx` is pinned in `Self`, whose `drop` releases the slot first.
                unsafe { T::CONTEXT.claim(ctx) }?;
                // SAFETY: `slot` is valid for writes and pinned in `Self`; `TYPE` is static.
                unsafe {
                    slot.write(bindings::rdma_link_ops {
                        type_: T::TYPE.as_char_ptr(),
                        newlink: Some(Self::newlink),
                        ..pin_init::zeroed()
                    });
                    bindings::rdma_link_register(slot);
                }
                // The core skips (with a warning) a type that is already registered, leaving
                // `list` unlinked; then there is nothing to unregister on drop either.
                // SAFETY: `slot` was initialised above; the core links `list` under its lock
                // before `rdma_link_register` returns, and a linked `next` is never NULL again
                // (a concurrent registration may change it, hence the volatile read).
                if unsafe { core::ptr::read_volatile(&raw const (*slot).list.next) }.is_null() {
                    T::CONTEXT.release();
                    return Err(EEXIST);
                }
                Ok(())
            }),
            _t: PhantomData,
        })
    }

    /// The context every `newlink` gets.
    pub fn context(&self) -> &T::Context {
        &self.ctx
    }

    /// # Safety
    ///
    /// Called by the netlink core with a NUL-terminated name and a referenced netdev.
    unsafe extern "C" fn newlink(name: *const c_char, ndev: *mut bindings::net_device) -> c_int {
        from_result(|| {
            // SAFETY: `nldev_newlink` passes its NUL-terminated `ibdev_name` buffer and a
            // registered `ndev` held by `dev_get_by_name` until its `dev_put` after we return
            // (this function's `# Safety`); neither reference outlives this closure.
            let (name, ndev) = unsafe { (CStr::from_char_ptr(name), NetDevice::from_raw(ndev)) };
            // SAFETY: The core calls `newlink` only while the type is registered, and
            // unregistration waits for it (`link_ops_rwsem`) before releasing the slot.
            let ctx = unsafe { T::CONTEXT.get() }.ok_or(ENODEV)?;
            T::newlink(ctx, name, ndev)?;
            Ok(0)
        })
    }
}

#[pinned_drop]
impl<T: LinkOps> PinnedDrop for LinkRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `ops` is registered; this waits for running `newlink`s.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
        // No `newlink` runs any more: the context may go.
        T::CONTEXT.release();
    }
}
