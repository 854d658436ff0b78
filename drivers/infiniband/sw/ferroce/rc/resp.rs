// SPDX-License-Identifier: GPL-2.0

//! The RC responder: requests in PSN order land in receive WQEs (SEND) or registered memory
//! (RDMA WRITE), RDMA READs are answered from registered memory, and the requester hears back by
//! ACK, RNR NAK or NAK.
//!
//! Every remote key, address and length is checked against the MR table before memory is
//! touched; a request that fails is NAKed and changes nothing.
//!
//! UC requests take the same SEND and WRITE paths, but nothing is answered: a message with a
//! gap, or one that is refused, is dropped from there to its end.

use crate::{
    counters::{Counter, Counters},
    cq::FerroceCq,
    device::Ferroce,
    net::recv::{Packet, QpDrop},
    net::xmit::Xmit,
    proto::{
        aeth::{Nak, Syndrome},
        opcode::{OpKind, Opcode},
        packet::{Aeth, ExtHeaders, Reth},
        psn::Psn,
        responder::{request_fits, Refusal, Sequence, Sequencer, UcStep, UnderWay},
        wqe::{
            access, Completion, RecvWqe, WcOpcode, WcStatus, RECV_WQE_HEADER, SGE_SIZE,
            WC_WITH_IMM, WC_WITH_INV,
        },
    },
    qp::{QpCtx, QpInner, QpShared},
    rc::{self, path_mtu},
    rc::{
        atomic, flush,
        read::{self, Resources},
    },
    sge,
    srq::FerroceSrq,
};
use kernel::{
    prelude::*,
    rdma::{attr::Access, qp::Qp},
};

/// `Refusal::Access` unless the QP grants its peer `right`.
pub(super) fn granted(cx: &QpCtx<'_>, right: Access) -> Result<(), Refusal> {
    if cx.inner.attr.access_flags.contains(right) {
        Ok(())
    } else {
        Err(Refusal::Access)
    }
}

/// `Refusal::Access` unless the key `reth` names (a region's or a memory window's) lets this
/// QP at the whole range with `right`; a zero-length request names no memory.
pub(super) fn check_range(cx: &QpCtx<'_>, reth: &Reth, right: u32) -> Result<(), Refusal> {
    if reth.dma_len == 0 {
        return Ok(());
    }
    cx.remote(reth.rkey, reth.va, reth.dma_len, right)
        .map(|_| ())
        .ok_or(Refusal::Access)
}

/// The counter a refusal counts on an RC QP.
fn refusal_counter(r: Refusal) -> Counter {
    match r {
        // An RNR NAK goes out either way; `rcvd_drop_nomem` says when memory was short.
        Refusal::NotReady | Refusal::NoMem => Counter::SendRnrErr,
        Refusal::Invalid => Counter::RespInvalidRequest,
        Refusal::Access => Counter::RespRemoteAccessErrors,
        // A receive completed with an error; `resp_local_length_error` says which.
        Refusal::Receive(_) => Counter::RespCqeError,
        Refusal::TooLong => Counter::RespLocalLengthError,
    }
}
/// A SEND under way: how much has landed in the receive WQE at [`Responder::head`].
struct Receiving {
    offset: usize,
    failed: Option<WcStatus>,
}

/// An RDMA WRITE under way: where its next packet goes. The region is looked up again per
/// packet (see [`crate::mr::MrRef`]); one deregistered meanwhile takes no more bytes.
struct Writing {
    rkey: u32,
    va: u64,
    left: u32,
    len: u32,
}

/// The responder's state, under the QP's lock. The expected PSN is the QP's `rq_psn`.
#[derive(Default)]
pub(crate) struct Responder {
    pub(crate) msn: u32,
    /// Gaps: NAKed once (RC), or the message under way lost (UC).
    seq: Sequencer,
    recv: Option<Receiving>,
    /// A copy of the receive WQE the next (or current) message lands in, once taken: the RQ's
    /// oldest, or one taken from the SRQ, which is then this QP's until it completes.
    head: Option<KVec<u8>>,
    write: Option<Writing>,
    /// RDMA READs being answered, and the last READs and atomics answered (for duplicates).
    pub(crate) resources: Resources,
}

impl Responder {
    /// The receive WQE this QP took from its SRQ and did not complete, if any.
    pub(crate) fn into_held(self) -> Option<KVec<u8>> {
        self.head
    }
}

