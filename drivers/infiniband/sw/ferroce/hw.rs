// SPDX-License-Identifier: GPL-2.0

//! Hardware RoCE on the same netdev. A RoCE NIC takes UDP 4791 traffic for its GIDs in
//! hardware, so a soft device beside it would receive nothing, and rdma_cm binds to whichever
//! device registered first. By default (`defer`) ferroce makes no device where a hardware RDMA
//! device serves the netdev's RoCE (on the netdev itself or on a device below it: a bond's
//! port, a macvlan's real device), and says which device to use; `force` makes one anyway,
//! with a warning. The same holds for a hardware device that appears after ferroce's: under
//! `defer` ferroce's device goes. The policy is the module parameter `hw_force` at load, then
//! `/sys/kernel/ferroce/hw_policy` (`defer` or `force`). A hardware device that goes away hands its
//! netdevs to auto-provisioning ([`crate::auto`]), if it is on.

use crate::{
    auto::Provisioner,
    device::{retire, retire_on, Ferroce},
};
use core::{
    fmt::{self, Write},
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    net::netdevice::NetDevice,
    new_mutex,
    prelude::*,
    rdma::{
        client::ClientHandler,
        device::{Device, OtherDevice},
        slot::ContextSlot,
    },
    str::Formatter,
    sync::{Arc, Mutex},
    sysfs::{Attr, AttrFile, KernelDir},
};

/// The hardware device that serves RoCE on `netdev`, or on a device below it (a bond's or
/// team's port, a macvlan's real device), other than the device with index `except` (one
/// being removed). `ENOMEM` if the devices below cannot be listed: no answer is not "none".
pub(crate) fn serving_hardware(
    netdev: &NetDevice,
    except: Option<u32>,
) -> Result<Option<OtherDevice>> {
    let other = |hw: &OtherDevice| Some(hw.index()) != except;
    if let Some(hw) = OtherDevice::hardware_roce_on(netdev).find(other) {
        return Ok(Some(hw));
    }
    Ok(netdev
        .lowers()?
        .iter()
        .find_map(|lower| OtherDevice::hardware_roce_on(lower).find(other)))
}

/// After device `name` registered on `netdev`: a hardware device enabled meanwhile (other than
/// the one with index `except`, see [`serving_hardware`]) may not have seen it, but is seen
/// now; then the device goes again (queued) and this fails with `EBUSY`. Hardware that cannot
/// be ruled out (`ENOMEM`) counts as there.
pub(crate) fn retire_if_served(name: &CStr, netdev: &NetDevice, except: Option<u32>) -> Result {
    let hw = match serving_hardware(netdev, except) {
        Ok(None) => return Ok(()),
        Ok(Some(hw)) => hw,
        Err(e) => {
            pr_warn!(
                "{}: not added: hardware RoCE not ruled out ({:?})\n",
                name,
                e
            );
            retire_on(netdev);
            return Err(e);
        }
    };
    pr_warn!(
        "{}: not added: RoCE on {} is served by hardware device {}, registered meanwhile, use it\n",
        name,
        netdev.name(),
        hw.name()
    );
    retire_on(netdev);
    Err(EBUSY)
}

/// What `rdma link add` does on a netdev whose RoCE a hardware device serves, and what
/// becomes of a device whose netdev a hardware device takes later: one policy for the module.
pub(crate) struct HwPolicy {
    force: AtomicBool,
}

/// The module's policy: `hw_force` sets it at load, `/sys/kernel/ferroce/hw_policy` after.
pub(crate) static HW_POLICY: HwPolicy = HwPolicy {
    force: AtomicBool::new(false),
};

/// `/sys/kernel/ferroce/`: `hw_policy` reads and sets [`HW_POLICY`]; `hw_netdevs` lists the
/// netdevs that hardware devices serve. The files keep their directory.
#[pin_data]
pub(crate) struct HwFiles {
    #[pin]
    policy: AttrFile<PolicyAttr>,
    #[pin]
    netdevs: AttrFile<NetdevsAttr>,
}

impl HwFiles {
    /// The files, with the policy set from the module parameter `hw_force`.
    pub(crate) fn new(devices: Arc<HwDevices>) -> Result<Pin<KBox<Self>>> {
        HW_POLICY.force.store(
            crate::module_parameters::hw_force.value(),
            Ordering::Relaxed,
        );
        let dir = KernelDir::new(c"ferroce")?;
        KBox::pin_init(
            try_pin_init!(Self {
                policy <- AttrFile::new(&dir, c"hw_policy", 0o644, PolicyAttr),
                // Root only: it names netdevs of every namespace.
                netdevs <- AttrFile::new(&dir, c"hw_netdevs", 0o400, NetdevsAttr(devices)),
            }),
            GFP_KERNEL,
        )
    }
}

/// `hw_policy`: `defer` or `force`.
struct PolicyAttr;

impl Attr for PolicyAttr {
    fn show(&self, out: &mut Formatter<'_>) -> fmt::Result {
        writeln!(
            out,
            "{}",
            if HW_POLICY.forced() { "force" } else { "defer" }
        )
    }

