// SPDX-License-Identifier: GPL-2.0

//! Netdev notifiers: events on every network device.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use super::netdevice::NetDevice;
use crate::{bindings, error::to_result, prelude::*, types::Opaque};

/// Netdev notifier events an RDMA provider reacts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetdevEvent {
    /// The device was registered, or moved into a namespace (`NETDEV_REGISTER`).
    Register,
    /// The device was renamed (`NETDEV_CHANGENAME`).
    ChangeName,
    /// The device came up (`NETDEV_UP`).
    Up,
    /// The device went down (`NETDEV_DOWN`).
    Down,
    /// Carrier or other state changed (`NETDEV_CHANGE`).
    Change,
    /// The MTU changed (`NETDEV_CHANGEMTU`).
    ChangeMtu,
    /// The device is being unregistered, or moved to another network namespace
    /// (`NETDEV_UNREGISTER`).
    Unregister,
    /// Any other event.
    Other,
}

impl NetdevEvent {
    fn from_raw(event: c_ulong) -> Self {
        // CAST: The `netdev_cmd` values are small positive constants.
        match event as u32 {
            bindings::netdev_cmd_NETDEV_REGISTER => Self::Register,
            bindings::netdev_cmd_NETDEV_CHANGENAME => Self::ChangeName,
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            _ => Self::Other,
        }
    }
}

/// Handles netdev notifier events; the [`NetdevNotifier`] owns it.
pub trait NetdevNotifierHandler: Send + Sync + 'static {
    /// Called under `RTNL` for every event on every network device, in any namespace.
    fn event(&self, dev: &NetDevice, event: NetdevEvent);
}

/// A registered netdev notifier (`register_netdevice_notifier`).
///
/// # Invariants
///
/// `nb` is registered with the netdev notifier chain from construction until drop.
#[pin_data(PinnedDrop)]
pub struct NetdevNotifier<T: NetdevNotifierHandler> {
    handler: T,
    #[pin]
    nb: Opaque<bindings::notifier_block>,
}

// SAFETY: The notifier block is only touched by the notifier core under its own locking.
unsafe impl<T: NetdevNotifierHandler> Send for NetdevNotifier<T> {}

// SAFETY: `&NetdevNotifier` exposes `&T` only, which is `Sync`.
unsafe impl<T: NetdevNotifierHandler> Sync for NetdevNotifier<T> {}

impl<T: NetdevNotifierHandler> NetdevNotifier<T> {
    /// Registers `handler`. Registration replays `NETDEV_REGISTER` and `NETDEV_UP` for the
    /// devices that exist already, in every namespace.
    pub fn register(handler: T) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            handler,
            nb <- Opaque::try_ffi_init(|slot: *mut bindings::notifier_block| {
                // SAFETY: `slot` is valid for writes; the block is pinned in `Self`.
                unsafe {
                    slot.write(bindings::notifier_block {
                        notifier_call: Some(Self::call),
                        ..pin_init::zeroed()
                    })
                };
                // SAFETY: `slot` is initialised and stays pinned until `drop` unregisters it.
                to_result(unsafe { bindings::register_netdevice_notifier(slot) })
            }),
        })
    }

    /// The handler.
    pub fn handler(&self) -> &T {
        &self.handler
    }

    /// # Safety
    ///
    /// Only the netdev notifier chain calls this, with `nb` the block of a registered
    /// [`NetdevNotifier<T>`] and `ptr` a `netdev_notifier_info`.
    unsafe extern "C" fn call(
        nb: *mut bindings::notifier_block,
        event: c_ulong,
        ptr: *mut c_void,
    ) -> c_int {
        // SAFETY: Netdev notifiers are called with a `netdev_notifier_info`.
        let dev = unsafe { bindings::netdev_notifier_info_to_dev(ptr.cast()) };
        // SAFETY: Per the function's contract `nb` is the `nb` field of a `Self`, registered, so
        // pinned and alive until its `drop` unregisters it, which waits for running calls.
        let this = unsafe { &*crate::container_of!(Opaque::cast_from(nb).cast_mut(), Self, nb) };
        if !dev.is_null() {
            // SAFETY: The notifier chain holds a reference to `dev` for the call.
            let dev = unsafe { NetDevice::from_raw(dev) };
            this.handler.event(dev, NetdevEvent::from_raw(event));
        }
        // CAST: `NOTIFY_DONE` is 0.
        bindings::NOTIFY_DONE as c_int
    }
}

#[pinned_drop]
impl<T: NetdevNotifierHandler> PinnedDrop for NetdevNotifier<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `nb` is registered.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}
