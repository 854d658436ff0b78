// SPDX-License-Identifier: GPL-2.0

//! Kernel UDP sockets that hand every datagram to an encapsulation handler (`udp_tunnel`).
//!
//! C header: [`include/net/udp_tunnel.h`](srctree/include/net/udp_tunnel.h)

use super::{namespace::Namespace, skbuff::SkBuff};
use crate::{bindings, error::to_result, prelude::*};
use core::{marker::PhantomData, ptr::NonNull};

/// Receives the datagrams of a [`UdpTunnelSocket`].
pub trait EncapRecv: 'static {
    /// Handles one datagram; `skb.data` is at its UDP header. Runs in softirq context under RCU.
    fn recv(skb: SkBuff);
}

/// The address family of a tunnel socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// IPv4.
    Inet,
    /// IPv6 only (`IPV6_V6ONLY`), so an IPv4 socket can share the port.
    Inet6,
}

/// A kernel UDP socket bound to a local port in one namespace, delivering to `T`.
///
/// Dropping it releases the socket (`udp_tunnel_sock_release`). It holds no reference on the
/// namespace, so it must be dropped before the namespace is dismantled: keep it in the
/// namespace's [`super::namespace::Pernet`] data, or drop it earlier.
///
/// # Invariants
///
/// `sock` is a kernel UDP socket set up with `T`'s receive callback, owned by this object.
pub struct UdpTunnelSocket<T: EncapRecv> {
    sock: NonNull<bindings::socket>,
    _t: PhantomData<T>,
}

impl<T: EncapRecv> UdpTunnelSocket<T> {
    /// Creates a socket on `port` (host order) for any local address of `net`.
    pub fn new(net: &Namespace, family: Family, port: u16) -> Result<Self> {
        // SAFETY: All-zero is a valid `udp_port_cfg` (wildcard addresses, no interface).
        let mut cfg: bindings::udp_port_cfg = unsafe { core::mem::zeroed() };
        cfg.local_udp_port = port.to_be();
        match family {
            Family::Inet => cfg.family = bindings::AF_INET as u8,
            Family::Inet6 => {
                cfg.family = bindings::AF_INET6 as u8;
                cfg.set_ipv6_v6only(1);
            }
        }
        let mut sock: *mut bindings::socket = core::ptr::null_mut();
        // SAFETY: `net` is alive; `cfg` and `sock` are valid for the call.
        to_result(unsafe { bindings::udp_sock_create(net.as_raw(), &mut cfg, &mut sock) })?;
        let sock = NonNull::new(sock).ok_or(EINVAL)?;

        // SAFETY: All-zero is a valid config: no user data, no optional callbacks.
        let mut tnl: bindings::udp_tunnel_sock_cfg = unsafe { core::mem::zeroed() };
        // Any non-zero type makes UDP hand datagrams to `encap_rcv`.
        tnl.encap_type = 1;
        tnl.encap_rcv = Some(Self::encap_rcv);
        // SAFETY: `sock` was just created in `net` and is not yet visible to receivers.
        unsafe { bindings::setup_udp_tunnel_sock(net.as_raw(), (*sock.as_ptr()).sk, &mut tnl) };
        // INVARIANT: Set up with `T`'s callback above.
        Ok(Self {
            sock,
            _t: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by UDP only, for a socket this type set up, with `skb` NULL or an owned packet.
    unsafe extern "C" fn encap_rcv(_sk: *mut bindings::sock, skb: *mut bindings::sk_buff) -> c_int {
        if let Some(skb) = NonNull::new(skb) {
            // SAFETY: UDP hands us its reference on `skb` when we return 0.
            T::recv(unsafe { SkBuff::from_raw(skb) });
        }
        0
    }
}

impl<T: EncapRecv> Drop for UdpTunnelSocket<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the socket. Receivers run under RCU on a socket
        // that is freed after a grace period, so one still in `encap_rcv` is not cut short.
        unsafe { bindings::udp_tunnel_sock_release((*self.sock.as_ptr()).sk) };
    }
}

// SAFETY: The socket may be released from any thread.
unsafe impl<T: EncapRecv> Send for UdpTunnelSocket<T> {}

// SAFETY: No method takes `&self`.
unsafe impl<T: EncapRecv> Sync for UdpTunnelSocket<T> {}
