// SPDX-License-Identifier: GPL-2.0

//! Sending a QP's packets to one peer: the netdev, namespace and route are looked up once per
//! batch, then each packet is built in place in its skb.

use crate::{
    counters::Counter,
    device::Ferroce,
    proto::{
        bth::Bth,
        build::{build_ipv4, ipv4_packet_len, Ipv4Path},
        packet::ExtHeaders,
    },
};
use kernel::{
    net::{ipv4::Route, namespace::Namespace},
    prelude::*,
    rdma::device::Device,
    sync::aref::ARef,
};

/// Packets to one peer along one route.
pub(crate) struct Xmit<'a> {
    dev: &'a Device<Ferroce>,
    net: ARef<Namespace>,
    route: Route,
    path: Ipv4Path,
}

impl<'a> Xmit<'a> {
    /// Resolves the route of `path` out of the device's netdev.
    pub(crate) fn new(dev: &'a Device<Ferroce>, path: Ipv4Path) -> Result<Self> {
        let nd = dev.netdev(1).ok_or(ENODEV)?;
        let net = nd.net().ok_or(ENODEV)?;
        let route = Route::output(&net, path.saddr, path.daddr, nd.ifindex())?;
        Ok(Self {
            dev,
            net,
            route,
            path,
        })
    }

    /// Sends one packet.
    pub(crate) fn send(&self, bth: &Bth, ext: &ExtHeaders, payload: &[u8]) -> Result {
        let len = ipv4_packet_len(bth.opcode, payload.len()).ok_or(EINVAL)?;
        self.route.clone().send(&self.net, len, |out| {
            build_ipv4(&self.path, bth, ext, payload, out).map_err(|_| EINVAL)
        })?;
        let counters = &self.dev.data().counters;
        counters.inc(Counter::SentPkts);
        counters.add(Counter::SentBytes, payload.len() as u64);
        Ok(())
    }
}
