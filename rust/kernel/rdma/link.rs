// SPDX-License-Identifier: GPL-2.0

//! RDMA link types (`struct rdma_link_ops`): `rdma link add NAME type TYPE netdev DEV`.
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)

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

    /// Creates a device called `name` over `netdev`. Runs in process context without `RTNL`,
    /// with the caller's `CAP_NET_ADMIN` checked; may sleep.
    fn newlink(name: &CStr, netdev: &NetDevice) -> Result;
}

/// A registered link type.
///
/// # Invariants
///
/// `ops` is registered with the RDMA netlink core from construction until drop.
#[pin_data(PinnedDrop)]
pub struct LinkRegistration<T: LinkOps> {
    #[pin]
    ops: Opaque<bindings::rdma_link_ops>,
    _t: PhantomData<T>,
}

// SAFETY: The core only touches `ops` under its own `link_ops_rwsem`.
unsafe impl<T: LinkOps> Send for LinkRegistration<T> {}

// SAFETY: `&LinkRegistration` exposes nothing.
unsafe impl<T: LinkOps> Sync for LinkRegistration<T> {}

impl<T: LinkOps> LinkRegistration<T> {
    /// Registers the link type. A type that is already registered is refused with `EEXIST`,
    /// after the core's warning.
    pub fn register() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            ops <- Opaque::try_ffi_init(|slot: *mut bindings::rdma_link_ops| {
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
                    return Err(EEXIST);
                }
                Ok(())
            }),
            _t: PhantomData,
        })
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
            T::newlink(name, ndev)?;
            Ok(0)
        })
    }
}

#[pinned_drop]
impl<T: LinkOps> PinnedDrop for LinkRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `ops` is registered; this waits for running `newlink`s.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
    }
}
