// SPDX-License-Identifier: GPL-2.0

//! The RC requester and completer: send WQEs become SEND, RDMA WRITE and RDMA READ packets;
//! ACKs, NAKs and read responses retire them in order, and lost packets are sent again from the
//! PSN the peer expects (go-back-N).
//!
//! A WQE is copied out of the shared ring once, when it starts; retransmissions use that copy,
//! so user space cannot change a message under way.

use crate::{
    counters::Counter,
    cq::FerroceCq,
    device::Ferroce,
    proto::{
        bth::Bth,
        opcode::{OpKind, Opcode, Position},
        packet::{ExtHeaders, Packet, Reth},
        psn::Psn,
        wqe::{
            Completion, SendWqe, WcOpcode, WcStatus, SEND_INLINE, SEND_SIGNALED, SEND_SOLICITED,
            SEND_WQE_HEADER, SGE_SIZE,
        },
    },
    qp::{QpInner, QpShared},
    recv::QpDrop,
    sge,
    xmit::Xmit,
};
use kernel::{prelude::*, rdma::qp::Qp};

/// `IB_UVERBS_WR_*` opcodes an RC QP takes.
const WR_RDMA_WRITE: u32 = 0;
const WR_RDMA_WRITE_WITH_IMM: u32 = 1;
const WR_SEND: u32 = 2;
const WR_SEND_WITH_IMM: u32 = 3;
const WR_RDMA_READ: u32 = 4;

/// Largest RC message (`max_msg_sz`).
const MAX_MSG: u32 = 1 << 31;

/// AETH syndromes (IBTA 9.7.5.1): the top three bits, and NAK codes.
const AETH_ACK: u8 = 0;
const AETH_RNR_NAK: u8 = 1;
const AETH_NAK: u8 = 3;
const NAK_PSN_SEQ: u8 = 0;
const NAK_INVALID_REQUEST: u8 = 1;
const NAK_REMOTE_ACCESS: u8 = 2;

/// What a WQE asks the peer to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Send,
    Write,
    Read,
}

/// A WQE that has started: its private copy and where it stands.
struct Sent {
    slot: KVec<u8>,
    kind: Kind,
    imm: Option<u32>,
    len: u32,
    /// Payload bytes per packet when it started.
    mtu: u32,
    first_psn: Psn,
    /// PSNs it takes: its packets, or for a READ its responses.
    npkts: u32,
    /// Read response packets received.
    read_pkts: u32,
    /// Success until the WQE fails (locally or by a NAK).
    status: WcStatus,
    /// Every packet acknowledged (or every read response in).
    acked: bool,
}

impl Sent {
    fn last_psn(&self) -> Psn {
        self.first_psn.add(self.npkts.saturating_sub(1))
    }

    fn wqe(&self) -> SendWqe<'_> {
        SendWqe::new(&self.slot)
    }

    fn wc_opcode(&self) -> WcOpcode {
        match self.kind {
            Kind::Send => WcOpcode::Send,
            Kind::Write => WcOpcode::RdmaWrite,
            Kind::Read => WcOpcode::RdmaRead,
        }
    }
}

/// The requester's state, under the QP's lock.
#[derive(Default)]
pub(crate) struct Requester {
    /// Ring position of the next WQE to start.
    next: u32,
    /// Started WQEs not yet completed, oldest first (at the ring's consumer index).
    flight: KVec<Sent>,
    /// A WQE failed: start no more until the QP is flushed.
    stopped: bool,
}

impl Requester {
    /// Forgets everything in flight (the QP is being flushed); new WQEs start at `cons`.
    pub(crate) fn reset(&mut self, cons: u32) {
        self.flight.clear();
        self.next = cons;
        self.stopped = false;
    }
}

/// Payload bytes per packet on this QP's path.
pub(crate) fn path_mtu(qp: &Qp<Ferroce>, inner: &QpInner) -> u32 {
    let dev_mtu = qp.device().data().ib_mtu();
    match inner.attr.path_mtu {
        n @ 1..=5 => (256u32 << (n - 1)).min(dev_mtu),
        _ => dev_mtu,
    }
}

