// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: numbers, work queue rings shared with rdma-core's rxe provider, and the
//! attribute and state machine of `ibv_modify_qp`.

use crate::{
    ah::Av,
    counters::{Counter, Counters},
    cq::FerroceCq,
    device::Ferroce,
    kqp::KernelQueues,
    limits,
    proto::{
        build::Path,
        opcode::{OpKind, Transport},
        packet::Packet,
        wqe::{self, Completion, SendWqe, WcOpcode, RECV_WQE_HEADER, SEND_WQE_HEADER, SGE_SIZE},
    },
    queue::{mminfo, Ring, MMINFO_SIZE},
    rc, rc_comp, rc_resp,
    recv::QpDrop,
    send, ud,
};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    impl_has_hr_timer, impl_has_work, new_mutex, new_work,
    prelude::*,
    rdma::{
        mmap::{MmapInfo, SharedMem},
        pd::Pd,
        qp::{
            transition_ok, AttrMask, Qp, QpAttr, QpCaps, QpCreated, QpInit, QpLink, QpQuery,
            QpState, QpType,
        },
        udata::Udata,
        wr::{RecvBuf, SendWr},
    },
    sync::{Arc, ArcBorrow, Mutex},
    time::{
        hrtimer::{
            ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerRestart,
            RelativeMode,
        },
        Monotonic,
    },
    workqueue::{OwnedQueue, Work, WorkItem},
    xarray::{AllocKind, XArray},
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
        let prod = self.0.producer()?.load(Ordering::Acquire);
        if self.0.geo.count(prod, cons) == 0 {
            return Ok(false);
        }
        self.0.mem.read(self.0.geo.slot_offset(cons), out)?;
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
}

impl QpInner {
    /// The IPv4 path to the connected peer (RC, UC), from the address vector.
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

/// What the data path will need of a QP; shared with the device's QP table.
#[pin_data]
pub(crate) struct QpShared {
    qpn: u32,
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
    /// Sends kernel WRs and handles the timer.
    #[pin]
    work: Work<QpShared>,
    #[pin]
    pub(crate) kq: KernelQueues,
    #[pin]
    inner: Mutex<QpInner>,
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
        this.link.with(|qp| {
            let mut inner = this.inner.lock();
            if this.kernel {
                this.kq.run_sends(qp, &this, &mut inner);
            }
            rc_comp::on_timer(qp, &this, &mut inner);
        });
    }
}

impl QpShared {
    /// Queues the QP's work (unless it is queued already).
    pub(crate) fn kick(self: &Arc<Self>) {
        let _ = self.wq.enqueue(self.clone());
    }

    /// Takes a valid packet addressed to this QP; an `Err` is counted as a drop.
    pub(crate) fn receive(
        this: &Arc<Self>,
        pkt: &Packet<'_>,
        ip: &[u8],
        counters: &Counters,
    ) -> Result<(), QpDrop> {
        this.link
            .with(|qp| {
                let mut inner = this.inner.lock();
                match this.qp_type {
                    QpType::Ud | QpType::Gsi => {
                        ud::receive(qp, this, &mut inner, pkt, ip, counters)
                    }
                    QpType::Rc => {
                        let state = inner.attr.state;
                        if pkt.info.transport != Transport::Rc {
                            return Err(QpDrop::BadState);
                        }
                        match pkt.info.kind {
                            OpKind::Ack | OpKind::ReadResponse | OpKind::AtomicAck => {
                                if !matches!(state, QpState::Rts | QpState::Sqd) {
                                    return Err(QpDrop::BadState);
                                }
                                rc_comp::on_response(qp, this, &mut inner, pkt).inspect(|()| {
                                    counters.inc(Counter::RcvdPkts);
                                    // Read responses carry data, counted as sent by the peer.
                                    counters.add(Counter::RcvdBytes, pkt.payload.len() as u64);
                                })
                            }
                            _ => {
                                if !matches!(state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
                                    return Err(QpDrop::BadState);
                                }
                                rc_resp::on_request(qp, this, &mut inner, pkt, counters)
                            }
                        }
                    }
                    QpType::Uc => {
                        if pkt.info.transport != Transport::Uc
                            || !matches!(
                                inner.attr.state,
                                QpState::Rtr | QpState::Rts | QpState::Sqd
                            )
                        {
                            return Err(QpDrop::BadState);
                        }
                        rc_resp::on_uc_request(qp, this, &mut inner, pkt, counters)
                    }
                }
            })
            // Being destroyed.
            .unwrap_or(Err(QpDrop::BadState))
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
        let qpn = self.qpn;
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
            let opcode = WcOpcode::for_send_wr(w.opcode()).unwrap_or(WcOpcode::Send);
            Ok(Completion::flushed(w.wr_id(), opcode, qpn))
        })
    }
}

