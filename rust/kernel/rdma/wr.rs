// SPDX-License-Identifier: GPL-2.0

//! Work requests and completions of kernel consumers (`struct ib_send_wr`, `ib_recv_wr`,
//! `ib_wc`): the MAD layer on QP1, and any other in-kernel user of the device.
//!
//! Kernel consumers name their buffers by DMA address, which for a device without a DMA device
//! (`ib_uses_virt_dma()`) is the kernel virtual address, under the PD's `local_dma_lkey` (the
//! region from [`super::ops::Driver::get_dma_mr`]). Only such SGEs are accepted: their memory is
//! the consumer's, mapped until the WR completes, which is what lets [`SendWr::gather`] and
//! [`RecvBuf::write`] touch it.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{ah::Ah, ops::Driver, qp::QpLink};
use crate::{bindings, prelude::*};
use core::marker::PhantomData;

/// One SGE of a kernel work request, as posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrSge {
    /// A virt-DMA address (a kernel virtual address, see [`super::virt_dma`]).
    pub addr: u64,
    /// Its length in bytes.
    pub length: u32,
    /// The key of the region it lies in.
    pub lkey: u32,
}

impl WrSge {
    fn of(s: &bindings::ib_sge) -> Self {
        Self {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    }
}

/// A WR's SGE list, borrowed from the WR for the call.
///
/// # Safety
///
/// `sg_list` points to `num_sge` valid SGEs (or `num_sge` is 0), which outlive `'a`.
unsafe fn sge_slice<'a>(
    sg_list: *const bindings::ib_sge,
    num_sge: c_int,
) -> Result<&'a [bindings::ib_sge]> {
    let n = usize::try_from(num_sge).map_err(|_| EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if sg_list.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: `sg_list` points to `n` valid SGEs that outlive `'a` (this function's `# Safety`).
    Ok(unsafe { core::slice::from_raw_parts(sg_list, n) })
}

/// Copies the bytes `sges` name into `out`, which must be their total length.
///
/// # Safety
///
/// Every SGE names kernel memory the consumer owns and does not write during the call (an SGE
/// of a kernel WR under the PD's `local_dma_lkey`, or of an inline send).
unsafe fn gather_kernel(sges: &[bindings::ib_sge], out: &mut [u8]) -> Result {
    let total = sges
        .iter()
        .try_fold(0usize, |t, s| t.checked_add(s.length as usize))
        .ok_or(EINVAL)?;
    if out.len() != total {
        return Err(EINVAL);
    }
    let mut at = 0;
    for s in sges {
        let len = s.length as usize;
        if len == 0 {
            continue;
        }
        let addr = usize::try_from(s.addr).map_err(|_| EINVAL)?;
        addr.checked_add(len).ok_or(EINVAL)?;
        // SAFETY: Kernel memory the consumer owns, `len` bytes at `addr` (`# Safety`).
        let src = unsafe { core::slice::from_raw_parts(addr as *const u8, len) };
        out[at..at + len].copy_from_slice(src);
        at += len;
    }
    Ok(())
}

/// The destination of a UD or GSI send.
pub struct UdDest<'a, T: Driver> {
    /// The address handle.
    pub ah: &'a Ah<T>,
    /// The remote QP number.
    pub remote_qpn: u32,
    /// The remote Q_Key.
    pub remote_qkey: u32,
}

/// The peer memory an RC send WR names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteWr {
    /// None: a SEND or a local operation.
    None,
    /// An RDMA WRITE's or READ's target (`struct ib_rdma_wr`).
    Rdma {
        /// Its address in the peer's region.
        remote_addr: u64,
        /// The peer's key.
        rkey: u32,
    },
    /// An atomic's word and operands (`struct ib_atomic_wr`).
    Atomic {
        /// The word's address in the peer's region.
        remote_addr: u64,
        /// What a compare and swap compares with, or a fetch and add adds.
        compare_add: u64,
        /// What a compare and swap swaps in.
        swap: u64,
        /// The peer's key.
        rkey: u32,
    },
}

