// SPDX-License-Identifier: GPL-2.0

//! Auto-provisioning, opted into with the module parameter `auto_netdevs` (comma-separated
//! globs of netdev names, `proto::netdev_pattern`): every Ethernet netdev whose name matches,
//! in every namespace the host's administrator made (owned by the initial user namespace),
//! gets a device named `rxe_<netdev>` unless it has one already or a hardware device serves
//! its RoCE (see [`crate::hw`]; auto-provisioning never adds beside hardware, whatever
//! `hw_policy` says). Netdevs that appear later, move in, are renamed to a matching name, or
//! are handed back by a hardware device that goes away, are looked at too. A device goes with
//! its netdev, as any other (the driver's netdev notifier). VLANs, loopback and the ports of
//! bonds and teams are never provisioned. Namespaces of unprivileged users are left out: their
//! netdevs could take the names that the host's own netdevs are to get.
//!
//! Netdev events come under `RTNL`, which registering a device takes itself: they only queue
//! a look at the netdev, on an ordered queue of the module's, so that looks never race.

use crate::{
    device::{self, Ferroce},
    hw::{retire_if_served, serving_hardware, HwDevices},
    link,
    proto::netdev_pattern,
};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    debugfs::Dir,
    impl_has_work,
    net::{
        netdevice::{LinkType, NetDevice},
        notifier::{NetdevEvent, NetdevNotifier, NetdevNotifierHandler},
    },
    new_work,
    prelude::*,
    rdma::device::Device,
    str::{BStr, CString},
    sync::{aref::ARef, Arc},
    time::{delay::fsleep, Delta},
    workqueue::{OwnedQueue, Work, WorkItem},
};

/// How many names a device tries: `rxe_<netdev>`, then `rxe_<netdev>_1` and on, for netdevs of
/// one name in several namespaces (device names are global).
const NAME_TRIES: u32 = 8;

/// How many times at most (200 ms apart, 3 s in all) a taken `rxe_<netdev>` is tried again
/// before the next name, while devices are on their way out: one holds its name until freed.
const FIRST_NAME_WAITS: u32 = 15;

/// Decides which netdevs get a device, and makes them.
pub(crate) struct Provisioner {
    /// The module parameter's text: it lives as long as the module.
    patterns: &'static [u8],
    /// The looks at netdevs, one at a time; drained when the last reference goes, which the
    /// module drops before its devices.
    queue: OwnedQueue,
    /// `ferroce/` in debugfs, for the devices' directories.
    debugfs: Dir,
    /// The hardware RoCE devices registered now.
    hw: Arc<HwDevices>,
    /// Cleared at module unload, before the hardware watch lets go of every device; looks
    /// still queued then do nothing.
    open: Arc<AtomicBool>,
}

impl Provisioner {
    /// The provisioner if `auto_netdevs` names any netdev, or `None`.
    pub(crate) fn new(debugfs: &Dir, hw: &Arc<HwDevices>) -> Result<Option<Arc<Self>>> {
        let patterns = crate::module_parameters::auto_netdevs
            .value_ref()
            .as_bytes();
        if patterns.trim_ascii().is_empty() {
            return Ok(None);
        }
        pr_info!(
            "ferroce: auto-provisioning netdevs matching '{}'\n",
            BStr::from_bytes(patterns)
        );
        let this = Self {
            patterns,
            queue: OwnedQueue::new_ordered(c"ferroce_auto")?,
            debugfs: debugfs.clone(),
            hw: hw.clone(),
            open: Arc::new(AtomicBool::new(true), GFP_KERNEL)?,
        };
        Ok(Some(Arc::new(this, GFP_KERNEL)?))
    }

    /// No more looks: the module is going.
    pub(crate) fn close(&self) {
        self.open.store(false, Ordering::Relaxed);
    }

    /// Queues a look at `netdev` if it is one to provision ([`covers`]). A hardware device
    /// with index `except` (one going away) does not count as serving it, unless it is
    /// registered again by the time the look runs.
    pub(crate) fn request(&self, netdev: &NetDevice, except: Option<u32>) {
        if !self.open.load(Ordering::Relaxed) || !covers(self.patterns, netdev) {
            return;
        }
        let look = KBox::pin_init(
            pin_init!(Look {
                netdev: netdev.into(),
                debugfs: self.debugfs.clone(),
                except,
                patterns: self.patterns,
                hw: self.hw.clone(),
                open: self.open.clone(),
                work <- new_work!("ferroce::auto::Look::work"),
            }),
            GFP_KERNEL,
        );
        match look {
            Ok(look) => self.queue.enqueue(look),
            Err(e) => pr_warn!(
                "ferroce: {}: not provisioned: no memory ({:?})\n",
                netdev.name(),
                e
            ),
        }
    }
}

/// A look at one netdev, queued.
#[pin_data]
struct Look {
    netdev: ARef<NetDevice>,
    debugfs: Dir,
    except: Option<u32>,
    patterns: &'static [u8],
    hw: Arc<HwDevices>,
    open: Arc<AtomicBool>,
    #[pin]
    work: Work<Look>,
}

impl_has_work! {
    impl HasWork<Self> for Look { self.work }
}

impl WorkItem for Look {
    type Pointer = Pin<KBox<Self>>;

