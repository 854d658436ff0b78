// SPDX-License-Identifier: GPL-2.0

//! Hardware RoCE on the same netdev. A RoCE NIC takes UDP 4791 traffic for its GIDs in
//! hardware, so a soft device beside it would receive nothing, and rdma_cm binds to whichever
//! device registered first. By default (`defer`) ferroce makes no device where a hardware RDMA
//! device serves the netdev's RoCE, and says which device to use; `force` makes one anyway,
//! with a warning. The same holds for a hardware device that appears after ferroce's: under
//! `defer` ferroce's device goes. The policy is the module parameter `hw_force` at load, then
//! debugfs `ferroce/hw_policy` (`defer` or `force`).

use crate::device::Ferroce;
use core::{
    fmt,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    net::netdevice::NetDevice,
    prelude::*,
    rdma::{
        client::ClientHandler,
        device::{Device, OtherDevice},
    },
    uaccess::UserSliceReader,
};

/// What `rdma link add` does on a netdev whose RoCE a hardware device serves, and what
/// becomes of a device whose netdev a hardware device takes later: one policy for the module.
pub(crate) struct HwPolicy {
    force: AtomicBool,
}

/// The module's policy: `hw_force` sets it at load, debugfs after.
pub(crate) static HW_POLICY: HwPolicy = HwPolicy {
    force: AtomicBool::new(false),
};

/// `ferroce/hw_policy` in debugfs: reads and sets [`HW_POLICY`].
pub(crate) struct HwPolicyFile;

impl HwPolicyFile {
    /// The file, with the policy set from the module parameter `hw_force`.
    pub(crate) fn new() -> Self {
        HW_POLICY.force.store(
            crate::module_parameters::hw_force.value(),
            Ordering::Relaxed,
        );
        Self
    }

    pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", if HW_POLICY.forced() { "force" } else { "defer" })
    }

    /// `defer` or `force`; anything else is refused with `EINVAL`.
    pub(crate) fn store(&self, r: &mut UserSliceReader) -> Result {
        let mut buf = [0u8; 8];
        let buf = buf.get_mut(..r.len()).ok_or(EINVAL)?;
        r.read_slice(buf)?;
        let force = match core::str::from_utf8(buf).map(str::trim) {
            Ok("defer") => false,
            Ok("force") => true,
            _ => {
                pr_warn!("ferroce: hw_policy refused: defer or force\n");
                return Err(EINVAL);
            }
        };
        HW_POLICY.force.store(force, Ordering::Relaxed);
        Ok(())
    }
}

impl HwPolicy {
    fn forced(&self) -> bool {
        self.force.load(Ordering::Relaxed)
    }

    /// After device `name` registered on `netdev`: a hardware device enabled meanwhile (after
    /// [`Self::admit`] looked) may not have seen it, but is seen now; under `defer` the new
    /// device goes again (queued) and the add fails with `EBUSY`. One of the two checks sees
    /// the other: each device is findable before it is enabled.
    pub(crate) fn recheck(&self, name: &CStr, netdev: &NetDevice) -> Result {
        if self.forced() {
            return Ok(());
        }
        let Some(hw) = OtherDevice::hardware_roce_on(netdev) else {
            return Ok(());
        };
        pr_warn!(
            "{}: not added: RoCE on {} is served by hardware device {}, registered meanwhile, use it\n",
            name,
            netdev.name(),
            hw.name()
        );
        if let Some(soft) = Device::<Ferroce>::get_by_netdev(netdev) {
            soft.unregister_queued();
        }
        Err(EBUSY)
    }

    /// Whether device `name` may be made on `netdev`: `EBUSY` under `defer` if a hardware
    /// device serves its RoCE, with a log line naming that device.
    pub(crate) fn admit(&self, name: &CStr, netdev: &NetDevice) -> Result {
        let Some(hw) = OtherDevice::hardware_roce_on(netdev) else {
            return Ok(());
        };
        if !self.forced() {
            pr_warn!(
                "{}: not added: RoCE on {} is served by hardware device {}, use it (hw_policy force adds a soft device anyway)\n",
                name,
                netdev.name(),
                hw.name()
            );
            return Err(EBUSY);
        }
        pr_warn!(
            "{}: adding on {} beside hardware device {} (hw_policy force): both serve its GIDs, rdma_cm binds to {}, which registered first, and the core's port events for the netdev reach only this device\n",
            name,
            netdev.name(),
            hw.name(),
            hw.name()
        );
        Ok(())
    }
}

/// Watches the devices the RDMA core registers: one that runs RoCE in hardware on a netdev
/// with a ferroce device takes it over under `defer` (the ferroce device goes, as on
/// `rdma link del`); under `force` both stay, with a warning.
pub(crate) struct HwWatch;

impl ClientHandler for HwWatch {
    const NAME: &'static CStr = c"ferroce_hw";

    fn added(hw: &OtherDevice) {
        hw.for_each_hardware_roce_netdev(|netdev| {
            let Some(soft) = Device::<Ferroce>::get_by_netdev(netdev) else {
                return;
            };
            if HW_POLICY.forced() {
                pr_warn!(
                    "{}: stays on {} beside hardware device {} (hw_policy force): rdma_cm binds to {}, which registered first, the NIC takes RoCE to its GIDs, and the core's port events for the netdev reach only {}\n",
                    soft.name(),
                    netdev.name(),
                    hw.name(),
                    soft.name(),
                    hw.name()
                );
                return;
            }
            pr_warn!(
                "{}: removed: RoCE on {} is now served by hardware device {}, use it\n",
                soft.name(),
                netdev.name(),
                hw.name()
            );
            soft.unregister_queued();
        });
    }
}