/// A fast registration (`struct ib_reg_wr`): the key and rights the region takes, and what the
/// consumer mapped into it (`ib_map_mr_sg()` set the region's `iova`, `length` and page size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegMrWr {
    /// The key the region takes (`ib_update_fast_reg_key()` changes its low 8 bits).
    pub key: u32,
    /// `IB_ACCESS_*`.
    pub access: u32,
    /// The address of the region's first byte.
    pub iova: u64,
    /// Its length.
    pub length: u64,
    /// The page size of its mapping.
    pub page_size: u32,
}

/// A send work request of a kernel consumer, borrowed for the call that posts it.
pub struct SendWr<'a, T: Driver> {
    /// Returned in the completion (for most consumers, a `struct ib_cqe` pointer).
    pub wr_id: u64,
    /// What it asks for.
    pub opcode: WrOpcode,
    /// How it completes and is sent.
    pub send_flags: SendFlags,
    /// `ex` as the WR holds it: immediate data in wire order, or, for SEND_WITH_INV and
    /// LOCAL_INV, the key to invalidate in host order.
    pub imm: u32,
    /// For UD and GSI QPs.
    pub ud: Option<UdDest<'a, T>>,
    /// For RDMA and atomic WRs of RC and UC QPs.
    pub remote: RemoteWr,
    /// For `IB_WR_REG_MR`.
    pub reg: Option<RegMrWr>,
    sges: &'a [bindings::ib_sge],
    dma_lkey: u32,
}

impl<T: Driver> SendWr<'_, T> {
    /// Bytes the SGEs hold.
    pub fn len(&self) -> usize {
        self.sges.iter().map(|s| s.length as usize).sum()
    }

    /// Whether the WR carries no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The SGEs, as posted.
    pub fn sges(&self) -> impl ExactSizeIterator<Item = WrSge> + '_ {
        self.sges.iter().map(WrSge::of)
    }

    /// Copies the WR's data into `out`, which must be [`Self::len`] bytes: the SGEs must be
    /// under the PD's `local_dma_lkey` (`EINVAL` otherwise), or the WR inline, whose SGEs
    /// are plain addresses.
    pub fn gather(&self, out: &mut [u8]) -> Result {
        let inline = self.send_flags.contains(SendFlag::Inline);
        if !inline && self.sges.iter().any(|s| s.lkey != self.dma_lkey) {
            return Err(EINVAL);
        }
        // SAFETY: A kernel consumer's WR (only those become `SendWr`s) whose SGEs are under
        // the PD's `local_dma_lkey` or inline (checked above): kernel memory the consumer owns
        // and does not write until the WR completes (or, inline, until the post returns).
        unsafe { gather_kernel(self.sges, out) }
    }
}

/// A receive work request of a kernel consumer, borrowed for the call that posts it.
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    sges: &'a [bindings::ib_sge],
    dma_lkey: u32,
}

impl RecvWr<'_> {
    /// The SGEs, as posted.
    pub fn sges(&self) -> impl ExactSizeIterator<Item = WrSge> + '_ {
        self.sges.iter().map(WrSge::of)
    }

    /// The buffers, kept for the data that completes the WR: `EINVAL` unless every SGE is
    /// under the PD's `local_dma_lkey` (memory [`RecvBuf::write`] may touch directly).
    pub fn to_buf(&self) -> Result<RecvBuf> {
        let mut sges = KVec::with_capacity(self.sges.len(), GFP_ATOMIC)?;
        for s in self.sges {
            if s.lkey != self.dma_lkey {
                return Err(EINVAL);
            }
            let addr = usize::try_from(s.addr).map_err(|_| EINVAL)?;
            let len = s.length as usize;
            addr.checked_add(len).ok_or(EINVAL)?;
            sges.push(KernelSge { addr, len }, GFP_ATOMIC)?;
        }
        Ok(RecvBuf {
            wr_id: self.wr_id,
            sges,
        })
    }
}

