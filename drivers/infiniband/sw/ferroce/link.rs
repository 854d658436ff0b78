// SPDX-License-Identifier: GPL-2.0

//! Making devices: `rdma link add` (and auto-provisioning, through [`add`]), and following
//! their netdevs' events.

use crate::{
    counters::Counter,
    device::{retire, Ferroce, FerroceDevice},
    hw::HW_POLICY,
};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    debugfs::Dir,
    net::{
        netdevice::{LinkType, NetDevice, Rtnl},
        notifier::{NetdevEvent, NetdevNotifierHandler},
    },
    prelude::*,
    rdma::{
        attr::uverbs_cmd,
        device::{Device, DeviceOptions},
        link::LinkOps,
        slot::ContextSlot,
    },
    time::{delay::fsleep, Delta},
};

/// Serialises `rdma link add`, so that two racing adds on one netdev cannot both pass the
/// "already has a device" check. Link creation is rare; a sleeping try-lock is enough.
static NEWLINK_BUSY: AtomicBool = AtomicBool::new(false);

struct NewlinkGuard;

impl NewlinkGuard {
    fn lock() -> Self {
        while NEWLINK_BUSY
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            fsleep(Delta::from_millis(1));
        }
        NewlinkGuard
    }
}

impl Drop for NewlinkGuard {
    fn drop(&mut self) {
        NEWLINK_BUSY.store(false, Ordering::Release);
    }
}

/// What the module gives every device it creates.
pub(crate) struct Links {
    /// `ferroce/` in debugfs: a directory per device.
    debugfs: Dir,
}

impl Links {
    /// `debugfs` is the module's `ferroce/` directory.
    pub(crate) fn new(debugfs: Dir) -> Self {
        Self { debugfs }
    }
}

static LINKS: ContextSlot<Links> = ContextSlot::new();

impl LinkOps for Ferroce {
    const TYPE: &'static CStr = c"rxe";
    type Context = Links;
    const CONTEXT: &'static ContextSlot<Links> = &LINKS;

    fn newlink(links: &Links, name: &CStr, netdev: &NetDevice) -> Result {
        add(&links.debugfs, name, netdev, || {
            HW_POLICY.admit(name, netdev)
        })?;
        HW_POLICY.recheck(name, netdev)
    }
}

/// Makes device `name` on `netdev`, with its debugfs directory under `debugfs`: for
/// `rdma link add` and auto-provisioning alike. `admit` says whether hardware RoCE there
/// allows it, once the netdev is known to be one that takes a device and has none.
pub(crate) fn add(
    debugfs: &Dir,
    name: &CStr,
    netdev: &NetDevice,
    admit: impl FnOnce() -> Result,
) -> Result {
    if netdev.is_vlan() {
        pr_warn!(
            "{}: refusing VLAN device {}: add the link on its real device\n",
            name,
            netdev.name()
        );
        return Err(EPERM);
    }
    match netdev.link_type() {
        LinkType::Ether | LinkType::RawIp => {}
        other => {
            pr_warn!(
                "{}: refusing {}: not an Ethernet or IP device ({:?})\n",
                name,
                netdev.name(),
                other
            );
            return Err(EINVAL);
        }
    }
    let _guard = NewlinkGuard::lock();
    if let Some(existing) = Device::<Ferroce>::get_by_netdev(netdev) {
        pr_warn!(
            "{}: {} already has device {}\n",
            name,
            netdev.name(),
            existing.name()
        );
        return Err(EEXIST);
    }
    admit()?;
    let data = FerroceDevice::new(debugfs, name, netdev)?;
    let guid = data.guid();
    let opts = DeviceOptions {
        name,
        netdev,
        node_guid: guid,
        node_desc: b"ferroce",
        uverbs_cmd_mask: uverbs_cmd::POST_SEND | uverbs_cmd::REQ_NOTIFY_CQ,
    };
    Device::<Ferroce>::register(&opts, Ok::<_, Error>(data))?;
    // A netdev unregistered or moved to another namespace meanwhile sent its
    // `NETDEV_UNREGISTER` before the device could be found by it: the device would stay on a
    // dead netdev (until the netdev core's next reminder), or on one in a namespace whose
    // sockets it does not have. Under RTNL, a netdev still registered here sends that event
    // later, and it finds the device.
    let rtnl = Rtnl::lock();
    let dev = Device::<Ferroce>::get_by_netdev(netdev);
    let stale = dev
        .as_ref()
        .is_none_or(|dev| !netdev.is_registered(&rtnl) || !dev.data().serves_namespace_of(netdev));
    drop(rtnl);
    if stale {
        pr_warn!(
            "{}: not added: {} went away or moved meanwhile\n",
            name,
            netdev.name()
        );
        if let Some(dev) = dev {
            retire(dev);
        }
        return Err(ENODEV);
    }
    Ok(())
}

impl NetdevNotifierHandler for Ferroce {
    fn event(&self, netdev: &NetDevice, event: NetdevEvent) {
        let Some(dev) = Device::<Ferroce>::get_by_netdev(netdev) else {
            return;
        };
        match event {
            // Also a move to another namespace: the device goes, as with C rxe.
            NetdevEvent::Unregister => retire(dev),
            NetdevEvent::ChangeMtu => dev.data().set_link_mtu(netdev.mtu()),
            NetdevEvent::Down | NetdevEvent::Change if !netdev.is_running_with_carrier() => {
                dev.data().counters.inc(Counter::LinkDowned)
            }
            // Port up/down events come from the RDMA core's own netdev notifier.
            _ => {}
        }
    }
}
