// SPDX-License-Identifier: GPL-2.0

//! Hardware RoCE on the same netdev. A RoCE NIC takes UDP 4791 traffic for its GIDs in
//! hardware, so a soft device beside it would receive nothing, and rdma_cm binds to whichever
//! device registered first. By default (`defer`) ferroce makes no device where a hardware RDMA
//! device serves the netdev's RoCE, and says which device to use; `force` makes one anyway,
//! with a warning. The policy is the module parameter `hw_force` at load, then debugfs
//! `ferroce/hw_policy` (`defer` or `force`).

use core::{
    fmt,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    net::netdevice::NetDevice, prelude::*, rdma::device::OtherDevice, uaccess::UserSliceReader,
};

/// What `rdma link add` does on a netdev whose RoCE a hardware device serves.
pub(crate) struct HwPolicy {
    force: AtomicBool,
}

impl HwPolicy {
    /// As the module parameter `hw_force` says.
    pub(crate) fn from_module_param() -> Self {
        Self {
            force: AtomicBool::new(crate::module_parameters::hw_force.value()),
        }
    }

    fn name(force: bool) -> &'static str {
        if force {
            "force"
        } else {
            "defer"
        }
    }

    /// The debugfs file's text.
    pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", Self::name(self.force.load(Ordering::Relaxed)))
    }

    /// `defer` or `force` written to the debugfs file; anything else is refused with `EINVAL`.
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
        self.force.store(force, Ordering::Relaxed);
        Ok(())
    }

    /// Whether device `name` may be made on `netdev`: `EBUSY` under `defer` if a hardware
    /// device serves its RoCE, with a log line naming that device.
    pub(crate) fn admit(&self, name: &CStr, netdev: &NetDevice) -> Result {
        let Some(hw) = OtherDevice::hardware_roce_on(netdev) else {
            return Ok(());
        };
        if !self.force.load(Ordering::Relaxed) {
            pr_warn!(
                "{}: not added: RoCE on {} is served by hardware device {}, use it (hw_policy force adds a soft device anyway)\n",
                name,
                netdev.name(),
                hw.name()
            );
            return Err(EBUSY);
        }
        pr_warn!(
            "{}: added on {} beside hardware device {} (hw_policy force): both serve its GIDs, and rdma_cm binds to {}, which registered first\n",
            name,
            netdev.name(),
            hw.name(),
            hw.name()
        );
        Ok(())
    }
}
