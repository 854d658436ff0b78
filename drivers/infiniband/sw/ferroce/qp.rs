// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: the state a QP's packets, work and verbs share, and the attribute and state
//! machine of `ibv_modify_qp`. Its rings ([`ring`]), the device's table of QPs ([`table`]),
//! packets as they come in ([`rx`]) and go out ([`tx`]), its work ([`work`]) and kernel
//! consumers' posts ([`kernel_queues`] for datagram QPs, [`kernel_ring`] for RC and UC) have
//! files of their own; the transports are `rc` and `ud`.

pub(crate) mod kernel_queues;
pub(crate) mod kernel_ring;
pub(crate) mod ring;
pub(crate) mod rx;
pub(crate) mod table;
pub(crate) mod tx;
mod work;

pub(crate) use self::table::QpTable;
use self::{
    kernel_queues::KernelQueues, kernel_ring::KernelRings, ring::WorkRing, table::QPN_LIMIT,
};
use crate::{
    ah::Av,
    cc::QpCc,
    counters::Counters,
    cq::FerroceCq,
    device::{Ferroce, FerroceDevice},
    limits,
    mr::MrRef,
    net::xmit::TxPath,
    proto::{
        build::Path,
        wqe::{
            self, Completion, RecvWqe, SendWqe, WcOpcode, WrOpcode, RECV_WQE_HEADER,
            SEND_WQE_HEADER, SGE_SIZE,
        },
    },
    queue::{mminfo, MMINFO_SIZE},
    rc, ud,
};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use kernel::{
    impl_has_hr_timer, impl_has_work,
    net::skbuff::SkbQueue,
    new_spinlock_bh, new_work,
    prelude::*,
    rdma::{
        pd::Pd,
        qp::{
            transition_ok, AttrMask, Qp, QpAttr, QpCaps, QpCreated, QpInit, QpLink, QpQuery,
            QpState, QpType,
        },
        udata::Udata,
        wr::{RecvWr, SendWr},
    },
    sync::{Arc, SpinLockBh},
    time::{
        hrtimer::{ArcHrTimerHandle, HrTimer, RelativeMode},
        Monotonic,
    },
    workqueue::{OwnedQueue, Work},
};

/// Largest inline send.
const MAX_INLINE_DATA: u32 = 512;
/// `struct rxe_create_qp_resp`: the RQ's then the SQ's `struct mminfo`.
const CREATE_QP_RESP_SIZE: usize = 2 * MMINFO_SIZE;
/// The GSI QP's number.
const GSI_QPN: u32 = 1;
/// Packets a stream's outbox holds for the stream's work before others send them.
const STREAM_OUTBOX_MAX: u32 = 4 * tx::TX_BUDGET;

/// What changes under a QP's lock: its attributes and the kernel's ring positions.
pub(crate) struct QpInner {
    pub(crate) attr: QpAttr,
    pub(crate) sq_cons: u32,
    pub(crate) rq_cons: u32,
    /// RC requester and completer.
    pub(crate) req: rc::req::Requester,
    /// RC responder.
    pub(crate) resp: rc::resp::Responder,
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

/// A QP while its lock is held, as its transports see it: the core's QP, the state its packets,
/// work and verbs share, and what the lock guards.
pub(crate) struct QpCtx<'a> {
    pub(crate) qp: &'a Qp<Ferroce>,
    pub(crate) shared: &'a Arc<QpShared>,
    pub(crate) inner: &'a mut QpInner,
}

impl<'a> QpCtx<'a> {
    /// The device's state.
    pub(crate) fn dev(&self) -> &'a FerroceDevice {
        self.qp.device().data()
    }

    /// The region and offset a peer's `rkey` (a region's or a memory window's), `va` and `len`
    /// name, if this QP may use them with `rights` over the whole range.
    pub(crate) fn remote(
        &self,
        rkey: u32,
        va: u64,
        len: u32,
        rights: u32,
    ) -> Option<(MrRef, usize)> {
        self.dev()
            .mrs
            .remote(self.shared.pd, self.shared.id, rkey, va, len, rights)
    }

    /// The device's counters.
    pub(crate) fn counters(&self) -> &'a Counters {
        &self.dev().counters
    }

    /// A WR failed: the QP goes to the error state, which flushes the others.
    pub(crate) fn fail(&mut self) {
        self.shared.fail(self.qp, self.inner);
    }
}

/// Who posts a QP's WRs, and where they wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Posts {
    /// User space, into the rings it maps.
    User,
    /// A kernel consumer of a datagram QP (the MAD layer on QP1, UD): WRs wait in `kq`.
    KernelQueue,
    /// A kernel consumer of an RC or UC QP: WRs are written into the rings ([`kernel_ring`]).
    KernelRing,
}

