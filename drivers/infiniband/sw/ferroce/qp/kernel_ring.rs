// SPDX-License-Identifier: GPL-2.0

//! WRs of kernel consumers of RC and UC QPs: written into the QP's own rings (kernel memory that
//! no process maps) in the layout rdma-core's provider writes, so that the RC engine serves
//! them as it serves user space, with no second state machine. Kernel consumers post from any
//! context, often with interrupts off, where the QP's lock may not be taken: the producer side
//! has an interrupt-safe lock of its own, and the QP's work does the rest.

use super::{ring::WorkRing, QpShared};
use crate::{
    device::Ferroce,
    proto::{
        wqe::{RegMr, Sge, WrOpcode},
        wqe_out::{self, Remote, SendHeader, TooBig},
    },
};
use core::sync::atomic::{AtomicU8, Ordering};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    rdma::{
        qp::QpState,
        wr::{self, RecvWr, RemoteWr, SendFlag, SendWr},
    },
    sync::SpinLockIrq,
};

/// Bytes of the largest slot: a send WQE with 32 SGEs or 512 inline bytes (720), rounded up.
const MAX_SLOT: usize = 1024;

/// What the QP's state lets a kernel consumer post, as [`KernelRings::gate`] holds it.
mod gate {
    /// Receives may be posted (INIT on).
    pub(super) const RECV: u8 = 1 << 0;
    /// Sends may be posted (RTS on).
    pub(super) const SEND: u8 = 1 << 1;
    /// The QP is in the error state: what is posted completes flushed.
    pub(super) const ERROR: u8 = 1 << 2;
}

/// The producer side of a kernel QP's rings.
#[pin_data]
pub(crate) struct KernelRings {
    /// Serialises producers; held with interrupts off.
    #[pin]
    post: SpinLockIrq<()>,
    /// A copy of the QP's state that posting may read without its lock.
    gate: AtomicU8,
}

impl KernelRings {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            post <- new_spinlock_irq!(()),
            gate: AtomicU8::new(0),
        })
    }

    /// Follows a state change (called under the QP's lock).
    pub(crate) fn set_state(&self, s: QpState) {
        let g = match s {
            QpState::Reset => 0,
            QpState::Init | QpState::Rtr => gate::RECV,
            QpState::Rts | QpState::Sqd | QpState::Sqe => gate::RECV | gate::SEND,
            QpState::Err => gate::RECV | gate::SEND | gate::ERROR,
        };
        self.gate.store(g, Ordering::Release);
    }

    /// Whether the QP is in the error state, where what is posted completes flushed.
    fn in_error(&self) -> bool {
        self.gate.load(Ordering::Acquire) & gate::ERROR != 0
    }

    /// Writes a send WR into the SQ. Before RTS it is `EINVAL` (as C rxe), `ENOMEM` if the
    /// ring is full, `EINVAL` for what the QP's transport or the WQE's room does not take.
    pub(crate) fn post_send(&self, shared: &QpShared, wr: &SendWr<'_, Ferroce>) -> Result {
        if self.gate.load(Ordering::Acquire) & gate::SEND == 0 {
            return Err(EINVAL);
        }
        let h = header(wr, shared.is_uc())?;
        let inline = wr.send_flags.contains(SendFlag::Inline);
        self.produce(&shared.sq, |slot| {
            let res = if inline {
                wqe_out::send_inline(slot, &h, wr.len(), |b| wr.gather(b))
            } else {
                wqe_out::send_with_sges(slot, &h, wr.sges().map(sge)).map(Ok)
            };
            res.map_err(too_big)?
        })
    }

    /// Writes a receive WR into the RQ. In RESET it is `EINVAL`; returns whether the QP's work
    /// must run (in the error state, to flush it).
    pub(crate) fn post_recv(&self, shared: &QpShared, wr: &RecvWr<'_>) -> Result<bool> {
        if self.gate.load(Ordering::Acquire) & gate::RECV == 0 {
            return Err(EINVAL);
        }
        self.produce(&shared.rq, |slot| {
            wqe_out::recv(slot, wr.wr_id, wr.sges().map(sge)).map_err(too_big)
        })?;
        Ok(self.in_error())
    }

    /// Drops every WQE posted (the QP is reset): the consumer indexes `sq_cons` and `rq_cons`
    /// move to the producers'.
    pub(crate) fn discard(&self, shared: &QpShared, sq_cons: &mut u32, rq_cons: &mut u32) {
        let _guard = self.post.lock();
        // Kernel memory only the kernel writes: the indexes can be read.
        let _ = shared.sq.discard(sq_cons);
        let _ = shared.rq.discard(rq_cons);
    }

    /// Appends one WQE that `fill` writes.
    fn produce(&self, ring: &WorkRing, fill: impl FnOnce(&mut [u8]) -> Result) -> Result {
        let mut buf = [0u8; MAX_SLOT];
        let _guard = self.post.lock();
        ring.produce(&mut buf, fill)
    }
}

fn sge(s: wr::WrSge) -> Sge {
    Sge {
        addr: s.addr,
        len: s.length,
        lkey: s.lkey,
    }
}

/// A WR that does not fit the QP's slot (more SGEs or inline bytes than it was created for).
fn too_big(_: TooBig) -> Error {
    EINVAL
}

/// The WQE header of a kernel WR: only what the RC engine does for the QP's transport (a WR it
/// would refuse fails its post, not its completion); UC has no SEND with invalidate, READ or
/// atomics.
fn header(wr: &SendWr<'_, Ferroce>, uc: bool) -> Result<SendHeader> {
    use kernel::rdma::wr::WrOpcode as K;
    let opcode = match wr.opcode {
        K::Send => WrOpcode::Send,
        K::SendWithImm => WrOpcode::SendWithImm,
        K::SendWithInv if !uc => WrOpcode::SendWithInv,
        K::RdmaWrite => WrOpcode::RdmaWrite,
        K::RdmaWriteWithImm => WrOpcode::RdmaWriteWithImm,
        K::RdmaRead if !uc => WrOpcode::RdmaRead,
        K::AtomicCmpAndSwp if !uc => WrOpcode::AtomicCmpAndSwp,
        K::AtomicFetchAndAdd if !uc => WrOpcode::AtomicFetchAndAdd,
        K::LocalInv => WrOpcode::LocalInv,
        K::RegMr => WrOpcode::RegMr,
        _ => return Err(EINVAL),
    };
    let remote = match (opcode, wr.reg, wr.remote) {
        (WrOpcode::RegMr, Some(r), _) => {
            if !r.page_size.is_power_of_two() {
                return Err(EINVAL);
            }
            Remote::Reg(RegMr {
                iova: r.iova,
                length: r.length,
                key: r.key,
                access: r.access,
                page_shift: r.page_size.trailing_zeros(),
            })
        }
        (WrOpcode::RegMr, None, _) => return Err(EINVAL),
        (_, _, RemoteWr::None) => Remote::None,
        (_, _, RemoteWr::Rdma { remote_addr, rkey }) => Remote::Rdma {
            addr: remote_addr,
            rkey,
        },
        (
            _,
            _,
            RemoteWr::Atomic {
                remote_addr,
                compare_add,
                swap,
                rkey,
            },
        ) => Remote::Atomic {
            addr: remote_addr,
            compare_add,
            swap,
            rkey,
        },
    };
    Ok(SendHeader {
        wr_id: wr.wr_id,
        opcode,
        send_flags: u32::from(wr.send_flags),
        // The union's bytes as the WR holds them: immediate data in wire order, a key to
        // invalidate in host order.
        ex: wr.imm.to_ne_bytes(),
        remote,
    })
}
