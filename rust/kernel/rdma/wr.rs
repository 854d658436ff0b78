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

/// One buffer of a kernel work request: a kernel virtual address and a length.
#[derive(Clone, Copy, Debug)]
struct KernelSge {
    addr: usize,
    len: usize,
}

/// Reads a WR's SGE list, accepting only the PD's `local_dma_lkey`.
///
/// # Safety
///
/// `sg_list` points to `num_sge` valid SGEs (or `num_sge` is 0).
unsafe fn sges(
    sg_list: *const bindings::ib_sge,
    num_sge: c_int,
    lkey: u32,
) -> Result<KVec<KernelSge>> {
    let n = usize::try_from(num_sge).map_err(|_| EINVAL)?;
    let mut out = KVec::with_capacity(n, GFP_ATOMIC)?;
    for i in 0..n {
        // SAFETY: `i < n == num_sge` and `sg_list` points to `num_sge` valid SGEs (this
        // function's `# Safety`), so `sg_list.add(i)` is in bounds and readable.
        let sge = unsafe { &*sg_list.add(i) };
        if sge.lkey != lkey {
            return Err(EINVAL);
        }
        let addr = usize::try_from(sge.addr).map_err(|_| EINVAL)?;
        let len = sge.length as usize;
        addr.checked_add(len).ok_or(EINVAL)?;
        out.push(KernelSge { addr, len }, GFP_ATOMIC)?;
    }
    Ok(out)
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

/// A send work request of a kernel consumer.
pub struct SendWr<'a, T: Driver> {
    /// Returned in the completion (for most consumers, a `struct ib_cqe` pointer).
    pub wr_id: u64,
    /// What it asks for.
    pub opcode: WrOpcode,
    /// How it completes and is sent.
    pub send_flags: SendFlags,
    /// Immediate data as the wire carries it.
    pub imm: u32,
    /// For UD and GSI QPs.
    pub ud: Option<UdDest<'a, T>>,
    sges: KVec<KernelSge>,
}

impl<T: Driver> SendWr<'_, T> {
    /// Bytes the SGEs hold.
    pub fn len(&self) -> usize {
        self.sges.iter().map(|s| s.len).sum()
    }

    /// Whether the WR carries no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the WR's data into `out`, which must be [`Self::len`] bytes.
    pub fn gather(&self, out: &mut [u8]) -> Result {
        if out.len() != self.len() {
            return Err(EINVAL);
        }
        let mut at = 0;
        for s in self.sges.iter() {
            // SAFETY: A `local_dma_lkey` SGE of a posted WR: the consumer's kernel memory,
            // mapped and not written by it until the WR completes (module doc).
            let src = unsafe { core::slice::from_raw_parts(s.addr as *const u8, s.len) };
            out[at..at + s.len].copy_from_slice(src);
            at += s.len;
        }
        Ok(())
    }
}

/// The buffers of a kernel consumer's receive WR, for the data that completes it.
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
        // SAFETY: A valid list node; for UD and GSI QPs the node is the `wr` of an `ib_ud_wr`.
        let res = unsafe {
            let w = &*wr;
            // An opcode the core does not define is the consumer's mistake.
            let opcode = WrOpcode::from_raw(w.opcode).ok_or(EINVAL);
            opcode.and_then(|opcode| {
                let sges = sges(w.sg_list, w.num_sge, lkey)?;
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
                let send = SendWr {
                    wr_id: w.__bindgen_anon_1.wr_id,
                    opcode,
                    // CAST: A bit mask.
                    send_flags: SendFlags::from_raw(w.send_flags as u32),
                    imm: w.ex.imm_data,
                    ud: dest,
                    sges,
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
            sges(w.sg_list, w.num_sge, lkey).and_then(|sges| {
                T::post_recv(
                    qp,
                    RecvBuf {
                        wr_id: w.__bindgen_anon_1.wr_id,
                        sges,
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