/// The next [`QpShared::id`].
static NEXT_QP_ID: AtomicU64 = AtomicU64::new(0);

/// What the data path needs of a QP; shared with the device's QP table.
///
/// Its state is under a spinlock held with softirqs off: packets are taken in softirq, as they
/// arrive, and the verbs and the QP's work take the same lock. Nothing under it sleeps; packets
/// built under it wait in `tx` and leave, in order, once it is dropped.
#[pin_data]
pub(crate) struct QpShared {
    qp_type: QpType,
    pub(crate) pd: usize,
    /// Unique among every QP the module ever made (a QP number is reused): what a type 2
    /// memory window is bound to.
    pub(crate) id: u64,
    pub(crate) sq: WorkRing,
    pub(crate) rq: WorkRing,
    pub(crate) caps: QpCaps,
    sig_all: bool,
    pub(crate) posts: Posts,
    link: Arc<QpLink<Ferroce>>,
    /// The device's data path queue, where the QP's work runs.
    wq: Arc<OwnedQueue>,
    /// Where its stream is sent (see [`rc::req::leaves_to_work`]).
    stream_wq: Arc<OwnedQueue>,
    /// Sends the QP's stream, and alone: its packets leave from one CPU at a time.
    #[pin]
    stream: Work<QpShared, 1>,
    /// `Requester::streaming`, for the outbox's senders, which do not hold the lock.
    pub(crate) streaming: AtomicBool,
    #[pin]
    timer: HrTimer<QpShared>,
    /// Takes the backlog, fires the timer, sends kernel WRs and what a budget left over.
    #[pin]
    work: Work<QpShared>,
    #[pin]
    pub(crate) kq: KernelQueues,
    #[pin]
    kring: KernelRings,
    /// Packets from QPs of the same device, waiting for the QP's work.
    #[pin]
    rx: SkbQueue,
    rx_bytes: AtomicUsize,
    /// Packets built under the lock, in order, waiting to leave.
    #[pin]
    tx: SkbQueue,
    /// Someone is sending `tx`: one sender at a time keeps the order.
    tx_busy: AtomicBool,
    /// The PSN of the earliest RC request the stack dropped as it was queued, for the
    /// requester to send again from ([`tx::NO_DROP`] if none).
    tx_drop: AtomicU32,
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
    impl HasWork<Self, 1> for QpShared { self.stream }
}

impl QpShared {
    pub(crate) fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// Queues the QP's work (unless it is queued already).
    pub(crate) fn kick(self: &Arc<Self>) {
        // Already queued: that run sees what this one would have.
        let _ = self.wq.enqueue::<_, 0>(self.clone());
    }

    /// Queues the QP's stream work (unless it is queued already).
    pub(crate) fn kick_stream(self: &Arc<Self>) {
        let _ = self.stream_wq.enqueue::<_, 1>(self.clone());
    }

    /// Queues what sends the rest: the stream's work in a stream, the QP's work otherwise.
    pub(crate) fn kick_send(self: &Arc<Self>) {
        if self.streaming.load(Ordering::Acquire) {
            self.kick_stream();
        } else {
            self.kick();
        }
    }

    /// Sends the outbox, outside a stream; in one, the stream's work sends it, so that the
    /// QP's packets leave from one CPU at a time, unless more than a few budgets wait there
    /// (a responder's READ responses pile up faster than a starved stream work sends).
    pub(crate) fn flush_or_leave(self: &Arc<Self>, counters: &Counters) {
        if !self.streaming.load(Ordering::Acquire) || self.tx.len() > STREAM_OUTBOX_MAX {
            self.flush_tx(counters);
        } else if !self.tx.is_empty() {
            self.kick_stream();
        }
    }

