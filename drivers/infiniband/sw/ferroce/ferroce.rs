// SPDX-License-Identifier: GPL-2.0

//! ferroce: a RoCEv2 soft-RDMA provider, loaded as `rdma_rxe`.
//!
//! It is a drop-in for the C rxe driver: same module name, link type, driver id and user ABI.

use kernel::{
    // The CRC-32 `proto` builds on.
    crc::crc32_le,
    debugfs::Dir,
    net::{namespace::PernetRegistration, notifier::NetdevNotifier},
    prelude::*,
    rdma::{client::ClientRegistration, device::DriverDevices, link::LinkRegistration},
};

mod abi;
mod ah;
mod auto;
mod cc;
mod counters;
mod cq;
mod device;
mod frwr;
mod hw;
mod limits;
mod link;
mod mcast;
mod mr;
mod mw;
mod net;
mod proto;

#[cfg(CONFIG_KUNIT)]
mod proto_kunit;
mod qp;
mod queue;
mod rc;
mod sge;
mod srq;
mod ud;
mod verbs;

use device::Ferroce;

/// The driver version, logged on load.
const VERSION: &str = "0.2.0";

module! {
    type: FerroceModule,
    name: "rdma_rxe",
    authors: ["The ferroce developers"],
    description: "ferroce: Soft RDMA over Converged Ethernet (RoCEv2) provider in Rust",
    license: "GPL",
    alias: ["rdma-link-rxe"],
    params: {
        cc: bool {
            default: true,
            description: "ECN congestion control (ECT marking, CNPs, DCQCN) of new devices; then debugfs ferroce/<dev>/cc_enable",
        },
        np_min_time_between_cnps: u32 {
            default: 4,
            description: "Microseconds at least between two CNPs of one QP (0-131071)",
        },
        hw_force: bool {
            default: false,
            description: "Add devices also on netdevs whose RoCE a hardware RDMA device serves (default: refuse with EBUSY, naming it); then /sys/kernel/ferroce/hw_policy",
        },
        auto_netdevs: str {
            default: "",
            description: "Netdev name globs, comma-separated (e.g. 'eth*,enp*' or '*'): every Ethernet netdev that matches, in any namespace, now or later, gets a device rxe_<netdev>, unless hardware RoCE serves it; default: none",
        },
        stream_highpri: bool {
            default: false,
            description: "Send new devices' RDMA WRITE streams from high-priority (nice -20) workers, for hosts whose processes busy-poll every CPU; default: normal priority (nice 0)",
        },
        rp_ai_rate: u32 {
            default: 5,
            description: "DCQCN additive increase of the target rate, Mb/s (1-100000)",
        },
    },
}

/// Module state. Fields drop in order: no more watching for hardware RoCE (it removes and
/// provisions devices), its sysfs files, no more auto-provisioning (its queue drains), no new
/// links, then every device goes, then the notifier (unregistering it replays events for every
/// netdev, so no device may be left), then the per-namespace sockets.
#[pin_data(PinnedDrop)]
struct FerroceModule {
    #[pin]
    hw_watch: ClientRegistration<hw::HwWatch>,
    hw_files: Pin<KBox<hw::HwFiles>>,
    auto: Option<Pin<KBox<NetdevNotifier<auto::AutoNetdevs>>>>,
    #[pin]
    link: LinkRegistration<Ferroce>,
    devices: DriverDevices<Ferroce>,
    #[pin]
    notifier: NetdevNotifier<Ferroce>,
    #[pin]
    sockets: PernetRegistration<net::RoceNet>,
}

impl kernel::InPlaceModule for FerroceModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pr_info!(
            "ferroce {VERSION} loaded (RoCEv2 on UDP port {})\n",
            proto::ROCE_V2_UDP_PORT
        );
        let debugfs = Dir::new(c"ferroce");
        let hw_devices = hw::HwDevices::new();
        let provisioner = match &hw_devices {
            Ok(hw) => auto::Provisioner::new(&debugfs, hw),
            Err(e) => Err(*e),
        };
        try_pin_init!(Self {
            sockets <- PernetRegistration::register(),
            notifier <- NetdevNotifier::register(Ferroce),
            devices: DriverDevices::new(),
            hw_files: hw::HwFiles::new(hw_devices.clone()?)?,
            link <- LinkRegistration::register(Ok::<_, Error>(link::Links::new(debugfs))),
            auto: auto::watch(provisioner.clone()?)?,
            hw_watch <- ClientRegistration::register(Ok::<_, Error>(hw::HwWatchState {
                auto: provisioner?,
                devices: hw_devices?,
            })),
        })
    }
}

#[pinned_drop]
impl PinnedDrop for FerroceModule {
    fn drop(self: Pin<&mut Self>) {
        // Unregistering the hardware watch reports every device as removed: none of them
        // frees a netdev for auto-provisioning now.
        if let Some(auto) = &self.hw_watch.context().auto {
            auto.close();
        }
        pr_info!("ferroce {VERSION} unloaded\n");
    }
}
