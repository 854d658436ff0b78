// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: numbers, work queue rings shared with rdma-core's rxe provider, and the
//! attribute and state machine of `ibv_modify_qp`.

use crate::{
    ah::Av,
    cc::{self, QpCc},
    counters::{Counter, Counters},
    cq::FerroceCq,
    device::Ferroce,
    kqp::KernelQueues,
    limits,
    proto::{
        bth::pkey_matches,
        build::Path,
        dcqcn,
        opcode::{OpKind, Transport},
        packet::DropReason,
        wqe::{
            self, Completion, SendWqe, WcOpcode, WrOpcode, RECV_WQE_HEADER, SEND_WQE_HEADER,
            SGE_SIZE,
        },
    },
    queue::{mminfo, Ring, MMINFO_SIZE},
    rc, rc_comp, rc_read, rc_resp,
    recv::{drop_counter, Packet, QpDrop, Reject, RxHeaders},
    send, ud,
    xmit::{TxPath, Xmit},
};
use core::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use kernel::{
    impl_has_hr_timer, impl_has_work,
    net::skbuff::{SkBuff, SkbQueue},
    new_spinlock_bh, new_work,
    prelude::*,
    rdma::{
        mmap::{MmapInfo, SharedMem},
        pd::Pd,
        pool::Pool,
        qp::{
            transition_ok, AttrMask, Qp, QpAttr, QpCaps, QpCreated, QpInit, QpLink, QpQuery,
            QpState, QpType,
        },
        udata::Udata,
        wr::{RecvBuf, SendWr},
    },
    sync::{Arc, ArcBorrow, SpinLockBh},
    time::{
        hrtimer::{
            ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerRestart,
            RelativeMode,
        },
        Monotonic,
    },
    workqueue::{OwnedQueue, Work, WorkItem},
};

/// Largest inline send.
const MAX_INLINE_DATA: u32 = 512;
/// `struct rxe_create_qp_resp`: the RQ's then the SQ's `struct mminfo`.
const CREATE_QP_RESP_SIZE: usize = 2 * MMINFO_SIZE;
/// User QPs are numbered from here; lower ones are reserved (QP0, QP1).
const FIRST_QPN: u32 = 16;
/// The GSI QP's number.
const GSI_QPN: u32 = 1;
/// QP numbers are 24 bits.
const QPN_LIMIT: u32 = 1 << 24;
/// Bytes of packets a QP's backlog holds (packets from QPs of its own device wait there);
/// past it they are dropped, and a reliable sender sends them again.
const RX_BACKLOG_BYTES: usize = 4 << 20;
/// Packets it holds: small ones cost more memory than their length says.
const RX_BACKLOG_PKTS: u32 = 4096;
/// Packets the QP's work takes from its backlog before it lets other work run.
const RX_BATCH: usize = 64;

/// A send or receive ring; user space produces, the kernel consumes.
pub(crate) struct WorkRing(Ring);

impl WorkRing {
    fn new(entries: u32, elem: usize, udata: Option<&Udata<'_>>) -> Result<(Self, MmapInfo)> {
        // The provider needs a slot even for a queue of zero WRs.
        let (ring, info) = Ring::new(entries.max(1), elem, limits::DEVICE_LIMITS.max_qp_wr, udata)?;
        Ok((Self(ring), info))
    }

    /// Bytes per slot.
    pub(crate) fn slot_len(&self) -> usize {
        1usize << self.0.geo.log2_elem()
    }

    /// Copies the WQE at `cons` into `out` (a slot's length); `false` if none is posted there.
    pub(crate) fn peek(&self, cons: u32, out: &mut [u8]) -> Result<bool> {
        self.peek_at(cons, cons, out)
    }

    /// Copies the WQE at `pos` into `out`, if user space has posted it: `pos` must lie between
    /// the kernel's consumer index `cons` and the producer index. Whatever the process writes
    /// there, nothing before `cons` or a ring's worth after it is ever taken.
    pub(crate) fn peek_at(&self, cons: u32, pos: u32, out: &mut [u8]) -> Result<bool> {
        let prod = self.0.producer()?.load(Ordering::Acquire);
        if self.0.geo.count(pos, cons) >= self.0.geo.count(prod, cons) {
            return Ok(false);
        }
        self.0.mem.read(self.0.geo.slot_offset(pos), out)?;
        Ok(true)
    }

    /// The ring position after `pos`.
    pub(crate) fn next(&self, pos: u32) -> u32 {
        self.0.geo.next(pos)
    }