    /// `defer` or `force` (a trailing newline is fine); anything else: `EINVAL`.
    fn store(&self, input: &[u8]) -> Result {
        let force = match core::str::from_utf8(input).map(str::trim) {
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

/// `hw_netdevs`: see [`HwDevices::list`].
struct NetdevsAttr(Arc<HwDevices>);

impl Attr for NetdevsAttr {
    fn show(&self, out: &mut Formatter<'_>) -> fmt::Result {
        self.0.list(out)
    }
}

impl HwPolicy {
    fn forced(&self) -> bool {
        self.force.load(Ordering::Relaxed)
    }

    /// After device `name` registered on `netdev`, under `defer`: [`retire_if_served`] (a
    /// hardware device enabled after [`Self::admit`] looked). One of the two checks sees the
    /// other: each device is findable before it is enabled.
    pub(crate) fn recheck(&self, name: &CStr, netdev: &NetDevice) -> Result {
        if self.forced() {
            return Ok(());
        }
        retire_if_served(name, netdev, None)
    }

    /// Whether device `name` may be made on `netdev`: `EBUSY` under `defer` if a hardware
    /// device serves its RoCE, with a log line naming that device.
    pub(crate) fn admit(&self, name: &CStr, netdev: &NetDevice) -> Result {
        let Some(hw) = serving_hardware(netdev, None)? else {
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

/// The hardware RoCE devices registered now, and what became of their netdevs:
/// `/sys/kernel/ferroce/hw_netdevs`.
#[pin_data]
pub(crate) struct HwDevices {
    #[pin]
    list: Mutex<KVec<OtherDevice>>,
}

impl HwDevices {
    /// Whether the device with index `index` is a registered hardware RoCE device now.
    pub(crate) fn contains(&self, index: u32) -> bool {
        self.list.lock().iter().any(|hw| hw.index() == index)
    }

    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                list <- new_mutex!(KVec::new()),
            }),
            GFP_KERNEL,
        )
    }

    /// One line per netdev that a hardware device serves (or a device above it): the netdev,
    /// the hardware device, and ferroce's device there (under `force`) or `-` (deferred).
    fn list(&self, f: &mut impl fmt::Write) -> fmt::Result {
        writeln!(f, "netdev hardware ferroce")?;
        // A copy, walked without the lock: `removed` takes it from a driver's unregister path.
        let mut devices = KVec::new();
        for hw in self.list.lock().iter() {
            devices
                .push(hw.clone(), GFP_KERNEL)
                .map_err(|_| fmt::Error)?;
        }
        for hw in devices.iter() {
            let mut res = Ok(());
            hw.for_each_hardware_roce_netdev(|netdev| {
                for_self_and_uppers(netdev, |served| {
                    let soft = Device::<Ferroce>::get_by_netdev(served);
                    let soft = match &soft {
                        Some(soft) => soft.name(),
                        None => c"-",
                    };
                    res = res.and_then(|()| {
                        writeln!(
                            f,
                            "{} {} {}",
                            text(served.name()),
                            text(hw.name()),
                            text(soft)
                        )
                    });
                })
            });
            res?;
        }
        Ok(())
    }
}

/// A netdev or device name as text; `?` for one that is not UTF-8.
fn text(name: &CStr) -> &str {
    name.to_str().unwrap_or("?")
}

/// Watches the devices the RDMA core registers: one that runs RoCE in hardware on a netdev
/// with a ferroce device (or below it: a bond's port) takes it over under `defer` (the ferroce
/// device goes, as on `rdma link del`); under `force` both stay, with a warning. One that goes
/// away hands its netdevs, and the devices above them, to auto-provisioning, if it is on.
pub(crate) struct HwWatch;

/// What the hardware watch keeps.
pub(crate) struct HwWatchState {
    /// Auto-provisioning, if it is on.
    pub(crate) auto: Option<Arc<Provisioner>>,
    /// The hardware RoCE devices there are.
    pub(crate) devices: Arc<HwDevices>,
}

static HW_WATCH: ContextSlot<HwWatchState> = ContextSlot::new();

impl ClientHandler for HwWatch {
    const NAME: &'static CStr = c"ferroce_hw";
    type Context = HwWatchState;
    const CONTEXT: &'static ContextSlot<Self::Context> = &HW_WATCH;

    fn added(state: &HwWatchState, hw: &OtherDevice) {
        if !hw.is_hardware() {
            return;
        }
        // Listed before the take-over: a look whose device registers after the take-over has
        // looked then sees this device, even under an index it was told to ignore (one
        // re-enabled in place by an RDMA namespace move). A device without RoCE netdevs adds
        // no line to `hw_netdevs`.
        if state
            .devices
            .list
            .lock()
            .push(hw.clone(), GFP_KERNEL)
            .is_err()
        {
            pr_warn!(
                "ferroce: {} not listed in hw_netdevs: no memory\n",
                hw.name()
            );
        }
        hw.for_each_hardware_roce_netdev(|netdev| {
            for_self_and_uppers(netdev, |served| take_over(hw, served))
        });
    }

    fn removed(state: &HwWatchState, hw: &OtherDevice) {
        // The core waits for our reference once every client is told: let go of it now.
        state
            .devices
            .list
            .lock()
            .retain(|dev| dev.index() != hw.index());
        let Some(auto) = &state.auto else {
            return;
        };
        hw.for_each_hardware_roce_netdev(|netdev| {
            for_self_and_uppers(netdev, |freed| auto.request(freed, Some(hw.index())))
        });
    }
}

/// Calls `f` with `netdev` and every device above it. An upper list that cannot be made (no
/// memory) is logged and skipped.
fn for_self_and_uppers(netdev: &NetDevice, mut f: impl FnMut(&NetDevice)) {
    f(netdev);
    match netdev.uppers() {
        Ok(uppers) => uppers.iter().for_each(|upper| f(upper)),
        Err(e) => pr_warn!(
            "ferroce: devices above {} not looked at ({:?})\n",
            netdev.name(),
            e
        ),
    }
}

/// Hardware device `hw` now serves RoCE on `netdev`: its ferroce device, if any, goes under
/// `defer`, and stays with a warning under `force`.
fn take_over(hw: &OtherDevice, netdev: &NetDevice) {
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
    retire(soft);
}
