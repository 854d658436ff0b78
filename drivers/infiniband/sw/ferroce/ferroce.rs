// SPDX-License-Identifier: GPL-2.0

//! ferroce: a RoCEv2 soft-RDMA provider, loaded as `rdma_rxe`.
//!
//! It is a drop-in for the C rxe driver: same module name, link type, driver id and user ABI.

use kernel::prelude::*;

// The data path will use the protocol logic; until then only the KUnit suites do.
#[cfg_attr(not(CONFIG_KUNIT), expect(dead_code))]
mod proto;

#[cfg(CONFIG_KUNIT)]
mod proto_kunit;

/// The driver version, logged on load.
const VERSION: &str = "0.1.0";

module! {
    type: Ferroce,
    name: "rdma_rxe",
    authors: ["The ferroce developers"],
    description: "ferroce: Soft RDMA over Converged Ethernet (RoCEv2) provider in Rust",
    license: "GPL",
}

struct Ferroce;

impl kernel::Module for Ferroce {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!(
            "ferroce {VERSION} loaded (RoCEv2 on UDP port {})\n",
            proto::ROCE_V2_UDP_PORT
        );
        Ok(Ferroce)
    }
}

impl Drop for Ferroce {
    fn drop(&mut self) {
        pr_info!("ferroce {VERSION} unloaded\n");
    }
}