    /// Retires the WQE at `*cons`: the slot is the producer's again.
    pub(crate) fn advance(&self, cons: &mut u32) -> Result {
        *cons = self.0.geo.next(*cons);
        self.0.consumer()?.store(*cons, Ordering::Release);
        Ok(())
    }

    /// Completes every WQE user space has posted, oldest first, with what `complete` makes of
    /// it, into `cq`. `cons` is the kernel's own consumer index: the shared copy is only
    /// written, since user space may scribble on it. Stops early if the CQ is full.
    fn flush(
        &self,
        cons: &mut u32,
        qp: &Qp<Ferroce>,
        to_send_cq: bool,
        mut complete: impl FnMut(&SharedMem, usize) -> Result<Completion>,
    ) -> Result {
        let prod = self.0.producer()?.load(Ordering::Acquire);
        // Masked: a garbage producer index flushes at most a ring's worth of garbage WQEs.
        for _ in 0..self.0.geo.count(prod, *cons) {
            let c = complete(&self.0.mem, self.0.geo.slot_offset(*cons))?;
            let target = if to_send_cq {
                qp.send_cq()
            } else {
                qp.recv_cq()
            };
            FerroceCq::post(qp, target, &c, true)?;
            *cons = self.0.geo.next(*cons);
            self.0.consumer()?.store(*cons, Ordering::Release);
        }
        Ok(())
    }
}

/// What changes under a QP's lock: its attributes and the kernel's ring positions.
pub(crate) struct QpInner {
    pub(crate) attr: QpAttr,
    pub(crate) sq_cons: u32,
    pub(crate) rq_cons: u32,
    /// RC requester and completer.
    pub(crate) req: rc::Requester,
    /// RC responder.
    pub(crate) resp: rc_resp::Responder,
    /// The RC retransmission or RNR timer, while armed. It holds the QP: destroy drops it.
    pub(crate) timer: Option<ArcHrTimerHandle<QpShared>>,
    /// The way to the connected peer (RC, UC), kept while it holds.
    peer: Option<TxPath>,
    /// Congestion control: the CNPs it sends and the rate those it receives allow.
    pub(crate) cc: QpCc,
}

impl QpInner {
    /// The path to the connected peer (RC, UC), from the address vector.
    pub(crate) fn path(&self, qpn: u32) -> Option<Path> {
        let ah = &self.attr.ah;
        Av {
            sgid: ah.sgid,
            dgid: ah.dgid,
            tclass: ah.traffic_class,
            hop_limit: ah.hop_limit,
            flow_label: ah.flow_label,
        }
        .path(qpn, self.attr.dest_qp_num)
    }
}

/// What the data path needs of a QP; shared with the device's QP table.
///
/// Its state is under a spinlock held with softirqs off: packets are taken in softirq, as they
/// arrive, and the verbs and the QP's work take the same lock. Nothing under it sleeps; packets
/// built under it wait in `tx` and leave, in order, once it is dropped.
#[pin_data]
pub(crate) struct QpShared {
    qp_type: QpType,
    pub(crate) pd: usize,
    pub(crate) sq: WorkRing,
    pub(crate) rq: WorkRing,
    pub(crate) caps: QpCaps,
    sig_all: bool,
    /// A kernel consumer's QP: WRs come through `kq`, not the rings.
    pub(crate) kernel: bool,
    link: Arc<QpLink<Ferroce>>,
    /// The device's data path queue, where the QP's work runs.
    wq: Arc<OwnedQueue>,
    #[pin]
    timer: HrTimer<QpShared>,
    /// Takes the backlog, fires the timer, sends kernel WRs and what a budget left over.
    #[pin]
    work: Work<QpShared>,
    #[pin]
    pub(crate) kq: KernelQueues,
    /// Packets from QPs of the same device, waiting for the QP's work.
    #[pin]
    rx: SkbQueue,
    rx_bytes: AtomicUsize,
    /// Packets built under the lock, in order, waiting to leave.
    #[pin]
    tx: SkbQueue,
    /// Someone is sending `tx`: one sender at a time keeps the order.
    tx_busy: AtomicBool,
    #[pin]
    inner: SpinLockBh<QpInner>,
}

impl_has_hr_timer! {
    impl HasHrTimer<Self> for QpShared {
        mode: RelativeMode<Monotonic>,
        field: self.timer,
    }
}

impl_has_work! {
    impl HasWork<Self> for QpShared { self.work }
}

