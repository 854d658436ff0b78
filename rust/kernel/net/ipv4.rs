// SPDX-License-Identifier: GPL-2.0

//! Sending IPv4 packets that the caller builds whole (header included), through the routing
//! table and `ip_local_out`, as tunnels without a socket of their own do; and a netdev's
//! membership of multicast groups, for packets to them.
//!
//! C headers: [`include/net/route.h`](srctree/include/net/route.h),
//! [`include/linux/igmp.h`](srctree/include/linux/igmp.h)

use super::{
    namespace::Namespace,
    netdevice::{NetDevice, Rtnl},
    skbuff::SkBuff,
};
use crate::{bindings, error::from_err_ptr, prelude::*};

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// A route lookup's answer, held until the packet goes out on it.
///
/// # Invariants
///
/// `rt` is a route we hold a reference to.
pub struct Route {
    rt: *mut bindings::rtable,
}

impl Route {
    /// Looks up the route from `saddr` to `daddr` (network order bytes), for UDP, leaving by
    /// `oif` if it is not 0.
    pub fn output(net: &Namespace, saddr: [u8; 4], daddr: [u8; 4], oif: i32) -> Result<Self> {
        // SAFETY: All-zero is a valid, empty flow key.
        let mut fl: bindings::flowi4 = unsafe { core::mem::zeroed() };
        fl.__fl_common.flowic_oif = oif;
        fl.__fl_common.flowic_proto = bindings::IPPROTO_UDP as u8;
        fl.saddr = u32::from_ne_bytes(saddr);
        fl.daddr = u32::from_ne_bytes(daddr);
        // SAFETY: `net` is alive; `fl` is a valid key; no socket.
        let rt = from_err_ptr(unsafe {
            bindings::ip_route_output_flow(net.as_raw(), &mut fl, core::ptr::null())
        })?;
        // INVARIANT: A successful lookup returns a referenced route.
        Ok(Self { rt })
    }

    /// Routes `skb` (a whole packet of this family, see [`SkBuff::new_packet`]) along this route,
    /// for [`SkBuff::send_routed`] later: the skb takes a reference of its own.
    pub fn attach(&self, skb: &mut SkBuff) {
        let raw = skb.as_raw_mut();
        // SAFETY: We own `skb` (it is `&mut`); the route is alive (type invariant) and the skb
        // gets its own reference to it, dropped with the skb.
        unsafe {
            (*raw).__bindgen_anon_4.headers.as_mut().protocol = (bindings::ETH_P_IP as u16).to_be();
            bindings::dst_hold(&raw mut (*self.rt).dst);
            bindings::skb_dst_drop(raw);
            bindings::skb_dst_set(raw, &raw mut (*self.rt).dst);
        }
    }

    /// Whether the route still holds: routes change, and a device going away kills its
    /// routes. A holder that caches a route looks it up again when this is false.
    pub fn is_current(&self) -> bool {
        // SAFETY: By the type invariant the route is alive.
        !unsafe { bindings::dst_check(&raw mut (*self.rt).dst, 0) }.is_null()
    }

    /// Whether the route leads to one host elsewhere: not a broadcast, multicast or local
    /// destination.
    pub fn is_unicast(&self) -> bool {
        // SAFETY: By the type invariant the route is alive.
        let rt_type = unsafe { (*self.rt).rt_type };
        u32::from(rt_type) == bindings::RTN_UNICAST
    }

    /// The device the route leaves by.
    pub fn dev(&self) -> Option<&NetDevice> {
        // SAFETY: By the type invariant the route is alive, and it holds its device.
        let dev = unsafe { (*self.rt).dst.__bindgen_anon_1.dev };
        // SAFETY: As above: the device lives as long as the route.
        (!dev.is_null()).then(|| unsafe { NetDevice::from_raw(dev) })
    }

