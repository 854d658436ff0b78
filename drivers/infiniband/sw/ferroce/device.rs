// SPDX-License-Identifier: GPL-2.0

//! One ferroce device: a RoCEv2 port over a netdev, created by `rdma link add`.

use crate::{
    ah::{AhTable, FerroceAh},
    cc::Cc,
    counters::{Counter, Counters, DESCS},
    cq::FerroceCq,
    hw::HW_POLICY,
    limits,
    mr::{FerroceMr, MrTable},
    net::PortsUse,
    proto::{eui64, mtu}, //
    qp::{FerroceQp, QpTable},
};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::{
    debugfs::Dir,
    net::{
        netdevice::{LinkType, NetDevice, Rtnl},
        notifier::{NetdevEvent, NetdevNotifierHandler},
    },
    prelude::*,
    rdma::{
        attr::{
            core_cap, driver_id, port_cap, uverbs_cmd, DeviceAttrs, Mtu, PhysState, PortAttrs,
            PortImmutable, PortState, MGMT_MAD_SIZE,
        },
        cq::{Cq, CqAttr, NotifyFlags},
        device::{Device, DeviceOptions, DeviceRef},
        link::LinkOps,
        mr::{MrKeys, MrRequest},
        ops::Driver,
        pd::Pd,
        qp::{AhAttr, AttrMask, Qp, QpAttr, QpCreated, QpInit, QpQuery},
        slot::ContextSlot,
        stats::StatDesc,
        udata::Udata,
        wr::{RecvBuf, SendWr, WcSink},
    },
    sync::{aref::ARef, Arc},
    time::{delay::fsleep, Delta},
    workqueue::{OwnedQueue, WQ_PERCPU},
};

/// The rdma_rxe uverbs ABI version that rdma-core's rxe provider expects.
const RXE_UVERBS_ABI_VERSION: u32 = 2;

/// The ferroce provider.
pub(crate) struct Ferroce;

/// Per-device state. The netdev is the core's to hold (`ib_device_set_netdev`).
pub(crate) struct FerroceDevice {
    /// Runs the QPs' work; drained when the device goes (see `Drop`).
    pub(crate) wq: Arc<OwnedQueue>,
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

    fn set_link_mtu(&self, link_mtu: u32) {
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
    }
}

/// Per-user-context state: none (mapped rings are tracked by the core's mmap entries).
pub(crate) struct Ucontext;

/// Per-protection-domain state: none; objects refer to their PD by its id.
pub(crate) struct FerrocePd;

#[vtable]
impl Driver for Ferroce {
    type Data = FerroceDevice;
    type Ucontext = Ucontext;
    type Pd = FerrocePd;
    type Cq = FerroceCq;
    type Mr = FerroceMr;
    type Qp = FerroceQp;
    type Ah = FerroceAh;

    const DRIVER_ID: u32 = driver_id::RXE;
    const UVERBS_ABI_VER: u32 = RXE_UVERBS_ABI_VERSION;

