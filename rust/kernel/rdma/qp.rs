// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`) and their attributes.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    attr::{AccessFlags, Mtu},
    cq::Cq,
    device::Device,
    event,
    object::CoreObject,
    ops::Driver,
    pd::Pd,
    srq::Srq,
    udata::Udata,
};
use crate::{
    bindings, new_spinlock_bh,
    prelude::*,
    sync::{Arc, SpinLockBh},
};
use core::{marker::PhantomData, ptr::NonNull};

type Object<T> = CoreObject<bindings::ib_qp, QpData<T>>;

/// What the abstraction keeps next to the provider's data.
#[pin_data]
struct QpData<T: Driver> {
    link: Arc<QpLink<T>>,
    #[pin]
    data: T::Qp,
}

/// A live QP's address, as [`QpLink`] holds it.
struct LivePtr(NonNull<bindings::ib_qp>);

// SAFETY: A QP may be used from any thread and context; `QpLink` only hands it out under its
// lock.
unsafe impl Send for LivePtr {}

/// Reaches a QP from work that runs outside its callbacks (received packets, timers), in any
/// context: a softirq takes received packets through it.
///
/// It works from the end of create to the start of destroy: destroy revokes it and waits for a
/// user in [`QpLink::with`] to finish, so a holder never sees a QP that is being destroyed.
#[pin_data]
pub struct QpLink<T: Driver> {
    #[pin]
    qp: SpinLockBh<Option<LivePtr>>,
    /// The QP's address as an identity (completions name their QP by it); never dereferenced.
    id: core::sync::atomic::AtomicPtr<bindings::ib_qp>,
    _driver: PhantomData<fn() -> T>,
}

impl<T: Driver> QpLink<T> {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                qp <- new_spinlock_bh!(None, "QpLink::qp"),
                id: core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()),
                _driver: PhantomData,
            }),
            GFP_KERNEL,
        )
    }

    /// Runs `f` on the QP if it is still alive. `f` runs under a spinlock, with softirqs off:
    /// it must not sleep.
    pub fn with<R>(&self, f: impl FnOnce(&Qp<T>) -> R) -> Option<R> {
        let guard = self.qp.lock();
        let qp = guard.as_ref()?.0.as_ptr();
        // SAFETY: The pointer is set once the QP is initialised and cleared under this lock
        // before its destroy drops anything, so the QP is live while we hold the lock.
        Some(f(unsafe { Qp::<T>::from_raw(qp) }))
    }

    fn set(&self, qp: Option<NonNull<bindings::ib_qp>>) {
        if let Some(p) = qp {
            self.id
                .store(p.as_ptr(), core::sync::atomic::Ordering::Release);
        }
        *self.qp.lock() = qp.map(LivePtr);
    }

    /// The QP's address, for `ib_wc.qp`.
    pub(crate) fn raw(&self) -> *mut bindings::ib_qp {
        self.id.load(core::sync::atomic::Ordering::Acquire)
    }
}

/// The size the core allocates for one object (`ops.size_ib_qp`).
pub(crate) const fn alloc_size<T: Driver>() -> usize {
    Object::<T>::ALLOC_SIZE
}

/// Transport service of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// QP1, the general services interface (MADs).
    Gsi,
}

impl QpType {
    fn from_raw(t: bindings::ib_qp_type) -> Result<Self> {
        Ok(match t {
            bindings::ib_qp_type_IB_QPT_RC => Self::Rc,
            bindings::ib_qp_type_IB_QPT_UC => Self::Uc,
            bindings::ib_qp_type_IB_QPT_UD => Self::Ud,
            bindings::ib_qp_type_IB_QPT_GSI => Self::Gsi,
            _ => return Err(EOPNOTSUPP),
        })
    }

    fn to_raw(self) -> bindings::ib_qp_type {
        match self {
            Self::Rc => bindings::ib_qp_type_IB_QPT_RC,
            Self::Uc => bindings::ib_qp_type_IB_QPT_UC,
            Self::Ud => bindings::ib_qp_type_IB_QPT_UD,
            Self::Gsi => bindings::ib_qp_type_IB_QPT_GSI,
        }
    }
}