    /// Sends `skb`, a whole IPv4 packet (see [`SkBuff::new_packet`]). The stack sets the
    /// header's total length and checksum; everything else is the caller's. `ENOBUFS` if a qdisc
    /// dropped it.
    pub fn send(self, net: &Namespace, skb: SkBuff) -> Result {
        let skb = skb.into_raw();
        let rt = self.rt;
        core::mem::forget(self);
        // SAFETY: `skb` is ours and complete; the route's reference moves into it; the stack
        // takes the skb whatever it returns.
        let ret = unsafe {
            (*skb).__bindgen_anon_4.headers.as_mut().protocol = (bindings::ETH_P_IP as u16).to_be();
            bindings::skb_dst_set(skb, &raw mut (*rt).dst);
            bindings::ip_local_out(net.as_raw(), core::ptr::null_mut(), skb)
        };
        super::skbuff::local_out_result(ret)
    }
}

// SAFETY: Route entries are reference counted and may be used and released on any CPU.
unsafe impl Send for Route {}
// SAFETY: As above: shared access only reads the entry or takes references.
unsafe impl Sync for Route {}

impl Clone for Route {
    /// Another reference to the same route: one per packet sent along it.
    fn clone(&self) -> Self {
        // SAFETY: By the type invariant the route is alive; we take a reference of our own.
        unsafe { bindings::dst_hold(&raw mut (*self.rt).dst) };
        // INVARIANT: The reference just taken.
        Self { rt: self.rt }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we hold a reference.
        unsafe { bindings::dst_release(&raw mut (*self.rt).dst) };
    }
}

/// A netdev's membership of an IPv4 multicast group (`ip_mc_inc_group`): while it lasts the
/// stack takes the group's packets on the netdev and reports the membership (IGMP), so that
/// snooping switches forward them. Memberships are counted: other members (sockets, the RDMA
/// CM) keep theirs. (`ip_mc_inc_group` cannot report an allocation failure; leaving then
/// takes a count that was not ours, as the RDMA CM's own memberships do.)
///
/// # Invariants
///
/// `in_dev` is the IPv4 state of the netdev at join, whose reference we hold, and holds one
/// count of `group` that is ours (or none, once torn down with its netdev's IPv4 state).
pub struct Membership {
    in_dev: *mut bindings::in_device,
    group: [u8; 4],
}

impl Membership {
    /// Joins `group` (a multicast address) on `dev`: `ENODEV` if `dev` has no IPv4 state.
    /// Takes RTNL: sleeps, and must not be called under it.
    pub fn join(dev: &NetDevice, group: [u8; 4]) -> Result<Self> {
        if group[0] & 0xf0 != 0xe0 {
            return Err(EINVAL);
        }
        let _rtnl = Rtnl::lock();
        // SAFETY: `dev` is alive and RTNL is held, as `__in_dev_get_rtnl` requires.
        let in_dev = unsafe { bindings::__in_dev_get_rtnl(dev.as_raw()) };
        if in_dev.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: `in_dev` is `dev`'s, alive under RTNL; the reference taken keeps it after.
        unsafe {
            bindings::in_dev_hold(in_dev);
            bindings::ip_mc_inc_group(in_dev, u32::from_ne_bytes(group));
        }
        // INVARIANT: The reference and the count just taken.
        Ok(Self { in_dev, group })
    }
}

impl Drop for Membership {
    /// Leaves the group; sleeps (takes RTNL).
    fn drop(&mut self) {
        let _rtnl = Rtnl::lock();
        // SAFETY: By the type invariant we hold a reference to `in_dev`, and RTNL is held. If
        // it was torn down its list is empty and nothing changes.
        unsafe {
            bindings::__ip_mc_dec_group(
                self.in_dev,
                u32::from_ne_bytes(self.group),
                GFP_KERNEL.as_raw(),
            );
            bindings::in_dev_put(self.in_dev);
        }
    }
}

// SAFETY: The membership is a reference and a count, released on any thread in process context.
unsafe impl Send for Membership {}
// SAFETY: Shared access does nothing.
unsafe impl Sync for Membership {}