    /// Whether packets wait in the backlog (from QPs of the same device).
    pub(crate) fn backlog_pending(&self) -> bool {
        !self.rx.is_empty()
    }

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
        let was = inner.attr.state;
        inner.attr.state = QpState::Err;
        self.kring.set_state(QpState::Err);
        // A full CQ loses completions (its consumer fell behind); the QP is in error regardless.
        let _ = self.flush(qp, inner);
        self.entered_error(qp, was);
    }

    /// A QP on an SRQ that has just entered the error state takes no more of its WQEs: its
    /// consumer hears so (and may then destroy it, `ib_drain_rq()` waits for this).
    fn entered_error(&self, qp: &Qp<Ferroce>, was: QpState) {
        if was != QpState::Err && qp.srq().is_some() {
            qp.raise_last_wqe_reached();
        }
    }

    /// Forgets what the requester started (and ends its stream): new WQEs start at the ring's
    /// consumer index.
    fn reset_requester(&self, inner: &mut QpInner) {
        let cons = inner.sq_cons;
        inner.req.reset(cons);
        self.streaming.store(false, Ordering::Release);
        self.tx_drop.store(tx::NO_DROP, Ordering::Relaxed);
    }

    /// Completes every posted WQE with a flush error: receives first, then sends.
    fn flush(&self, qp: &Qp<Ferroce>, inner: &mut QpInner) -> Result {
        inner.timer = None;
        inner.cc.wake_at = None;
        if self.posts == Posts::KernelQueue {
            self.kq.flush(qp);
        }
        let resp = core::mem::take(&mut inner.resp);
        let res = self.flush_rings(qp, inner, resp.into_held());
        self.reset_requester(inner);
        res
    }

    /// Completes `held`, a receive WQE the responder took from the QP's SRQ, with a flush
    /// error: it is the QP's, and flushed as the RQ's would be.
    fn flush_held(&self, qp: &Qp<Ferroce>, held: Option<KVec<u8>>) -> Result {
        match held {
            Some(slot) if qp.srq().is_some() => {
                let c = Completion::flushed(RecvWqe::new(&slot).wr_id(), WcOpcode::Recv, qp.qpn());
                FerroceCq::post(qp, qp.recv_cq(), &c, true)
            }
            _ => Ok(()),
        }
    }

    /// `held` is the receive WQE the responder took from the QP's SRQ, if any (see
    /// [`Self::flush_held`]).
    fn flush_rings(&self, qp: &Qp<Ferroce>, inner: &mut QpInner, held: Option<KVec<u8>>) -> Result {
        let qpn = qp.qpn();
        if qp.srq().is_some() {
            self.flush_held(qp, held)?;
        } else {
            self.rq.flush(&mut inner.rq_cons, qp, false, |mem, at| {
                let mut b = [0u8; wqe::RECV_WQE_PREFIX];
                mem.read(at, &mut b)?;
                Ok(Completion::flushed(
                    wqe::recv_wr_id(&b),
                    WcOpcode::Recv,
                    qpn,
                ))
            })?;
        }
        self.sq.flush(&mut inner.sq_cons, qp, true, |mem, at| {
            let mut b = [0u8; wqe::SEND_WQE_PREFIX];
            mem.read(at, &mut b)?;
            let w = SendWqe::new(&b);
            // A WQE with an opcode user space made up still completes, as a send (REG_MR is
            // kernel consumers' only: the user ABI has no completion opcode for it).
            let opcode = w
                .opcode()
                .filter(|&o| o != WrOpcode::RegMr || self.posts == Posts::KernelRing)
                .map_or(WcOpcode::Send, WrOpcode::completion);
            Ok(Completion::flushed(w.wr_id(), opcode, qpn))
        })
    }
}

/// The driver data of a QP.
pub(crate) struct FerroceQp {
    shared: Arc<QpShared>,
    table: Arc<QpTable>,
    qpn: u32,
}

impl FerroceQp {
    /// The state its packets reach it by.
    pub(crate) fn shared(&self) -> &Arc<QpShared> {
        &self.shared
    }