/// QP state (`enum ib_qp_state`).
///
/// # Examples
///
/// ```
/// use kernel::rdma::qp::QpState;
///
/// // A responder takes requests from RTR on; a requester sends from RTS on.
/// assert!(QpState::Rtr.can_receive() && !QpState::Rtr.can_send());
/// assert!(QpState::Rts.can_receive() && QpState::Rts.can_send());
/// // Draining (SQD) finishes what was started; errors and a reset stop both.
/// assert!(QpState::Sqd.can_send());
/// assert!(!QpState::Err.can_receive() && !QpState::Reset.can_send());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum QpState {
    /// Just created or reset.
    #[default]
    Reset = bindings::ib_qp_state_IB_QPS_RESET,
    /// Receives may be posted.
    Init = bindings::ib_qp_state_IB_QPS_INIT,
    /// Ready to receive.
    Rtr = bindings::ib_qp_state_IB_QPS_RTR,
    /// Ready to send.
    Rts = bindings::ib_qp_state_IB_QPS_RTS,
    /// Send queue drained.
    Sqd = bindings::ib_qp_state_IB_QPS_SQD,
    /// Send queue error.
    Sqe = bindings::ib_qp_state_IB_QPS_SQE,
    /// Error.
    Err = bindings::ib_qp_state_IB_QPS_ERR,
}

impl QpState {
    fn from_raw(s: bindings::ib_qp_state) -> Result<Self> {
        Ok(match s {
            bindings::ib_qp_state_IB_QPS_RESET => Self::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => Self::Init,
            bindings::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => Self::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => Self::Err,
            _ => return Err(EINVAL),
        })
    }

    /// Whether the QP takes requests from its peer (RTR on; in SQD it still does).
    pub fn can_receive(self) -> bool {
        matches!(self, Self::Rtr | Self::Rts | Self::Sqd)
    }

    /// Whether the QP's send side is live: it sends and takes the answers (RTS; in SQD it
    /// finishes what it started).
    pub fn can_send(self) -> bool {
        matches!(self, Self::Rts | Self::Sqd)
    }

    /// Whether a send posted now is an error (`EINVAL`): the QP has not reached RTS.
    pub fn refuses_sends(self) -> bool {
        matches!(self, Self::Reset | Self::Init | Self::Rtr)
    }
}

/// Work queue sizes (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCaps {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send WR.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive WR.
    pub max_recv_sge: u32,
    /// Largest inline send.
    pub max_inline_data: u32,
}

impl QpCaps {
    fn from_raw(c: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    fn write_to(&self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// What a consumer asks for when creating a QP.
pub struct QpInit<'a, T: Driver> {
    /// The transport.
    pub qp_type: QpType,
    /// Requested sizes.
    pub caps: QpCaps,
    /// Where send completions go.
    pub send_cq: &'a Cq<T>,
    /// Where receive completions go.
    pub recv_cq: &'a Cq<T>,
    /// The shared receive queue its receives come from, if any.
    pub srq: Option<&'a Srq<T>>,
    /// Whether every send WR completes (not only signalled ones).
    pub sig_all: bool,
    /// Reaches the QP from outside its callbacks once it is created.
    pub link: Arc<QpLink<T>>,
}

/// The path to the peer (`struct rdma_ah_attr` with its GRH, for RoCE).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AhAttr {
    /// Destination GID (an IPv6 or IPv4-mapped address for RoCE v2).
    pub dgid: [u8; 16],
    /// Source GID, from the GID table entry the consumer chose.
    pub sgid: [u8; 16],
    /// Index of that entry.
    pub sgid_index: u8,
    /// Whether the source GID is a RoCE v2 (UDP) one.
    pub roce_v2: bool,
    /// IPv6 flow label (also the UDP source port's entropy).
    pub flow_label: u32,
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// Traffic class / TOS.
    pub traffic_class: u8,
    /// Service level.
    pub sl: u8,
    /// Destination MAC, resolved by the core.
    pub dmac: [u8; 6],
}

impl AhAttr {
    /// # Safety
    ///
    /// `a` is a valid attribute whose `sgid_attr`, if set, is valid.
    pub(crate) unsafe fn from_raw(a: &bindings::rdma_ah_attr) -> Self {
        let grh = &a.grh;
        // SAFETY: `sgid_attr` is NULL (`as_ref` gives `None`) or points to a valid GID attribute
        // (this function's `# Safety`), so `as_ref` is sound.
        let (sgid, roce_v2) = unsafe {
            match grh.sgid_attr.as_ref() {
                Some(s) => (
                    s.gid.raw,
                    s.gid_type == bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
                ),
                None => ([0; 16], false),
            }
        };
        Self {
            // SAFETY: Every bit pattern of the union is a valid `raw`.
            dgid: unsafe { grh.dgid.raw },
            sgid,
            sgid_index: grh.sgid_index,
            roce_v2,
            flow_label: grh.flow_label,
            hop_limit: grh.hop_limit,
            traffic_class: grh.traffic_class,
            sl: a.sl,
            // SAFETY: RoCE devices get RoCE attributes; any bytes are a valid MAC.
            dmac: unsafe { a.__bindgen_anon_1.roce.dmac },
        }
    }