/// Takes a request for this QP.
pub(crate) fn on_request(
    cx: &mut QpCtx<'_>,
    pkt: &Packet<'_>,
    counters: &Counters,
) -> Result<(), QpDrop> {
    let more = cx
        .with_peer(|cx, xmit| {
            request(cx, xmit, pkt, counters);
            read::answer(cx.inner, xmit, cx.shared.id)
        })
        .ok_or(QpDrop::BadState)?;
    if more {
        // A long READ goes on from the QP's work, so other QPs' packets are not held up.
        cx.shared.kick();
    }
    Ok(())
}

fn request(cx: &mut QpCtx<'_>, xmit: &Xmit<'_>, pkt: &Packet<'_>, counters: &Counters) {
    let psn = pkt.bth.psn;
    let expected = Psn::new(cx.inner.attr.rq_psn);
    match cx.inner.resp.seq.rc(psn, expected) {
        Sequence::Expected => {}
        Sequence::Ahead { nak } => {
            counters.inc(Counter::OutOfSeqRequest);
            if nak {
                ack(xmit, cx.inner, expected, Syndrome::Nak(Nak::PsnSequence));
            }
            return;
        }
        Sequence::Duplicate => {
            counters.inc(Counter::DuplicateRequest);
            if matches!(
                pkt.info.kind,
                OpKind::ReadRequest | OpKind::AtomicWrite | OpKind::Flush
            ) {
                // Answered again only from where the requester lost it, and only if it is one
                // of the READs this QP answered (an ATOMIC WRITE's is an empty READ, so it is
                // not stored twice): a forged one reads nothing.
                read::duplicate(cx.inner, pkt);
            } else if pkt.info.kind == OpKind::Atomic {
                // Its saved answer again, if kept; the word is not changed twice.
                atomic::duplicate(cx.inner, xmit, pkt);
            } else if pkt.bth.ack_req {
                // Its ACK was lost (or is late): say again how far we are.
                ack(xmit, cx.inner, expected.add(Psn::MASK), Syndrome::Ack);
            }
            return;
        }
    }
    let last = pkt.info.position.ends();
    let res = match pkt.info.kind {
        OpKind::ReadRequest => {
            counters.inc(Counter::RxReadRequests);
            between_messages(cx.inner)
                .and_then(|()| read::start(cx, pkt))
                .map(|npkts| {
                    cx.inner.attr.rq_psn = psn.add(npkts).get();
                    counters.inc(Counter::RcvdPkts);
                })
        }
        OpKind::Atomic => {
            counters.inc(Counter::RxAtomicRequests);
            between_messages(cx.inner)
                .and_then(|()| atomic::start(cx, xmit, pkt))
                .map(|()| counters.inc(Counter::RcvdPkts))
        }
        OpKind::AtomicWrite => {
            counters.inc(Counter::RxWriteRequests);
            between_messages(cx.inner)
                .and_then(|()| atomic::write(cx, pkt))
                .map(|()| counters.inc(Counter::RcvdPkts))
        }
        OpKind::Flush => between_messages(cx.inner)
            .and_then(|()| flush::start(cx, pkt))
            .map(|()| counters.inc(Counter::RcvdPkts)),
        _ => send_or_write(cx, pkt, counters),
    };
    match res {
        // Its responses carry the answer (and moved the expected PSN).
        Ok(())
            if matches!(
                pkt.info.kind,
                OpKind::ReadRequest | OpKind::Atomic | OpKind::AtomicWrite | OpKind::Flush
            ) => {}
        Ok(()) => {
            cx.inner.attr.rq_psn = psn.add(1).get();
            counters.inc(Counter::RcvdPkts);
            counters.add(Counter::RcvdBytes, pkt.payload.len() as u64);
            if last {
                cx.inner.resp.msn = cx.inner.resp.msn.wrapping_add(1) & Psn::MASK;
            }
            if pkt.bth.ack_req {
                ack(xmit, cx.inner, psn, Syndrome::Ack);
            }
        }
        Err(refusal) => {
            // The PSN stays expected: nothing of the request took effect, except a receive
            // WQE that completed with an error.
            counters.inc(refusal_counter(refusal));
            if refusal == Refusal::NoMem {
                counters.inc(Counter::DropNoMem);
            }
            let syndrome = refusal.syndrome(cx.inner.attr.min_rnr_timer);
            ack(xmit, cx.inner, psn, syndrome);
            fail_on_receive_error(cx, refusal, counters);
            if refusal.fails_qp() {
                cx.fail();
            }
        }
    }
}