impl HrTimerCallback for QpShared {
    type Pointer<'a> = Arc<Self>;

    /// In interrupt context: the work does the rest. The handle in `QpInner::timer` keeps a
    /// reference while this runs, so the one dropped here is never the last.
    fn run(this: ArcBorrow<'_, Self>, _ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        let _ = this.wq.enqueue(Arc::<Self>::from(this));
        HrTimerRestart::NoRestart
    }
}

impl WorkItem for QpShared {
    type Pointer = Arc<Self>;

    fn run(this: Arc<Self>) {
        let again = this
            .link
            .with(|qp| {
                let counters = &qp.device().data().counters;
                let more = {
                    let mut inner = this.inner.lock();
                    if this.kernel {
                        this.kq.run_sends(qp, &this, &mut inner);
                    }
                    rc_comp::on_timer(qp, &this, &mut inner);
                    this.resume(qp, &mut inner)
                };
                this.flush_tx(counters);
                // Packets held back behind READ responses: the responses' progress (`more`)
                // brings the work back, not the packets (no route: nothing would go out).
                let mut held = false;
                // A bounded batch: a busy backlog must not keep other QPs' work waiting.
                for _ in 0..RX_BATCH {
                    let (skb, res) = {
                        let mut inner = this.inner.lock();
                        let Some(skb) = this.rx.pop() else {
                            break;
                        };
                        let res = match RxHeaders::parse(&skb) {
                            Err(reason) => Err(Reject::Packet(reason)),
                            // READ responses go out before what was asked after them; a
                            // duplicate READ, which asks for them again, is taken at once.
                            Ok(hdr)
                                if inner.resp.reads.answering() && !hdr.rewinds_read(&inner) =>
                            {
                                this.rx.push_front(skb);
                                held = true;
                                break;
                            }
                            Ok(hdr) => this.take(qp, &mut inner, &skb, &hdr, counters),
                        };
                        this.rx_bytes
                            .fetch_sub(skb.len() as usize, Ordering::Relaxed);
                        (skb, res)
                    };
                    this.flush_tx(counters);
                    consume_or_count(skb, res, counters);
                }
                more || (!held && !this.rx.is_empty())
            })
            .unwrap_or(false);
        if again {
            this.kick();
        }
    }
}

/// Frees a packet as delivered, or counts why it was dropped.
fn consume_or_count(skb: SkBuff, res: Result<(), Reject>, counters: &Counters) {
    match res {
        Ok(()) => skb.consume(),
        Err(r) => {
            counters.inc(drop_counter(r));
            drop(skb);
        }
    }
}

impl QpShared {
    pub(crate) fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// Queues the QP's work (unless it is queued already).
    pub(crate) fn kick(self: &Arc<Self>) {
        let _ = self.wq.enqueue(self.clone());
    }

    /// Takes a packet addressed to this QP, in softirq, at once. It waits in the QP's
    /// backlog, for the QP's work, if it comes from a QP of the same device (`looped`: taking it
    /// at once could recurse), or if packets wait there already, or READ responses are still
    /// going out (what was asked after a READ is answered after it; only a duplicate READ
    /// request, which asks for responses again, is taken at once).
    pub(crate) fn receive(
        this: &Arc<Self>,
        skb: SkBuff,
        hdr: RxHeaders,
        looped: bool,
        counters: &Counters,
    ) {
        let res = if looped {
            Some(Err(skb))
        } else {
            this.link.with(move |qp| {
                let mut inner = this.inner.lock();
                // A duplicate READ overtakes the backlog: what waits there may wait for the
                // very responses it asks for again.
                let waits = !this.rx.is_empty() || inner.resp.reads.answering();
                if waits && !hdr.rewinds_read(&inner) {
                    return Err(skb);
                }
                let res = this.take(qp, &mut inner, &skb, &hdr, counters);
                Ok((skb, res))
            })
        };
        match res {
            Some(Ok((skb, res))) => {
                this.flush_tx(counters);
                consume_or_count(skb, res, counters);
            }
            Some(Err(skb)) => this.backlog(skb, counters),
            // Being destroyed: the packet went with the closure.
            None => counters.inc(Counter::DropBadState),
        }
    }