    pub(crate) fn write_to(&self, a: &mut bindings::rdma_ah_attr, port: u32) {
        a.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        a.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        a.port_num = port;
        a.sl = self.sl;
        a.grh.dgid.raw = self.dgid;
        a.grh.sgid_index = self.sgid_index;
        a.grh.flow_label = self.flow_label;
        a.grh.hop_limit = self.hop_limit;
        a.grh.traffic_class = self.traffic_class;
        a.__bindgen_anon_1.roce.dmac = self.dmac;
    }
}

/// Which [`QpAttr`] fields a modify sets (`enum ib_qp_attr_mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttrMask(u32);

impl AttrMask {
    /// The target state.
    pub const STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_STATE;
    /// The state the caller believes the QP is in.
    pub const CUR_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_CUR_STATE;
    /// Notify when the SQ drains.
    pub const EN_SQD_ASYNC_NOTIFY: u32 = bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
    /// Remote access rights.
    pub const ACCESS_FLAGS: u32 = bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    /// P_Key index.
    pub const PKEY_INDEX: u32 = bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX;
    /// Port number.
    pub const PORT: u32 = bindings::ib_qp_attr_mask_IB_QP_PORT;
    /// Q_Key (UD).
    pub const QKEY: u32 = bindings::ib_qp_attr_mask_IB_QP_QKEY;
    /// Path to the peer.
    pub const AV: u32 = bindings::ib_qp_attr_mask_IB_QP_AV;
    /// Path MTU.
    pub const PATH_MTU: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MTU;
    /// Local ACK timeout.
    pub const TIMEOUT: u32 = bindings::ib_qp_attr_mask_IB_QP_TIMEOUT;
    /// Transport retry count.
    pub const RETRY_CNT: u32 = bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT;
    /// RNR retry count.
    pub const RNR_RETRY: u32 = bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY;
    /// Expected receive PSN.
    pub const RQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_RQ_PSN;
    /// Outstanding reads/atomics as requester.
    pub const MAX_QP_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    /// Alternate path (unsupported).
    pub const ALT_PATH: u32 = bindings::ib_qp_attr_mask_IB_QP_ALT_PATH;
    /// RNR NAK timer.
    pub const MIN_RNR_TIMER: u32 = bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    /// First send PSN.
    pub const SQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_SQ_PSN;
    /// Outstanding reads/atomics as responder.
    pub const MAX_DEST_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC;
    /// Path migration state.
    pub const PATH_MIG_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE;
    /// Queue sizes (unsupported in modify).
    pub const CAP: u32 = bindings::ib_qp_attr_mask_IB_QP_CAP;
    /// Peer QP number.
    pub const DEST_QPN: u32 = bindings::ib_qp_attr_mask_IB_QP_DEST_QPN;
    /// Send rate limit.
    pub const RATE_LIMIT: u32 = bindings::ib_qp_attr_mask_IB_QP_RATE_LIMIT;

