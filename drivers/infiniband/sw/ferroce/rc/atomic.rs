// SPDX-License-Identifier: GPL-2.0

//! The RC responder's atomics: compare and swap and fetch and add on an 8-byte word of a
//! registered region, done with the CPU's own atomic instructions on the pinned page, so that
//! atomics from any QP of any device on the word never lose an update, without a lock (C rxe
//! takes one lock for all atomics of all devices).
//!
//! Each one is a responder resource (as a READ is, within `max_dest_rd_atomic`): its original
//! value is kept, so that a duplicate request (the ACK was lost) gets the same answer and the
//! word is not changed twice.
//!
//! An ATOMIC WRITE stores 8 bytes whole; IBA answers it as a zero-length READ, so its resource
//! is one: a duplicate gets the empty response again and stores nothing.

use crate::{
    mr::MrRef,
    net::{recv::Packet, xmit::Xmit},
    proto::{
        aeth::Syndrome,
        opcode::Opcode,
        packet::{Aeth, AtomicAckEth, ExtHeaders},
        psn::Psn,
        read::{AtomicResult, Resource},
        responder::Refusal,
        wqe::access,
    },
    qp::{QpCtx, QpInner},
    rc::{self, read, resp::granted},
};
use core::sync::atomic::Ordering;
use kernel::{prelude::*, rdma::attr::Access};

/// The word an atomic works on: 8 bytes, naturally aligned.
const WORD: u32 = 8;

/// What every 8-byte operation needs before it is done: a naturally aligned word (else an
/// invalid request, as C rxe) that the key lets this QP at with `right`, and room for one more
/// responder resource. Returns the region and the word's offset in it.
fn claim_word(
    cx: &mut QpCtx<'_>,
    rkey: u32,
    va: u64,
    right: u32,
) -> Result<(MrRef, usize), Refusal> {
    if va % u64::from(WORD) != 0 {
        return Err(Refusal::Invalid);
    }
    let granted = cx.inner.attr.max_dest_rd_atomic;
    cx.inner.resp.resources.admit(granted)?;
    let found = cx.remote(rkey, va, WORD, right).ok_or(Refusal::Access)?;
    cx.inner.resp.resources.make_room(granted)?;
    Ok(found)
}

/// Takes an atomic request in sequence: checks it, does it, keeps its answer and sends it.
pub(crate) fn start(cx: &mut QpCtx<'_>, xmit: &Xmit<'_>, pkt: &Packet<'_>) -> Result<(), Refusal> {
    let a = pkt.ext.atomic.ok_or(Refusal::Invalid)?;
    granted(cx, Access::RemoteAtomic)?;
    let (mr, at) = claim_word(cx, a.rkey, a.va, access::REMOTE_ATOMIC)?;
    let compare_swap = pkt.info.opcode == Opcode::RcCompareSwap;
    // The word as the process sees it, in host order; the wire carries the operands as numbers.
    let orig = mr
        .mem
        .with_atomic_u64(at, |word| {
            if compare_swap {
                match word.compare_exchange(
                    a.compare,
                    a.swap_add,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                ) {
                    Ok(v) | Err(v) => v,
                }
            } else {
                word.fetch_add(a.swap_add, Ordering::SeqCst)
            }
        })
        // Aligned as an address of the region, not in memory (a region registered at an
        // unaligned iova): no word to work on.
        .map_err(|_| Refusal::Invalid)?;
    let msn = cx.inner.resp.msn.wrapping_add(1) & Psn::MASK;
    let psn = pkt.bth.psn;
    let result = AtomicResult::new(psn, a.rkey, a.va, orig, msn);
    // Room was made: this does not fail.
    cx.inner.resp.resources.push(Resource::Atomic(result))?;
    cx.inner.resp.msn = msn;
    cx.inner.attr.rq_psn = psn.add(1).get();
    send_ack(xmit, cx.inner, psn, orig, msn);
    Ok(())
}

/// Takes an ATOMIC WRITE in sequence: checks it, stores its 8 bytes in one store, and keeps a
/// zero-length READ resource whose response answers it (sent by [`rc::read::answer`]).
pub(crate) fn write(cx: &mut QpCtx<'_>, pkt: &Packet<'_>) -> Result<(), Refusal> {
    let reth = pkt.ext.reth.ok_or(Refusal::Invalid)?;
    granted(cx, Access::RemoteWrite)?;
    // IBA oA19-28: exactly one word; anything else is an invalid request.
    let mut value = [0u8; WORD as usize];
    if reth.dma_len != WORD || pkt.bth.pad != 0 {
        return Err(Refusal::Invalid);
    }
    pkt.payload
        .copy_to(&mut value)
        .map_err(|_| Refusal::Invalid)?;
    let (mr, at) = claim_word(cx, reth.rkey, reth.va, access::REMOTE_WRITE)?;
    // The bytes as they came: the requester's process wrote them in its memory's order.
    mr.mem
        .with_atomic_u64(at, |word| {
            word.store(u64::from_ne_bytes(value), Ordering::SeqCst)
        })
        .map_err(|_| Refusal::Invalid)?;
    read::keep_empty_answer(cx, pkt, reth)
}

/// A duplicate atomic request: the answer again, if it is one of the atomics kept; the word is
/// not touched. One that matches none is dropped (its answer is too old to give again).
pub(crate) fn duplicate(inner: &mut QpInner, xmit: &Xmit<'_>, pkt: &Packet<'_>) {
    let Some(a) = pkt.ext.atomic else {
        return;
    };
    let psn = pkt.bth.psn;
    // The newest first: one kept from 2^24 PSNs ago may share the PSN.
    let found = inner.resp.resources.iter_mut().rev().find_map(|r| match r {
        Resource::Atomic(r) => r.replay(psn, a.rkey, a.va),
        Resource::Read(_) => None,
    });
    if let Some((orig, msn)) = found {
        send_ack(xmit, inner, psn, orig, msn);
    }
}

/// Sends the atomic ACK for `psn`: the original value, and the MSN of its request.
fn send_ack(xmit: &Xmit<'_>, inner: &QpInner, psn: Psn, orig: u64, msn: u32) {
    let bth = rc::bth(&inner.attr, Opcode::RcAtomicAck, psn);
    let ext = ExtHeaders {
        aeth: Some(Aeth {
            syndrome: Syndrome::Ack.to_u8(),
            msn,
        }),
        atomic_ack: Some(AtomicAckEth { orig }),
        ..ExtHeaders::default()
    };
    // A lost ACK is answered again when the requester asks again (a duplicate).
    let _ = xmit.send(&bth, &ext, &[]);
}
