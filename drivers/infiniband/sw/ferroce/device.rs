// SPDX-License-Identifier: GPL-2.0

//! One ferroce device: a RoCEv2 port over a netdev, created by `rdma link add` or
//! auto-provisioning ([`crate::link`]), and its way out. Its verbs are in [`crate::verbs`].

use crate::{
    ah::AhTable,
    cc::Cc,
    counters::Counters,
    mcast::McastTable,
    mr::MrTable,
    net::PortsUse,
    proto::{eui64, mtu},
    qp::QpTable,
};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::{
    debugfs::Dir,
    net::netdevice::NetDevice,
    prelude::*,
    rdma::device::{Device, DeviceRef},
    sync::{aref::ARef, Arc},
    workqueue::{OwnedQueue, WQ_HIGHPRI, WQ_MEM_RECLAIM, WQ_PERCPU, WQ_UNBOUND},
};

/// The ferroce provider.
pub(crate) struct Ferroce;

/// Per-device state. The netdev is the core's to hold (`ib_device_set_netdev`).
pub(crate) struct FerroceDevice {
    /// Runs the QPs' work; drained when the device goes (see `Drop`).
    pub(crate) wq: Arc<OwnedQueue>,
    /// Where user QPs' streams are sent.
    pub(crate) stream_wq: Arc<OwnedQueue>,
    /// Active IB MTU in bytes, following the netdev MTU.
    ib_mtu: AtomicU32,
    guid: [u8; 8],
    pub(crate) counters: Arc<Counters>,
    /// Memory regions by key.
    pub(crate) mrs: Arc<MrTable>,
    /// Queue pairs by number.
    pub(crate) qps: Arc<QpTable>,
    /// Address handles by number.
    pub(crate) ahs: Arc<AhTable>,
    /// Multicast groups and their UD QPs.
    pub(crate) mcast: Arc<McastTable>,
    /// How many SRQs it has (see `srq.rs`).
    pub(crate) srqs: Arc<AtomicU32>,
    /// The netdev the device is on, for the data path: the core's copy is behind a lock that
    /// softirqs must not take.
    pub(crate) netdev: ARef<NetDevice>,
    /// ECN congestion control.
    pub(crate) cc: Cc,
    /// Keeps the namespace's UDP port open while the device exists.
    ports: PortsUse,
    /// Its unregistration is queued ([`retire`]): it is on its way out.
    going: AtomicBool,
}

impl FerroceDevice {
    /// Whether its unregistration is queued.
    pub(crate) fn going(&self) -> bool {
        self.going.load(Ordering::Relaxed)
    }

    /// Whether the device's sockets are those of the namespace `netdev` is in now.
    pub(crate) fn serves_namespace_of(&self, netdev: &NetDevice) -> bool {
        self.ports.serves(netdev)
    }

    /// The active IB MTU in bytes.
    pub(crate) fn ib_mtu(&self) -> u32 {
        self.ib_mtu.load(Ordering::Relaxed)
    }

    /// The state of a new device `name` on `netdev`, its debugfs files under `debugfs`.
    pub(crate) fn new(debugfs: &Dir, name: &CStr, netdev: &NetDevice) -> Result<Self> {
        let guid = match netdev.mac_addr() {
            Some(mac) => eui64::from_mac(mac),
            // CAST: Interface indexes are positive.
            None => eui64::from_ifindex(netdev.ifindex() as u32),
        };
        let counters = Arc::new(Counters::new(), GFP_KERNEL)?;
        let qps = Arc::pin_init(QpTable::new(), GFP_KERNEL)?;
        Ok(FerroceDevice {
            // Per CPU: a QP's work runs where it was kicked (where its packets were taken), so
            // what it sends follows what was sent from there, in order. With a rescuer: block
            // storage (NVMe-oF, RNBD) moves its I/O through this queue, and destroys QPs, which
            // flushes it, from queues of its own that memory reclaim may wait on.
            wq: Arc::new(
                OwnedQueue::new(name, WQ_PERCPU | WQ_MEM_RECLAIM)?,
                GFP_KERNEL,
            )?,
            // Unbound: a user QP's stream is sent beside its poster, on another CPU (see
            // `rc::req::leaves_to_work`). Kernel consumers never stream.
            stream_wq: Arc::new(OwnedQueue::new(name, stream_wq_flags())?, GFP_KERNEL)?,
            ib_mtu: AtomicU32::new(mtu::ib_mtu_for_link(netdev.mtu())),
            guid,
            counters,
            mrs: Arc::pin_init(MrTable::new(), GFP_KERNEL)?,
            qps,
            ahs: Arc::pin_init(AhTable::new(), GFP_KERNEL)?,
            mcast: Arc::pin_init(McastTable::new(), GFP_KERNEL)?,
            srqs: Arc::new(AtomicU32::new(0), GFP_KERNEL)?,
            netdev: netdev.into(),
            cc: Cc::new(debugfs, name)?,
            ports: PortsUse::get(netdev)?,
            going: AtomicBool::new(false),
        })
    }

    /// The node and system image GUID, from the netdev's MAC address.
    pub(crate) fn guid(&self) -> [u8; 8] {
        self.guid
    }

    pub(crate) fn set_link_mtu(&self, link_mtu: u32) {
        self.ib_mtu
            .store(mtu::ib_mtu_for_link(link_mtu), Ordering::Relaxed);
    }
}

impl Drop for FerroceDevice {
    fn drop(&mut self) {
        if self.going() {
            GOING.fetch_sub(1, Ordering::Relaxed);
        }
        // QPs (and their timers) are gone; work still queued may hold the last references to
        // QP state, and with it to `wq`. Finish it here, so `wq` is never destroyed from one
        // of its own workers.
        self.wq.drain();
        self.stream_wq.drain();
    }
}

/// Per-user-context state: none (mapped rings are tracked by the core's mmap entries).
pub(crate) struct Ucontext;

/// Per-protection-domain state: none; objects refer to their PD by its id.
pub(crate) struct FerrocePd;

/// The stream queue's flags. Normal priority (nice 0) by default: a process that streams gets
/// no priority it could not give itself. High priority (`stream_highpri`) is for hosts where processes
/// busy-poll every CPU, which the scheduler otherwise gives an equal share of the stream's CPU.
fn stream_wq_flags() -> u32 {
    if crate::module_parameters::stream_highpri.value() {
        WQ_UNBOUND | WQ_HIGHPRI
    } else {
        WQ_UNBOUND
    }
}

/// Queues `dev`'s unregistration (safe under RTNL), marked as going, so that a look at its
/// netdev meanwhile knows to wait for it.
pub(crate) fn retire(dev: DeviceRef<Ferroce>) {
    if !dev.data().going.swap(true, Ordering::Relaxed) {
        GOING.fetch_add(1, Ordering::Relaxed);
    }
    dev.unregister_queued();
}

/// How many [`retire`]d devices are not freed yet (each holds its name until then).
static GOING: AtomicU32 = AtomicU32::new(0);

/// Whether a [`retire`]d device is not freed yet.
pub(crate) fn devices_going() -> bool {
    GOING.load(Ordering::Relaxed) != 0
}

/// [`retire`]s the device on `netdev`, if it has one.
pub(crate) fn retire_on(netdev: &NetDevice) {
    if let Some(dev) = Device::<Ferroce>::get_by_netdev(netdev) {
        retire(dev);
    }
}
