// SPDX-License-Identifier: GPL-2.0

//! The requester side for UD: send WQEs from the shared ring become RoCEv2 packets.
//!
//! Each WQE is copied out of user memory once, then checked field by field (opcode, address
//! vector, SGEs against the MR table and the QP's PD); one that fails completes in error and
//! harms only its own QP.

use crate::{
    counters::Counter,
    device::Ferroce,
    proto::{
        bth::Bth,
        build::{build_ipv4, flow_label, ipv4_packet_len, udp_sport, Ipv4Path},
        packet::{Deth, ExtHeaders},
        psn::Psn,
        wqe::{Completion, WcOpcode, WcStatus},
    },
};
use kernel::{net::ipv4::Route, prelude::*, rdma::qp::Qp};

/// Offsets in `struct rxe_send_wqe` (x86-64 layout of rdma_user_rxe.h).
mod off {
    pub(super) const OPCODE: usize = 12;
    pub(super) const SEND_FLAGS: usize = 16;
    pub(super) const IMM: usize = 20;
    pub(super) const UD_REMOTE_QPN: usize = 24;
    pub(super) const UD_REMOTE_QKEY: usize = 28;
    pub(super) const UD_AV: usize = 56;
    pub(super) const AV_NETWORK_TYPE: usize = 1;
    pub(super) const AV_FLOW_LABEL: usize = 8 + 16;
    pub(super) const AV_HOP_LIMIT: usize = 8 + 21;
    pub(super) const AV_TCLASS: usize = 8 + 22;
    pub(super) const AV_SADDR4: usize = 32 + 4;
    pub(super) const AV_DADDR4: usize = 60 + 4;
    pub(super) const DMA_LENGTH: usize = 184;
    pub(super) const DMA_NUM_SGE: usize = 196;
    pub(super) const DMA_DATA: usize = 208;
}

/// `IB_SEND_SIGNALED`, `IB_SEND_SOLICITED`, `IB_SEND_INLINE`.
const SEND_SIGNALED: u32 = 2;
const SEND_SOLICITED: u32 = 4;
const SEND_INLINE: u32 = 8;
/// `RXE_NETWORK_TYPE_IPV4`.
const NETWORK_IPV4: u8 = 1;
/// A SGE: address, length, lkey.
const SGE_SIZE: usize = 16;
/// UD opcodes.
const UD_SEND_ONLY: u8 = 0x64;
const UD_SEND_ONLY_WITH_IMM: u8 = 0x65;

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_ne_bytes)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}

fn bytes4(b: &[u8], at: usize) -> [u8; 4] {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .unwrap_or([0; 4])
}

/// What a checked UD WQE asks for.
struct UdWork {
    solicited: bool,
    imm: Option<u32>,
    remote_qpn: u32,
    remote_qkey: u32,
    path: Ipv4Path,
}

/// What a UD send needs of its QP.
pub(crate) struct UdQp {
    /// The PD's id, which MRs named by SGEs must share.
    pub(crate) pd: usize,
    /// Bytes after the WQE header: room for SGEs or inline data.
    pub(crate) payload_room: usize,
    /// Whether every WR completes.
    pub(crate) sig_all: bool,
    /// The QP's Q_Key.
    pub(crate) qkey: u32,
}

/// Sends the UD WQE `wqe` (a private copy of its slot); returns its completion, if it has one.
pub(crate) fn send_ud(
    qp: &Qp<Ferroce>,
    ud: &UdQp,
    wqe: &[u8],
    psn: &mut u32,
) -> Option<Completion> {
    let wr_id = u64_at(wqe, 0);
    let flags = u32_at(wqe, off::SEND_FLAGS);
    let done = |status| Completion {
        status,
        ..Completion::flushed(wr_id, WcOpcode::Send, qp.qpn())
    };
    match prepare(qp, ud, wqe) {
        Ok((work, payload)) => {
            // A packet that cannot go out (no route, no memory) is lost, as UD allows.
            let _ = transmit(qp, &work, &payload, ud.qkey, psn);
            (ud.sig_all || flags & SEND_SIGNALED != 0).then(|| done(WcStatus::Success))
        }
        // Errors complete whether signaled or not.
        Err(status) => Some(done(status)),
    }
}

