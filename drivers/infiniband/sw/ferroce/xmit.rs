// SPDX-License-Identifier: GPL-2.0

//! Sending a QP's packets to one peer: the netdev, namespace and route are looked up once per
//! batch, then each packet is built in place in its skb.

use crate::{
    counters::Counter,
    device::Ferroce,
    proto::{bth::Bth, build::Path, packet::ExtHeaders},
};
use kernel::{
    net::{ipv4, ipv6, namespace::Namespace},
    prelude::*,
    rdma::device::Device,
    sync::aref::ARef,
};

/// A route over either IP version.
enum Route {
    V4(ipv4::Route),
    V6(ipv6::Route),
}

/// Packets to one peer along one route.
pub(crate) struct Xmit<'a> {
    dev: &'a Device<Ferroce>,
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
            net,
            route,
            path,
        })
    }

    /// Sends one packet.
    pub(crate) fn send(&self, bth: &Bth, ext: &ExtHeaders, payload: &[u8]) -> Result {
        let len = self
            .path
            .packet_len(bth.opcode, payload.len())
            .ok_or(EINVAL)?;
        let fill = |out: &mut [u8]| self.path.build(bth, ext, payload, out).map_err(|_| EINVAL);
        match &self.route {
            Route::V4(r) => r.clone().send(&self.net, len, fill)?,
            Route::V6(r) => r.clone().send(&self.net, len, fill)?,
        }
        let counters = &self.dev.data().counters;
        counters.inc(Counter::SentPkts);
        counters.add(Counter::SentBytes, payload.len() as u64);
        Ok(())
    }
}