impl QpShared {
    /// Sends every posted UD WQE, oldest first; each one's completion goes to the send CQ.
    fn send_ud(&self, qp: &Qp<Ferroce>, inner: &mut QpInner) -> Result {
        let ring = &self.sq.0;
        let elem = 1usize << ring.geo.log2_elem();
        let ud = send::UdQp {
            pd: self.pd,
            payload_room: elem - SEND_WQE_HEADER,
            sig_all: self.sig_all,
            qkey: inner.attr.qkey,
        };
        // One private copy of a slot at a time: user space cannot change a WQE under us.
        let mut wqe = KVec::new();
        wqe.resize(elem, 0u8, GFP_KERNEL)?;
        let prod = ring.producer()?.load(Ordering::Acquire);
        for _ in 0..ring.geo.count(prod, inner.sq_cons) {
            ring.mem
                .read(ring.geo.slot_offset(inner.sq_cons), &mut wqe)?;
            let mut psn = inner.attr.sq_psn;
            let done = send::send_ud(qp, &ud, &wqe, &mut psn);
            inner.attr.sq_psn = psn;
            inner.sq_cons = ring.geo.next(inner.sq_cons);
            ring.consumer()?.store(inner.sq_cons, Ordering::Release);
            if let Some(c) = done {
                FerroceCq::post(qp, qp.send_cq(), &c, false)?;
            }
        }
        Ok(())
    }
}

/// A device's QPs by number.
#[pin_data]
pub(crate) struct QpTable {
    #[pin]
    qps: XArray<Arc<QpShared>>,
    cursor: AtomicU32,
}

impl QpTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            qps <- XArray::new(AllocKind::Alloc),
            cursor: AtomicU32::new(0),
        })
    }

    /// Stores `make(qpn)` under a free QP number; returns it.
    fn insert(
        &self,
        fixed: Option<u32>,
        make: impl FnOnce(u32) -> Result<Arc<QpShared>>,
    ) -> Result<Arc<QpShared>> {
        let qpn = if let Some(n) = fixed {
            n
        } else {
            let span = QPN_LIMIT - FIRST_QPN;
            let qps = self.qps.lock();
            let start = self.cursor.fetch_add(1, Ordering::Relaxed);
            (0..limits::DEVICE_LIMITS.max_qp)
                .map(|i| FIRST_QPN + start.wrapping_add(i) % span)
                .find(|&n| qps.get(n as usize).is_none())
                .ok_or(ENOMEM)?
        };
        let shared = make(qpn)?;
        let mut qps = self.qps.lock();
        if qps.get(qpn as usize).is_some() {
            // Another create took it between the locks (rare: fail the create), or QP1 exists.
            return Err(if fixed.is_some() { EBUSY } else { EAGAIN });
        }
        let res = qps.store(qpn as usize, shared.clone(), GFP_ATOMIC);
        drop(qps);
        // On failure the store hands back its clone, freed here, after the lock.
        res.map(|_| shared).map_err(|e| e.error)
    }

    /// The QP numbered `qpn`.
    pub(crate) fn get(&self, qpn: u32) -> Option<Arc<QpShared>> {
        self.qps.lock().get(qpn as usize).map(Into::into)
    }

    fn remove(&self, qpn: u32) {
        let removed = self.qps.lock().remove(qpn as usize);
        // Freeing rings may sleep: after the lock.
        drop(removed);
    }
}