fn prepare(qp: &Qp<Ferroce>, ud: &UdQp, wqe: &[u8]) -> Result<(UdWork, KVec<u8>), WcStatus> {
    let opcode = u32_at(wqe, off::OPCODE);
    let flags = u32_at(wqe, off::SEND_FLAGS);
    let imm = match opcode {
        // IB_WR_SEND, IB_WR_SEND_WITH_IMM: all a UD QP can do.
        2 => None,
        3 => Some(u32::from_be_bytes(bytes4(wqe, off::IMM))),
        _ => return Err(WcStatus::LocQpOpErr),
    };
    let av = wqe.get(off::UD_AV..).ok_or(WcStatus::LocQpOpErr)?;
    if av.get(off::AV_NETWORK_TYPE) != Some(&NETWORK_IPV4) {
        return Err(WcStatus::LocQpOpErr);
    }
    let dev = qp.device().data();
    let len = u32_at(wqe, off::DMA_LENGTH) as usize;
    if len > dev.ib_mtu() as usize {
        return Err(WcStatus::LocLenErr);
    }
    let mut payload = KVec::new();
    payload
        .resize(len, 0, GFP_KERNEL)
        .map_err(|_| WcStatus::LocLenErr)?;
    if flags & SEND_INLINE != 0 {
        if len > ud.payload_room {
            return Err(WcStatus::LocLenErr);
        }
        let src = wqe
            .get(off::DMA_DATA..off::DMA_DATA + len)
            .ok_or(WcStatus::LocLenErr)?;
        payload.copy_from_slice(src);
    } else {
        gather(qp, ud, wqe, &mut payload)?;
    }
    let saddr = bytes4(av, off::AV_SADDR4);
    let daddr = bytes4(av, off::AV_DADDR4);
    let remote_qpn = u32_at(wqe, off::UD_REMOTE_QPN) & 0xff_ffff;
    let fl = u32_at(av, off::AV_FLOW_LABEL) & 0xf_ffff;
    let fl = if fl == 0 {
        flow_label(qp.qpn(), remote_qpn)
    } else {
        fl
    };
    Ok((
        UdWork {
            solicited: flags & SEND_SOLICITED != 0,
            imm,
            remote_qpn,
            remote_qkey: u32_at(wqe, off::UD_REMOTE_QKEY),
            path: Ipv4Path {
                saddr,
                daddr,
                tos: av.get(off::AV_TCLASS).copied().unwrap_or(0),
                ttl: match av.get(off::AV_HOP_LIMIT).copied() {
                    Some(0) | None => 64,
                    Some(t) => t,
                },
                sport: udp_sport(fl),
            },
        },
        payload,
    ))
}

/// Copies the SGEs' bytes into `out` (as long as the WQE's total length).
fn gather(qp: &Qp<Ferroce>, ud: &UdQp, wqe: &[u8], out: &mut [u8]) -> Result<(), WcStatus> {
    let num = u32_at(wqe, off::DMA_NUM_SGE) as usize;
    if num.saturating_mul(SGE_SIZE) > ud.payload_room {
        return Err(WcStatus::LocLenErr);
    }
    let dev = qp.device().data();
    let mut done = 0usize;
    for i in 0..num {
        let sge = wqe
            .get(off::DMA_DATA + i * SGE_SIZE..off::DMA_DATA + (i + 1) * SGE_SIZE)
            .ok_or(WcStatus::LocLenErr)?;
        let (addr, len, lkey) = (u64_at(sge, 0), u32_at(sge, 8) as usize, u32_at(sge, 12));
        let dst = out.get_mut(done..done + len).ok_or(WcStatus::LocLenErr)?;
        let mr = dev.mrs.get(lkey).ok_or(WcStatus::LocProtErr)?;
        if mr.pd != ud.pd {
            return Err(WcStatus::LocProtErr);
        }
        let start = addr.checked_sub(mr.iova).ok_or(WcStatus::LocProtErr)?;
        let start = usize::try_from(start).map_err(|_| WcStatus::LocProtErr)?;
        mr.mem.read(start, dst).map_err(|_| WcStatus::LocProtErr)?;
        done += len;
    }
    if done != out.len() {
        return Err(WcStatus::LocLenErr);
    }
    Ok(())
}

fn transmit(qp: &Qp<Ferroce>, w: &UdWork, payload: &[u8], qp_qkey: u32, psn: &mut u32) -> Result {
    let dev = qp.device();
    let nd = dev.netdev(1).ok_or(ENODEV)?;
    let net = nd.net().ok_or(ENODEV)?;
    let bth = Bth {
        opcode: if w.imm.is_some() {
            UD_SEND_ONLY_WITH_IMM
        } else {
            UD_SEND_ONLY
        },
        solicited: w.solicited,
        mig_req: false,
        pad: 0,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qpn: w.remote_qpn,
        ack_req: false,
        psn: Psn::new(*psn),
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
    let len = ipv4_packet_len(bth.opcode, payload.len()).ok_or(EINVAL)?;
    let route = Route::output(&net, w.path.saddr, w.path.daddr, nd.ifindex())?;
    route.send(&net, len, |out| {
        build_ipv4(&w.path, &bth, &ext, payload, out).map_err(|_| EINVAL)
    })?;
    dev.data().counters.inc(Counter::SentPkts);
    dev.data()
        .counters
        .add(Counter::SentBytes, payload.len() as u64);
    Ok(())
}