    /// Queues a packet for the QP's work, within the backlog's bound.
    fn backlog(self: &Arc<Self>, skb: SkBuff, counters: &Counters) {
        let len = skb.len() as usize;
        if self.rx.len() >= RX_BACKLOG_PKTS {
            counters.inc(Counter::DropBacklog);
            return;
        }
        if self.rx_bytes.fetch_add(len, Ordering::Relaxed) + len > RX_BACKLOG_BYTES {
            self.rx_bytes.fetch_sub(len, Ordering::Relaxed);
            counters.inc(Counter::DropBacklog);
            return;
        }
        self.rx.push(skb);
        self.kick();
    }

    /// Checks one packet's ICRC, then hands it to the QP's transport, under the lock.
    fn take(
        self: &Arc<Self>,
        qp: &Qp<Ferroce>,
        inner: &mut QpInner,
        skb: &SkBuff,
        hdr: &RxHeaders,
        counters: &Counters,
    ) -> Result<(), Reject> {
        if !hdr.verify_icrc(skb) {
            return Err(Reject::Packet(DropReason::BadIcrc));
        }
        let pkt = Packet::new(skb, hdr);
        self.dispatch(qp, inner, &pkt, counters).map_err(Reject::Qp)
    }

    fn dispatch(
        self: &Arc<Self>,
        qp: &Qp<Ferroce>,
        inner: &mut QpInner,
        pkt: &Packet<'_>,
        counters: &Counters,
    ) -> Result<(), QpDrop> {
        let state = inner.attr.state;
        // The one P_Key of the port (index 0) is every QP's.
        if !pkey_matches(pkt.bth.pkey, limits::DEFAULT_PKEY) {
            return Err(QpDrop::BadPkey);
        }
        // A connected QP takes packets from its peer, to its own address, only.
        if matches!(self.qp_type, QpType::Rc | QpType::Uc)
            && state.can_receive()
            && !inner
                .path(qp.qpn())
                .is_some_and(|p| p.answers(pkt.hdr.ip()))
        {
            return Err(QpDrop::BadAddress);
        }
        if pkt.info.kind == OpKind::Cnp {
            cc::on_cnp(qp, self, inner, counters);
            return Ok(());
        }
        // A CE mark counts, and gets a CNP, once the packet passed the checks that make it the
        // peer's, of the QP's transport, to a QP in a state to take it.
        let ce = dcqcn::is_ce(pkt.hdr.ip());
        match self.qp_type {
            QpType::Ud | QpType::Gsi => {
                if ce {
                    counters.inc(Counter::NpEcnMarked);
                }
                ud::receive(qp, self, inner, pkt, counters)
            }
            QpType::Rc => {
                if pkt.info.transport != Transport::Rc {
                    return Err(QpDrop::BadState);
                }
                if pkt.info.is_response() {
                    if !state.can_send() {
                        return Err(QpDrop::BadState);
                    }
                    if ce {
                        cc::on_ce(qp, self, inner, pkt, counters);
                    }
                    // C rxe's name for responses handed to the completer.
                    counters.inc(Counter::AckDeferred);
                    rc_comp::on_response(qp, self, inner, pkt).inspect(|()| {
                        counters.inc(Counter::RcvdPkts);
                        // Read responses carry data, counted as sent by the peer.
                        counters.add(Counter::RcvdBytes, pkt.payload.len() as u64);
                    })
                } else {
                    if !state.can_receive() {
                        return Err(QpDrop::BadState);
                    }
                    if ce {
                        cc::on_ce(qp, self, inner, pkt, counters);
                    }
                    rc_resp::on_request(qp, self, inner, pkt, counters)
                }
            }
            QpType::Uc => {
                if pkt.info.transport != Transport::Uc || !state.can_receive() {
                    return Err(QpDrop::BadState);
                }
                if ce {
                    cc::on_ce(qp, self, inner, pkt, counters);
                }
                rc_resp::on_uc_request(qp, self, inner, pkt, counters)
            }
        }
    }