    /// Whether any of `bits` is set.
    pub fn has(self, bits: u32) -> bool {
        self.0 & bits != 0
    }

    /// The raw mask.
    pub fn bits(self) -> u32 {
        self.0
    }
}

/// A QP's modifiable attributes (`struct ib_qp_attr`, without alternate paths).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttr {
    /// State (target of a modify).
    pub state: QpState,
    /// State the caller believes the QP is in.
    pub cur_state: QpState,
    /// Path MTU; `None` until a modify sets it (INIT to RTR requires it for RC and UC).
    pub path_mtu: Option<Mtu>,
    /// Q_Key.
    pub qkey: u32,
    /// Expected receive PSN.
    pub rq_psn: u32,
    /// Next send PSN.
    pub sq_psn: u32,
    /// Peer QP number.
    pub dest_qp_num: u32,
    /// The rights the QP's responder grants the peer.
    pub access_flags: AccessFlags,
    /// Path to the peer.
    pub ah: AhAttr,
    /// P_Key index.
    pub pkey_index: u16,
    /// Notify when the SQ drains.
    pub en_sqd_async_notify: u8,
    /// Outstanding reads/atomics as requester.
    pub max_rd_atomic: u8,
    /// Outstanding reads/atomics as responder.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Port number.
    pub port: u32,
    /// Local ACK timeout code.
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7: infinite).
    pub rnr_retry: u8,
    /// Send rate limit in kb/s (`IB_QP_RATE_LIMIT`); 0: none.
    pub rate_limit: u32,
}

impl QpAttr {
    /// # Safety
    ///
    /// `a` is a modify request from the core; for `AV`, its `sgid_attr` is valid.
    unsafe fn from_raw(a: &bindings::ib_qp_attr, mask: AttrMask) -> Result<Self> {
        // Only the fields `mask` names are read: kernel callers leave the others unset.
        let mut out = Self::default();
        if mask.has(AttrMask::STATE) {
            out.state = QpState::from_raw(a.qp_state)?;
        }
        if mask.has(AttrMask::CUR_STATE) {
            out.cur_state = QpState::from_raw(a.cur_qp_state)?;
        }
        if mask.has(AttrMask::AV) {
            // SAFETY: `a` is a modify request from the core and `mask` has `AV`, so its `sgid_attr`
            // is valid (this function's `# Safety`), as `AhAttr::from_raw` needs.
            out.ah = unsafe { AhAttr::from_raw(&a.ah_attr) };
        }
        if mask.has(AttrMask::ACCESS_FLAGS) {
            // CAST: A bit mask.
            out.access_flags = AccessFlags::from_raw(a.qp_access_flags as u32);
        }
        if mask.has(AttrMask::PATH_MTU) {
            out.path_mtu = Some(Mtu::from_raw(a.path_mtu)?);
        }
        macro_rules! read {
            ($($bit:ident => $field:ident = $c:ident),* $(,)?) => {
                $(if mask.has(AttrMask::$bit) { out.$field = a.$c; })*
            };
        }
        read!(
            QKEY => qkey = qkey,
            RQ_PSN => rq_psn = rq_psn,
            SQ_PSN => sq_psn = sq_psn,
            DEST_QPN => dest_qp_num = dest_qp_num,
            PKEY_INDEX => pkey_index = pkey_index,
            EN_SQD_ASYNC_NOTIFY => en_sqd_async_notify = en_sqd_async_notify,
            MAX_QP_RD_ATOMIC => max_rd_atomic = max_rd_atomic,
            MAX_DEST_RD_ATOMIC => max_dest_rd_atomic = max_dest_rd_atomic,
            MIN_RNR_TIMER => min_rnr_timer = min_rnr_timer,
            PORT => port = port_num,
            TIMEOUT => timeout = timeout,
            RETRY_CNT => retry_cnt = retry_cnt,
            RNR_RETRY => rnr_retry = rnr_retry,
            RATE_LIMIT => rate_limit = rate_limit,
        );
        Ok(out)
    }