    fn run(this: Pin<KBox<Self>>) {
        this.provision();
    }
}

impl Look {
    /// Makes the netdev's device, unless it has one or hardware serves its RoCE.
    fn provision(&self) {
        let netdev = &*self.netdev;
        // The module is going, or the netdev changed meanwhile (renamed away, enslaved, moved).
        if !self.open.load(Ordering::Relaxed) || !covers(self.patterns, netdev) {
            return;
        }
        if let Some(dev) = Device::<Ferroce>::get_by_netdev(netdev) {
            if !dev.data().going() && dev.data().serves_namespace_of(netdev) {
                return;
            }
            // A device on its way out (its netdev moved away, and maybe back): wait for it,
            // so that its name and the netdev are free.
            dev.unregister();
        }
        let hw = match serving_hardware(netdev, self.except()) {
            Ok(hw) => hw,
            Err(e) => {
                pr_warn!("ferroce: {}: not provisioned ({:?})\n", netdev.name(), e);
                return;
            }
        };
        if let Some(hw) = hw {
            pr_info!(
                "ferroce: {}: no device (auto_netdevs): its RoCE is served by hardware device {}\n",
                netdev.name(),
                hw.name()
            );
            return;
        }
        let mut waits = 0;
        let mut graced = false;
        let mut attempt = 0;
        while attempt < NAME_TRIES {
            // The module is going, or the netdev changed while a name was waited for.
            if !self.open.load(Ordering::Relaxed) || !covers(self.patterns, netdev) {
                return;
            }
            let name = match device_name(netdev, attempt) {
                Ok(name) => name,
                Err(e) => {
                    pr_warn!("ferroce: {}: not provisioned ({:?})\n", netdev.name(), e);
                    return;
                }
            };
            match link::add(&self.debugfs, &name, netdev, || Ok(())) {
                Ok(()) => return self.recheck(&name),
                // `rxe_<netdev>` is taken: maybe by the device this netdev had a moment ago
                // (moved, or deleted and made again), which holds its name until freed, a
                // little after it can no longer be found. While devices are on their way out
                // (and once more after), give it time; then take the next name (a netdev of
                // the same name elsewhere).
                Err(e)
                    if e == ENFILE
                        && attempt == 0
                        && waits < FIRST_NAME_WAITS
                        && (device::devices_going() || !graced) =>
                {
                    graced |= !device::devices_going();
                    waits += 1;
                    fsleep(Delta::from_millis(200));
                }
                Err(e) if e == ENFILE => attempt += 1,
                // Gone meanwhile, or has a device now: nothing to do.
                Err(e) if e == ENODEV || e == EEXIST => return,
                Err(e) => {
                    pr_warn!(
                        "{}: not provisioned on {} ({:?})\n",
                        &*name,
                        netdev.name(),
                        e
                    );
                    return;
                }
            }
        }
        pr_warn!(
            "ferroce: {}: not provisioned: {} names taken\n",
            netdev.name(),
            NAME_TRIES
        );
    }

    /// The hardware device that a look ignores: the one going away, unless it is back.
    fn except(&self) -> Option<u32> {
        self.except.filter(|&index| !self.hw.contains(index))
    }

    /// After device `name` registered: a hardware device enabled meanwhile may have missed it.
    fn recheck(&self, name: &CStr) {
        // On an error the device is gone again, and the log says why: nothing left to do.
        let _ = retire_if_served(name, &self.netdev, self.except());
    }
}

/// Whether auto-provisioning covers `netdev`: a plain Ethernet device (not a VLAN, nor a port
/// of a bond or team) whose name matches, in a namespace of the host's administrator.
fn covers(patterns: &[u8], netdev: &NetDevice) -> bool {
    netdev.link_type() == LinkType::Ether
        && !netdev.is_vlan()
        && !netdev.is_lag_port()
        && netdev_pattern::matches_any(patterns, netdev.name().to_bytes())
        && netdev.net().is_some_and(|net| net.is_init_user_owned())
}

/// `rxe_<netdev>`, or `rxe_<netdev>_<attempt>` after the first attempt.
fn device_name(netdev: &NetDevice, attempt: u32) -> Result<CString> {
    if attempt == 0 {
        CString::try_from_fmt(fmt!("rxe_{}", netdev.name()))
    } else {
        CString::try_from_fmt(fmt!("rxe_{}_{}", netdev.name(), attempt))
    }
}

/// Sees netdevs come (and, at registration, every netdev there is) and asks for a look.
pub(crate) struct AutoNetdevs(Arc<Provisioner>);

impl NetdevNotifierHandler for AutoNetdevs {
    fn event(&self, netdev: &NetDevice, event: NetdevEvent) {
        if matches!(event, NetdevEvent::Register | NetdevEvent::ChangeName) {
            self.0.request(netdev, None);
        }
    }
}

/// Starts auto-provisioning, if `provisioner` is on: a look at every netdev there is, then at
/// every netdev that comes or is renamed.
pub(crate) fn watch(
    provisioner: Option<Arc<Provisioner>>,
) -> Result<Option<Pin<KBox<NetdevNotifier<AutoNetdevs>>>>> {
    provisioner
        .map(|p| KBox::pin_init(NetdevNotifier::register(AutoNetdevs(p)), GFP_KERNEL))
        .transpose()
}
