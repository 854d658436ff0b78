// SPDX-License-Identifier: GPL-2.0

//! Sending IPv6 packets that the caller builds whole (header included), through the routing
//! table and `ip6_local_out`, as tunnels without a socket of their own do; and a netdev's
//! membership of multicast groups, for packets to them.
//!
//! C headers: [`include/net/ipv6.h`](srctree/include/net/ipv6.h),
//! [`include/net/addrconf.h`](srctree/include/net/addrconf.h)

use super::{
    namespace::Namespace,
    netdevice::{NetDevice, Rtnl},
    skbuff::SkBuff,
};
use crate::{bindings, error::from_err_ptr, prelude::*};

/// Length of an IPv6 header without extension headers.
pub const HEADER_LEN: usize = 40;

/// A route lookup's answer, held until the packet goes out on it.
///
/// # Invariants
///
/// `dst` is a route entry we hold a reference to; `cookie` is its validity cookie, taken at
/// lookup.
pub struct Route {
    dst: *mut bindings::dst_entry,
    cookie: u32,
}

impl Route {
    /// Looks up the route from `saddr` to `daddr`, for UDP with `flow_label` (the low 20 bits),
    /// leaving by `oif` if it is not 0. As the IPv4 lookup does (and `ip6_dst_lookup_flow` does
    /// not), a source that is not one of the namespace's own addresses is refused with
    /// `EADDRNOTAVAIL`: a caller's address cannot be spoofed through it.
    pub fn output(
        net: &Namespace,
        saddr: [u8; 16],
        daddr: [u8; 16],
        flow_label: u32,
        oif: i32,
    ) -> Result<Self> {
        let src = bindings::in6_addr {
            in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: saddr },
        };
        // SAFETY: `net` is alive and `src` a valid address; no device (any of the namespace's),
        // not strict. It takes the RCU read lock itself and does not sleep.
        if unsafe { bindings::ipv6_chk_addr(net.as_raw(), &src, core::ptr::null(), 0) } == 0 {
            return Err(EADDRNOTAVAIL);
        }
        // SAFETY: All-zero is a valid, empty flow key.
        let mut fl: bindings::flowi6 = unsafe { core::mem::zeroed() };
        fl.__fl_common.flowic_oif = oif;
        fl.__fl_common.flowic_proto = bindings::IPPROTO_UDP as u8;
        fl.saddr.in6_u.u6_addr8 = saddr;
        fl.daddr.in6_u.u6_addr8 = daddr;
        fl.flowlabel = (flow_label & 0xf_ffff).to_be();
        // SAFETY: `net` is alive; `fl` is a valid key; no socket and no final destination.
        let dst = from_err_ptr(unsafe {
            bindings::ip6_dst_lookup_flow(
                net.as_raw(),
                core::ptr::null(),
                &mut fl,
                core::ptr::null(),
            )
        })?;
        // SAFETY: IPv6 output routes are `rt6_info`s, whose first member is the entry.
        let cookie = unsafe { bindings::rt6_get_cookie(dst.cast()) };
        // INVARIANT: A successful lookup returns a referenced entry.
        Ok(Self { dst, cookie })
    }

    /// Routes `skb` (a whole packet of this family, see [`SkBuff::new_packet`]) along this route,
    /// for [`SkBuff::send_routed`] later: the skb takes a reference of its own.
    pub fn attach(&self, skb: &mut SkBuff) {
        let raw = skb.as_raw_mut();
        // SAFETY: We own `skb` (it is `&mut`); the route is alive (type invariant) and the skb
        // gets its own reference to it, dropped with the skb.
        unsafe {
            (*raw).__bindgen_anon_4.headers.as_mut().protocol =
                (bindings::ETH_P_IPV6 as u16).to_be();
            bindings::dst_hold(self.dst);
            bindings::skb_dst_drop(raw);
            bindings::skb_dst_set(raw, self.dst);
        }
    }

    /// Whether the route still holds: routes change, and a device going away kills its
    /// routes. A holder that caches a route looks it up again when this is false.
    pub fn is_current(&self) -> bool {
        // SAFETY: By the type invariant the route is alive.
        !unsafe { bindings::dst_check(self.dst, self.cookie) }.is_null()
    }

    /// The device the route leaves by.
    pub fn dev(&self) -> Option<&NetDevice> {
        // SAFETY: By the type invariant the entry is alive, and it holds its device.
        let dev = unsafe { (*self.dst).__bindgen_anon_1.dev };
        // SAFETY: As above: the device lives as long as the entry.
        (!dev.is_null()).then(|| unsafe { NetDevice::from_raw(dev) })
    }

    /// Sends `skb`, a whole IPv6 packet (see [`SkBuff::new_packet`]). The stack sets the
    /// payload length; everything else (the UDP checksum too) is the caller's. `ENOBUFS` if a
    /// qdisc dropped it.
    pub fn send(self, net: &Namespace, skb: SkBuff) -> Result {
        let skb = skb.into_raw();
        let dst = self.dst;
        core::mem::forget(self);
        // SAFETY: `skb` is ours and complete; the route's reference moves into it; the stack
        // takes the skb whatever it returns.
        let ret = unsafe {
            (*skb).__bindgen_anon_4.headers.as_mut().protocol =
                (bindings::ETH_P_IPV6 as u16).to_be();
            bindings::skb_dst_set(skb, dst);
            bindings::ip6_local_out(net.as_raw(), core::ptr::null_mut(), skb)
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
        // SAFETY: By the type invariant the entry is alive; we take a reference of our own.
        unsafe { bindings::dst_hold(self.dst) };
        // INVARIANT: The reference just taken.
        Self {
            dst: self.dst,
            cookie: self.cookie,
        }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we hold a reference.
        unsafe { bindings::dst_release(self.dst) };
    }
}

