// SPDX-License-Identifier: GPL-2.0

//! The RC responder's RDMA READs: each accepted request becomes a read resource, whose
//! responses go out a bounded batch at a time (a 2 GiB READ must not hold the QP, or the CPU,
//! for its whole length), from the packet that asked or from the QP's work.
//!
//! The QP keeps at most `max_dest_rd_atomic` resources, READs' and atomics' (see [`super::atomic`])
//! alike: those being answered, then the last ones answered, so that a duplicate request (its
//! responses were lost) is answered again from where it asks, out of the resource, not from
//! what the duplicate names. A duplicate that matches no resource reads nothing.

use crate::{
    limits::MAX_MSG_SIZE,
    net::recv::Packet,
    net::xmit::Xmit,
    proto::{
        aeth::Syndrome,
        packet::{Aeth, BuildError, ExtHeaders, Reth},
        psn::Psn,
        read::{admits, ReadResource, Resource, Response},
        responder::Refusal,
        wqe::access,
    },
    qp::{QpCtx, QpInner},
    rc::{
        self, path_mtu,
        resp::{check_range, granted},
    },
};
use kernel::{
    prelude::*,
    rdma::{attr::Access, qp::QpAttr},
};

/// Read response packets built in one hold of the QP's lock.
const BATCH: u32 = 32;

/// A QP's READ and atomic resources, oldest first. Every request in sequence that takes one
/// drops the oldest answered one: the dropped ones stay at the front until they are half of
/// the list, then go in one pass, so that dropping costs no shift of the rest each time.
#[derive(Default)]
pub(crate) struct Resources {
    list: KVec<Resource>,
    /// How many at the front of `list` are dropped.
    dropped: usize,
    /// How many of the kept ones are READs': only those can be answering, so a QP that takes
    /// only atomics never looks through them.
    reads: usize,
}

impl Resources {
    fn kept(&self) -> &[Resource] {
        self.list.get(self.dropped..).unwrap_or(&[])
    }

    /// Whether responses are still to go out.
    pub(crate) fn answering(&self) -> bool {
        self.reads > 0 && self.kept().iter().any(Resource::answering)
    }

    /// `Refusal::Invalid` if the requester has as many READs and atomics outstanding as it was
    /// granted (`max_dest_rd_atomic`; none granted: none is taken, as C rxe).
    pub(super) fn admit(&self, granted: u8) -> Result<(), Refusal> {
        let answering = match self.reads {
            0 => 0,
            _ => self.kept().iter().filter(|r| r.answering()).count(),
        };
        if admits(answering, granted) {
            Ok(())
        } else {
            Err(Refusal::Invalid)
        }
    }

    /// Makes room for one more: the oldest answered one goes, and the slot is allocated now, so
    /// that [`Self::push`] cannot fail after the operation took effect.
    pub(super) fn make_room(&mut self, granted: u8) -> Result<(), Refusal> {
        let kept = self.kept();
        if kept.len() >= usize::from(granted) {
            if let Some(i) = kept.iter().position(|r| !r.answering()) {
                let read = matches!(kept[i], Resource::Read(_));
                if i == 0 {
                    self.dropped += 1;
                } else {
                    self.list
                        .remove(self.dropped + i)
                        .map_err(|_| Refusal::NotReady)?;
                }
                if read {
                    self.reads -= 1;
                }
            }
        }
        if self.dropped > 0 && self.dropped * 2 >= self.list.len() {
            let (dropped, mut seen) = (self.dropped, 0);
            self.list.retain(|_| {
                seen += 1;
                seen > dropped
            });
            self.dropped = 0;
        }
        self.list.reserve(1, GFP_ATOMIC).map_err(|_| Refusal::NoMem)
    }

    /// Keeps `r` (after [`Self::make_room`]).
    pub(super) fn push(&mut self, r: Resource) -> Result<(), Refusal> {
        let read = matches!(r, Resource::Read(_));
        self.list.push(r, GFP_ATOMIC).map_err(|_| Refusal::NoMem)?;
        if read {
            self.reads += 1;
        }
        Ok(())
    }

    /// The resources, oldest first.
    pub(super) fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut Resource> {
        let dropped = self.dropped;
        self.list.get_mut(dropped..).unwrap_or(&mut []).iter_mut()
    }
}

/// Finishes a request in sequence that one empty READ response answers (ATOMIC WRITE, FLUSH;
/// [`Resources::make_room`] was called): keeps that response as a zero-length READ resource,
/// which [`answer`] sends and a duplicate gets again, and moves the MSN and expected PSN on.
pub(crate) fn keep_empty_answer(
    cx: &mut QpCtx<'_>,
    pkt: &Packet<'_>,
    reth: Reth,
) -> Result<(), Refusal> {
    let msn = cx.inner.resp.msn.wrapping_add(1) & Psn::MASK;
    let answer = Reth { dma_len: 0, ..reth };
    let r = ReadResource::new(pkt.bth.psn, answer, path_mtu(cx), msn, cx.shared.pd);
    // Room was made: this does not fail.
    cx.inner.resp.resources.push(Resource::Read(r))?;
    cx.inner.resp.msn = msn;
    cx.inner.attr.rq_psn = pkt.bth.psn.add(1).get();
    Ok(())
}