/// One buffer of a kept receive WR: a kernel virtual address and a length.
#[derive(Clone, Copy, Debug)]
struct KernelSge {
    addr: usize,
    len: usize,
}

/// The buffers of a kernel consumer's receive WR, for the data that completes it; all under
/// the PD's `local_dma_lkey` (see [`RecvWr::to_buf`]).
///
/// Valid until the WR completes: the provider drops it when it posts the completion (or flushes
/// the WR), and never writes after.
pub struct RecvBuf {
    /// Returned in the completion.
    pub wr_id: u64,
    sges: KVec<KernelSge>,
}

// SAFETY: The buffers are kernel memory that any CPU may write; the consumer does not touch them
// until the completion.
unsafe impl Send for RecvBuf {}
// SAFETY: As above; writes need `&self` only because each WR is written by one context at a time
// (the provider's lock around its receive queue).
unsafe impl Sync for RecvBuf {}

impl RecvBuf {
    /// Bytes the buffers hold.
    pub fn len(&self) -> usize {
        self.sges.iter().map(|s| s.len).sum()
    }

    /// Whether there is no room at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes `data` at byte `offset` of the buffers; `EMSGSIZE` if they end first.
    pub fn write(&self, mut offset: usize, mut data: &[u8]) -> Result {
        for s in self.sges.iter() {
            if data.is_empty() {
                break;
            }
            if offset >= s.len {
                offset -= s.len;
                continue;
            }
            let n = (s.len - offset).min(data.len());
            // SAFETY: A `local_dma_lkey` SGE of a posted receive WR, which has not completed:
            // the consumer's kernel memory, ours to write (type doc).
            unsafe {
                core::ptr::copy_nonoverlapping(data.as_ptr(), (s.addr + offset) as *mut u8, n)
            };
            data = &data[n..];
            offset = 0;
        }
        if data.is_empty() {
            Ok(())
        } else {
            Err(EMSGSIZE)
        }
    }
}

/// A completion for a kernel consumer (`struct ib_wc`, without the QP, which the sink adds).
#[derive(Clone, Copy, Debug, Default)]
pub struct Wc {
    /// The WR's `wr_id`.
    pub wr_id: u64,
    /// `IB_WC_*` status.
    pub status: u32,
    /// `IB_WC_*` opcode.
    pub opcode: u32,
    /// Bytes received (with the GRH for UD).
    pub byte_len: u32,
    /// Immediate data as the wire carried it.
    pub imm: u32,
    /// Source QP of a UD receive.
    pub src_qp: u32,
    /// `IB_WC_*` flags.
    pub wc_flags: u32,
    /// `RDMA_NETWORK_*` of the received packet.
    pub network_hdr_type: u8,
}