/// Starts every posted WQE, oldest first.
pub(crate) fn push(qp: &Qp<Ferroce>, shared: &QpShared, inner: &mut QpInner) -> Result {
    let path = inner.path(qp.qpn()).ok_or(EINVAL)?;
    let xmit = Xmit::new(qp.device(), path)?;
    let mtu = path_mtu(qp, inner);
    while !inner.req.stopped {
        let mut slot = KVec::new();
        slot.resize(shared.sq.slot_len(), 0u8, GFP_KERNEL)?;
        if !shared.sq.peek(inner.req.next, &mut slot)? {
            break;
        }
        inner.req.next = shared.sq.next(inner.req.next);
        let psn = Psn::new(inner.attr.sq_psn);
        let sent = match prepare(slot, shared.sq.slot_len(), mtu, psn) {
            Ok(sent) => {
                inner.attr.sq_psn = psn.add(sent.npkts).get();
                // A packet the stack drops is lost like any other: the timer resends it.
                let _ = transmit(qp, shared, inner, &xmit, &sent, 0);
                sent
            }
            Err((slot, status)) => {
                inner.req.stopped = true;
                Sent {
                    slot,
                    kind: Kind::Send,
                    imm: None,
                    len: 0,
                    mtu,
                    first_psn: psn,
                    npkts: 0,
                    read_pkts: 0,
                    status,
                    acked: false,
                }
            }
        };
        inner.req.flight.push(sent, GFP_KERNEL)?;
    }
    complete(qp, shared, inner);
    Ok(())
}

/// Checks a WQE copy; a bad one comes back with its completion status.
fn prepare(
    slot: KVec<u8>,
    slot_len: usize,
    mtu: u32,
    psn: Psn,
) -> Result<Sent, (KVec<u8>, WcStatus)> {
    let w = SendWqe::new(&slot);
    let (kind, imm) = match w.opcode() {
        WR_SEND => (Kind::Send, None),
        WR_SEND_WITH_IMM => (Kind::Send, Some(w.imm())),
        WR_RDMA_WRITE => (Kind::Write, None),
        WR_RDMA_WRITE_WITH_IMM => (Kind::Write, Some(w.imm())),
        WR_RDMA_READ => (Kind::Read, None),
        _ => return Err((slot, WcStatus::LocQpOpErr)),
    };
    let room = slot_len - SEND_WQE_HEADER;
    let len = if w.send_flags() & SEND_INLINE != 0 {
        if kind == Kind::Read || w.length() as usize > room {
            return Err((slot, WcStatus::LocLenErr));
        }
        w.length()
    } else {
        let num = w.num_sge() as usize;
        if num.saturating_mul(SGE_SIZE) > room {
            return Err((slot, WcStatus::LocLenErr));
        }
        // The message is what the SGEs add up to; the WQE's own total is not trusted.
        let total = (0..num)
            .map(|i| w.sge(i).map_or(0u64, |s| u64::from(s.len)))
            .sum::<u64>();
        match u32::try_from(total) {
            Ok(t) if t <= MAX_MSG => t,
            _ => return Err((slot, WcStatus::LocLenErr)),
        }
    };
    let npkts = len.div_ceil(mtu).max(1);
    Ok(Sent {
        slot,
        kind,
        imm,
        len,
        mtu,
        first_psn: psn,
        npkts,
        read_pkts: 0,
        status: WcStatus::Success,
        acked: false,
    })
}

/// Sends `sent`'s packets from its `from`th on (a READ: its request for what is missing).
fn transmit(
    qp: &Qp<Ferroce>,
    shared: &QpShared,
    inner: &QpInner,
    xmit: &Xmit<'_>,
    sent: &Sent,
    from: u32,
) -> Result {
    let w = sent.wqe();
    let flags = w.send_flags();
    let mut bth = Bth {
        opcode: 0,
        solicited: false,
        mig_req: false,
        pad: 0,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qpn: inner.attr.dest_qp_num,
        ack_req: false,
        psn: sent.first_psn.add(from),
    };
    if sent.kind == Kind::Read {
        let done = from.saturating_mul(sent.mtu).min(sent.len);
        bth.opcode = Opcode::RcReadRequest as u8;
        bth.ack_req = true;
        let ext = ExtHeaders {
            reth: Some(Reth {
                va: w.rdma_remote_addr().wrapping_add(u64::from(done)),
                rkey: w.rdma_rkey(),
                dma_len: sent.len - done,
            }),
            ..ExtHeaders::default()
        };
        return xmit.send(&bth, &ext, &[]);
    }
    let mrs = &qp.device().data().mrs;
    let num = w.num_sge() as usize;
    let mut buf = KVec::new();
    for i in from..sent.npkts {
        let off = i * sent.mtu;
        let n = (sent.len - off).min(sent.mtu) as usize;
        buf.clear();
        buf.resize(n, 0u8, GFP_KERNEL)?;
        if flags & SEND_INLINE != 0 {
            let data = w.inline_data(sent.len as usize).ok_or(EINVAL)?;
            buf.copy_from_slice(&data[off as usize..off as usize + n]);
        } else if sge::gather_at(
            mrs,
            shared.pd,
            (0..num).map(|j| w.sge(j)),
            off as usize,
            &mut buf,
        )
        .is_err()
        {
            // The SGEs were checked for length; only a region deregistered since can fail.
            return Err(EFAULT);
        }
        let pos = match (i == 0, i + 1 == sent.npkts) {
            (true, true) => Position::Only,
            (true, false) => Position::First,
            (false, true) => Position::Last,
            (false, false) => Position::Middle,
        };
        let last = matches!(pos, Position::Last | Position::Only);
        bth.opcode = opcode(sent.kind, pos, sent.imm.is_some()) as u8;
        bth.psn = sent.first_psn.add(i);
        bth.ack_req = last;
        bth.solicited = last && flags & SEND_SOLICITED != 0;
        let ext = ExtHeaders {
            reth: (sent.kind == Kind::Write && matches!(pos, Position::First | Position::Only))
                .then(|| Reth {
                    va: w.rdma_remote_addr(),
                    rkey: w.rdma_rkey(),
                    dma_len: sent.len,
                }),
            imm: if last { sent.imm } else { None },
            ..ExtHeaders::default()
        };
        xmit.send(&bth, &ext, &buf)?;
    }
    Ok(())
}

