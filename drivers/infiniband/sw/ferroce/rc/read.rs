// SPDX-License-Identifier: GPL-2.0

//! The RC responder's RDMA READs: each accepted request becomes a read resource, whose
//! responses go out a bounded batch at a time (a 2 GiB READ must not hold the QP, or the CPU,
//! for its whole length), from the packet that asked or from the QP's work.
//!
//! The QP keeps at most `max_dest_rd_atomic` resources: those being answered, then the last
//! ones answered, so that a duplicate request (its responses were lost) is answered again from
//! where it asks, out of the resource, not from what the duplicate names. A duplicate that
//! matches no resource reads nothing.

use crate::{
    limits::MAX_MSG_SIZE,
    net::recv::Packet,
    net::xmit::Xmit,
    proto::{
        aeth::Syndrome,
        opcode::Opcode,
        packet::{Aeth, BuildError, ExtHeaders},
        psn::Psn,
        wqe::access,
    },
    qp::{QpCtx, QpInner},
    rc::resp::Refusal,
    rc::{self, path_mtu},
    sge,
};
use kernel::prelude::*;

/// Read response packets built in one hold of the QP's lock.
const BATCH: u32 = 32;

/// One READ being answered, or answered lately.
struct Resource {
    /// The PSN of its first response.
    first: Psn,
    npkts: u32,
    mtu: u32,
    len: u32,
    /// Where the READ starts; the region is looked up per response (see
    /// [`crate::mr::MrRef`]), so a deregistered one is read no further.
    va: u64,
    pd: usize,
    rkey: u32,
    /// The MSN its responses carry.
    msn: u32,
    /// The next response to send; `npkts` once all went out.
    next: u32,
    /// Responses sent again for duplicates, bounded by [`RESEND_LIMIT`].
    resent: u64,
}

/// How many times over a READ's responses are sent again for duplicate requests, at most (plus
/// [`RESEND_SLACK`]): a lossy link needs a few; a host that replays a request, say from a
/// spoofed address, must not turn one READ into endless traffic.
const RESEND_LIMIT: u64 = 8;
const RESEND_SLACK: u64 = 1024;

impl Resource {
    fn answering(&self) -> bool {
        self.next < self.npkts
    }
}

/// A QP's read resources, oldest first.
#[derive(Default)]
pub(crate) struct Reads(KVec<Resource>);

impl Reads {
    /// Whether responses are still to go out.
    pub(crate) fn answering(&self) -> bool {
        self.0.iter().any(Resource::answering)
    }
}

/// Takes a READ request in sequence: checks it and makes it a resource. Returns the PSNs its
/// responses take.
pub(crate) fn start(cx: &mut QpCtx<'_>, pkt: &Packet<'_>) -> Result<u32, Refusal> {
    let reth = pkt.ext.reth.ok_or(Refusal::Invalid)?;
    if cx.inner.attr.access_flags & access::REMOTE_READ == 0 {
        return Err(Refusal::Access);
    }
    // IBA C9-94: no message is longer than the port's largest.
    if reth.dma_len > MAX_MSG_SIZE {
        return Err(Refusal::Invalid);
    }
    // None granted (`max_dest_rd_atomic` 0): no READ is taken (as C rxe).
    let limit = usize::from(cx.inner.attr.max_dest_rd_atomic);
    let reads = &mut cx.inner.resp.reads.0;
    // The requester may have no more READs outstanding than it was granted.
    if reads.iter().filter(|r| r.answering()).count() >= limit {
        return Err(Refusal::Invalid);
    }
    let mtu = path_mtu(cx);
    // A zero-length READ names no memory.
    if reth.dma_len != 0 {
        sge::remote(
            &cx.dev().mrs,
            cx.shared.pd,
            reth.rkey,
            reth.va,
            reth.dma_len,
            access::REMOTE_READ,
        )
        .ok_or(Refusal::Access)?;
    }
    let reads = &mut cx.inner.resp.reads.0;
    // Room for it: the oldest answered one goes.
    if reads.len() >= limit {
        if let Some(i) = reads.iter().position(|r| !r.answering()) {
            reads.remove(i).map_err(|_| Refusal::NotReady)?;
        }
    }
    let msn = (cx.inner.resp.msn + 1) & Psn::MASK;
    let npkts = reth.dma_len.div_ceil(mtu).max(1);
    cx.inner
        .resp
        .reads
        .0
        .push(
            Resource {
                first: pkt.bth.psn,
                npkts,
                mtu,
                len: reth.dma_len,
                va: reth.va,
                pd: cx.shared.pd,
                rkey: reth.rkey,
                msn,
                next: 0,
                resent: 0,
            },
            GFP_ATOMIC,
        )
        .map_err(|_| Refusal::NoMem)?;
    // The responses carry the MSN of this request, counted now.
    cx.inner.resp.msn = msn;
    Ok(npkts)
}