/// The driver data of a QP.
pub(crate) struct FerroceQp {
    shared: Arc<QpShared>,
    table: Arc<QpTable>,
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
        let mut rings = Some((sq, rq));
        let fixed = (init.qp_type == QpType::Gsi).then_some(GSI_QPN);
        let shared = table.insert(fixed, |qpn| {
            let (sq, rq) = rings.take().ok_or(EINVAL)?;
            Arc::pin_init(
                try_pin_init!(QpShared {
                    qpn,
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
                    inner <- new_mutex!(QpInner {
                        attr: QpAttr {
                            port: 1,
                            ..QpAttr::default()
                        },
                        sq_cons: 0,
                        rq_cons: 0,
                        req: rc::Requester::default(),
                        resp: rc_resp::Responder::default(),
                        timer: None,
                    }),
                }),
                GFP_KERNEL,
            )
        })?;
        let qpn = shared.qpn;
        Ok((QpCreated { qpn, caps }, Ok(Self { shared, table })))
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
        check_attr(new, mask)?;
        inner.attr.update(new, mask);
        inner.attr.state = next;
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
        Ok(())
    }

    /// User space posted sends. Before RTS they wait; in the error state they
    /// complete with a flush error at once.
    pub(crate) fn doorbell(qp: &Qp<Ferroce>) -> Result {
        let this = &qp.data().shared;
        let mut inner = this.inner.lock();
        match (inner.attr.state, this.qp_type) {
            (QpState::Err, _) => this.flush(qp, &mut inner),
            (QpState::Rts | QpState::Sqd, QpType::Ud) => this.send_ud(qp, &mut inner),
            (QpState::Rts | QpState::Sqd, QpType::Rc | QpType::Uc) => {
                rc::push(qp, this, &mut inner)
            }
            // Before RTS they wait.
            _ => Ok(()),
        }
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

/// Checks what the state table does not: values in range for this device.
fn check_attr(a: &QpAttr, mask: AttrMask) -> Result {
    let lim = &limits::DEVICE_LIMITS;
    let bad = (mask.has(AttrMask::PORT) && a.port != 1)
        || (mask.has(AttrMask::PKEY_INDEX) && a.pkey_index != 0)
        // IB_MTU_256 ..= IB_MTU_4096.
        || (mask.has(AttrMask::PATH_MTU) && !(1..=5).contains(&a.path_mtu))
        || (mask.has(AttrMask::MAX_QP_RD_ATOMIC) && u32::from(a.max_rd_atomic) > lim.max_qp_init_rd_atom)
        || (mask.has(AttrMask::MAX_DEST_RD_ATOMIC) && u32::from(a.max_dest_rd_atomic) > lim.max_qp_rd_atom)
        || (mask.has(AttrMask::TIMEOUT) && a.timeout > 31)
        || (mask.has(AttrMask::RETRY_CNT) && a.retry_cnt > 7)
        || (mask.has(AttrMask::RNR_RETRY) && a.rnr_retry > 7)
        || (mask.has(AttrMask::MIN_RNR_TIMER) && a.min_rnr_timer > 31)
        || (mask.has(AttrMask::DEST_QPN) && a.dest_qp_num >= QPN_LIMIT)
        // ferroce speaks RoCE v2 only: the source GID must be a UDP one.
        || (mask.has(AttrMask::AV) && !a.ah.roce_v2)
        || mask.has(AttrMask::ALT_PATH | AttrMask::RATE_LIMIT);
    if bad {
        Err(EINVAL)
    } else {
        Ok(())
    }
}

impl Drop for FerroceQp {
    fn drop(&mut self) {
        self.table.remove(self.shared.qpn);
        // The armed timer holds the QP; no one re-arms it once the link is revoked.
        let timer = self.shared.inner.lock().timer.take();
        drop(timer);
        // Work queued before now (a timer's, or packets for this QP) may hold the last other
        // reference. Wait for it: the rings must go now, while their user context exists,
        // not later from a worker.
        self.shared.wq.flush();
    }
}