/// Takes a request for this UC QP.
pub(crate) fn on_uc_request(
    cx: &mut QpCtx<'_>,
    pkt: &Packet<'_>,
    counters: &Counters,
) -> Result<(), QpDrop> {
    let psn = pkt.bth.psn;
    let expected = Psn::new(cx.inner.attr.rq_psn);
    let (step, gap) = cx.inner.resp.seq.uc(psn, expected, pkt.info.position);
    if gap {
        // The message under way is lost. Its receive WQE was not consumed and takes the next
        // SEND; a WRITE's bytes stay where they landed.
        counters.inc(Counter::OutOfSeqRequest);
    }
    // Nothing is resent on UC: the next PSN is the one after the sender's.
    cx.inner.attr.rq_psn = psn.add(1).get();
    match step {
        // A new message ends whatever was under way.
        UcStep::Start => drop_message(cx.inner),
        UcStep::Continue => {}
        UcStep::Skip => return Ok(()),
    }
    match send_or_write(cx, pkt, counters) {
        Ok(()) => {
            counters.inc(Counter::RcvdPkts);
            counters.add(Counter::RcvdBytes, pkt.payload.len() as u64);
        }
        Err(refusal) => {
            counters.inc(match refusal {
                Refusal::NotReady => Counter::DropNoRecvWqe,
                Refusal::NoMem => Counter::DropNoMem,
                r => refusal_counter(r),
            });
            drop_message(cx.inner);
            cx.inner.resp.seq.lose_message();
            fail_on_receive_error(cx, refusal, counters);
        }
    }
    Ok(())
}

/// `Refusal::Invalid` while a SEND or WRITE is under way: a READ or an atomic is a message of
/// its own, and one in the middle of another breaks the opcode sequence (as C rxe finds too).
fn between_messages(inner: &QpInner) -> Result<(), Refusal> {
    if inner.resp.recv.is_some() || inner.resp.write.is_some() {
        Err(Refusal::Invalid)
    } else {
        Ok(())
    }
}

/// Forgets the SEND or WRITE under way.
fn drop_message(inner: &mut QpInner) {
    inner.resp.recv = None;
    inner.resp.write = None;
}

/// Takes a SEND or WRITE packet; anything else is invalid here, and so is one out of its
/// message's sequence or not of its length.
fn send_or_write(cx: &mut QpCtx<'_>, pkt: &Packet<'_>, counters: &Counters) -> Result<(), Refusal> {
    let under = match (&cx.inner.resp.recv, &cx.inner.resp.write) {
        (Some(_), _) => UnderWay::Send,
        (None, Some(_)) => UnderWay::Write,
        (None, None) => UnderWay::Nothing,
    };
    if !request_fits(
        under,
        pkt.info.kind == OpKind::Write,
        pkt.info.position,
        pkt.payload.len(),
        path_mtu(cx),
    ) {
        return Err(Refusal::Invalid);
    }
    match pkt.info.kind {
        OpKind::Send => send(cx, pkt),
        OpKind::Write => {
            if pkt.info.position.starts() {
                counters.inc(Counter::RxWriteRequests);
            }
            write(cx, pkt)
        }
        _ => Err(Refusal::Invalid),
    }
}

/// A SEND that its receive WQE could not take completed that WQE with an error, which (as any
/// error completion) takes the QP to the error state.
fn fail_on_receive_error(cx: &mut QpCtx<'_>, refusal: Refusal, counters: &Counters) {
    if let Refusal::Receive(status) = refusal {
        if status == WcStatus::LocLenErr {
            counters.inc(Counter::RespLocalLengthError);
        }
        cx.fail();
    }
}

/// Sends an ACK or NAK for `psn`.
pub(crate) fn ack(xmit: &Xmit<'_>, inner: &QpInner, psn: Psn, syndrome: Syndrome) {
    let bth = rc::bth(&inner.attr, Opcode::RcAck, psn);
    let ext = ExtHeaders {
        aeth: Some(Aeth {
            syndrome: syndrome.to_u8(),
            msn: inner.resp.msn,
        }),
        ..ExtHeaders::default()
    };
    // A lost ACK is resent when the requester asks again.
    let _ = xmit.send(&bth, &ext, &[]);
}

