// SPDX-License-Identifier: GPL-2.0

//! The UD responder: a received datagram lands in the next receive WQE, behind the 40 bytes of
//! its GRH, and completes.

use crate::{
    cc,
    counters::{Counter, Counters},
    cq::FerroceCq,
    device::Ferroce,
    net::recv::{Packet, QpDrop},
    proto::{
        dcqcn,
        opcode::Transport,
        wqe::{
            Completion, RecvWqe, WcOpcode, WcStatus, RECV_WQE_HEADER, SGE_SIZE, WC_GRH, WC_WITH_IMM,
        },
    },
    qp::{Posts, QpCtx},
    rc::resp::recv_pd,
    sge,
    srq::FerroceSrq,
};
use kernel::{
    prelude::*,
    rdma::{
        qp::Qp,
        wr::{NETWORK_IPV4, NETWORK_IPV6},
    },
};

/// Bytes of the GRH in front of a UD receive buffer.
const GRH_LEN: usize = 40;

/// Delivers a UD packet (already checked for length and ICRC) to `shared`'s RQ.
pub(crate) fn receive(
    cx: &mut QpCtx<'_>,
    pkt: &Packet<'_>,
    counters: &Counters,
) -> Result<(), QpDrop> {
    let ip = pkt.hdr.ip();
    if pkt.info.transport != Transport::Ud || !cx.inner.attr.state.can_receive() {
        return Err(QpDrop::BadState);
    }
    let deth = pkt.ext.deth.ok_or(QpDrop::BadState)?;
    if deth.qkey != cx.inner.attr.qkey {
        return Err(QpDrop::BadQkey);
    }
    // A copy of a group's packet was counted where it was copied, and gets no CNP.
    if !pkt.hdr.is_multicast() && dcqcn::is_ce(ip) {
        cc::on_datagram_ce(cx, pkt, deth.src_qpn, counters);
    }
    let (wr_id, status) = if cx.shared.posts == Posts::KernelQueue {
        let buf = cx.shared.kq.take_recv().ok_or(QpDrop::NoRecvWqe)?;
        let landed = grh(ip).and_then(|grh| {
            buf.write(0, &grh).map_err(|_| WcStatus::LocLenErr)?;
            pkt.payload.for_each(
                |at, piece| {
                    buf.write(GRH_LEN + at, piece)
                        .map_err(|_| WcStatus::LocLenErr)
                },
                WcStatus::LocLenErr,
            )
        });
        (buf.wr_id, landed.err().unwrap_or(WcStatus::Success))
    } else {
        let cons = cx.inner.rq_cons;
        let srq = cx.qp.srq();
        let slot = match srq {
            Some(srq) => FerroceSrq::take(srq),
            None => cx.shared.rq.copy_at(cons, cons),
        };
        let slot = slot.map_err(|_| QpDrop::NoMem)?.ok_or(QpDrop::NoRecvWqe)?;
        let pd = recv_pd(cx.qp, cx.shared);
        let status = land(cx.qp, pd, &slot, pkt, ip)
            .err()
            .unwrap_or(WcStatus::Success);
        if srq.is_none() {
            // Only the shared copy of the index can fail to be written; the kernel's moved on.
            let _ = cx.shared.rq.advance(&mut cx.inner.rq_cons);
        }
        (RecvWqe::new(&slot).wr_id(), status)
    };
    let mut wc_flags = WC_GRH;
    if pkt.ext.imm.is_some() {
        wc_flags |= WC_WITH_IMM;
    }
    let c = Completion {
        wr_id,
        status,
        opcode: WcOpcode::Recv,
        // CAST: Bounded by the MTU.
        byte_len: (GRH_LEN + pkt.payload.len()) as u32,
        qp_num: cx.qp.qpn(),
        src_qp: deth.src_qpn,
        wc_flags,
        imm_data: pkt.ext.imm.unwrap_or(0),
        port_num: 1,
        net_type: if ip.len() == 20 {
            NETWORK_IPV4
        } else {
            NETWORK_IPV6
        },
    };
    // A multicast packet was counted once, before its copies went to the group's QPs.
    if !pkt.hdr.is_multicast() {
        counters.inc(Counter::RcvdPkts);
        counters.add(Counter::RcvdBytes, pkt.payload.len() as u64);
    }
    if status == WcStatus::Success {
        counters.inc(Counter::RdmaRecvs);
    }
    // A full CQ loses the completion: its consumer fell behind.
    let _ = FerroceCq::post(cx.qp, cx.qp.recv_cq(), &c, pkt.bth.solicited);
    Ok(())
}

/// Writes the GRH and the payload into the buffers of the WQE in `slot`, whose keys are `pd`'s.
fn land(
    qp: &Qp<Ferroce>,
    pd: usize,
    slot: &[u8],
    pkt: &Packet<'_>,
    ip: &[u8],
) -> Result<(), WcStatus> {
    let wqe = RecvWqe::new(slot);
    let num = wqe.num_sge() as usize;
    if num.saturating_mul(SGE_SIZE) > slot.len().saturating_sub(RECV_WQE_HEADER) {
        return Err(WcStatus::LocLenErr);
    }
    let grh = grh(ip)?;
    let mrs = &qp.device().data().mrs;
    let sges = || (0..num).map(|i| wqe.sge(i));
    sge::scatter_bytes(mrs, pd, sges(), 0, &grh)?;
    sge::scatter(mrs, pd, sges(), GRH_LEN, &pkt.payload)
}

/// The 40 bytes in front of a UD receive. RoCE v2 over IPv4 puts the IPv4 header in their last
/// 20 (as rxe, libibverbs' `ibv_init_ah_from_wc` and the kernel's `ib_init_ah_attr_from_wc`
/// expect); over IPv6 they are the IPv6 header.
fn grh(ip: &[u8]) -> Result<[u8; GRH_LEN], WcStatus> {
    let mut grh = [0u8; GRH_LEN];
    match ip.len() {
        GRH_LEN => grh.copy_from_slice(ip),
        n if n <= GRH_LEN => grh[GRH_LEN - n..].copy_from_slice(ip),
        _ => return Err(WcStatus::LocLenErr),
    }
    Ok(grh)
}