    /// Runs `f` with a way to send to the connected peer (RC, UC): the kept one, or one looked
    /// up again if the path changed or its route no longer holds. `None` if there is no route.
    pub(crate) fn with_peer<R>(
        &self,
        qp: &Qp<Ferroce>,
        inner: &mut QpInner,
        f: impl FnOnce(&mut QpInner, &Xmit<'_>) -> R,
    ) -> Option<R> {
        let path = qp.device().data().cc.mark(inner.path(qp.qpn())?);
        let to = match inner.peer.take() {
            Some(t) if t.is_current(&path) => t,
            _ => TxPath::new(qp.device(), path).ok()?,
        };
        let res = f(inner, &Xmit::new(qp.device(), &to, &self.tx));
        inner.peer = Some(to);
        Some(res)
    }

    /// A way to send datagrams along `path`, into this QP's outbox.
    pub(crate) fn with_path<R>(
        &self,
        qp: &Qp<Ferroce>,
        path: Path,
        f: impl FnOnce(&Xmit<'_>) -> R,
    ) -> Result<R> {
        let to = TxPath::new(qp.device(), path)?;
        Ok(f(&Xmit::new(qp.device(), &to, &self.tx)))
    }

    /// Sends what waits in the outbox, in order. Called once the QP's lock is dropped; if
    /// another context is sending already, it takes these packets too.
    pub(crate) fn flush_tx(&self, counters: &Counters) {
        while !self.tx.is_empty() {
            // Orders our push (or the other sender's release below) before reading `tx_busy`:
            // either we see it free, or its owner sees our packet.
            fence(Ordering::SeqCst);
            if self
                .tx_busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                return;
            }
            while let Some(skb) = self.tx.pop() {
                if skb.send_routed().is_err() {
                    counters.inc(Counter::SendErr);
                }
            }
            self.tx_busy.store(false, Ordering::Release);
            fence(Ordering::SeqCst);
            // A packet queued after the last pop but before the store is sent by the loop.
        }
    }

    /// Whether packets wait in the backlog (from QPs of the same device).
    pub(crate) fn backlog_pending(&self) -> bool {
        !self.rx.is_empty()
    }

    /// Goes on with what a budget cut short: READ responses (a responder answers from RTR on),
    /// then sending (RC, UC, UD). Returns whether more is left for the next run.
    fn resume(self: &Arc<Self>, qp: &Qp<Ferroce>, inner: &mut QpInner) -> bool {
        if self.kernel {
            return false;
        }
        let state = inner.attr.state;
        let mut more = false;
        if self.qp_type == QpType::Rc && state.can_receive() {
            more |= rc_read::resume(qp, self, inner);
        }
        if state.can_send() {
            more |= match self.qp_type {
                QpType::Rc | QpType::Uc => rc::push(qp, self, inner),
                QpType::Ud => self.send_ud(qp, inner),
                QpType::Gsi => false,
            };
        }
        more
    }
}

impl QpShared {
    /// Whether the QP is UC, whose WQEs the RC requester sends without waiting for ACKs.
    pub(crate) fn is_uc(&self) -> bool {
        self.qp_type == QpType::Uc
    }

    /// Whether every send WR completes.
    pub(crate) fn sig_all(&self) -> bool {
        self.sig_all
    }

    /// A WR failed: the QP goes to the error state, which flushes the others.
    pub(crate) fn fail(&self, qp: &Qp<Ferroce>, inner: &mut QpInner) {
        inner.attr.state = QpState::Err;
        let _ = self.flush(qp, inner);
    }

    /// Completes every posted WQE with a flush error: receives first, then sends.
    fn flush(&self, qp: &Qp<Ferroce>, inner: &mut QpInner) -> Result {
        inner.timer = None;
        inner.cc.wake_at = None;
        if self.kernel {
            self.kq.flush(qp);
        }
        inner.resp = rc_resp::Responder::default();
        let res = self.flush_rings(qp, inner);
        let cons = inner.sq_cons;
        inner.req.reset(cons);
        res
    }