/// Makes sure [`Responder::head`] holds the receive WQE the next message lands in: the RQ's
/// oldest, or the SRQ's (taken from it now). `NotReady` if none is posted.
fn take_recv_wqe(cx: &mut QpCtx<'_>) -> Result<(), Refusal> {
    if cx.inner.resp.head.is_some() {
        return Ok(());
    }
    let slot = match cx.qp.srq() {
        Some(srq) => FerroceSrq::take(srq),
        None => {
            let cons = cx.inner.rq_cons;
            cx.shared.rq.copy_at(cons, cons)
        }
    };
    let slot = slot.map_err(|_| Refusal::NoMem)?.ok_or(Refusal::NotReady)?;
    cx.inner.resp.head = Some(slot);
    Ok(())
}

/// The PD whose keys a receive WQE's SGEs are: the SRQ's for a WQE posted there.
pub(crate) fn recv_pd(qp: &Qp<Ferroce>, shared: &QpShared) -> usize {
    qp.srq().map_or(shared.pd, |srq| srq.data().pd)
}

/// `LocLenErr` for a receive WQE that names more SGEs than its slot holds.
fn malformed(slot: &[u8]) -> Option<WcStatus> {
    let num = RecvWqe::new(slot).num_sge() as usize;
    (num.saturating_mul(SGE_SIZE) > slot.len().saturating_sub(RECV_WQE_HEADER))
        .then_some(WcStatus::LocLenErr)
}

/// Writes `data` at `offset` into a receive WQE's buffers, whose keys are `pd`'s.
fn land(
    qp: &Qp<Ferroce>,
    pd: usize,
    slot: &[u8],
    offset: usize,
    data: &crate::net::recv::Payload<'_>,
) -> Result<(), WcStatus> {
    if let Some(status) = malformed(slot) {
        return Err(status);
    }
    let w = RecvWqe::new(slot);
    let num = w.num_sge() as usize;
    let mrs = &qp.device().data().mrs;
    sge::scatter(mrs, pd, (0..num).map(|i| w.sge(i)), offset, data)
}

/// Completes the receive WQE at [`Responder::head`] (taken by [`take_recv_wqe`]).
fn complete_recv(cx: &mut QpCtx<'_>, c: Completion, solicited: bool) {
    let Some(slot) = cx.inner.resp.head.take() else {
        return;
    };
    if cx.qp.srq().is_none() {
        // Only the shared copy of the index can fail to be written; the kernel's moved on.
        let _ = cx.shared.rq.advance(&mut cx.inner.rq_cons);
    }
    let c = Completion {
        wr_id: RecvWqe::new(&slot).wr_id(),
        ..c
    };
    if c.status == WcStatus::Success {
        cx.counters().inc(Counter::RdmaRecvs);
    }
    // A full CQ loses the completion: its consumer fell behind.
    let _ = FerroceCq::post(cx.qp, cx.qp.recv_cq(), &c, solicited);
}

fn recv_completion(
    qp: &Qp<Ferroce>,
    status: WcStatus,
    opcode: WcOpcode,
    len: usize,
    imm: Option<u32>,
) -> Completion {
    Completion {
        wr_id: 0,
        status,
        opcode,
        // CAST: Messages are below 2^31 bytes.
        byte_len: len as u32,
        qp_num: qp.qpn(),
        src_qp: 0,
        wc_flags: if imm.is_some() { WC_WITH_IMM } else { 0 },
        imm_data: imm.unwrap_or(0),
        port_num: 1,
        net_type: 0,
    }
}

