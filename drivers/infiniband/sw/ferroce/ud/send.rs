// SPDX-License-Identifier: GPL-2.0

//! The UD requester: send WQEs from the shared ring become RoCEv2 packets.
//!
//! Each WQE is copied out of user memory once, then checked field by field (opcode, address
//! vector, SGEs against the MR table and the QP's PD); one that fails completes in error and
//! harms only its own QP.

use crate::{
    ah::{ipv4_mapped, Av},
    counters::Counter,
    cq::FerroceCq,
    device::Ferroce,
    proto::{
        bth::Bth,
        build::Path,
        opcode::Opcode,
        packet::{Deth, ExtHeaders},
        psn::Psn,
        wqe::{
            Completion, SendWqe, WcOpcode, WcStatus, WrOpcode, NETWORK_IPV4, NETWORK_IPV6,
            SEND_INLINE, SEND_SIGNALED, SEND_SOLICITED, SEND_WQE_HEADER, SGE_SIZE,
        },
    },
    qp::{tx::TX_BUDGET, QpCtx, QpShared},
    sge,
};
use kernel::{prelude::*, rdma::qp::Qp};

/// Sends posted WQEs, oldest first, up to [`TX_BUDGET`]; each one's completion goes to the send
/// CQ. Returns whether more are posted.
pub(crate) fn push(cx: &mut QpCtx<'_>) -> bool {
    let slot_len = cx.shared.sq.slot_len();
    let ud = UdQp {
        shared: cx.shared,
        payload_room: slot_len - SEND_WQE_HEADER,
        qkey: cx.inner.attr.qkey,
    };
    // One private copy of a slot at a time: user space cannot change a WQE under us.
    let mut wqe = KVec::new();
    if wqe.resize(slot_len, 0u8, GFP_ATOMIC).is_err() {
        // The work tries again.
        return true;
    }
    let Ok(posted) = cx.shared.sq.posted(cx.inner.sq_cons) else {
        return false;
    };
    for _ in 0..posted.min(TX_BUDGET) {
        match cx.shared.sq.peek(cx.inner.sq_cons, &mut wqe) {
            Ok(true) => {}
            _ => return false,
        }
        let mut psn = cx.inner.attr.sq_psn;
        let done = send_ud(cx.qp, &ud, &wqe, &mut psn);
        cx.inner.attr.sq_psn = psn;
        // Only the shared copy of the index can fail to be written; the kernel's moved on.
        let _ = cx.shared.sq.advance(&mut cx.inner.sq_cons);
        if let Some(c) = done {
            // A full CQ loses the completion: its consumer fell behind.
            let _ = FerroceCq::post(cx.qp, cx.qp.send_cq(), &c, false);
        }
    }
    posted > TX_BUDGET
}

/// What a checked UD WQE asks for.
struct UdWork {
    solicited: bool,
    imm: Option<u32>,
    remote_qpn: u32,
    remote_qkey: u32,
    path: Path,
}

/// What a UD send needs of its QP.
struct UdQp<'a> {
    shared: &'a QpShared,
    /// Bytes after the WQE header: room for SGEs or inline data.
    payload_room: usize,
    /// The QP's Q_Key.
    qkey: u32,
}

/// Sends the UD WQE `wqe` (a private copy of its slot); returns its completion, if it has one.
fn send_ud(qp: &Qp<Ferroce>, ud: &UdQp<'_>, wqe: &[u8], psn: &mut u32) -> Option<Completion> {
    let wqe = SendWqe::new(wqe);
    let (wr_id, flags) = (wqe.wr_id(), wqe.send_flags());
    let done = |status| Completion::of_send_queue(wr_id, status, WcOpcode::Send, qp.qpn());
    match prepare(qp, ud, &wqe) {
        Ok((work, payload)) => {
            // A packet that cannot go out (no route, no memory) is lost, as UD allows.
            let _ = transmit(qp, ud.shared, &work, &payload, ud.qkey, psn);
            qp.device().data().counters.inc(Counter::RdmaSends);
            (ud.shared.sig_all() || flags & SEND_SIGNALED != 0).then(|| done(WcStatus::Success))
        }
        // Errors complete whether signaled or not.
        Err(status) => Some(done(status)),
    }
}

fn prepare(
    qp: &Qp<Ferroce>,
    ud: &UdQp<'_>,
    wqe: &SendWqe<'_>,
) -> Result<(UdWork, KVec<u8>), WcStatus> {
    let flags = wqe.send_flags();
    // All a UD QP can do.
    let imm = match wqe.opcode() {
        Some(WrOpcode::Send) => None,
        Some(WrOpcode::SendWithImm) => Some(wqe.imm()),
        _ => return Err(WcStatus::LocQpOpErr),
    };
    let av = path_of(qp, ud, wqe)?;
    let len = wqe.length() as usize;
    if len > qp.device().data().ib_mtu() as usize {
        return Err(WcStatus::LocLenErr);
    }
    let mut payload = KVec::new();
    payload
        .resize(len, 0, GFP_ATOMIC)
        .map_err(|_| WcStatus::LocLenErr)?;
    if flags & SEND_INLINE != 0 {
        if len > ud.payload_room {
            return Err(WcStatus::LocLenErr);
        }
        payload.copy_from_slice(wqe.inline_data(len).ok_or(WcStatus::LocLenErr)?);
    } else {
        gather(qp, ud, wqe, &mut payload)?;
    }
    let remote_qpn = wqe.ud_remote_qpn();
    Ok((
        UdWork {
            solicited: flags & SEND_SOLICITED != 0,
            imm,
            remote_qpn,
            remote_qkey: wqe.ud_remote_qkey(),
            path: av.path(qp.qpn(), remote_qpn).ok_or(WcStatus::LocQpOpErr)?,
        },
        payload,
    ))
}

