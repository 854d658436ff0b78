// SPDX-License-Identifier: GPL-2.0

//! Sending a QP's packets to one peer: the netdev, namespace and route are looked up once per
//! batch, then each packet is built in place in its skb. A packet for the device's own address
//! (both QPs on one device) goes straight to its receive queue, as the stack would not bring it
//! back: it would arrive on the loopback device, which no ferroce device is on.

use crate::{
    counters::Counter,
    device::Ferroce,
    proto::{
        bth::Bth,
        build::Path,
        packet::{BuildError, ExtHeaders},
    },
    recv::RxQueue,
};
use kernel::{
    net::{ipv4, ipv6, namespace::Namespace, netdevice::NetDevice, skbuff::SkBuff},
    prelude::*,
    rdma::device::Device,
    sync::aref::ARef,
};

/// A route over either IP version, or none: to the device itself.
enum Route {
    V4(ipv4::Route),
    V6(ipv6::Route),
    Loopback,
}

/// Packets to one peer along one route.
pub(crate) struct Xmit<'a> {
    dev: &'a Device<Ferroce>,
    netdev: ARef<NetDevice>,
    net: ARef<Namespace>,
    route: Route,
    path: Path,
}

impl<'a> Xmit<'a> {
    /// Resolves the route of `path` out of the device's netdev.
    pub(crate) fn new(dev: &'a Device<Ferroce>, path: Path) -> Result<Self> {
        let nd = dev.netdev(1).ok_or(ENODEV)?;
        let net = nd.net().ok_or(ENODEV)?;
        let route = match &path {
            _ if path.is_loopback() => Route::Loopback,
            Path::V4(p) => Route::V4(ipv4::Route::output(&net, p.saddr, p.daddr, nd.ifindex())?),
            Path::V6(p) => Route::V6(ipv6::Route::output(
                &net,
                p.saddr,
                p.daddr,
                p.flow_label,
                nd.ifindex(),
            )?),
        };
        Ok(Self {
            dev,
            netdev: nd,
            net,
            route,
            path,
        })
    }

    /// Sends one packet.
    pub(crate) fn send(&self, bth: &Bth, ext: &ExtHeaders, payload: &[u8]) -> Result {
        self.send_with(bth, ext, payload.len(), |dst| {
            dst.copy_from_slice(payload);
            Ok(())
        })
    }

    /// Sends one packet whose `payload_len` bytes `fill` writes straight into the skb;
    /// `EFAULT` if it cannot.
    pub(crate) fn send_with(
        &self,
        bth: &Bth,
        ext: &ExtHeaders,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), BuildError>,
    ) -> Result {
        let len = self
            .path
            .packet_len(bth.opcode, payload_len)
            .ok_or(EINVAL)?;
        let mut skb = SkBuff::new_packet(&self.netdev, len, |out| {
            self.path
                .build_with(bth, ext, payload_len, out, fill)
                .map_err(|e| match e {
                    BuildError::Payload => EFAULT,
                    _ => EINVAL,
                })
        })?;
        match &self.route {
            Route::V4(r) => r.clone().send(&self.net, skb)?,
            Route::V6(r) => r.clone().send(&self.net, skb)?,
            Route::Loopback => {
                skb.pull(self.path.ip_header_len())?;
                RxQueue::take(self.dev.data(), skb);
            }
        }
        let counters = &self.dev.data().counters;
        counters.inc(Counter::SentPkts);
        counters.add(Counter::SentBytes, payload_len as u64);
        Ok(())
    }
}