    pub(crate) fn create(
        pd: &Pd<Ferroce>,
        init: &QpInit<'_, Ferroce>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(QpCreated, impl PinInit<Self, Error>)> {
        let kernel = udata.is_none();
        // SRQs are user space's (see `srq.rs`).
        let on_srq = init.srq.is_some();
        if on_srq && kernel {
            return Err(EOPNOTSUPP);
        }
        let posts = match (init.qp_type, kernel) {
            (QpType::Rc | QpType::Uc | QpType::Ud, false) => Posts::User,
            // Kernel datagram QPs: QP1 for the MAD layer, and UD.
            (QpType::Ud | QpType::Gsi, true) => Posts::KernelQueue,
            (QpType::Rc | QpType::Uc, true) => Posts::KernelRing,
            _ => return Err(EOPNOTSUPP),
        };
        let queued = posts == Posts::KernelQueue;
        if let Some(udata) = udata.as_deref() {
            if udata.inlen() != 0 || udata.outlen() < CREATE_QP_RESP_SIZE {
                return Err(EINVAL);
            }
        }
        let lim = &limits::DEVICE_LIMITS;
        let c = &init.caps;
        if c.max_send_wr > lim.max_qp_wr
            || (!on_srq && (c.max_recv_wr > lim.max_qp_wr || c.max_recv_sge > lim.max_recv_sge))
            || c.max_send_sge > lim.max_send_sge
            || c.max_inline_data > MAX_INLINE_DATA
        {
            return Err(EINVAL);
        }
        // A send WQE carries SGEs or inline data in the same space.
        let send_room = (c.max_send_sge as usize * SGE_SIZE).max(c.max_inline_data as usize);
        // On an SRQ the receive caps are ignored (as `ibv_create_qp` says).
        let recv_room = if on_srq {
            0
        } else {
            c.max_recv_sge as usize * SGE_SIZE
        };
        // A kernel datagram QP's rings stay empty (its WRs wait in `kq`): one slot each.
        let (sq_wr, rq_wr) = if queued {
            (1, 1)
        } else {
            (c.max_send_wr, c.max_recv_wr)
        };
        let (sq, sq_info) = WorkRing::new(sq_wr, SEND_WQE_HEADER + send_room, udata.as_deref())?;
        // On an SRQ, the RQ is one slot that user space cannot map (rdma-core's rxe provider
        // maps none; its `struct mminfo` stays zero).
        let (rq, rq_info) = if on_srq {
            WorkRing::new(1, RECV_WQE_HEADER, None)?
        } else {
            WorkRing::new(rq_wr, RECV_WQE_HEADER + recv_room, udata.as_deref())?
        };
        let caps = QpCaps {
            max_send_wr: if queued { c.max_send_wr } else { sq.capacity() },
            max_recv_wr: match (on_srq, queued) {
                (true, _) => 0,
                (false, true) => c.max_recv_wr,
                (false, false) => rq.capacity(),
            },
            // CAST: Bounded by the checks above (at most 512 bytes).
            max_send_sge: (send_room / SGE_SIZE) as u32,
            max_recv_sge: if on_srq { 0 } else { c.max_recv_sge },
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
        let stream_wq = pd.device().data().stream_wq.clone();
        let shared = Arc::pin_init(
            try_pin_init!(QpShared {
                qp_type: init.qp_type,
                pd: pd.id(),
                id: NEXT_QP_ID.fetch_add(1, Ordering::Relaxed),
                sq,
                rq,
                caps,
                sig_all: init.sig_all,
                posts,
                link: init.link.clone(),
                wq,
                stream_wq,
                stream <- new_work!("ferroce::QpShared::stream"),
                streaming: AtomicBool::new(false),
                timer <- HrTimer::new(),
                work <- new_work!("ferroce::QpShared::work"),
                kq <- KernelQueues::new(),
                kring <- KernelRings::new(),
                rx <- SkbQueue::new(),
                rx_bytes: AtomicUsize::new(0),
                tx <- SkbQueue::new(),
                tx_busy: AtomicBool::new(false),
                tx_drop: AtomicU32::new(tx::NO_DROP),
                inner <- new_spinlock_bh!(
                    QpInner {
                        attr: QpAttr {
                            port: 1,
                            ..QpAttr::default()
                        },
                        sq_cons: 0,
                        rq_cons: 0,
                        req: rc::req::Requester::default(),
                        resp: rc::resp::Responder::default(),
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
        let was = inner.attr.state;
        inner.attr.update(new, mask);
        inner.attr.state = next;
        this.kring.set_state(next);
        if next == QpState::Reset {
            // A reset QP starts over: nothing of its old messages may carry on. A WQE it took
            // from its SRQ is no longer on the SRQ: it completes flushed rather than vanish.
            // A kernel consumer's WRs go with it (as on C rxe): its rings are emptied.
            if this.posts == Posts::KernelRing {
                let (mut sq_cons, mut rq_cons) = (inner.sq_cons, inner.rq_cons);
                this.kring.discard(this, &mut sq_cons, &mut rq_cons);
                (inner.sq_cons, inner.rq_cons) = (sq_cons, rq_cons);
            }
            this.reset_requester(&mut inner);
            let resp = core::mem::take(&mut inner.resp);
            let _ = this.flush_held(qp, resp.into_held());
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
            this.entered_error(qp, was);
        }
        // A new rate limit applies now, not when the pacer's wake-up for the old one comes.
        let repace = mask.has(AttrMask::RATE_LIMIT) && next.can_send();
        if repace {
            inner.cc.restart();
        }
        // Back from SQD or SQE: what waited in the ring starts.
        let resume = next == QpState::Rts && matches!(was, QpState::Sqd | QpState::Sqe);
        drop(inner);
        if repace || resume {
            this.kick();
        }
        Ok(())
    }

    /// User space posted sends. Before RTS the doorbell fails (`EINVAL`); in the error state
    /// they complete with a flush error at once; in SQE they wait. What one budget does not
    /// send, the QP's work sends.
    pub(crate) fn doorbell(qp: &Qp<Ferroce>) -> Result {
        let this = &qp.data().shared;
        let (res, more) = {
            let mut inner = this.inner.lock();
            let mut cx = QpCtx {
                qp,
                shared: this,
                inner: &mut inner,
            };
            match (cx.inner.attr.state, this.qp_type) {
                // As the C rxe: a QP not yet ready to send refuses the doorbell.
                (s, _) if s.refuses_sends() => (Err(EINVAL), false),
                (QpState::Err, _) => (this.flush(qp, cx.inner), false),
                (s, QpType::Ud) if s.can_send() => (Ok(()), ud::send::push(&mut cx)),
                // A short message goes out at once, from the poster's CPU (latency); a long
                // WRITE, or a stream under way, is left to the stream's work, on another CPU
                // (the stream runs beside the poster instead of taking its turns).
                (s, QpType::Rc | QpType::Uc) if s.can_send() => (
                    Ok(()),
                    rc::req::leaves_to_work(&mut cx) || rc::req::push(&mut cx),
                ),
                // SQE: they wait.
                _ => (Ok(()), false),
            }
        };
        this.flush_or_leave(&qp.device().data().counters);
        if more {
            this.kick_send();
        }
        res
    }

    /// A kernel consumer posts a send; the QP's work sends it. Does not sleep.
    pub(crate) fn post_send(qp: &Qp<Ferroce>, wr: &SendWr<'_, Ferroce>) -> Result {
        let this = &qp.data().shared;
        match this.posts {
            // Not checked against the state here, unlike the doorbell: kernel consumers post
            // with interrupts off (the MAD layer does), where the QP's softirq-off lock may not
            // be taken.
            Posts::KernelQueue => this.kq.post_send(wr)?,
            Posts::KernelRing => this.kring.post_send(this, wr)?,
            Posts::User => return Err(EINVAL),
        }
        this.kick();
        Ok(())
    }

    /// A kernel consumer posts a receive. Does not sleep.
    pub(crate) fn post_recv(qp: &Qp<Ferroce>, wr: &RecvWr<'_>) -> Result {
        let this = &qp.data().shared;
        // On an SRQ, receives are posted there.
        if qp.srq().is_some() {
            return Err(EINVAL);
        }
        match this.posts {
            Posts::KernelQueue => this.kq.post_recv(wr),
            Posts::KernelRing => {
                if this.kring.post_recv(this, wr)? {
                    this.kick();
                }
                Ok(())
            }
            Posts::User => Err(EINVAL),
        }
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
    let max_rd_atomic = u32::from(a.max_rd_atomic);
    let max_dest_rd_atomic = u32::from(a.max_dest_rd_atomic);
    let bad = [
        mask.has(AttrMask::PORT) && a.port != 1,
        mask.has(AttrMask::PKEY_INDEX) && a.pkey_index != 0,
        mask.has(AttrMask::MAX_QP_RD_ATOMIC) && max_rd_atomic > lim.max_qp_init_rd_atom,
        mask.has(AttrMask::MAX_DEST_RD_ATOMIC) && max_dest_rd_atomic > lim.max_qp_rd_atom,
        mask.has(AttrMask::TIMEOUT) && a.timeout > 31,
        mask.has(AttrMask::RETRY_CNT) && a.retry_cnt > 7,
        mask.has(AttrMask::RNR_RETRY) && a.rnr_retry > 7,
        mask.has(AttrMask::MIN_RNR_TIMER) && a.min_rnr_timer > 31,
        mask.has(AttrMask::DEST_QPN) && a.dest_qp_num >= QPN_LIMIT,
        // ferroce speaks RoCE v2 only: the source GID must be a UDP one.
        mask.has(AttrMask::AV) && !a.ah.roce_v2,
        mask.has(AttrMask::RATE_LIMIT)
            && a.rate_limit != 0
            && !RATE_LIMIT_KBPS.contains(&a.rate_limit),
        mask.has(AttrMask::ALT_PATH),
    ];
    if bad.contains(&true) {
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
        // Only user QPs stream; a kernel consumer may destroy its QP from a queue that memory
        // reclaim waits on, and the stream queue has no rescuer.
        if self.shared.posts == Posts::User {
            self.shared.stream_wq.flush();
        }
    }
}