    fn write_to(&self, a: &mut bindings::ib_qp_attr) {
        a.qp_state = self.state as u32;
        a.cur_qp_state = self.state as u32;
        a.path_mtu = self.path_mtu.map_or(0, |m| m as u32);
        a.qkey = self.qkey;
        a.rq_psn = self.rq_psn;
        a.sq_psn = self.sq_psn;
        a.dest_qp_num = self.dest_qp_num;
        // CAST: A bit mask, as the core passed it.
        a.qp_access_flags = self.access_flags.bits() as c_int;
        self.ah.write_to(&mut a.ah_attr, self.port);
        a.pkey_index = self.pkey_index;
        a.en_sqd_async_notify = self.en_sqd_async_notify;
        a.max_rd_atomic = self.max_rd_atomic;
        a.max_dest_rd_atomic = self.max_dest_rd_atomic;
        a.min_rnr_timer = self.min_rnr_timer;
        a.port_num = self.port;
        a.timeout = self.timeout;
        a.retry_cnt = self.retry_cnt;
        a.rnr_retry = self.rnr_retry;
        a.rate_limit = self.rate_limit;
    }

    /// Takes the fields of `new` that `mask` names.
    pub fn update(&mut self, new: &QpAttr, mask: AttrMask) {
        if mask.has(AttrMask::STATE) {
            self.state = new.state;
        }
        macro_rules! take {
            ($($bit:ident => $field:ident),* $(,)?) => {
                $(if mask.has(AttrMask::$bit) { self.$field = new.$field; })*
            };
        }
        take!(
            EN_SQD_ASYNC_NOTIFY => en_sqd_async_notify,
            ACCESS_FLAGS => access_flags,
            PKEY_INDEX => pkey_index,
            PORT => port,
            QKEY => qkey,
            AV => ah,
            PATH_MTU => path_mtu,
            TIMEOUT => timeout,
            RETRY_CNT => retry_cnt,
            RNR_RETRY => rnr_retry,
            RQ_PSN => rq_psn,
            MAX_QP_RD_ATOMIC => max_rd_atomic,
            MIN_RNR_TIMER => min_rnr_timer,
            SQ_PSN => sq_psn,
            MAX_DEST_RD_ATOMIC => max_dest_rd_atomic,
            DEST_QPN => dest_qp_num,
            RATE_LIMIT => rate_limit,
        );
    }
}

/// Whether the IBTA state table allows `cur -> next` for `qp_type` with exactly the attributes
/// in `mask` (required ones present, no foreign ones).
pub fn transition_ok(cur: QpState, next: QpState, qp_type: QpType, mask: AttrMask) -> bool {
    // SAFETY: A pure function of its arguments.
    unsafe { bindings::ib_modify_qp_is_ok(cur as u32, next as u32, qp_type.to_raw(), mask.0) }
}

/// What [`Driver::create_qp`] decided.
pub struct QpCreated {
    /// The QP number (1 for GSI).
    pub qpn: u32,
    /// The real sizes, at least those asked for.
    pub caps: QpCaps,
}

/// What [`Driver::query_qp`] reports.
pub struct QpQuery {
    /// Current attributes.
    pub attr: QpAttr,
    /// Current sizes.
    pub caps: QpCaps,
    /// Whether every send WR completes.
    pub sig_all: bool,
}

/// A queue pair of provider `T`, as its callbacks see it.
#[repr(transparent)]
pub struct Qp<T: Driver>(Object<T>);

impl<T: Driver> Qp<T> {
    /// # Safety
    ///
    /// `qp` was initialised by [`create`] and is not destroyed during `'a`.
    unsafe fn from_raw<'a>(qp: *mut bindings::ib_qp) -> &'a Self {
        // SAFETY: `Qp` is `repr(transparent)` over `Object<T>`; `qp` was initialised by `create`
        // (`Object::init`) and is not destroyed (`drop_data`) during `'a` (this function's
        // `# Safety`), as `from_c` needs.
        unsafe { &*core::ptr::from_ref(Object::<T>::from_c(qp)).cast::<Self>() }
    }

