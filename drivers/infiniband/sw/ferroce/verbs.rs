// SPDX-License-Identifier: GPL-2.0

//! The verbs table: what the RDMA core calls for a ferroce device, each handed to the object
//! it concerns.

use crate::{
    ah::FerroceAh,
    counters::DESCS,
    cq::FerroceCq,
    device::{Ferroce, FerroceDevice, FerrocePd, Ucontext},
    limits,
    mr::FerroceMr,
    mw::FerroceMw,
    proto::pma::{self, MadAnswer},
    qp::FerroceQp,
    srq::FerroceSrq,
};
use kernel::{
    prelude::*,
    rdma::{
        ah::Ah,
        attr::{
            core_cap, driver_id, port_cap, DeviceAttrs, Mtu, PhysState, PortAttrs, PortImmutable,
            PortState, MGMT_MAD_SIZE,
        },
        cq::{Cq, CqAttr, NotifyFlags},
        device::{Device, DeviceModify},
        mad::{MadResult, MAD_LEN},
        mr::{MrKeys, MrRequest, MrRereg},
        mw::MwType,
        ops::Driver,
        pd::Pd,
        qp::{AhAttr, AttrMask, Qp, QpAttr, QpCreated, QpInit, QpQuery},
        srq::{Srq, SrqAttr, SrqAttrMask},
        stats::StatDesc,
        udata::Udata,
        virt_dma::VirtDma,
        wr::{RecvWr, SendWr, WcSink},
    },
};

/// The rdma_rxe uverbs ABI version that rdma-core's rxe provider expects.
const RXE_UVERBS_ABI_VERSION: u32 = 2;

#[vtable]
impl Driver for Ferroce {
    type Data = FerroceDevice;
    type Ucontext = Ucontext;
    type Pd = FerrocePd;
    type Cq = FerroceCq;
    type Mr = FerroceMr;
    type Qp = FerroceQp;
    type Ah = FerroceAh;
    type Mw = FerroceMw;
    type Srq = FerroceSrq;

    const DRIVER_ID: u32 = driver_id::RXE;
    const UVERBS_ABI_VER: u32 = RXE_UVERBS_ABI_VERSION;

    fn query_device(dev: &Device<Self>) -> Result<DeviceAttrs> {
        Ok(DeviceAttrs {
            sys_image_guid: u64::from_ne_bytes(dev.data().guid()),
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
            active_mtu: Mtu::from_bytes(data.ib_mtu())?,
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

    fn rereg_user_mr(mr: &Self::Mr, pd: &Pd<Self>, change: &MrRereg) -> Result<MrKeys> {
        mr.rereg(pd, change)
    }

    fn create_srq(
        pd: &Pd<Self>,
        attr: &SrqAttr,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(SrqAttr, impl PinInit<Self::Srq, Error>)> {
        FerroceSrq::create(pd, attr, udata)
    }

    fn modify_srq(
        srq: &Srq<Self>,
        attr: &SrqAttr,
        mask: SrqAttrMask,
        udata: Option<&mut Udata<'_>>,
    ) -> Result {
        FerroceSrq::modify(srq, attr, mask, udata)
    }

    fn query_srq(srq: &Srq<Self>) -> Result<SrqAttr> {
        FerroceSrq::query(srq)
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

    fn query_ah(ah: &Ah<Self>) -> Result<AhAttr> {
        Ok(ah.data().attr())
    }

    fn alloc_mw(pd: &Pd<Self>, ty: MwType) -> Result<(u32, impl PinInit<Self::Mw, Error>)> {
        FerroceMw::alloc(pd, ty)
    }

    fn attach_mcast(qp: &Qp<Self>, gid: &[u8; 16]) -> Result {
        let data = qp.device().data();
        data.mcast.attach(&data.netdev, qp.data().shared(), gid)
    }

    fn detach_mcast(qp: &Qp<Self>, gid: &[u8; 16]) -> Result {
        qp.device().data().mcast.detach(qp.data().shared(), gid)
    }

    fn doorbell(qp: &Qp<Self>) -> Result {
        FerroceQp::doorbell(qp)
    }

    fn post_send(qp: &Qp<Self>, wr: &SendWr<'_, Self>) -> Result {
        FerroceQp::post_send(qp, wr)
    }

    fn post_recv(qp: &Qp<Self>, wr: &RecvWr<'_>) -> Result {
        FerroceQp::post_recv(qp, wr)
    }

    fn poll_cq(cq: &Cq<Self>, sink: &mut WcSink<'_, Self>) -> Result {
        FerroceCq::poll(cq, sink)
    }

    fn alloc_mr(
        pd: &Pd<Self>,
        max_pages: u32,
        mem: VirtDma,
    ) -> Result<(MrKeys, impl PinInit<Self::Mr, Error>)> {
        FerroceMr::alloc_fast(pd, max_pages, mem)
    }

    fn map_mr_begin(mr: &Self::Mr, page_size: u32) -> Result {
        mr.map_begin(page_size)
    }

    fn map_mr_page(mr: &Self::Mr, addr: u64) -> Result {
        mr.map_page(addr)
    }

    fn get_dma_mr(
        pd: &Pd<Self>,
        access: u32,
        mem: VirtDma,
    ) -> Result<(MrKeys, impl PinInit<Self::Mr, Error>)> {
        FerroceMr::dma(pd, access, mem)
    }

    const PORT_STATS: &'static [StatDesc] = &DESCS;

    fn port_stats(dev: &Device<Self>, port: u32, values: &mut [u64]) -> Result {
        check_port(port)?;
        dev.data().counters.read_into(values);
        Ok(())
    }

    fn process_mad(
        dev: &Device<Self>,
        port: u32,
        mad: &[u8; MAD_LEN],
        out: &mut [u8; MAD_LEN],
    ) -> Result<MadResult> {
        check_port(port)?;
        Ok(match pma::answer(mad, out, &dev.data().counters.pma()) {
            MadAnswer::Reply => MadResult::Reply,
            MadAnswer::Pass => MadResult::Pass,
            MadAnswer::Consume => MadResult::Consumed,
        })
    }

    fn modify_device(dev: &Device<Self>, change: &DeviceModify) -> Result {
        // The system image GUID is the node GUID, from the netdev's address (as C rxe's).
        if change.sys_image_guid.is_some() {
            return Err(EOPNOTSUPP);
        }
        if let Some(desc) = &change.node_desc {
            dev.set_node_desc(desc);
        }
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