/// A netdev's membership of an IPv6 multicast group (`ipv6_dev_mc_inc`), as for
/// [`super::ipv4::Membership`]: the stack takes the group's packets and reports the
/// membership (MLD).
///
/// # Invariants
///
/// `idev` is the IPv6 state of the netdev at join, whose reference we hold, and holds one
/// count of `group` that is ours (or none, once torn down with its netdev's IPv6 state).
pub struct Membership {
    idev: *mut bindings::inet6_dev,
    group: bindings::in6_addr,
}

impl Membership {
    /// Joins `group` (a multicast address) on `dev`: `ENODEV` if `dev` has no IPv6 state.
    /// Takes RTNL (under which the IPv6 state is replaced, so the count goes where the
    /// reference is): sleeps, and must not be called under it.
    pub fn join(dev: &NetDevice, group: [u8; 16]) -> Result<Self> {
        if group[0] != 0xff {
            return Err(EINVAL);
        }
        let group = bindings::in6_addr {
            in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: group },
        };
        let _rtnl = Rtnl::lock();
        // SAFETY: `dev` is alive; a reference to its IPv6 state, if any, is ours.
        let idev = unsafe { bindings::in6_dev_get(dev.as_raw()) };
        if idev.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: `dev` is alive and `group` a valid address; process context.
        let ret = unsafe { bindings::ipv6_dev_mc_inc(dev.as_raw(), &group) };
        if ret < 0 {
            // SAFETY: The reference taken above.
            unsafe { bindings::in6_dev_put(idev) };
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: The reference and the count just taken.
        Ok(Self { idev, group })
    }
}

impl Drop for Membership {
    /// Leaves the group; sleeps.
    fn drop(&mut self) {
        // SAFETY: By the type invariant we hold a reference to `idev`. If it was torn down its
        // list is empty and nothing changes (`ENOENT`).
        unsafe {
            bindings::__ipv6_dev_mc_dec(self.idev, &self.group);
            bindings::in6_dev_put(self.idev);
        }
    }
}

// SAFETY: As for the IPv4 membership.
unsafe impl Send for Membership {}
// SAFETY: Shared access does nothing.
unsafe impl Sync for Membership {}