    /// The provider's data.
    pub fn data(&self) -> &T::Qp {
        &self.0.get().data
    }

    /// Reaches this QP from outside its callbacks.
    pub fn link(&self) -> Arc<QpLink<T>> {
        self.0.get().link.clone()
    }

    /// The device the QP belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: Set by the core at allocation; the device outlives its QPs.
        unsafe { Device::<T>::from_raw((*self.0.c_ptr()).device) }
    }

    /// The CQ of send completions; it outlives the QP (the core counts its users).
    pub fn send_cq(&self) -> &Cq<T> {
        // SAFETY: Set by the core before create to a live CQ of `T` (checked non-NULL there),
        // which cannot be destroyed while this QP uses it.
        unsafe { Cq::<T>::from_raw((*self.0.c_ptr()).send_cq) }
    }

    /// The CQ of receive completions; as for [`Self::send_cq`].
    pub fn recv_cq(&self) -> &Cq<T> {
        // SAFETY: As in `send_cq`; `create` refused a NULL `recv_cq`.
        unsafe { Cq::<T>::from_raw((*self.0.c_ptr()).recv_cq) }
    }

    /// The shared receive queue its receives come from; it outlives the QP (the core counts its
    /// users).
    pub fn srq(&self) -> Option<&Srq<T>> {
        // SAFETY: Set by the core before create to NULL or a live SRQ of `T` (made by
        // `srq::create`), which cannot be destroyed while this QP uses it.
        let srq = unsafe { (*self.0.c_ptr()).srq };
        // SAFETY: As above.
        (!srq.is_null()).then(|| unsafe { Srq::<T>::from_raw(srq) })
    }

    /// Tells the consumer that the QP, in the error state, takes no more WQEs from its SRQ
    /// (`IB_EVENT_QP_LAST_WQE_REACHED`). Any context.
    pub fn raise_last_wqe_reached(&self) {
        let qp = self.0.c_ptr();
        let kind = bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED;
        // SAFETY: The QP is live (`&self`); `device` is set at allocation, `event_handler` and
        // `qp_context` by the core's `create_qp()` before create, and nothing changes them.
        unsafe {
            let element = bindings::ib_event__bindgen_ty_1 { qp };
            event::raise(
                (*qp).event_handler,
                (*qp).device,
                element,
                kind,
                (*qp).qp_context,
            )
        };
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: Set at creation and not changed after.
        unsafe { (*self.0.c_ptr()).qp_num }
    }
}

