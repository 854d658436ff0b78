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

    /// Whether the device is registered: not yet being unregistered. Under `RTNL`, which
    /// orders it with the `NETDEV_UNREGISTER` event that follows a change.
    pub fn is_registered(&self, _rtnl: &Rtnl) -> bool {
        // SAFETY: By the type invariant the device is valid. `reg_state` leaves `REGISTERED`
        // only under `RTNL`, which the caller holds; a volatile read is the `READ_ONCE()` that
        // the writes after unregistration (without `RTNL`) ask for.
        let state = unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).reg_state) };
        u32::from(state) == bindings::netdev_reg_state_NETREG_REGISTERED
    }

    /// Whether the device is a port of a bond or team (`netif_is_lag_port`).
    pub fn is_lag_port(&self) -> bool {
        // SAFETY: By the type invariant the device is valid.
        unsafe { bindings::netif_is_lag_port(self.as_raw()) }
    }

    /// The devices below this one (bond and team ports, a macvlan's or VLAN's real device),
    /// all the way down, with a reference held on each.
    pub fn lowers(&self) -> Result<KVec<ARef<NetDevice>>> {
        self.walk_linked(bindings::netdev_walk_all_lower_dev_rcu)
    }

    /// The devices above this one (its bond or team, macvlans and VLANs on it), all the way
    /// up, with a reference held on each.
    pub fn uppers(&self) -> Result<KVec<ARef<NetDevice>>> {
        self.walk_linked(bindings::netdev_walk_all_upper_dev_rcu)
    }

    fn walk_linked(
        &self,
        walk: unsafe extern "C" fn(
            *mut bindings::net_device,
            Option<
                unsafe extern "C" fn(
                    *mut bindings::net_device,
                    *mut bindings::netdev_nested_priv,
                ) -> c_int,
            >,
            *mut bindings::netdev_nested_priv,
        ) -> c_int,
    ) -> Result<KVec<ARef<NetDevice>>> {
        /// # Safety
        ///
        /// `dev` is a device under RCU; `priv_.data` points to the walk's `Result<KVec<_>>`.
        unsafe extern "C" fn collect(
            dev: *mut bindings::net_device,
            priv_: *mut bindings::netdev_nested_priv,
        ) -> c_int {
            // SAFETY: Per the function's contract, `data` is the caller's exclusive `Result`.
            let found = unsafe { &mut *(*priv_).data.cast::<Result<KVec<ARef<NetDevice>>>>() };
            // SAFETY: `dev` is alive under RCU; `dev_hold` keeps it after.
            let dev: ARef<NetDevice> = unsafe { NetDevice::from_raw(dev) }.into();
            let pushed = match found {
                // Under RCU: no sleeping allocation.
                Ok(v) => v.push(dev, GFP_ATOMIC).map_err(Error::from),
                Err(_) => return 1,
            };
            match pushed {
                Ok(()) => 0,
                Err(e) => {
                    *found = Err(e);
                    1
                }
            }
        }
        let mut found: Result<KVec<ARef<NetDevice>>> = Ok(KVec::new());
        let mut priv_ = bindings::netdev_nested_priv {
            flags: 0,
            data: (&raw mut found).cast(),
        };
        let _rcu = rcu::read_lock();
        // SAFETY: By the type invariant the device is valid; the walk runs under RCU, as it
        // requires, and `collect` gets `priv_`, which points to `found`.
        unsafe { walk(self.as_raw(), Some(collect), &mut priv_) };
        found
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

/// The RTNL lock (`rtnl_lock`), which serialises netdev configuration and notifier events.
///
/// Not to be taken in a netdev notifier, which runs under it, nor while holding a lock that
/// a path under `RTNL` takes.
pub struct Rtnl(core::marker::PhantomData<*mut ()>);

impl Rtnl {
    /// Takes the lock until the returned guard drops; may sleep.
    pub fn lock() -> Self {
        // SAFETY: Process context, per this function's documentation.
        unsafe { bindings::rtnl_lock() };
        Self(core::marker::PhantomData)
    }
}

impl Drop for Rtnl {
    fn drop(&mut self) {
        // SAFETY: The guard exists only while we hold the lock.
        unsafe { bindings::rtnl_unlock() };
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