    fn flush_rings(&self, qp: &Qp<Ferroce>, inner: &mut QpInner) -> Result {
        let qpn = qp.qpn();
        self.rq.flush(&mut inner.rq_cons, qp, false, |mem, at| {
            let mut b = [0u8; wqe::RECV_WQE_PREFIX];
            mem.read(at, &mut b)?;
            Ok(Completion::flushed(
                wqe::recv_wr_id(&b),
                WcOpcode::Recv,
                qpn,
            ))
        })?;
        self.sq.flush(&mut inner.sq_cons, qp, true, |mem, at| {
            let mut b = [0u8; wqe::SEND_WQE_PREFIX];
            mem.read(at, &mut b)?;
            let w = SendWqe::new(&b);
            // A WQE with an opcode user space made up still completes, as a send.
            let opcode = w.opcode().map_or(WcOpcode::Send, WrOpcode::completion);
            Ok(Completion::flushed(w.wr_id(), opcode, qpn))
        })
    }
}

impl QpShared {
    /// Sends posted UD WQEs, oldest first, up to [`TX_BUDGET`]; each one's completion goes to
    /// the send CQ. Returns whether more are posted.
    fn send_ud(&self, qp: &Qp<Ferroce>, inner: &mut QpInner) -> bool {
        let ring = &self.sq.0;
        let elem = 1usize << ring.geo.log2_elem();
        let ud = send::UdQp {
            shared: self,
            payload_room: elem - SEND_WQE_HEADER,
            qkey: inner.attr.qkey,
        };
        // One private copy of a slot at a time: user space cannot change a WQE under us.
        let mut wqe = KVec::new();
        if wqe.resize(elem, 0u8, GFP_ATOMIC).is_err() {
            // The work tries again.
            return true;
        }
        let Ok(prod) = ring.producer().map(|p| p.load(Ordering::Acquire)) else {
            return false;
        };
        let posted = ring.geo.count(prod, inner.sq_cons);
        for _ in 0..posted.min(TX_BUDGET) {
            if ring
                .mem
                .read(ring.geo.slot_offset(inner.sq_cons), &mut wqe)
                .is_err()
            {
                return false;
            }
            let mut psn = inner.attr.sq_psn;
            let done = send::send_ud(qp, &ud, &wqe, &mut psn);
            inner.attr.sq_psn = psn;
            inner.sq_cons = ring.geo.next(inner.sq_cons);
            if let Ok(c) = ring.consumer() {
                c.store(inner.sq_cons, Ordering::Release);
            }
            if let Some(c) = done {
                // A full CQ loses the completion: its consumer fell behind.
                let _ = FerroceCq::post(qp, qp.send_cq(), &c, false);
            }
        }
        posted > TX_BUDGET
    }
}

/// Packets a QP builds in one hold of its lock, from a doorbell or its work, before it lets the
/// packets go and others take the lock; the work goes on with the rest.
pub(crate) const TX_BUDGET: u32 = 64;

/// A device's QPs by number, found without a lock (packets arrive in softirq).
#[pin_data]
pub(crate) struct QpTable {
    #[pin]
    qps: Pool<QpShared>,
}

impl QpTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            qps <- Pool::new(FIRST_QPN..=QPN_LIMIT - 1),
        })
    }

    /// Stores `shared` under a free QP number, or under `fixed` (QP1); returns the number.
    fn insert(&self, fixed: Option<u32>, shared: Arc<QpShared>) -> Result<u32> {
        match fixed {
            Some(qpn) => self.qps.insert(qpn, shared, GFP_KERNEL).map(|()| qpn),
            None => self.qps.alloc(shared, GFP_KERNEL),
        }
    }

    /// The QP numbered `qpn`. Any context.
    pub(crate) fn get(&self, qpn: u32) -> Option<Arc<QpShared>> {
        self.qps.get(qpn)
    }

    /// Takes the QP out; once this returns no packet finds it. Sleeps.
    fn remove(&self, qpn: u32) {
        let removed = self.qps.remove(qpn);
        // Freeing rings may sleep: here, not in a lookup's context.
        drop(removed);
    }
}

/// The driver data of a QP.
pub(crate) struct FerroceQp {
    shared: Arc<QpShared>,
    table: Arc<QpTable>,
    qpn: u32,
}