/// `ops.create_qp`.
///
/// # Safety
///
/// `qp` is a zeroed allocation of [`alloc_size`] bytes with `device` and `pd` set, for a device
/// of `T`; `init` is valid, its CQs are live CQs of `T` and its SRQ NULL or live; `udata` is
/// NULL or the command's.
pub(crate) unsafe fn create<T: Driver>(
    qp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> Result {
    // SAFETY: `init` is valid and only ours during the call; `udata` is NULL or the command's
    // `driver_udata` (verbs.c `create_qp` passes `&uattrs->driver_udata`), as
    // `Udata::from_raw` needs (this function's `# Safety`).
    let (init, mut udata) = unsafe { (&mut *init, Udata::from_raw(udata)) };
    if !init.xrcd.is_null() || init.send_cq.is_null() {
        return Err(EOPNOTSUPP);
    }
    if init.recv_cq.is_null() {
        return Err(EINVAL);
    }
    if init.create_flags != 0 {
        return Err(EOPNOTSUPP);
    }
    // uverbs checks that the SRQ is of the QP's device; kernel callers of `ib_create_qp()` are
    // not checked.
    // SAFETY: `qp` has `device` set and a non-NULL `srq` is live (this function's `# Safety`).
    if !init.srq.is_null() && unsafe { (*init.srq).device != (*qp).device } {
        return Err(EINVAL);
    }
    let qp_type = QpType::from_raw(init.qp_type)?;
    // SAFETY: The core set `pd` (this function's `# Safety`) to a PD of this device, set up by
    // `pd::init` and held by the caller for the call; every type accepted above has a PD.
    let pd = unsafe { Pd::<T>::from_raw((*qp).pd) };
    let request = QpInit {
        qp_type,
        caps: QpCaps::from_raw(&init.cap),
        // SAFETY: Both CQs are non-NULL (checked above) live CQs of `T` (this function's
        // `# Safety`), held by the caller for the call, which `request` does not outlive.
        send_cq: unsafe { Cq::<T>::from_raw(init.send_cq) },
        // SAFETY: As above.
        recv_cq: unsafe { Cq::<T>::from_raw(init.recv_cq) },
        // SAFETY: A non-NULL `srq` is a live SRQ that the caller holds for the call, of this
        // device (checked above), so made by `srq::create`.
        srq: (!init.srq.is_null()).then(|| unsafe { Srq::<T>::from_raw(init.srq) }),
        sig_all: init.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
        link: QpLink::new()?,
    };
    let (created, data) = T::create_qp(pd, &request, udata.as_mut())?;
    let link = request.link.clone();
    let data_link = link.clone();
    // SAFETY: `qp` is a zeroed allocation of `alloc_size::<T>()` = `ALLOC_SIZE` bytes (this
    // function's `# Safety`); nothing after this fails, so once initialised the core
    // frees it only after `destroy_qp` has run `drop_data`.
    unsafe {
        Object::<T>::init(
            qp,
            try_pin_init!(QpData {
                link: data_link,
                data <- data,
            }),
        )?
    };
    // SAFETY: The object is ours until we return; the core reads these after.
    unsafe { (*qp).qp_num = created.qpn };
    created.caps.write_to(&mut init.cap);
    link.set(NonNull::new(qp));
    Ok(())
}

/// `ops.modify_qp`.
///
/// # Safety
///
/// `qp` was initialised by [`create`]; `attr` is valid; `udata` is NULL or the command's.
pub(crate) unsafe fn modify<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    udata: *mut bindings::ib_udata,
) -> Result {
    // CAST: A bit mask.
    let mask = AttrMask(mask as u32);
    // SAFETY: `qp` came from `create` (this function's `# Safety`) and lives through a modify;
    // `attr` is valid and `_ib_modify_qp` resolved its `sgid_attr` for `AV`; `udata` is
    // NULL or the command's `driver_udata` (`ib_modify_qp_with_udata`).
    let (this, attr, mut udata) = unsafe {
        (
            Qp::<T>::from_raw(qp),
            QpAttr::from_raw(&*attr, mask)?,
            Udata::from_raw(udata),
        )
    };
    T::modify_qp(this, &attr, mask, udata.as_mut())
}

/// Attaches `qp` to the multicast group `gid`, or detaches it.
///
/// # Safety
///
/// `qp` came from `create` and lives through the call; `gid` is valid for reads.
pub(crate) unsafe fn mcast<T: Driver>(
    qp: *mut bindings::ib_qp,
    gid: *const bindings::ib_gid,
    attach: bool,
) -> Result {
    // SAFETY: Per this function's `# Safety`; every bit pattern of the union is a valid `raw`.
    let (this, gid) = unsafe { (Qp::<T>::from_raw(qp), &(*gid).raw) };
    if attach {
        T::attach_mcast(this, gid)
    } else {
        T::detach_mcast(this, gid)
    }
}

/// `ops.query_qp`.
///
/// # Safety
///
/// `qp` was initialised by [`create`]; `attr` and `init` are valid for writes.
pub(crate) unsafe fn query<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    init: *mut bindings::ib_qp_init_attr,
) -> Result {
    // SAFETY: `qp` came from `create` and lives through the call; `attr` and `init` are valid
    // for writes (this function's `# Safety`) and only the caller's, untouched meanwhile.
    let (this, attr, init) = unsafe { (Qp::<T>::from_raw(qp), &mut *attr, &mut *init) };
    let q = T::query_qp(this)?;
    q.attr.write_to(attr);
    q.caps.write_to(&mut attr.cap);
    q.caps.write_to(&mut init.cap);
    init.sq_sig_type = if q.sig_all {
        bindings::ib_sig_type_IB_SIGNAL_ALL_WR
    } else {
        bindings::ib_sig_type_IB_SIGNAL_REQ_WR
    };
    // SAFETY: Set at creation.
    unsafe {
        init.qp_type = (*qp).qp_type;
        init.send_cq = (*qp).send_cq;
        init.recv_cq = (*qp).recv_cq;
        init.srq = (*qp).srq;
    }
    Ok(())
}