/// `IB_WC_GRH`.
pub const WC_GRH: u32 = bindings::ib_wc_flags_IB_WC_GRH;
/// `IB_WC_WITH_IMM`.
pub const WC_WITH_IMM: u32 = bindings::ib_wc_flags_IB_WC_WITH_IMM;
/// `IB_WC_WITH_INVALIDATE`: a SEND with invalidate; `ex.invalidate_rkey` holds the key.
pub const WC_WITH_INVALIDATE: u32 = bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;
/// What a kernel consumer's send WR asks for (`enum ib_wr_opcode`).
///
/// # Examples
///
/// ```
/// use kernel::rdma::wr::WrOpcode;
///
/// assert_eq!(WrOpcode::from_raw(2), Some(WrOpcode::Send));
/// assert_eq!(WrOpcode::from_raw(0x20), Some(WrOpcode::RegMr));
/// // Driver-private and unassigned codes are no opcode a provider is asked for.
/// assert_eq!(WrOpcode::from_raw(240), None);
/// assert_eq!(WrOpcode::from_raw(99), None);
/// ```
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrOpcode {
    /// RDMA WRITE.
    RdmaWrite = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
    /// RDMA WRITE with immediate data.
    RdmaWriteWithImm = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
    /// SEND.
    Send = bindings::ib_wr_opcode_IB_WR_SEND,
    /// SEND with immediate data.
    SendWithImm = bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM,
    /// RDMA READ.
    RdmaRead = bindings::ib_wr_opcode_IB_WR_RDMA_READ,
    /// Atomic compare and swap.
    AtomicCmpAndSwp = bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
    /// Atomic fetch and add.
    AtomicFetchAndAdd = bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD,
    /// Invalidates a local memory key.
    LocalInv = bindings::ib_wr_opcode_IB_WR_LOCAL_INV,
    /// Binds a memory window.
    BindMw = bindings::ib_wr_opcode_IB_WR_BIND_MW,
    /// SEND that invalidates a remote key.
    SendWithInv = bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV,
    /// Large send offload (UD).
    Lso = bindings::ib_wr_opcode_IB_WR_LSO,
    /// RDMA READ that invalidates the local key afterwards.
    RdmaReadWithInv = bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV,
    /// Masked atomic compare and swap.
    MaskedAtomicCmpAndSwp = bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP,
    /// Masked atomic fetch and add.
    MaskedAtomicFetchAndAdd = bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD,
    /// RDMA FLUSH.
    Flush = bindings::ib_wr_opcode_IB_WR_FLUSH,
    /// Atomic WRITE.
    AtomicWrite = bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE,
    /// Fast registration of a memory region.
    RegMr = bindings::ib_wr_opcode_IB_WR_REG_MR,
    /// Fast registration with signature integrity.
    RegMrIntegrity = bindings::ib_wr_opcode_IB_WR_REG_MR_INTEGRITY,
}

impl WrOpcode {
    /// The opcode of a raw `ib_wr_opcode`; `None` for the driver-private range and values the
    /// core does not define.
    pub const fn from_raw(op: u32) -> Option<Self> {
        const ALL: [WrOpcode; 18] = [
            WrOpcode::RdmaWrite,
            WrOpcode::RdmaWriteWithImm,
            WrOpcode::Send,
            WrOpcode::SendWithImm,
            WrOpcode::RdmaRead,
            WrOpcode::AtomicCmpAndSwp,
            WrOpcode::AtomicFetchAndAdd,
            WrOpcode::LocalInv,
            WrOpcode::BindMw,
            WrOpcode::SendWithInv,
            WrOpcode::Lso,
            WrOpcode::RdmaReadWithInv,
            WrOpcode::MaskedAtomicCmpAndSwp,
            WrOpcode::MaskedAtomicFetchAndAdd,
            WrOpcode::Flush,
            WrOpcode::AtomicWrite,
            WrOpcode::RegMr,
            WrOpcode::RegMrIntegrity,
        ];
        let mut i = 0;
        while i < ALL.len() {
            if ALL[i] as u32 == op {
                return Some(ALL[i]);
            }
            i += 1;
        }
        None
    }
}

