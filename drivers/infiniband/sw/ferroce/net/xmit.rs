// SPDX-License-Identifier: GPL-2.0

//! Sending a QP's packets to one peer. The route is looked up once and kept (RC and UC QPs
//! keep theirs for as long as it holds); each packet is built in place in its skb, routed, and
//! queued on its QP's outbox, which is sent once the QP's lock is dropped (the stack may not be
//! entered with interrupts off, and batches leave together, in order).
//!
//! A packet for the device's own address (both QPs on one device) goes to the receiving QP's
//! backlog instead: the stack would not bring it back (it would arrive on the loopback device,
//! which no ferroce device is on), and taking it at once could recurse without end.

use crate::{
    ah::{is_multicast, mapped_ipv4},
    counters::Counter,
    device::Ferroce,
    proto::{
        bth::Bth,
        build::Path,
        packet::{BuildError, ExtHeaders},
    },
};
use kernel::{
    net::{
        ipv4, ipv6,
        netdevice::NetDevice,
        skbuff::{SkBuff, SkbQueue},
    },
    prelude::*,
    rdma::device::Device,
    sync::aref::ARef,
    time::{Instant, Monotonic},
};

/// A route over either IP version, or none: to the device itself.
enum Route {
    V4(ipv4::Route),
    V6(ipv6::Route),
    Loopback,
}

/// The way to one peer: the path (addresses, ports, traffic class) and its route. A QP keeps
/// its own while [`TxPath::is_current`].
pub(crate) struct TxPath {
    netdev: ARef<NetDevice>,
    route: Route,
    path: Path,
}

impl TxPath {
    /// Resolves the route of `path` out of the device's netdev. Does not sleep.
    pub(crate) fn new(dev: &Device<Ferroce>, path: Path) -> Result<Self> {
        let nd = dev.data().netdev.clone();
        let net = nd.net().ok_or(ENODEV)?;
        // The lookup also proves the source address is one of the namespace's own, even for a
        // packet that never leaves (a user's address vector names both ends).
        let route = match &path {
            Path::V4(p) => {
                let oif = if path.is_loopback() { 0 } else { nd.ifindex() };
                let r = ipv4::Route::output(&net, p.saddr, p.daddr, oif)?;
                if path.is_loopback() {
                    Route::Loopback
                } else {
                    Route::V4(r)
                }
            }
            Path::V6(p) => {
                let oif = if path.is_loopback() { 0 } else { nd.ifindex() };
                let r = ipv6::Route::output(&net, p.saddr, p.daddr, p.flow_label, oif)?;
                if path.is_loopback() {
                    Route::Loopback
                } else {
                    Route::V6(r)
                }
            }
        };
        Ok(Self {
            netdev: nd,
            route,
            path,
        })
    }

    /// Whether it leads to one other host: for IPv4 a unicast route (not a broadcast,
    /// multicast or local one), for IPv6 a destination that is neither unspecified, loopback,
    /// multicast nor IPv4-mapped.
    pub(crate) fn is_unicast(&self) -> bool {
        match (&self.route, &self.path) {
            (Route::V4(r), _) => r.is_unicast(),
            (Route::V6(_), Path::V6(p)) => {
                let a = &p.daddr;
                let unspecified_or_loopback = a[..15].iter().all(|&b| b == 0) && a[15] <= 1;
                !unspecified_or_loopback && mapped_ipv4(a).is_none() && !is_multicast(a)
            }
            _ => false,
        }
    }

    /// Whether this is still the way to `path`: same path, and a route that still holds.
    pub(crate) fn is_current(&self, path: &Path) -> bool {
        self.path == *path
            && match &self.route {
                Route::V4(r) => r.is_current(),
                Route::V6(r) => r.is_current(),
                Route::Loopback => true,
            }
    }
}

/// Packets to one peer, queued on one QP's outbox.
pub(crate) struct Xmit<'a> {
    dev: &'a Device<Ferroce>,
    to: &'a TxPath,
    out: &'a SkbQueue,
}

impl<'a> Xmit<'a> {
    pub(crate) fn new(dev: &'a Device<Ferroce>, to: &'a TxPath, out: &'a SkbQueue) -> Self {
        Self { dev, to, out }
    }

    /// The device it sends from.
    pub(crate) fn device(&self) -> &'a Device<Ferroce> {
        self.dev
    }

    /// Whether it sends to one other host (see [`TxPath::is_unicast`]).
    pub(crate) fn is_unicast(&self) -> bool {
        self.to.is_unicast()
    }

    /// Queues one packet.
    pub(crate) fn send(&self, bth: &Bth, ext: &ExtHeaders, payload: &[u8]) -> Result {
        self.send_with(bth, ext, payload.len(), |dst| {
            dst.copy_from_slice(payload);
            Ok(())
        })
    }

    /// Queues one packet whose `payload_len` bytes `fill` writes straight into the skb;
    /// `EFAULT` if it cannot. Does not sleep.
    pub(crate) fn send_with(
        &self,
        bth: &Bth,
        ext: &ExtHeaders,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), BuildError>,
    ) -> Result {
        self.send_at(bth, ext, payload_len, fill, None)
    }

    /// The length on the wire (from the IP header) of a packet of `opcode` carrying
    /// `payload_len` bytes.
    pub(crate) fn wire_len(&self, opcode: u8, payload_len: usize) -> Option<usize> {
        self.to.path.packet_len(opcode, payload_len)
    }

    /// As [`Xmit::send_with`], for a packet that does not react to congestion marks: not
    /// ECN-capable, whatever the path's traffic class.
    pub(crate) fn send_not_ect(
        &self,
        bth: &Bth,
        ext: &ExtHeaders,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), BuildError>,
    ) -> Result {
        let path = crate::cc::unmarked(self.to.path);
        self.send_on(&path, bth, ext, payload_len, fill, None)
    }

    /// As [`Xmit::send_with`], to leave no earlier than `depart` (paced, see [`crate::cc`]).
    pub(crate) fn send_at(
        &self,
        bth: &Bth,
        ext: &ExtHeaders,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), BuildError>,
        depart: Option<Instant<Monotonic>>,
    ) -> Result {
        self.send_on(&self.to.path, bth, ext, payload_len, fill, depart)
    }

    /// Builds the packet along `path` (the kept route's, perhaps with another traffic class).
    fn send_on(
        &self,
        path: &Path,
        bth: &Bth,
        ext: &ExtHeaders,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), BuildError>,
        depart: Option<Instant<Monotonic>>,
    ) -> Result {
        let len = path.packet_len(bth.opcode, payload_len).ok_or(EINVAL)?;
        let mut skb = SkBuff::new_packet(&self.to.netdev, len, GFP_ATOMIC, |out| {
            path.build_with(bth, ext, payload_len, out, fill)
                .map_err(|e| match e {
                    BuildError::Payload => EFAULT,
                    _ => EINVAL,
                })
        })?;
        if let Some(at) = depart {
            skb.set_departure(at);
        }
        let data = self.dev.data();
        match &self.to.route {
            Route::V4(r) => {
                r.attach(&mut skb);
                self.out.push_routed(skb);
            }
            Route::V6(r) => {
                r.attach(&mut skb);
                self.out.push_routed(skb);
            }
            Route::Loopback => {
                skb.pull(path.ip_header_len())?;
                super::recv::deliver(data, skb, true);
            }
        }
        data.counters.inc(Counter::SentPkts);
        data.counters.add(Counter::SentBytes, payload_len as u64);
        Ok(())
    }
}