    fn query_device(dev: &Device<Self>) -> Result<DeviceAttrs> {
        Ok(DeviceAttrs {
            sys_image_guid: u64::from_ne_bytes(dev.data().guid),
            ..limits::DEVICE_LIMITS
        })
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttrs> {
        check_port(port)?;
        let data = dev.data();
        let nd = dev.netdev(port).ok_or(ENODEV)?;
        let (state, phys_state) = if nd.is_running_with_carrier() {
            (PortState::Active, PhysState::LinkUp)
        } else if nd.is_up() {
            (PortState::Down, PhysState::Polling)
        } else {
            (PortState::Down, PhysState::Disabled)
        };
        // Speed comes from ethtool; a netdev without it (veth) reports its default.
        let (active_speed, active_width) = dev.eth_speed(port)?;
        Ok(PortAttrs {
            state,
            phys_state,
            max_mtu: Mtu::Mtu4096,
            active_mtu: Mtu::from_bytes(data.ib_mtu.load(Ordering::Relaxed))?,
            phys_mtu: nd.mtu(),
            gid_tbl_len: limits::GID_TABLE_LEN,
            port_cap_flags: port_cap::CM_SUP,
            max_msg_sz: limits::MAX_MSG_SIZE,
            pkey_tbl_len: limits::PKEY_TABLE_LEN,
            max_vl_num: 1,
            active_width,
            active_speed,
        })
    }

    fn port_immutable(_dev: &Device<Self>, port: u32) -> Result<PortImmutable> {
        check_port(port)?;
        Ok(PortImmutable {
            pkey_tbl_len: limits::PKEY_TABLE_LEN.into(),
            gid_tbl_len: limits::GID_TABLE_LEN,
            core_cap_flags: core_cap::PORT_IBA_ROCE_UDP_ENCAP,
            max_mad_size: MGMT_MAD_SIZE,
        })
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        check_port(port)?;
        if index != 0 {
            return Err(EINVAL);
        }
        Ok(limits::DEFAULT_PKEY)
    }

    fn alloc_ucontext(_dev: &Device<Self>) -> impl PinInit<Self::Ucontext, Error> {
        Ok(Ucontext)
    }

    fn alloc_pd(_dev: &Device<Self>) -> impl PinInit<Self::Pd, Error> {
        Ok(FerrocePd)
    }

    fn create_cq(
        _dev: &Device<Self>,
        attr: &CqAttr,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(u32, impl PinInit<Self::Cq, Error>)> {
        FerroceCq::create(attr, udata)
    }

    fn resize_cq(cq: &Cq<Self>, cqe: u32, udata: &mut Udata<'_>) -> Result {
        FerroceCq::resize(cq, cqe, udata)
    }

    fn req_notify_cq(cq: &Cq<Self>, flags: NotifyFlags) -> Result<bool> {
        cq.data().req_notify(flags)
    }

    fn reg_user_mr(
        pd: &Pd<Self>,
        req: &MrRequest,
    ) -> Result<(MrKeys, impl PinInit<Self::Mr, Error>)> {
        FerroceMr::register(pd, req)
    }

    fn create_qp(
        pd: &Pd<Self>,
        init: &QpInit<'_, Self>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(QpCreated, impl PinInit<Self::Qp, Error>)> {
        FerroceQp::create(pd, init, udata)
    }

    fn modify_qp(
        qp: &Qp<Self>,
        attr: &QpAttr,
        mask: AttrMask,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result {
        FerroceQp::modify(qp, attr, mask)
    }

    fn query_qp(qp: &Qp<Self>) -> Result<QpQuery> {
        FerroceQp::query(qp)
    }

    fn create_ah(
        pd: &Pd<Self>,
        attr: &AhAttr,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<impl PinInit<Self::Ah, Error>> {
        FerroceAh::create(pd, attr, udata)
    }

    fn doorbell(qp: &Qp<Self>) -> Result {
        FerroceQp::doorbell(qp)
    }

    fn post_send(qp: &Qp<Self>, wr: &SendWr<'_, Self>) -> Result {
        FerroceQp::post_send(qp, wr)
    }

    fn post_recv(qp: &Qp<Self>, wr: RecvBuf) -> Result {
        FerroceQp::post_recv(qp, wr)
    }

    fn poll_cq(cq: &Cq<Self>, sink: &mut WcSink<'_, Self>) -> Result {
        FerroceCq::poll(cq, sink)
    }

    fn get_dma_mr(pd: &Pd<Self>, access: u32) -> Result<(MrKeys, impl PinInit<Self::Mr, Error>)> {
        FerroceMr::dma(pd, access)
    }

    const PORT_STATS: &'static [StatDesc] = &DESCS;

    fn port_stats(dev: &Device<Self>, port: u32, values: &mut [u64]) -> Result {
        check_port(port)?;
        dev.data().counters.read_into(values);
        Ok(())
    }

    fn disassociate_ucontext(_ctx: &Self::Ucontext) {
        // Mapped rings are vmalloc pages that each mapping holds a reference to: they outlive
        // the device safely and are freed at munmap, so nothing needs revoking.
    }

    fn enable_driver(dev: &Device<Self>) -> Result {
        let nd = dev.netdev(1).ok_or(ENODEV)?;
        // The core reports later port changes itself; this is the initial state.
        dev.dispatch_port_state(&nd);
        pr_info!("{}: added on {}\n", dev.name(), nd.name());
        Ok(())
    }
}

fn check_port(port: u32) -> Result {
    if port == 1 {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

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
    let guid = match netdev.mac_addr() {
        Some(mac) => eui64::from_mac(mac),
        // CAST: Interface indexes are positive.
        None => eui64::from_ifindex(netdev.ifindex() as u32),
    };
    let counters = Arc::new(Counters::new(), GFP_KERNEL)?;
    let qps = Arc::pin_init(QpTable::new(), GFP_KERNEL)?;
    let data = FerroceDevice {
        // Per CPU: a QP's work runs where it was kicked (where its packets were taken), so
        // what it sends follows what was sent from there, in order.
        wq: Arc::new(OwnedQueue::new(name, WQ_PERCPU)?, GFP_KERNEL)?,
        ib_mtu: AtomicU32::new(mtu::ib_mtu_for_link(netdev.mtu())),
        guid,
        counters,
        mrs: Arc::pin_init(MrTable::new(), GFP_KERNEL)?,
        qps,
        ahs: Arc::pin_init(AhTable::new(), GFP_KERNEL)?,
        netdev: netdev.into(),
        cc: Cc::new(debugfs, name)?,
        ports: PortsUse::get(netdev)?,
        going: AtomicBool::new(false),
    };
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