fn opcode(kind: Kind, pos: Position, imm: bool) -> Opcode {
    match (kind, pos, imm) {
        (Kind::Send, Position::First, _) => Opcode::RcSendFirst,
        (Kind::Send, Position::Middle, _) => Opcode::RcSendMiddle,
        (Kind::Send, Position::Last, false) => Opcode::RcSendLast,
        (Kind::Send, Position::Last, true) => Opcode::RcSendLastImm,
        (Kind::Send, Position::Only, false) => Opcode::RcSendOnly,
        (Kind::Send, Position::Only, true) => Opcode::RcSendOnlyImm,
        (_, Position::First, _) => Opcode::RcWriteFirst,
        (_, Position::Middle, _) => Opcode::RcWriteMiddle,
        (_, Position::Last, false) => Opcode::RcWriteLast,
        (_, Position::Last, true) => Opcode::RcWriteLastImm,
        (_, Position::Only, false) => Opcode::RcWriteOnly,
        (_, Position::Only, true) => Opcode::RcWriteOnlyImm,
    }
}

/// Retires finished WQEs from the front, in order; the first failure moves the QP to the error
/// state, which flushes the rest.
fn complete(qp: &Qp<Ferroce>, shared: &QpShared, inner: &mut QpInner) {
    let mut failed = false;
    while let Some(front) = inner.req.flight.first() {
        if !front.acked && front.status == WcStatus::Success {
            break;
        }
        let sent = inner.req.flight.remove(0).ok();
        let Some(sent) = sent else { break };
        let signaled = shared.sig_all() || sent.wqe().send_flags() & SEND_SIGNALED != 0;
        if signaled || sent.status != WcStatus::Success {
            let mut c = Completion::of_send_queue(
                sent.wqe().wr_id(),
                sent.status,
                sent.wc_opcode(),
                qp.qpn(),
            );
            if sent.kind == Kind::Read {
                c.byte_len = sent.len;
            }
            let _ = FerroceCq::post(qp.send_cq(), &c, false);
        }
        let _ = shared.sq.advance(&mut inner.sq_cons);
        if sent.status != WcStatus::Success {
            failed = true;
            break;
        }
    }
    if failed {
        shared.fail(qp, inner);
    }
}