/// Takes a READ request in sequence: checks it and makes it a resource. Returns the PSNs its
/// responses take.
pub(crate) fn start(cx: &mut QpCtx<'_>, pkt: &Packet<'_>) -> Result<u32, Refusal> {
    let reth = pkt.ext.reth.ok_or(Refusal::Invalid)?;
    granted(cx, Access::RemoteRead)?;
    // IBA C9-94: no message is longer than the port's largest.
    if reth.dma_len > MAX_MSG_SIZE {
        return Err(Refusal::Invalid);
    }
    let granted = cx.inner.attr.max_dest_rd_atomic;
    cx.inner.resp.resources.admit(granted)?;
    let mtu = path_mtu(cx);
    check_range(cx, &reth, access::REMOTE_READ)?;
    cx.inner.resp.resources.make_room(granted)?;
    // The responses carry the MSN of this request, counted now.
    let msn = cx.inner.resp.msn.wrapping_add(1) & Psn::MASK;
    let r = ReadResource::new(pkt.bth.psn, reth, mtu, msn, cx.shared.pd);
    cx.inner.resp.resources.push(Resource::Read(r))?;
    cx.inner.resp.msn = msn;
    Ok(r.npkts())
}

/// A duplicate READ request: if it names responses of a resource, they go out again from
/// there.
pub(crate) fn duplicate(inner: &mut QpInner, pkt: &Packet<'_>) {
    let Some(reth) = pkt.ext.reth else {
        return;
    };
    // The newest first: one kept from 2^24 PSNs ago may hold the PSN too.
    for r in inner.resp.resources.iter_mut().rev() {
        if let Resource::Read(r) = r {
            if r.rewind(pkt.bth.psn, reth.rkey) {
                break;
            }
        }
    }
}

/// Sends the next batch of read responses of the QP `qp` ([`crate::qp::QpShared::id`]).
/// Returns whether more are left (for the QP's work).
pub(crate) fn answer(inner: &mut QpInner, xmit: &Xmit<'_>, qp: u64) -> bool {
    let mut budget = BATCH;
    let attr = inner.attr;
    for r in inner.resp.resources.iter_mut() {
        let Resource::Read(r) = r else {
            continue;
        };
        while let Some(response) = r.next_response() {
            if budget == 0 {
                return true;
            }
            budget -= 1;
            match send_response(xmit, &attr, qp, &response) {
                Ok(()) => r.sent(),
                // The key reaches no more (the region was deregistered, or the window
                // invalidated, rebound or freed): give up on this READ; the requester's timer
                // reports it.
                Err(e) if e == EFAULT => r.abandon(),
                // No memory: the work tries again.
                Err(_) => return true,
            }
        }
    }
    false
}

/// Goes on answering READs from the QP's work; returns whether more are left.
pub(crate) fn resume(cx: &mut QpCtx<'_>) -> bool {
    if !cx.inner.resp.resources.answering() {
        return false;
    }
    cx.with_peer(|cx, xmit| answer(cx.inner, xmit, cx.shared.id))
        .unwrap_or(false)
}

/// Sends one read response. Not paced yet, so not ECN-capable: pacing them would hold the QP's
/// incoming packets (ACKs and CNPs among them) behind them.
fn send_response(xmit: &Xmit<'_>, attr: &QpAttr, qp: u64, r: &Response) -> Result {
    // Copied from the region straight into the packet.
    let fill = |dst: &mut [u8]| {
        if dst.is_empty() {
            return Ok(());
        }
        let mrs = &xmit.device().data().mrs;
        // CAST: `dst` is at most one MTU.
        let n = dst.len() as u32;
        // Deregistered since the READ came: it is not answered further.
        let (mr, at) = mrs
            .remote(r.pd, qp, r.rkey, r.va, n, access::REMOTE_READ)
            .ok_or(BuildError::Payload)?;
        mr.mem.read(at, dst).map_err(|_| BuildError::Payload)
    };
    let bth = rc::bth(attr, r.opcode, r.psn);
    let ext = ExtHeaders {
        aeth: r.aeth_msn.map(|msn| Aeth {
            syndrome: Syndrome::Ack.to_u8(),
            msn,
        }),
        ..ExtHeaders::default()
    };
    xmit.send_not_ect(&bth, &ext, r.len as usize, fill)
}