/// A SEND packet: into the receive WQE at the RQ's head.
fn send(cx: &mut QpCtx<'_>, pkt: &Packet<'_>) -> Result<(), Refusal> {
    let first = pkt.info.position.starts();
    let last = pkt.info.position.ends();
    if first {
        take_recv_wqe(cx)?;
        cx.inner.resp.recv = Some(Receiving {
            failed: cx.inner.resp.head.as_deref().and_then(malformed),
            offset: 0,
        });
    }
    let pd = recv_pd(cx.qp, cx.shared);
    let resp = &mut cx.inner.resp;
    let (Some(r), Some(slot)) = (resp.recv.as_mut(), resp.head.as_deref()) else {
        // A middle or last without a first.
        return Err(Refusal::Invalid);
    };
    if r.failed.is_none() {
        match land(cx.qp, pd, slot, r.offset, &pkt.payload) {
            Ok(()) => {}
            // The WQE is well formed, so its SGEs are too short (class D on UC).
            Err(WcStatus::LocLenErr) if cx.shared.is_uc() => return Err(Refusal::TooLong),
            Err(status) => r.failed = Some(status),
        }
    }
    r.offset += pkt.payload.len();
    if !last {
        return Ok(());
    }
    let Some(r) = cx.inner.resp.recv.take() else {
        return Err(Refusal::Invalid);
    };
    let status = r.failed.unwrap_or(WcStatus::Success);
    let mut c = recv_completion(cx.qp, status, WcOpcode::Recv, r.offset, pkt.ext.imm);
    // SEND with invalidate: once it landed, the key it names goes (a window bound to this QP).
    if let (WcStatus::Success, Some(ieth)) = (status, pkt.ext.ieth) {
        let mrs = &cx.dev().mrs;
        if mrs
            .invalidate(cx.shared.pd, cx.shared.id, ieth.rkey, true)
            .is_ok()
        {
            c.wc_flags |= WC_WITH_INV;
            // The key in host order where the user ABI has `ex.invalidate_rkey`.
            c.imm_data = u32::from_be_bytes(ieth.rkey.to_ne_bytes());
        } else {
            c.status = WcStatus::RemInvReqErr;
        }
    }
    let status = c.status;
    complete_recv(cx, c, pkt.bth.solicited);
    match status {
        WcStatus::Success => Ok(()),
        // The receive buffer was too small or bad: the requester hears of it.
        status => Err(Refusal::Receive(status)),
    }
}

/// An RDMA WRITE packet: into the region its first packet named.
fn write(cx: &mut QpCtx<'_>, pkt: &Packet<'_>) -> Result<(), Refusal> {
    let first = pkt.info.position.starts();
    let last = pkt.info.position.ends();
    // WRITE with immediate consumes a receive WQE for its completion. Without one it is RNR
    // NAKed before anything changes, so its retry finds the message as it was.
    if last && pkt.ext.imm.is_some() {
        take_recv_wqe(cx)?;
    }
    if first {
        let reth = pkt.ext.reth.ok_or(Refusal::Invalid)?;
        granted(cx, Access::RemoteWrite)?;
        cx.inner.resp.write = None;
        // The whole range is checked now, so a bad one is refused before any byte lands.
        check_range(cx, &reth, access::REMOTE_WRITE)?;
        if reth.dma_len != 0 {
            cx.inner.resp.write = Some(Writing {
                rkey: reth.rkey,
                va: reth.va,
                left: reth.dma_len,
                len: reth.dma_len,
            });
        }
        if cx.inner.resp.write.is_none() && !pkt.payload.is_empty() {
            return Err(Refusal::Invalid);
        }
    }
    let len = match cx.inner.resp.write.as_mut() {
        Some(w) => {
            // CAST: Payloads are at most 4 KiB.
            let n = pkt.payload.len() as u32;
            if n > w.left || (last && n != w.left) {
                cx.inner.resp.write = None;
                return Err(Refusal::Invalid);
            }
            // Field by field: `w` holds the QP's state borrowed (`QpCtx::remote` would take
            // the whole context).
            let mrs = &cx.qp.device().data().mrs;
            let right = access::REMOTE_WRITE;
            let Some((mr, at)) = mrs.remote(cx.shared.pd, cx.shared.id, w.rkey, w.va, n, right)
            else {
                // Deregistered since the message started: not one more byte.
                cx.inner.resp.write = None;
                return Err(Refusal::Access);
            };
            pkt.payload
                .for_each(|off, piece| mr.mem.write(at + off, piece), EFAULT)
                .map_err(|_| Refusal::Access)?;
            // In range: the region's end does not wrap (checked at registration).
            w.va = w.va.wrapping_add(u64::from(n));
            w.left -= n;
            w.len
        }
        None if pkt.payload.is_empty() && first => 0,
        None => return Err(Refusal::Invalid),
    };
    if !last {
        return Ok(());
    }
    cx.inner.resp.write = None;
    if let Some(imm) = pkt.ext.imm {
        let c = recv_completion(
            cx.qp,
            WcStatus::Success,
            WcOpcode::RecvRdmaWithImm,
            len as usize,
            Some(imm),
        );
        complete_recv(cx, c, pkt.bth.solicited);
    }
    Ok(())
}