impl FerroceQp {
    pub(crate) fn create(
        pd: &Pd<Ferroce>,
        init: &QpInit<'_, Ferroce>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(QpCreated, impl PinInit<Self, Error>)> {
        let kernel = udata.is_none();
        match (init.qp_type, kernel) {
            (QpType::Rc | QpType::Uc | QpType::Ud, false) => {}
            // Kernel consumers get datagram QPs: QP1 for the MAD layer, and UD.
            (QpType::Ud | QpType::Gsi, true) => {}
            _ => return Err(EOPNOTSUPP),
        }
        if let Some(udata) = udata.as_deref() {
            if udata.inlen() != 0 || udata.outlen() < CREATE_QP_RESP_SIZE {
                return Err(EINVAL);
            }
        }
        let lim = &limits::DEVICE_LIMITS;
        let c = &init.caps;
        if c.max_send_wr > lim.max_qp_wr
            || c.max_recv_wr > lim.max_qp_wr
            || c.max_send_sge > lim.max_send_sge
            || c.max_recv_sge > lim.max_recv_sge
            || c.max_inline_data > MAX_INLINE_DATA
        {
            return Err(EINVAL);
        }
        // A send WQE carries SGEs or inline data in the same space.
        let send_room = (c.max_send_sge as usize * SGE_SIZE).max(c.max_inline_data as usize);
        let recv_room = c.max_recv_sge as usize * SGE_SIZE;
        // A kernel QP's rings stay empty (its WRs come through `kq`): one slot each.
        let (sq_wr, rq_wr) = if kernel {
            (1, 1)
        } else {
            (c.max_send_wr, c.max_recv_wr)
        };
        let (sq, sq_info) = WorkRing::new(sq_wr, SEND_WQE_HEADER + send_room, udata.as_deref())?;
        let (rq, rq_info) = WorkRing::new(rq_wr, RECV_WQE_HEADER + recv_room, udata.as_deref())?;
        let caps = QpCaps {
            max_send_wr: if kernel {
                c.max_send_wr
            } else {
                sq.0.geo.capacity()
            },
            max_recv_wr: if kernel {
                c.max_recv_wr
            } else {
                rq.0.geo.capacity()
            },
            // CAST: Bounded by the checks above (at most 512 bytes).
            max_send_sge: (send_room / SGE_SIZE) as u32,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: send_room as u32,
        };
        if let Some(udata) = udata {
            let mut resp = [0u8; CREATE_QP_RESP_SIZE];
            resp[..MMINFO_SIZE].copy_from_slice(&mminfo(&rq_info));
            resp[MMINFO_SIZE..].copy_from_slice(&mminfo(&sq_info));
            udata.write(&resp)?;
        }

        let table = pd.device().data().qps.clone();
        let wq = pd.device().data().wq.clone();
        let shared = Arc::pin_init(
            try_pin_init!(QpShared {
                qp_type: init.qp_type,
                pd: pd.id(),
                sq,
                rq,
                caps,
                sig_all: init.sig_all,
                kernel,
                link: init.link.clone(),
                wq,
                timer <- HrTimer::new(),
                work <- new_work!("ferroce::QpShared::work"),
                kq <- KernelQueues::new(),
                rx <- SkbQueue::new(),
                rx_bytes: AtomicUsize::new(0),
                tx <- SkbQueue::new(),
                tx_busy: AtomicBool::new(false),
                inner <- new_spinlock_bh!(
                    QpInner {
                        attr: QpAttr {
                            port: 1,
                            ..QpAttr::default()
                        },
                        sq_cons: 0,
                        rq_cons: 0,
                        req: rc::Requester::default(),
                        resp: rc_resp::Responder::default(),
                        timer: None,
                        peer: None,
                        cc: QpCc::new(),
                    },
                    "ferroce::QpShared::inner"
                ),
            }),
            GFP_KERNEL,
        )?;
        let fixed = (init.qp_type == QpType::Gsi).then_some(GSI_QPN);
        // Another QP1 on this device (QP1 exists once) is EBUSY.
        let qpn = table.insert(fixed, shared.clone())?;
        Ok((QpCreated { qpn, caps }, Ok(Self { shared, table, qpn })))
    }

    pub(crate) fn modify(qp: &Qp<Ferroce>, new: &QpAttr, mask: AttrMask) -> Result {
        let this = &qp.data().shared;
        let mut inner = this.inner.lock();
        let cur = if mask.has(AttrMask::CUR_STATE) {
            new.cur_state
        } else {
            inner.attr.state
        };
        let next = if mask.has(AttrMask::STATE) {
            new.state
        } else {
            cur
        };
        if !transition_ok(cur, next, this.qp_type, mask) {
            return Err(EINVAL);
        }
        // Only RC and UC requesters are paced.
        if mask.has(AttrMask::RATE_LIMIT) && !matches!(this.qp_type, QpType::Rc | QpType::Uc) {
            return Err(EOPNOTSUPP);
        }
        check_attr(new, mask)?;
        inner.attr.update(new, mask);
        inner.attr.state = next;
        if next == QpState::Reset {
            // A reset QP starts over: nothing of its old messages may carry on.
            let cons = inner.sq_cons;
            inner.req.reset(cons);
            inner.resp = rc_resp::Responder::default();
            inner.timer = None;
            inner.cc = QpCc::new();
        }
        if next == QpState::Rts {
            let (r, rnr, psn) = (
                inner.attr.retry_cnt,
                inner.attr.rnr_retry,
                inner.attr.sq_psn,
            );
            inner.req.start(r, rnr, psn);
        }
        if next == QpState::Err {
            // A full CQ loses completions (its consumer fell behind); that does not undo the
            // transition.
            let _ = this.flush(qp, &mut inner);
        }
        // A new rate limit applies now, not when the pacer's wake-up for the old one comes.
        let repace = mask.has(AttrMask::RATE_LIMIT) && next.can_send();
        if repace {
            inner.cc.restart();
        }
        drop(inner);
        if repace {
            this.kick();
        }
        Ok(())
    }