/// A kernel consumer's datagram (the MAD layer's, on QP1).
pub(crate) struct Datagram<'a> {
    pub(crate) av: &'a Av,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_qkey: u32,
    pub(crate) imm: Option<u32>,
    pub(crate) solicited: bool,
    pub(crate) payload: &'a [u8],
}

/// Sends a kernel consumer's datagram; a packet the stack drops is lost, as UD allows.
pub(crate) fn send_datagram(
    qp: &Qp<Ferroce>,
    shared: &QpShared,
    d: &Datagram<'_>,
    qp_qkey: u32,
    psn: &mut u32,
) -> Result<(), WcStatus> {
    if d.payload.len() > qp.device().data().ib_mtu() as usize {
        return Err(WcStatus::LocLenErr);
    }
    let path =
        d.av.path(qp.qpn(), d.remote_qpn)
            .ok_or(WcStatus::LocQpOpErr)?;
    let work = UdWork {
        solicited: d.solicited,
        imm: d.imm,
        remote_qpn: d.remote_qpn,
        remote_qkey: d.remote_qkey,
        path,
    };
    // A packet that cannot go out (no route, no memory) is lost, as UD allows.
    let _ = transmit(qp, shared, &work, d.payload, qp_qkey, psn);
    qp.device().data().counters.inc(Counter::RdmaSends);
    Ok(())
}

/// The path of a UD WQE: its AH's (which must belong to the QP's PD), or for `ah_num` 0 the
/// address vector the provider wrote into the WQE.
fn path_of(qp: &Qp<Ferroce>, ud: &UdQp<'_>, wqe: &SendWqe<'_>) -> Result<Av, WcStatus> {
    match wqe.ud_ah_num() {
        0 => {
            let av = wqe.ud_av();
            let (sgid, dgid) = match av.network_type() {
                NETWORK_IPV4 => {
                    let (s, d) = av.ipv4();
                    (ipv4_mapped(s), ipv4_mapped(d))
                }
                NETWORK_IPV6 => av.ipv6(),
                _ => return Err(WcStatus::LocQpOpErr),
            };
            Ok(Av {
                sgid,
                dgid,
                tclass: av.traffic_class(),
                hop_limit: av.hop_limit(),
                flow_label: av.flow_label(),
            })
        }
        num => {
            let ah = qp
                .device()
                .data()
                .ahs
                .get(num)
                .ok_or(WcStatus::LocQpOpErr)?;
            if ah.pd != ud.shared.pd {
                return Err(WcStatus::LocQpOpErr);
            }
            Ok(ah.av)
        }
    }
}

/// Copies the SGEs' bytes into `out` (as long as the WQE's total length).
fn gather(
    qp: &Qp<Ferroce>,
    ud: &UdQp<'_>,
    wqe: &SendWqe<'_>,
    out: &mut [u8],
) -> Result<(), WcStatus> {
    let num = wqe.num_sge() as usize;
    if num.saturating_mul(SGE_SIZE) > ud.payload_room {
        return Err(WcStatus::LocLenErr);
    }
    let sges = (0..num).map(|i| wqe.sge(i));
    sge::gather(&qp.device().data().mrs, ud.shared.pd, sges, out)
}

fn transmit(
    qp: &Qp<Ferroce>,
    shared: &QpShared,
    w: &UdWork,
    payload: &[u8],
    qp_qkey: u32,
    psn: &mut u32,
) -> Result {
    let opcode = if w.imm.is_some() {
        Opcode::UdSendOnlyImm
    } else {
        Opcode::UdSendOnly
    };
    let bth = Bth {
        solicited: w.solicited,
        ..Bth::new(opcode as u8, w.remote_qpn, Psn::new(*psn))
    };
    *psn = Psn::new(*psn).add(1).get();
    // A Q_Key with the high bit set means "use the QP's own" (IBTA 10.2.5).
    let qkey = if w.remote_qkey & 0x8000_0000 != 0 {
        qp_qkey
    } else {
        w.remote_qkey
    };
    let ext = ExtHeaders {
        deth: Some(Deth {
            qkey,
            src_qpn: qp.qpn(),
        }),
        imm: w.imm,
        ..ExtHeaders::default()
    };
    let path = crate::cc::unmarked(w.path);
    shared.with_path(qp, path, |x| x.send(&bth, &ext, payload))?
}
