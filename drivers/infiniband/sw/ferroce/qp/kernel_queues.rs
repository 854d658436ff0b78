// SPDX-License-Identifier: GPL-2.0

//! Work queues of kernel consumers (the MAD layer on QP1, kernel UD QPs). They post from any
//! context, often under their own spinlocks, so WRs wait on interrupt-safe lists: sends for the
//! QP's work, receives for the packets that complete them.

use crate::{
    ah::AhState,
    cq::FerroceCq,
    device::Ferroce,
    proto::wqe::{Completion, WcOpcode, WcStatus},
    qp::QpCtx,
    ud::send::{self, Datagram},
};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    rdma::{
        qp::{Qp, QpState},
        wr::{RecvBuf, RecvWr, SendFlag, SendWr, WrOpcode},
    },
    sync::{Arc, SpinLockIrq},
};

/// A posted send, its data already copied out of the consumer's buffers.
pub(crate) struct KernelSend {
    wr_id: u64,
    signaled: bool,
    solicited: bool,
    imm: Option<u32>,
    ah: Arc<AhState>,
    remote_qpn: u32,
    remote_qkey: u32,
    payload: KVec<u8>,
}

/// A kernel QP's posted WRs.
#[pin_data]
pub(crate) struct KernelQueues {
    #[pin]
    sends: SpinLockIrq<KVec<KernelSend>>,
    #[pin]
    recvs: SpinLockIrq<KVec<RecvBuf>>,
}

impl KernelQueues {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            sends <- new_spinlock_irq!(KVec::new()),
            recvs <- new_spinlock_irq!(KVec::new()),
        })
    }

    /// Queues a send; the QP's work transmits it. Does not sleep.
    pub(crate) fn post_send(&self, wr: &SendWr<'_, Ferroce>) -> Result {
        // What a UD QP sends.
        let imm = match wr.opcode {
            WrOpcode::Send => None,
            // The WR holds the wire bytes in memory order.
            WrOpcode::SendWithImm => Some(u32::from_be_bytes(wr.imm.to_ne_bytes())),
            _ => return Err(EINVAL),
        };
        let ud = wr.ud.as_ref().ok_or(EINVAL)?;
        let mut payload = KVec::new();
        payload.resize(wr.len(), 0u8, GFP_ATOMIC)?;
        wr.gather(&mut payload)?;
        let send = KernelSend {
            wr_id: wr.wr_id,
            signaled: wr.send_flags.contains(SendFlag::Signaled),
            solicited: wr.send_flags.contains(SendFlag::Solicited),
            imm,
            ah: ud.ah.data().state(),
            remote_qpn: ud.remote_qpn & 0xff_ffff,
            remote_qkey: ud.remote_qkey,
            payload,
        };
        self.sends.lock().push(send, GFP_ATOMIC)?;
        Ok(())
    }

    /// Queues a receive; its buffers must be under the PD's `local_dma_lkey`. Does not sleep.
    pub(crate) fn post_recv(&self, wr: &RecvWr<'_>) -> Result {
        let buf = wr.to_buf()?;
        self.recvs.lock().push(buf, GFP_ATOMIC)?;
        Ok(())
    }

    /// The oldest posted receive, for a packet that arrived.
    pub(crate) fn take_recv(&self) -> Option<RecvBuf> {
        let mut recvs = self.recvs.lock();
        if recvs.is_empty() {
            None
        } else {
            recvs.remove(0).ok()
        }
    }

    /// Completes every posted WR with a flush error: receives first, then sends.
    pub(crate) fn flush(&self, qp: &Qp<Ferroce>) {
        let recvs = core::mem::take(&mut *self.recvs.lock());
        for r in recvs.iter() {
            let c = Completion::flushed(r.wr_id, WcOpcode::Recv, qp.qpn());
            // A full CQ loses the completion: its consumer fell behind.
            let _ = FerroceCq::post(qp, qp.recv_cq(), &c, true);
        }
        let sends = core::mem::take(&mut *self.sends.lock());
        for s in sends.iter() {
            let c = Completion::flushed(s.wr_id, WcOpcode::Send, qp.qpn());
            // A full CQ loses the completion: its consumer fell behind.
            let _ = FerroceCq::post(qp, qp.send_cq(), &c, true);
        }
    }
}

/// Sends what was posted, oldest first, each completing into the send CQ.
pub(crate) fn run_sends(cx: &mut QpCtx<'_>) {
    let sends = core::mem::take(&mut *cx.shared.kq.sends.lock());
    for s in sends.iter() {
        let status = match cx.inner.attr.state {
            state if state.can_send() => {
                let d = Datagram {
                    av: &s.ah.av,
                    remote_qpn: s.remote_qpn,
                    remote_qkey: s.remote_qkey,
                    imm: s.imm,
                    solicited: s.solicited,
                    payload: &s.payload,
                };
                let mut psn = cx.inner.attr.sq_psn;
                let res = send::send_datagram(cx.qp, cx.shared, &d, cx.inner.attr.qkey, &mut psn);
                cx.inner.attr.sq_psn = psn;
                res.err().unwrap_or(WcStatus::Success)
            }
            QpState::Err => WcStatus::WrFlushErr,
            // Posted before the QP could send (the consumer's mistake).
            _ => WcStatus::LocQpOpErr,
        };
        if s.signaled || cx.shared.sig_all() || status != WcStatus::Success {
            let c = Completion::of_send_queue(s.wr_id, status, WcOpcode::Send, cx.qp.qpn());
            // A full CQ loses the completion: its consumer fell behind.
            let _ = FerroceCq::post(cx.qp, cx.qp.send_cq(), &c, false);
        }
    }
}