/// A duplicate READ request: if it names responses of a resource, they go out again from
/// there.
pub(crate) fn duplicate(inner: &mut QpInner, pkt: &Packet<'_>) {
    let Some(reth) = pkt.ext.reth else {
        return;
    };
    let psn = pkt.bth.psn;
    if let Some(r) = inner.resp.reads.0.iter_mut().find(|r| {
        let i = psn.diff(r.first);
        // CAST: `i` is checked non-negative.
        r.rkey == reth.rkey && i >= 0 && (i as u32) < r.npkts
    }) {
        // CAST: Checked above.
        let from = psn.diff(r.first) as u32;
        let again = u64::from(r.next.saturating_sub(from));
        if r.resent + again <= u64::from(r.npkts) * RESEND_LIMIT + RESEND_SLACK {
            r.resent += again;
            r.next = r.next.min(from);
        }
    }
}

/// Sends the next batch of read responses. Returns whether more are left (for the QP's work).
pub(crate) fn answer(inner: &mut QpInner, xmit: &Xmit<'_>) -> bool {
    let mut budget = BATCH;
    let attr = inner.attr;
    for r in inner.resp.reads.0.iter_mut() {
        while r.answering() {
            if budget == 0 {
                return true;
            }
            budget -= 1;
            match send_response(xmit, &attr, r) {
                Ok(()) => r.next += 1,
                // The region was deregistered: give up on this READ; the requester's timer
                // reports it.
                Err(e) if e == EFAULT => r.next = r.npkts,
                // No memory: the work tries again.
                Err(_) => return true,
            }
        }
    }
    false
}

/// Goes on answering READs from the QP's work; returns whether more are left.
pub(crate) fn resume(cx: &mut QpCtx<'_>) -> bool {
    if !cx.inner.resp.reads.answering() {
        return false;
    }
    cx.with_peer(|cx, xmit| answer(cx.inner, xmit))
        .unwrap_or(false)
}

/// Sends response `r.next` of a READ. Not paced yet, so not ECN-capable: pacing them would hold
/// the QP's incoming packets (ACKs and CNPs among them) behind them.
fn send_response(xmit: &Xmit<'_>, attr: &kernel::rdma::qp::QpAttr, r: &Resource) -> Result {
    let i = r.next;
    let off = i * r.mtu;
    let n = (r.len - off).min(r.mtu) as usize;
    // Copied from the region straight into the packet.
    let fill = |dst: &mut [u8]| {
        if dst.is_empty() {
            return Ok(());
        }
        let mrs = &xmit.device().data().mrs;
        let va = r.va + u64::from(off);
        // CAST: `dst` is at most one MTU.
        let n = dst.len() as u32;
        // Deregistered since the READ came: it is not answered further.
        let (mr, at) = sge::remote(mrs, r.pd, r.rkey, va, n, access::REMOTE_READ)
            .ok_or(BuildError::Payload)?;
        mr.mem.read(at, dst).map_err(|_| BuildError::Payload)
    };
    let op = match (i == 0, i + 1 == r.npkts) {
        (true, true) => Opcode::RcReadResponseOnly,
        (true, false) => Opcode::RcReadResponseFirst,
        (false, true) => Opcode::RcReadResponseLast,
        (false, false) => Opcode::RcReadResponseMiddle,
    };
    let bth = rc::bth(attr, op, r.first.add(i));
    let ext = ExtHeaders {
        aeth: (op != Opcode::RcReadResponseMiddle).then_some(Aeth {
            syndrome: Syndrome::Ack.to_u8(),
            msn: r.msn,
        }),
        ..ExtHeaders::default()
    };
    xmit.send_not_ect(&bth, &ext, n, fill)
}