/// `ops.post_send`. User QPs ring the doorbell with an empty list (their WQEs are in the
/// shared ring); kernel consumers post lists of WRs.
///
/// # Safety
///
/// `qp` was initialised by [`create`]; `wr` is NULL or a valid list; `bad_wr` is valid for
/// writes when `wr` is not NULL.
pub(crate) unsafe fn post_send<T: Driver>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> Result {
    // SAFETY: `qp` came from `create` (this function's `# Safety`), and the core does not
    // destroy a QP while a post to it runs.
    let this = unsafe { Qp::<T>::from_raw(qp) };
    if wr.is_null() {
        return T::doorbell(this);
    }
    // A user QP's WRs would come from user memory (the `POST_SEND` command with a list), their
    // SGEs naming any address: only kernel consumers' WRs become `SendWr`s.
    // SAFETY: `qp` is live (this function's `# Safety`); verbs.c `create_qp` set `uobject`
    // before our `create` and nothing changes it, so the read races with no write.
    if unsafe { !(*qp).uobject.is_null() } {
        // SAFETY: `bad_wr` is valid for writes (this function's `# Safety`).
        unsafe { *bad_wr = wr };
        return Err(EINVAL);
    }
    // SAFETY: `this` is `qp`, whose `pd` the core set at creation; `wr` is a non-NULL valid
    // list and `bad_wr` is valid for writes (this function's `# Safety`); a kernel QP's
    // SGEs are kernel consumers' memory, as `SendWr::gather` assumes.
    unsafe { super::wr::post_send_list(this, qp, wr, bad_wr) }
}

/// `ops.post_recv`, for kernel consumers (user QPs post into their ring).
///
/// # Safety
///
/// `qp` was initialised by [`create`]; `wr` is a valid list; `bad_wr` is valid for writes.
pub(crate) unsafe fn post_recv<T: Driver>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> Result {
    // SAFETY: `qp` came from `create` (this function's `# Safety`), and the core does not
    // destroy a QP while a post to it runs.
    let this = unsafe { Qp::<T>::from_raw(qp) };
    // As for `post_send`: only kernel consumers' WRs become `RecvBuf`s.
    // SAFETY: `qp` is live (this function's `# Safety`); verbs.c `create_qp` set `uobject`
    // before our `create` and nothing changes it, so the read races with no write.
    if unsafe { !(*qp).uobject.is_null() } {
        // SAFETY: `bad_wr` is valid for writes (this function's `# Safety`).
        unsafe { *bad_wr = wr };
        return Err(EINVAL);
    }
    // SAFETY: `this` is `qp`, whose `pd` the core set at creation; `wr` is a valid list and
    // `bad_wr` is valid for writes (this function's `# Safety`); a kernel QP's SGEs are
    // kernel consumers' memory, as `RecvBuf::write` assumes.
    unsafe { super::wr::post_recv_list(this, qp, wr, bad_wr) }
}

/// Drops the provider data before the core frees the object.
///
/// # Safety
///
/// `qp` was initialised by [`create`] and this is the last use of its data.
pub(crate) unsafe fn drop_data<T: Driver>(qp: *mut bindings::ib_qp) {
    // SAFETY: `qp` was initialised by `create` and its data is dropped only below (this
    // function's `# Safety`); the reference ends with this statement.
    let link = unsafe { Object::<T>::data(qp) }.link.clone();
    // Waits for work inside `QpLink::with`; none starts after.
    link.set(None);
    // SAFETY: `qp` was initialised by `create` and this is the last use of its data (this
    // function's `# Safety`): `link.set(None)` waited out every `QpLink::with` user.
    unsafe { Object::<T>::drop_data(qp) };
}