/// Takes an ACK, NAK or read response for this QP's requests.
pub(crate) fn on_response(
    qp: &Qp<Ferroce>,
    shared: &QpShared,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Result<(), QpDrop> {
    let psn = pkt.bth.psn;
    match pkt.info.kind {
        OpKind::Ack => {
            let aeth = pkt.ext.aeth.ok_or(QpDrop::BadState)?;
            match aeth.syndrome >> 5 {
                AETH_ACK => ack_through(qp, shared, inner, psn),
                AETH_RNR_NAK => {
                    qp.device().data().counters.inc(Counter::RcvdRnrErr);
                    ack_before(inner, psn);
                    // No RNR timer yet: resend at once (the peer posts receives meanwhile).
                    resend_from(qp, shared, inner, psn);
                }
                AETH_NAK => {
                    ack_before(inner, psn);
                    match aeth.syndrome & 0x1f {
                        NAK_PSN_SEQ => {
                            qp.device().data().counters.inc(Counter::RcvdSeqErr);
                            resend_from(qp, shared, inner, psn);
                        }
                        code => fail_front(
                            inner,
                            match code {
                                NAK_INVALID_REQUEST => WcStatus::RemInvReqErr,
                                NAK_REMOTE_ACCESS => WcStatus::RemAccessErr,
                                _ => WcStatus::RemOpErr,
                            },
                        ),
                    }
                }
                _ => return Err(QpDrop::BadState),
            }
        }
        OpKind::ReadResponse => on_read_response(qp, shared, inner, pkt)?,
        _ => return Err(QpDrop::BadState),
    }
    complete(qp, shared, inner);
    Ok(())
}

/// An ACK of `psn`: every SEND and WRITE through it is done. A READ that it passes lost its
/// responses: that READ is asked again.
fn ack_through(qp: &Qp<Ferroce>, shared: &QpShared, inner: &mut QpInner, psn: Psn) {
    let mut resend = None;
    for sent in inner.req.flight.iter_mut() {
        if sent.acked || sent.status != WcStatus::Success {
            continue;
        }
        if sent.first_psn.diff(psn) > 0 {
            break;
        }
        if sent.kind == Kind::Read {
            resend = Some(sent.first_psn.add(sent.read_pkts));
            break;
        }
        if sent.last_psn().diff(psn) > 0 {
            break;
        }
        sent.acked = true;
    }
    if let Some(p) = resend {
        resend_from(qp, shared, inner, p);
    }
}

/// A NAK of `psn` acknowledges everything before it.
fn ack_before(inner: &mut QpInner, psn: Psn) {
    for sent in inner.req.flight.iter_mut() {
        if sent.acked || sent.status != WcStatus::Success || sent.kind == Kind::Read {
            break;
        }
        if !sent.last_psn().before(psn) {
            break;
        }
        sent.acked = true;
    }
}

/// The oldest unfinished WQE failed with `status`.
fn fail_front(inner: &mut QpInner, status: WcStatus) {
    if let Some(sent) = inner.req.flight.iter_mut().find(|s| !s.acked) {
        sent.status = status;
    }
    inner.req.stopped = true;
}

/// Go-back-N: sends everything unacknowledged again, from `psn` on.
fn resend_from(qp: &Qp<Ferroce>, shared: &QpShared, inner: &mut QpInner, psn: Psn) {
    let Some(path) = inner.path(qp.qpn()) else {
        return;
    };
    let Ok(xmit) = Xmit::new(qp.device(), path) else {
        return;
    };
    let inner = &*inner;
    for sent in inner.req.flight.iter() {
        if sent.acked || sent.status != WcStatus::Success || sent.last_psn().before(psn) {
            continue;
        }
        let from = if sent.kind == Kind::Read {
            sent.read_pkts
        } else {
            // CAST: Non-negative here, and below `npkts`.
            psn.diff(sent.first_psn).max(0) as u32
        };
        if transmit(qp, shared, inner, &xmit, sent, from).is_err() {
            return;
        }
    }
}

/// A read response lands in the READ's local buffers.
fn on_read_response(
    qp: &Qp<Ferroce>,
    shared: &QpShared,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Result<(), QpDrop> {
    let psn = pkt.bth.psn;
    // Responses to a READ also acknowledge everything before it.
    ack_before(inner, psn);
    let Some(sent) = inner
        .req
        .flight
        .iter_mut()
        .find(|s| !s.acked && s.status == WcStatus::Success)
    else {
        return Err(QpDrop::BadState);
    };
    if sent.kind != Kind::Read {
        return Err(QpDrop::BadState);
    }
    let expected = sent.first_psn.add(sent.read_pkts);
    let d = psn.diff(expected);
    if d < 0 {
        // A duplicate of one already in.
        return Ok(());
    }
    if d > 0 {
        // One went missing: ask again for the rest.
        let from = sent.first_psn.add(sent.read_pkts);
        resend_from(qp, shared, inner, from);
        return Ok(());
    }
    let off = sent.read_pkts.saturating_mul(sent.mtu);
    let w = SendWqe::new(&sent.slot);
    let num = (w.num_sge() as usize).min((sent.slot.len() - SEND_WQE_HEADER) / SGE_SIZE);
    let mrs = &qp.device().data().mrs;
    let fits = u64::from(off) + pkt.payload.len() as u64 <= u64::from(sent.len);
    let res = if fits {
        sge::scatter(
            mrs,
            shared.pd,
            (0..num).map(|i| w.sge(i)),
            off as usize,
            pkt.payload,
        )
    } else {
        Err(WcStatus::LocLenErr)
    };
    if let Err(status) = res {
        sent.status = status;
        inner.req.stopped = true;
        return Ok(());
    }
    sent.read_pkts += 1;
    if matches!(pkt.info.position, Position::Last | Position::Only) {
        sent.acked = true;
    }
    Ok(())
}