crate::impl_flags!(
    /// `IB_SEND_*` flags of a send WR. Bits the core defines that have no [`SendFlag`] here are
    /// kept as the WR carries them.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::rdma::wr::{SendFlag, SendFlags};
    ///
    /// let f = SendFlags::from_raw(SendFlag::Signaled as u32 | SendFlag::Inline as u32);
    /// assert!(f.contains(SendFlag::Signaled));
    /// assert!(!f.contains(SendFlag::Solicited));
    /// assert_eq!(f, SendFlag::Signaled | SendFlag::Inline);
    /// ```
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct SendFlags(u32);

    /// One `IB_SEND_*` flag.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum SendFlag {
        /// `IB_SEND_FENCE`: waits for the RDMA READs and atomics before it.
        // CAST: `enum ib_send_flags` is signed (it holds bit 31); these bits are small.
        Fence = bindings::ib_send_flags_IB_SEND_FENCE as u32,
        /// `IB_SEND_SIGNALED`: the WR completes with a completion entry.
        // CAST: As for `Fence`.
        Signaled = bindings::ib_send_flags_IB_SEND_SIGNALED as u32,
        /// `IB_SEND_SOLICITED`: the receiver's solicited-only CQ notification fires.
        // CAST: As for `Fence`.
        Solicited = bindings::ib_send_flags_IB_SEND_SOLICITED as u32,
        /// `IB_SEND_INLINE`: the data sits in the WQE.
        // CAST: As for `Fence`.
        Inline = bindings::ib_send_flags_IB_SEND_INLINE as u32,
    }
);

impl SendFlags {
    /// Flags as the WR carries them.
    pub const fn from_raw(bits: u32) -> Self {
        Self(bits)
    }
}

/// `IB_WC_WITH_NETWORK_HDR_TYPE`.
pub const WC_WITH_NETWORK_HDR_TYPE: u32 = bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;
/// `RDMA_NETWORK_IPV4`.
pub const NETWORK_IPV4: u8 = bindings::rdma_network_type_RDMA_NETWORK_IPV4 as u8;
/// `RDMA_NETWORK_IPV6`.
pub const NETWORK_IPV6: u8 = bindings::rdma_network_type_RDMA_NETWORK_IPV6 as u8;
/// `IB_QP1_QKEY`, the Q_Key of QP1.
pub const QP1_QKEY: u32 = bindings::IB_QP1_QKEY;

/// Where [`super::ops::Driver::poll_cq`] puts completions: the caller's `ib_wc` array.
pub struct WcSink<'a, T: Driver> {
    wc: *mut bindings::ib_wc,
    cap: usize,
    len: usize,
    _p: PhantomData<(&'a mut bindings::ib_wc, T)>,
}

impl<T: Driver> WcSink<'_, T> {
    /// Whether the array is full.
    pub fn is_full(&self) -> bool {
        self.len == self.cap
    }

    /// Appends `c` for the QP behind `qp`; `false` (and nothing written) if the array is full.
    pub fn push(&mut self, c: &Wc, qp: &QpLink<T>) -> bool {
        if self.is_full() {
            return false;
        }
        // SAFETY: `len < cap` indexes the caller's array, which we may write.
        let wc = unsafe { &mut *self.wc.add(self.len) };
        *wc = bindings::ib_wc {
            __bindgen_anon_1: bindings::ib_wc__bindgen_ty_1 { wr_id: c.wr_id },
            status: c.status,
            opcode: c.opcode,
            byte_len: c.byte_len,
            qp: qp.raw(),
            ex: bindings::ib_wc__bindgen_ty_2 { imm_data: c.imm },
            src_qp: c.src_qp,
            wc_flags: c.wc_flags as c_int,
            port_num: 1,
            network_hdr_type: c.network_hdr_type,
            ..Default::default()
        };
        self.len += 1;
        true
    }
}

