// SPDX-License-Identifier: GPL-2.0

//! Network devices.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use super::namespace::Namespace;
use crate::{
    bindings,
    prelude::*,
    sync::{
        aref::{ARef, AlwaysRefCounted},
        rcu,
    },
    types::Opaque, //
};
use core::ptr::NonNull;

/// Link-layer type of a network device (`ARPHRD_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkType {
    /// Ethernet (`ARPHRD_ETHER`), including veth, bridges, bonds and macvlan.
    Ether,
    /// No link-layer header (`ARPHRD_NONE`): IP-only devices such as tun.
    RawIp,
    /// The loopback device (`ARPHRD_LOOPBACK`).
    Loopback,
    /// Anything else, by its `ARPHRD_*` number.
    Other(u16),
}

/// A network device (`struct net_device`).
///
/// Only the read-mostly facts an upper-layer driver needs are exposed; the netdev core keeps
/// ownership of the device itself.
///
/// # Invariants
///
/// The wrapped `net_device` is valid and its reference count is non-zero for as long as a
/// reference to this type exists.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

impl NetDevice {
    /// Creates a reference to a [`NetDevice`] from a valid pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a registered `net_device` that stays alive (referenced) for `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is a transparent wrapper of `net_device`; the caller guarantees
        // the pointer is valid for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// Returns the raw `net_device` pointer.
    pub fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// Returns the interface name.
    pub fn name(&self) -> &CStr {
        // SAFETY: By the type invariant the device is valid; `name` is a NUL-terminated array
        // that lives as long as the device.
        unsafe { CStr::from_char_ptr((*self.as_raw()).name.as_ptr()) }
    }

    /// Returns the interface index.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: By the type invariant the device is valid; `ifindex` is fixed once registered.
        unsafe { (*self.as_raw()).ifindex }
    }

    /// Returns the namespace the device is in now, with a reference held; `None` if that
    /// namespace is being dismantled.
    pub fn net(&self) -> Option<ARef<Namespace>> {
        let _rcu = rcu::read_lock();
        // SAFETY: By the type invariant the device is valid; under RCU the namespace it points
        // to is not freed even if the device moves away concurrently.
        unsafe { Namespace::try_get(bindings::dev_net_rcu(self.as_raw())) }
    }

    /// Returns the current MTU. It may change at any time (`NETDEV_CHANGEMTU`).
    pub fn mtu(&self) -> u32 {
        // SAFETY: By the type invariant the device is valid. `mtu` changes under `RTNL`; a single
        // volatile read is the `READ_ONCE()` that lockless readers use.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).mtu) }
    }

    /// Returns the link-layer type (`dev->type`).
    pub fn link_type(&self) -> LinkType {
        // SAFETY: By the type invariant the device is valid; `type` is fixed once registered.
        let t = u32::from(unsafe { (*self.as_raw()).type_ });
        match t {
            bindings::ARPHRD_ETHER => LinkType::Ether,
            bindings::ARPHRD_NONE => LinkType::RawIp,
            bindings::ARPHRD_LOOPBACK => LinkType::Loopback,
            // CAST: `t` came from a `u16`.
            _ => LinkType::Other(t as u16),
        }
    }

    /// Whether this is an 802.1Q VLAN device.
    pub fn is_vlan(&self) -> bool {
        // SAFETY: By the type invariant the device is valid.
        unsafe { bindings::is_vlan_dev(self.as_raw()) }
    }

    /// Whether the device is administratively up and has carrier.
    pub fn is_running_with_carrier(&self) -> bool {
        // SAFETY: By the type invariant the device is valid.
        unsafe {
            bindings::netif_running(self.as_raw()) && bindings::netif_carrier_ok(self.as_raw())
        }
    }

    /// Whether the device is administratively up (`IFF_UP`).
    pub fn is_up(&self) -> bool {
        // SAFETY: By the type invariant the device is valid.
        let flags = unsafe { bindings::netif_get_flags(self.as_raw()) };
        flags & bindings::net_device_flags_IFF_UP != 0
    }

    /// Returns the first 6 bytes of the hardware address, or `None` if it has fewer (e.g. a
    /// tun device has none).
    pub fn mac_addr(&self) -> Option<[u8; 6]> {
        // SAFETY: By the type invariant the device is valid; `dev_addr` points to at least
        // `addr_len` bytes. It is read without `RTNL`, so a concurrent address change may give a
        // mix of old and new bytes, which callers tolerate (it seeds identifiers only).
        unsafe {
            let dev = self.as_raw();
            if usize::from((*dev).addr_len) < 6 || (*dev).dev_addr.is_null() {
                return None;
            }
            let mut mac = [0u8; 6];
            core::ptr::copy_nonoverlapping((*dev).dev_addr, mac.as_mut_ptr(), 6);
            Some(mac)
        }
    }
}

// SAFETY: Instances of `NetDevice` are always reference-counted (`dev_hold`/`dev_put`).
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: The existence of a shared reference means the refcount is non-zero.
        unsafe { bindings::dev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller guarantees the refcount is non-zero.
        unsafe { bindings::dev_put(obj.cast().as_ptr()) };
    }
}

// SAFETY: `net_device` is usable from any thread; the accessors above only read fields that are
// fixed after registration or read once with `READ_ONCE` semantics.
unsafe impl Send for NetDevice {}

// SAFETY: See `Send`; all methods take `&self` and do not mutate.
unsafe impl Sync for NetDevice {}