    /// User space posted sends. Before RTS they wait; in the error state they complete with a
    /// flush error at once. What one budget does not send, the QP's work sends.
    pub(crate) fn doorbell(qp: &Qp<Ferroce>) -> Result {
        let this = &qp.data().shared;
        let (res, more) = {
            let mut inner = this.inner.lock();
            match (inner.attr.state, this.qp_type) {
                (QpState::Err, _) => (this.flush(qp, &mut inner), false),
                (s, QpType::Ud) if s.can_send() => (Ok(()), this.send_ud(qp, &mut inner)),
                (s, QpType::Rc | QpType::Uc) if s.can_send() => {
                    (Ok(()), rc::push(qp, this, &mut inner))
                }
                // Before RTS they wait.
                _ => (Ok(()), false),
            }
        };
        this.flush_tx(&qp.device().data().counters);
        if more {
            this.kick();
        }
        res
    }

    /// A kernel consumer posts a send: queued for the QP's work.
    pub(crate) fn post_send(qp: &Qp<Ferroce>, wr: &SendWr<'_, Ferroce>) -> Result {
        let this = &qp.data().shared;
        if !this.kernel {
            return Err(EINVAL);
        }
        QpShared::post_kernel_send(this, wr)
    }

    /// A kernel consumer posts a receive.
    pub(crate) fn post_recv(qp: &Qp<Ferroce>, buf: RecvBuf) -> Result {
        let this = &qp.data().shared;
        if !this.kernel {
            return Err(EINVAL);
        }
        this.kq.post_recv(buf)
    }

    pub(crate) fn query(qp: &Qp<Ferroce>) -> Result<QpQuery> {
        let this = &qp.data().shared;
        Ok(QpQuery {
            attr: this.inner.lock().attr,
            caps: this.caps,
            sig_all: this.sig_all,
        })
    }
}

/// The send rates `IB_QP_RATE_LIMIT` takes, kb/s (0 lifts the limit): from DCQCN's floor
/// (1 Mb/s) to the rate it takes for a line ([`crate::cc::LINE_MBPS`]).
pub(crate) const RATE_LIMIT_KBPS: core::ops::RangeInclusive<u32> =
    1000..=crate::cc::LINE_MBPS * 1000;

/// Checks what the state table does not: values in range for this device.
fn check_attr(a: &QpAttr, mask: AttrMask) -> Result {
    let lim = &limits::DEVICE_LIMITS;
    let bad = (mask.has(AttrMask::PORT) && a.port != 1)
        || (mask.has(AttrMask::PKEY_INDEX) && a.pkey_index != 0)
        || (mask.has(AttrMask::MAX_QP_RD_ATOMIC) && u32::from(a.max_rd_atomic) > lim.max_qp_init_rd_atom)
        || (mask.has(AttrMask::MAX_DEST_RD_ATOMIC) && u32::from(a.max_dest_rd_atomic) > lim.max_qp_rd_atom)
        || (mask.has(AttrMask::TIMEOUT) && a.timeout > 31)
        || (mask.has(AttrMask::RETRY_CNT) && a.retry_cnt > 7)
        || (mask.has(AttrMask::RNR_RETRY) && a.rnr_retry > 7)
        || (mask.has(AttrMask::MIN_RNR_TIMER) && a.min_rnr_timer > 31)
        || (mask.has(AttrMask::DEST_QPN) && a.dest_qp_num >= QPN_LIMIT)
        // ferroce speaks RoCE v2 only: the source GID must be a UDP one.
        || (mask.has(AttrMask::AV) && !a.ah.roce_v2)
        || (mask.has(AttrMask::RATE_LIMIT) && a.rate_limit != 0 && !RATE_LIMIT_KBPS.contains(&a.rate_limit))
        || mask.has(AttrMask::ALT_PATH);
    if bad {
        Err(EINVAL)
    } else {
        Ok(())
    }
}

impl Drop for FerroceQp {
    fn drop(&mut self) {
        self.table.remove(self.qpn);
        // The armed timer holds the QP; no one re-arms it once the link is revoked.
        let timer = self.shared.inner.lock().timer.take();
        drop(timer);
        // Work queued before now (a timer's, or packets for this QP) may hold the last other
        // reference. Wait for it: the rings must go now, while their user context exists,
        // not later from a worker.
        self.shared.wq.flush();
    }
}