/// `ops.post_send` with a list: each WR goes to [`Driver::post_send`] in order.
///
/// # Safety
///
/// `qp` is a live QP of `T` with its PD set; `wr` is a valid list; `bad_wr` is valid for writes.
pub(crate) unsafe fn post_send_list<T: Driver>(
    qp: &super::qp::Qp<T>,
    raw_qp: *mut bindings::ib_qp,
    mut wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> Result {
    // SAFETY: `raw_qp` is `qp`'s `ib_qp` (as `qp::post_send` passes them), whose `pd` the core
    // set at creation (this function's `# Safety`); a PD may not be freed while its QPs
    // exist (`ib_dealloc_pd_user`).
    let lkey = unsafe { (*(*raw_qp).pd).local_dma_lkey };
    // SAFETY: Set at creation.
    let ud = unsafe {
        matches!(
            (*raw_qp).qp_type,
            bindings::ib_qp_type_IB_QPT_UD | bindings::ib_qp_type_IB_QPT_GSI
        )
    };
    while !wr.is_null() {
        // SAFETY: A valid list node; for UD and GSI QPs the node is the `wr` of an `ib_ud_wr`,
        // for RDMA, atomic and REG_MR opcodes of an `ib_rdma_wr`, `ib_atomic_wr` or
        // `ib_reg_wr`. Its SGEs outlive the call.
        let res = unsafe {
            let w = &*wr;
            // An opcode the core does not define is the consumer's mistake.
            let opcode = WrOpcode::from_raw(w.opcode).ok_or(EINVAL);
            opcode.and_then(|opcode| {
                let sges = sge_slice(w.sg_list, w.num_sge)?;
                let dest = if ud {
                    let u = &*crate::container_of!(wr, bindings::ib_ud_wr, wr);
                    if u.ah.is_null() {
                        return Err(EINVAL);
                    }
                    Some(UdDest {
                        ah: Ah::<T>::from_raw(u.ah),
                        remote_qpn: u.remote_qpn,
                        remote_qkey: u.remote_qkey,
                    })
                } else {
                    None
                };
                // The WR type the opcode implies (the verbs API's contract): RDMA WRs are the
                // `wr` of an `ib_rdma_wr`, atomics of an `ib_atomic_wr`.
                let remote = match opcode {
                    _ if ud => RemoteWr::None,
                    WrOpcode::RdmaWrite
                    | WrOpcode::RdmaWriteWithImm
                    | WrOpcode::RdmaRead
                    | WrOpcode::RdmaReadWithInv => {
                        let r = &*crate::container_of!(wr, bindings::ib_rdma_wr, wr);
                        RemoteWr::Rdma {
                            remote_addr: r.remote_addr,
                            rkey: r.rkey,
                        }
                    }
                    WrOpcode::AtomicCmpAndSwp
                    | WrOpcode::AtomicFetchAndAdd
                    | WrOpcode::MaskedAtomicCmpAndSwp
                    | WrOpcode::MaskedAtomicFetchAndAdd => {
                        let a = &*crate::container_of!(wr, bindings::ib_atomic_wr, wr);
                        RemoteWr::Atomic {
                            remote_addr: a.remote_addr,
                            compare_add: a.compare_add,
                            swap: a.swap,
                            rkey: a.rkey,
                        }
                    }
                    _ => RemoteWr::None,
                };
                let reg = if opcode == WrOpcode::RegMr && !ud {
                    let r = &*crate::container_of!(wr, bindings::ib_reg_wr, wr);
                    if r.mr.is_null() {
                        return Err(EINVAL);
                    }
                    // The region is the consumer's, alive while its registration is posted; C
                    // may change its other fields meanwhile: each is read on its own.
                    let mr = r.mr;
                    let lkey = (&raw const (*mr).lkey).read();
                    // The key names this region: only its low 8 bits are the consumer's.
                    if (r.key ^ lkey) & !0xff != 0 {
                        return Err(EINVAL);
                    }
                    Some(RegMrWr {
                        key: r.key,
                        // CAST: A bit mask.
                        access: r.access as u32,
                        iova: (&raw const (*mr).iova).read(),
                        length: (&raw const (*mr).length).read(),
                        page_size: (&raw const (*mr).page_size).read(),
                    })
                } else {
                    None
                };
                let send = SendWr {
                    wr_id: w.__bindgen_anon_1.wr_id,
                    opcode,
                    // CAST: A bit mask.
                    send_flags: SendFlags::from_raw(w.send_flags as u32),
                    imm: w.ex.imm_data,
                    ud: dest,
                    remote,
                    reg,
                    sges,
                    dma_lkey: lkey,
                };
                T::post_send(qp, &send)
            })
        };
        if let Err(e) = res {
            // SAFETY: `bad_wr` is valid for writes (this function's `# Safety`).
            unsafe { *bad_wr = wr };
            return Err(e);
        }
        // SAFETY: A valid list node.
        wr = unsafe { (*wr).next };
    }
    Ok(())
}

/// `ops.post_recv`: each WR goes to [`Driver::post_recv`] in order.
///
/// # Safety
///
/// As for [`post_send_list`].
pub(crate) unsafe fn post_recv_list<T: Driver>(
    qp: &super::qp::Qp<T>,
    raw_qp: *mut bindings::ib_qp,
    mut wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> Result {
    // SAFETY: `raw_qp` is `qp`'s `ib_qp` (as `qp::post_recv` passes them), whose `pd` the core
    // set at creation (this function's `# Safety`); a PD may not be freed while its QPs
    // exist (`ib_dealloc_pd_user`).
    let lkey = unsafe { (*(*raw_qp).pd).local_dma_lkey };
    while !wr.is_null() {
        // SAFETY: A valid list node.
        let res = unsafe {
            let w = &*wr;
            sge_slice(w.sg_list, w.num_sge).and_then(|sges| {
                T::post_recv(
                    qp,
                    &RecvWr {
                        wr_id: w.__bindgen_anon_1.wr_id,
                        sges,
                        dma_lkey: lkey,
                    },
                )
            })
        };
        if let Err(e) = res {
            // SAFETY: `bad_wr` is valid for writes (this function's `# Safety`, as for
            // `post_send_list`).
            unsafe { *bad_wr = wr };
            return Err(e);
        }
        // SAFETY: A valid list node.
        wr = unsafe { (*wr).next };
    }
    Ok(())
}

/// `ops.poll_cq`: returns how many completions were written.
///
/// # Safety
///
/// `wc` is valid for writes of `num` entries.
pub(crate) unsafe fn poll<T: Driver>(
    cq: &super::cq::Cq<T>,
    num: c_int,
    wc: *mut bindings::ib_wc,
) -> Result<c_int> {
    let mut sink = WcSink::<T> {
        wc,
        cap: usize::try_from(num).unwrap_or(0),
        len: 0,
        _p: PhantomData,
    };
    T::poll_cq(cq, &mut sink)?;
    // CAST: At most `num`.
    Ok(sink.len as c_int)
}

#[macros::kunit_tests(rust_rdma_wr)]
mod tests {
    use super::{SendFlag, SendFlags, WrOpcode};

    #[test]
    fn wr_opcodes_round_trip_and_unknown_ones_are_refused() {
        let mut known = 0;
        for raw in 0..=u8::MAX {
            let raw = u32::from(raw);
            if let Some(op) = WrOpcode::from_raw(raw) {
                assert_eq!(op as u32, raw);
                known += 1;
            }
        }
        assert_eq!(known, 18);
        assert_eq!(WrOpcode::from_raw(2), Some(WrOpcode::Send));
        assert_eq!(WrOpcode::from_raw(0x20), Some(WrOpcode::RegMr));
        // The driver-private range and the holes around it.
        for raw in [16, 31, 34, 240, 249, 0x1_0002] {
            assert_eq!(WrOpcode::from_raw(raw), None);
        }
    }

    #[test]
    fn send_flags_test_each_bit() {
        let f = SendFlags::from_raw(SendFlag::Signaled as u32 | SendFlag::Inline as u32);
        assert!(f.contains(SendFlag::Signaled) && f.contains(SendFlag::Inline));
        assert!(!f.contains(SendFlag::Solicited) && !f.contains(SendFlag::Fence));
        assert_eq!(SendFlag::Signaled as u32, 2);
        // A bit the enum does not name is kept, and tests as set.
        assert_eq!(u32::from(SendFlags::from_raw(1 << 4)), 1 << 4);
    }
}
