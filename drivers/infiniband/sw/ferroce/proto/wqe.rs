// SPDX-License-Identifier: GPL-2.0

//! The fields ferroce reads from rxe work queue entries and writes into completion entries,
//! at their offsets in rdma-core's rxe ABI (`rdma_user_rxe.h`, `struct ib_uverbs_wc`).
//!
//! WQEs come from user memory: the decoders take whatever bytes are there and only map them to
//! values; nothing here trusts them.

/// Size of `struct ib_uverbs_wc`.
pub(crate) const UVERBS_WC_SIZE: usize = 48;

/// Offsets in `struct ib_uverbs_wc`.
pub(crate) mod wc_off {
    pub(crate) const WR_ID: usize = 0;
    pub(crate) const STATUS: usize = 8;
    pub(crate) const OPCODE: usize = 12;
    pub(crate) const BYTE_LEN: usize = 20;
    pub(crate) const IMM_DATA: usize = 24;
    pub(crate) const QP_NUM: usize = 28;
    pub(crate) const SRC_QP: usize = 32;
    pub(crate) const WC_FLAGS: usize = 36;
    pub(crate) const PORT_NUM: usize = 46;
}

/// Completion status (`enum ib_wc_status`), the ones ferroce reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum WcStatus {
    /// Done.
    Success = 0,
    /// A length (message vs MTU or buffers) is wrong.
    LocLenErr = 1,
    /// The WR is not one this QP can do.
    LocQpOpErr = 2,
    /// An SGE names memory the QP may not use.
    LocProtErr = 4,
    /// The QP went to the error state before this WR ran.
    WrFlushErr = 5,
    /// A memory window bind the window, region or QP does not allow.
    MwBindErr = 6,
    /// The responder found the request invalid (NAK).
    RemInvReqErr = 9,
    /// The responder refused the remote key or range (NAK).
    RemAccessErr = 10,
    /// The responder failed the operation (NAK).
    RemOpErr = 11,
    /// No response within the timeout, `retry_cnt` times.
    RetryExcErr = 12,
    /// RNR NAKs beyond `rnr_retry`.
    RnrRetryExcErr = 13,
}

/// `IB_UVERBS_WC_*` opcodes, and `IB_WC_RECV` for receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum WcOpcode {
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    CompSwap = 3,
    FetchAdd = 4,
    BindMw = 5,
    LocalInv = 6,
    Tso = 7,
    Flush = 8,
    AtomicWrite = 9,
    /// `IB_WC_REG_MR`: kernel consumers only.
    RegMr = 10,
    Recv = 1 << 7,
    /// An RDMA WRITE with immediate consumed a receive WQE.
    RecvRdmaWithImm = (1 << 7) + 1,
}

/// Work request opcodes (`enum ib_uverbs_wr_opcode`; the kernel's `IB_WR_*` have the same
/// values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum WrOpcode {
    RdmaWrite = 0,
    RdmaWriteWithImm = 1,
    Send = 2,
    SendWithImm = 3,
    RdmaRead = 4,
    AtomicCmpAndSwp = 5,
    AtomicFetchAndAdd = 6,
    LocalInv = 7,
    BindMw = 8,
    SendWithInv = 9,
    Tso = 10,
    RdmaReadWithInv = 11,
    MaskedAtomicCmpAndSwp = 12,
    MaskedAtomicFetchAndAdd = 13,
    Flush = 14,
    AtomicWrite = 15,
    /// `IB_WR_REG_MR`: only kernel consumers post it (the user ABI has no such opcode).
    RegMr = 0x20,
}

impl WrOpcode {
    /// Every opcode of the user ABI, in value order.
    pub(crate) const ALL: [Self; 16] = [
        Self::RdmaWrite,
        Self::RdmaWriteWithImm,
        Self::Send,
        Self::SendWithImm,
        Self::RdmaRead,
        Self::AtomicCmpAndSwp,
        Self::AtomicFetchAndAdd,
        Self::LocalInv,
        Self::BindMw,
        Self::SendWithInv,
        Self::Tso,
        Self::RdmaReadWithInv,
        Self::MaskedAtomicCmpAndSwp,
        Self::MaskedAtomicFetchAndAdd,
        Self::Flush,
        Self::AtomicWrite,
    ];

    /// The opcode a WQE or WR names; `None` for a value no verb has.
    pub(crate) const fn from_raw(v: u32) -> Option<Self> {
        if v == Self::RegMr as u32 {
            Some(Self::RegMr)
        } else if (v as usize) < Self::ALL.len() {
            Some(Self::ALL[v as usize])
        } else {
            None
        }
    }

    /// The opcode its completion reports.
    pub(crate) const fn completion(self) -> WcOpcode {
        match self {
            Self::RdmaWrite | Self::RdmaWriteWithImm => WcOpcode::RdmaWrite,
            Self::Send | Self::SendWithImm | Self::SendWithInv => WcOpcode::Send,
            Self::RdmaRead | Self::RdmaReadWithInv => WcOpcode::RdmaRead,
            Self::AtomicCmpAndSwp | Self::MaskedAtomicCmpAndSwp => WcOpcode::CompSwap,
            Self::AtomicFetchAndAdd | Self::MaskedAtomicFetchAndAdd => WcOpcode::FetchAdd,
            Self::LocalInv => WcOpcode::LocalInv,
            Self::BindMw => WcOpcode::BindMw,
            Self::Tso => WcOpcode::Tso,
            Self::Flush => WcOpcode::Flush,
            Self::AtomicWrite => WcOpcode::AtomicWrite,
            Self::RegMr => WcOpcode::RegMr,
        }
    }
}

/// `IB_ACCESS_*` / `IB_UVERBS_ACCESS_*` bits of a region or a QP.
pub(crate) mod access {
    pub(crate) const LOCAL_WRITE: u32 = 1 << 0;
    pub(crate) const REMOTE_WRITE: u32 = 1 << 1;
    pub(crate) const REMOTE_READ: u32 = 1 << 2;
    pub(crate) const REMOTE_ATOMIC: u32 = 1 << 3;
    /// Any access a peer may have.
    pub(crate) const REMOTE: u32 = REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC;
    /// Memory windows may be bound to the region.
    pub(crate) const MW_BIND: u32 = 1 << 4;
    /// FLUSH for global visibility may name the region.
    pub(crate) const FLUSH_GLOBAL: u32 = 1 << 8;
    /// FLUSH for persistence may name the region.
    pub(crate) const FLUSH_PERSISTENT: u32 = 1 << 9;
    /// Either FLUSH right.
    pub(crate) const FLUSH: u32 = FLUSH_GLOBAL | FLUSH_PERSISTENT;
}

/// `IB_FLUSH_*` placement types a FLUSH asks for.
pub(crate) mod placement {
    pub(crate) const GLOBAL: u8 = 1 << 0;
    pub(crate) const PERSISTENT: u8 = 1 << 1;
}

/// `IB_FLUSH_RANGE`, `IB_FLUSH_MR`: what a FLUSH names.
pub(crate) mod selectivity {
    pub(crate) const RANGE: u8 = 0;
    pub(crate) const REGION: u8 = 1;
}

/// A completion, encoded as `struct ib_uverbs_wc` in host byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Completion {
    pub(crate) wr_id: u64,
    pub(crate) status: WcStatus,
    pub(crate) opcode: WcOpcode,
    pub(crate) byte_len: u32,
    pub(crate) qp_num: u32,
    pub(crate) src_qp: u32,
    pub(crate) wc_flags: u32,
    /// Immediate data as the wire carries it (`__be32`, delivered as is).
    pub(crate) imm_data: u32,
    pub(crate) port_num: u8,
    /// For kernel consumers: the received packet's `RDMA_NETWORK_*`, 0 if none. Not in the
    /// user ABI.
    pub(crate) net_type: u8,
}

/// `IB_WC_GRH`: the buffer starts with the 40-byte GRH (or an IPv4 header in its last 20).
pub(crate) const WC_GRH: u32 = 1;
/// `IB_WC_WITH_IMM`.
pub(crate) const WC_WITH_IMM: u32 = 2;
/// `IBV_WC_WITH_INV`: a SEND with invalidate; `imm_data` holds the invalidated key. The
/// kernel's `IB_WC_WITH_INVALIDATE` is another bit, which only kernel consumers see.
pub(crate) const WC_WITH_INV: u32 = 1 << 3;

impl Completion {
    /// A flush-error completion of a WR of `qp_num`.
    pub(crate) const fn flushed(wr_id: u64, opcode: WcOpcode, qp_num: u32) -> Self {
        Self::of_send_queue(wr_id, WcStatus::WrFlushErr, opcode, qp_num)
    }

    /// A completion that carries no received data: a send-queue WR's, or a flushed one.
    pub(crate) const fn of_send_queue(
        wr_id: u64,
        status: WcStatus,
        opcode: WcOpcode,
        qp_num: u32,
    ) -> Self {
        Self {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            qp_num,
            src_qp: 0,
            wc_flags: 0,
            imm_data: 0,
            port_num: 1,
            net_type: 0,
        }
    }

    /// The 48 bytes user space reads.
    pub(crate) fn encode(&self) -> [u8; UVERBS_WC_SIZE] {
        let mut b = [0u8; UVERBS_WC_SIZE];
        let mut put = |at: usize, v: [u8; 4]| b[at..at + 4].copy_from_slice(&v);
        put(wc_off::STATUS, (self.status as u32).to_ne_bytes());
        put(wc_off::OPCODE, (self.opcode as u32).to_ne_bytes());
        put(wc_off::BYTE_LEN, self.byte_len.to_ne_bytes());
        put(wc_off::IMM_DATA, self.imm_data.to_be_bytes());
        put(wc_off::QP_NUM, self.qp_num.to_ne_bytes());
        put(wc_off::SRC_QP, self.src_qp.to_ne_bytes());
        put(wc_off::WC_FLAGS, self.wc_flags.to_ne_bytes());
        b[wc_off::WR_ID..wc_off::WR_ID + 8].copy_from_slice(&self.wr_id.to_ne_bytes());
        b[wc_off::PORT_NUM] = self.port_num;
        b
    }
}

/// Bytes of a send WQE before its SGEs or inline data (`struct rxe_send_wqe`).
pub(crate) const SEND_WQE_HEADER: usize = 208;
/// Bytes of a send WQE that hold `wr_id`, `opcode` and `send_flags`.
pub(crate) const SEND_WQE_PREFIX: usize = 20;
/// Size of `struct rxe_sge`.
pub(crate) const SGE_SIZE: usize = 16;

/// Field offsets in `struct rxe_sge`.
pub(crate) mod sge_off {
    pub(crate) const ADDR: usize = 0;
    pub(crate) const LENGTH: usize = 8;
    pub(crate) const LKEY: usize = 12;
}

/// Offsets in `struct rxe_send_wqe` and its `struct rxe_av` (x86-64 layout).
pub(crate) mod off {
    pub(crate) const WR_ID: usize = 0;
    pub(crate) const OPCODE: usize = 12;
    pub(crate) const SEND_FLAGS: usize = 16;
    pub(crate) const IMM: usize = 20;
    pub(crate) const RDMA_REMOTE_ADDR: usize = 24;
    pub(crate) const RDMA_RKEY: usize = 32;
    pub(crate) const ATOMIC_REMOTE_ADDR: usize = 24;
    pub(crate) const ATOMIC_COMPARE_ADD: usize = 32;
    pub(crate) const ATOMIC_SWAP: usize = 40;
    pub(crate) const ATOMIC_RKEY: usize = 48;
    pub(crate) const MW_ADDR: usize = 24;
    pub(crate) const MW_LENGTH: usize = 32;
    pub(crate) const MW_MR_LKEY: usize = 40;
    pub(crate) const MW_MW_RKEY: usize = 44;
    pub(crate) const MW_RKEY: usize = 48;
    pub(crate) const MW_ACCESS: usize = 52;
    pub(crate) const FLUSH_REMOTE_ADDR: usize = 24;
    pub(crate) const FLUSH_RKEY: usize = 36;
    pub(crate) const FLUSH_TYPE: usize = 40;
    pub(crate) const FLUSH_LEVEL: usize = 41;
    pub(crate) const UD_REMOTE_QPN: usize = 24;
    pub(crate) const UD_REMOTE_QKEY: usize = 28;
    pub(crate) const UD_AH_NUM: usize = 36;
    pub(crate) const UD_AV: usize = 56;
    pub(crate) const AV_NETWORK_TYPE: usize = 1;
    pub(crate) const AV_FLOW_LABEL: usize = 8 + 16;
    pub(crate) const AV_HOP_LIMIT: usize = 8 + 21;
    pub(crate) const AV_TCLASS: usize = 8 + 22;
    pub(crate) const AV_SADDR4: usize = 32 + 4;
    pub(crate) const AV_DADDR4: usize = 60 + 4;
    pub(crate) const AV_SADDR6: usize = 32 + 8;
    pub(crate) const AV_DADDR6: usize = 60 + 8;
    /// `IB_WR_REG_MR`'s fields, which only kernel WQEs carry (a layout of ferroce's own, in the
    /// union user WQEs use for `wr.rdma` and the others).
    pub(crate) const REG_IOVA: usize = 24;
    pub(crate) const REG_LENGTH: usize = 32;
    pub(crate) const REG_KEY: usize = 40;
    pub(crate) const REG_ACCESS: usize = 44;
    pub(crate) const REG_PAGE_SHIFT: usize = 48;
    pub(crate) const DMA_LENGTH: usize = 184;
    pub(crate) const DMA_NUM_SGE: usize = 196;
}

fn bytes<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b.get(at..)
        .and_then(|s| s.first_chunk::<N>())
        .copied()
        .unwrap_or([0; N])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(bytes(b, at))
}

/// `IB_SEND_*` flags (rdma-core's `IBV_SEND_*` have the same values).
pub(crate) const SEND_FENCE: u32 = 1;
pub(crate) const SEND_SIGNALED: u32 = 2;
pub(crate) const SEND_SOLICITED: u32 = 4;
pub(crate) const SEND_INLINE: u32 = 8;
/// `RXE_NETWORK_TYPE_IPV4`.
pub(crate) const NETWORK_IPV4: u8 = 1;
/// `RXE_NETWORK_TYPE_IPV6`.
pub(crate) const NETWORK_IPV6: u8 = 2;

/// A scatter/gather entry (`struct rxe_sge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sge {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) lkey: u32,
}

/// A send WQE, read from a private copy of its slot. Any bytes decode to some value; bytes
/// beyond the copy read as zero.
pub(crate) struct SendWqe<'a>(&'a [u8]);

impl<'a> SendWqe<'a> {
    pub(crate) fn new(slot: &'a [u8]) -> Self {
        Self(slot)
    }

    pub(crate) fn wr_id(&self) -> u64 {
        u64::from_ne_bytes(bytes(self.0, off::WR_ID))
    }

    /// The WQE's opcode; `None` if its bytes name none.
    pub(crate) fn opcode(&self) -> Option<WrOpcode> {
        WrOpcode::from_raw(u32_at(self.0, off::OPCODE))
    }

    /// `IB_SEND_*`.
    pub(crate) fn send_flags(&self) -> u32 {
        u32_at(self.0, off::SEND_FLAGS)
    }

    /// The immediate data, as the big-endian value on the wire.
    pub(crate) fn imm(&self) -> u32 {
        u32::from_be_bytes(bytes(self.0, off::IMM))
    }

    /// The remote address of an RDMA WRITE or READ.
    pub(crate) fn rdma_remote_addr(&self) -> u64 {
        u64::from_ne_bytes(bytes(self.0, off::RDMA_REMOTE_ADDR))
    }

    /// The remote key of an RDMA WRITE or READ.
    pub(crate) fn rdma_rkey(&self) -> u32 {
        u32_at(self.0, off::RDMA_RKEY)
    }

    /// The remote address of an atomic's 8-byte word.
    pub(crate) fn atomic_remote_addr(&self) -> u64 {
        u64::from_ne_bytes(bytes(self.0, off::ATOMIC_REMOTE_ADDR))
    }

    /// What a compare and swap compares with, or what a fetch and add adds.
    pub(crate) fn atomic_compare_add(&self) -> u64 {
        u64::from_ne_bytes(bytes(self.0, off::ATOMIC_COMPARE_ADD))
    }

    /// What a compare and swap swaps in.
    pub(crate) fn atomic_swap(&self) -> u64 {
        u64::from_ne_bytes(bytes(self.0, off::ATOMIC_SWAP))
    }

    /// The remote key of an atomic.
    pub(crate) fn atomic_rkey(&self) -> u32 {
        u32_at(self.0, off::ATOMIC_RKEY)
    }

    pub(crate) fn ud_remote_qpn(&self) -> u32 {
        u32_at(self.0, off::UD_REMOTE_QPN) & 0xff_ffff
    }

    pub(crate) fn ud_remote_qkey(&self) -> u32 {
        u32_at(self.0, off::UD_REMOTE_QKEY)
    }

    /// The AH a UD WQE names; 0 if it carries its own address vector.
    pub(crate) fn ud_ah_num(&self) -> u32 {
        u32_at(self.0, off::UD_AH_NUM)
    }

    /// The address vector of a UD WQE.
    pub(crate) fn ud_av(&self) -> Av<'a> {
        Av(self.0.get(off::UD_AV..).unwrap_or(&[]))
    }

    /// The message length.
    pub(crate) fn length(&self) -> u32 {
        u32_at(self.0, off::DMA_LENGTH)
    }

    pub(crate) fn num_sge(&self) -> u32 {
        u32_at(self.0, off::DMA_NUM_SGE)
    }

    /// SGE `i`, if the copy holds it.
    pub(crate) fn sge(&self, i: usize) -> Option<Sge> {
        sge_at(self.0, SEND_WQE_HEADER, i)
    }

    /// The first `len` bytes of inline data, if the copy holds them.
    pub(crate) fn inline_data(&self, len: usize) -> Option<&'a [u8]> {
        self.0
            .get(SEND_WQE_HEADER..SEND_WQE_HEADER.checked_add(len)?)
    }

    /// The key a LOCAL_INV or SEND_WITH_INV invalidates (`ex.invalidate_rkey`, host order).
    pub(crate) fn invalidate_rkey(&self) -> u32 {
        u32_at(self.0, off::IMM)
    }

    /// What a BIND_MW WQE asks (`wr.mw`).
    pub(crate) fn bind_mw(&self) -> BindMw {
        BindMw {
            addr: u64::from_ne_bytes(bytes(self.0, off::MW_ADDR)),
            len: u64::from_ne_bytes(bytes(self.0, off::MW_LENGTH)),
            mr_lkey: u32_at(self.0, off::MW_MR_LKEY),
            mw_rkey: u32_at(self.0, off::MW_MW_RKEY),
            new_rkey: u32_at(self.0, off::MW_RKEY),
            access: u32_at(self.0, off::MW_ACCESS),
        }
    }

    /// What a REG_MR WQE asks (see [`off::REG_IOVA`]).
    pub(crate) fn reg_mr(&self) -> RegMr {
        RegMr {
            iova: u64::from_ne_bytes(bytes(self.0, off::REG_IOVA)),
            length: u64::from_ne_bytes(bytes(self.0, off::REG_LENGTH)),
            key: u32_at(self.0, off::REG_KEY),
            access: u32_at(self.0, off::REG_ACCESS),
            page_shift: u32_at(self.0, off::REG_PAGE_SHIFT),
        }
    }

    /// What a FLUSH asks for (`wr.flush`; its length is the WQE's `dma.length`, where
    /// rdma-core's provider and C rxe keep it: `wr.flush.length` is never set).
    pub(crate) fn flush(&self) -> FlushWr {
        let byte = |at: usize| self.0.get(at).copied().unwrap_or(0);
        FlushWr {
            va: u64::from_ne_bytes(bytes(self.0, off::FLUSH_REMOTE_ADDR)),
            len: self.length(),
            rkey: u32_at(self.0, off::FLUSH_RKEY),
            placement: byte(off::FLUSH_TYPE),
            selectivity: byte(off::FLUSH_LEVEL),
        }
    }

    /// The 8 bytes an ATOMIC WRITE stores, as the process wrote them (`dma.atomic_wr`, where
    /// inline data goes); `None` if the slot is too short to hold them.
    pub(crate) fn atomic_write_value(&self) -> Option<[u8; 8]> {
        self.inline_data(8)?.try_into().ok()
    }
}

/// A fast registration (`struct ib_reg_wr`, with its region's mapping): the key the region
/// takes, its rights, and the range the pages mapped into it hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegMr {
    pub(crate) iova: u64,
    pub(crate) length: u64,
    pub(crate) key: u32,
    pub(crate) access: u32,
    /// log2 of the page size the consumer mapped with.
    pub(crate) page_shift: u32,
}

/// A FLUSH (`struct rxe_send_wr`'s `wr.flush`): the peer's range (or, by `selectivity`, its
/// whole region) and what placement to make of the writes before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FlushWr {
    pub(crate) va: u64,
    pub(crate) len: u32,
    pub(crate) rkey: u32,
    /// `IB_FLUSH_GLOBAL` and `IB_FLUSH_PERSISTENT` bits.
    pub(crate) placement: u8,
    /// `IB_FLUSH_RANGE` (0) or `IB_FLUSH_MR` (1).
    pub(crate) selectivity: u8,
}

/// A memory window bind (`struct rxe_send_wr`'s `wr.mw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BindMw {
    /// Where the window starts, as an address of the region.
    pub(crate) addr: u64,
    /// Its length; 0 unbinds a type 1 window.
    pub(crate) len: u64,
    /// The region's local key.
    pub(crate) mr_lkey: u32,
    /// The window's key now.
    pub(crate) mw_rkey: u32,
    /// Its key once bound: the low 8 bits are the consumer's.
    pub(crate) new_rkey: u32,
    /// `IB_ACCESS_*` rights it grants.
    pub(crate) access: u32,
}

/// A UD address vector (`struct rxe_av`).
pub(crate) struct Av<'a>(&'a [u8]);

impl Av<'_> {
    /// `RXE_NETWORK_TYPE_*`.
    pub(crate) fn network_type(&self) -> u8 {
        bytes::<1>(self.0, off::AV_NETWORK_TYPE)[0]
    }

    pub(crate) fn flow_label(&self) -> u32 {
        u32_at(self.0, off::AV_FLOW_LABEL) & 0xf_ffff
    }

    pub(crate) fn hop_limit(&self) -> u8 {
        bytes::<1>(self.0, off::AV_HOP_LIMIT)[0]
    }

    pub(crate) fn traffic_class(&self) -> u8 {
        bytes::<1>(self.0, off::AV_TCLASS)[0]
    }

    /// Source and destination IPv4 addresses (from the `sockaddr_in`s).
    pub(crate) fn ipv4(&self) -> ([u8; 4], [u8; 4]) {
        (bytes(self.0, off::AV_SADDR4), bytes(self.0, off::AV_DADDR4))
    }

    /// Source and destination IPv6 addresses (from the `sockaddr_in6`s).
    pub(crate) fn ipv6(&self) -> ([u8; 16], [u8; 16]) {
        (bytes(self.0, off::AV_SADDR6), bytes(self.0, off::AV_DADDR6))
    }
}

/// SGE `i` of an SGE array that starts at `base`, if `wqe` holds it.
fn sge_at(wqe: &[u8], base: usize, i: usize) -> Option<Sge> {
    let at = i.checked_mul(SGE_SIZE)?.checked_add(base)?;
    let b: [u8; SGE_SIZE] = *wqe.get(at..)?.first_chunk()?;
    Some(Sge {
        addr: u64::from_ne_bytes(bytes(&b, sge_off::ADDR)),
        len: u32_at(&b, sge_off::LENGTH),
        lkey: u32_at(&b, sge_off::LKEY),
    })
}

/// Bytes of a receive WQE before its SGEs (`struct rxe_recv_wqe`).
pub(crate) const RECV_WQE_HEADER: usize = 40;
/// Offset of `dma.num_sge` in a receive WQE.
pub(crate) const RECV_NUM_SGE: usize = 28;

/// A receive WQE, read from a private copy of its slot; as for [`SendWqe`], any bytes decode.
pub(crate) struct RecvWqe<'a>(&'a [u8]);

impl<'a> RecvWqe<'a> {
    pub(crate) fn new(slot: &'a [u8]) -> Self {
        Self(slot)
    }

    pub(crate) fn wr_id(&self) -> u64 {
        u64::from_ne_bytes(bytes(self.0, 0))
    }

    pub(crate) fn num_sge(&self) -> u32 {
        u32_at(self.0, RECV_NUM_SGE)
    }

    /// SGE `i`, if the copy holds it.
    pub(crate) fn sge(&self, i: usize) -> Option<Sge> {
        sge_at(self.0, RECV_WQE_HEADER, i)
    }
}

/// Bytes of a receive WQE that hold its `wr_id`.
pub(crate) const RECV_WQE_PREFIX: usize = 8;

/// The `wr_id` of a `struct rxe_recv_wqe`.
pub(crate) fn recv_wr_id(b: &[u8; RECV_WQE_PREFIX]) -> u64 {
    u64::from_ne_bytes(*b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_layout_matches_ib_uverbs_wc() {
        let c = Completion {
            wr_id: 0x1122_3344_5566_7788,
            status: WcStatus::WrFlushErr,
            opcode: WcOpcode::Recv,
            byte_len: 0x100,
            qp_num: 0x12_3456,
            src_qp: 7,
            wc_flags: 2,
            imm_data: 0xcafe_f00d,
            port_num: 1,
            net_type: 2,
        };
        let b = c.encode();
        assert_eq!(&b[24..28], &[0xca, 0xfe, 0xf0, 0x0d]);
        assert_eq!(&b[0..8], &0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(&b[8..12], &5u32.to_ne_bytes());
        assert_eq!(&b[12..16], &128u32.to_ne_bytes());
        assert_eq!(&b[16..20], &[0; 4]);
        assert_eq!(&b[20..24], &0x100u32.to_ne_bytes());
        assert_eq!(&b[28..32], &0x12_3456u32.to_ne_bytes());
        assert_eq!(&b[32..36], &7u32.to_ne_bytes());
        assert_eq!(&b[36..40], &2u32.to_ne_bytes());
        assert_eq!(b[46], 1);
    }

    #[test]
    fn send_wqe_fields_and_opcodes() {
        let mut b = [0u8; SEND_WQE_HEADER + 2 * SGE_SIZE];
        b[0..8].copy_from_slice(&42u64.to_ne_bytes());
        b[12..16].copy_from_slice(&3u32.to_ne_bytes());
        b[16..20].copy_from_slice(&2u32.to_ne_bytes());
        b[20..24].copy_from_slice(&[0xca, 0xfe, 0xf0, 0x0d]);
        b[24..28].copy_from_slice(&0xff12_3456u32.to_ne_bytes());
        b[28..32].copy_from_slice(&0x2222u32.to_ne_bytes());
        // The address vector: IPv4, flow label, hop limit, traffic class, addresses.
        b[56 + 1] = NETWORK_IPV4;
        b[56 + 24..56 + 28].copy_from_slice(&0xabcdeu32.to_ne_bytes());
        b[56 + 29] = 7;
        b[56 + 30] = 0x20;
        b[56 + 36..56 + 40].copy_from_slice(&[10, 0, 0, 1]);
        b[56 + 64..56 + 68].copy_from_slice(&[10, 0, 0, 2]);
        b[184..188].copy_from_slice(&200u32.to_ne_bytes());
        b[196..200].copy_from_slice(&2u32.to_ne_bytes());
        b[224..232].copy_from_slice(&0x1000u64.to_ne_bytes());
        b[232..236].copy_from_slice(&100u32.to_ne_bytes());
        b[236..240].copy_from_slice(&0x105u32.to_ne_bytes());
        let w = SendWqe::new(&b);
        assert_eq!(
            (w.wr_id(), w.opcode(), w.send_flags()),
            (42, Some(WrOpcode::SendWithImm), 2)
        );
        assert_eq!(w.imm(), 0xcafe_f00d);
        assert_eq!((w.ud_remote_qpn(), w.ud_remote_qkey()), (0x12_3456, 0x2222));
        // The RDMA fields share the union with the UD ones.
        assert_eq!(w.rdma_remote_addr(), 0x2222_ff12_3456);
        assert_eq!(w.rdma_rkey(), 0);
        assert_eq!(w.ud_ah_num(), 0);
        b[36..40].copy_from_slice(&9u32.to_ne_bytes());
        assert_eq!(SendWqe::new(&b).ud_ah_num(), 9);
        let w = SendWqe::new(&b);
        let av = w.ud_av();
        assert_eq!(av.network_type(), NETWORK_IPV4);
        assert_eq!(
            (av.flow_label(), av.hop_limit(), av.traffic_class()),
            (0xabcde, 7, 0x20)
        );
        assert_eq!(av.ipv4(), ([10, 0, 0, 1], [10, 0, 0, 2]));
        // sin6_addr follows family, port and flow info in each `sockaddr_in6`.
        let mut b6 = b;
        b6[56 + 40] = 0xfd;
        b6[56 + 55] = 1;
        b6[56 + 68] = 0xfd;
        b6[56 + 83] = 2;
        let (s6, d6) = SendWqe::new(&b6).ud_av().ipv6();
        assert_eq!((s6[0], s6[15], d6[0], d6[15]), (0xfd, 1, 0xfd, 2));
        assert_eq!((w.length(), w.num_sge()), (200, 2));
        assert_eq!(
            w.sge(1),
            Some(Sge {
                addr: 0x1000,
                len: 100,
                lkey: 0x105
            })
        );
        assert_eq!(w.sge(2), None);
        assert_eq!(w.inline_data(4), Some(&b[208..212]));
        // An ATOMIC WRITE's 8 bytes sit where inline data does; a slot without them has none.
        let word: [u8; 8] = b[208..216].try_into().unwrap();
        assert_eq!(w.atomic_write_value(), Some(word));
        assert_eq!(SendWqe::new(&b[..215]).atomic_write_value(), None);
        // A FLUSH's fields share the union with an RDMA WRITE's address.
        let mut f = b.clone();
        f[32..36].copy_from_slice(&1u32.to_ne_bytes());
        f[36..40].copy_from_slice(&0x77u32.to_ne_bytes());
        f[40] = 1;
        f[41] = 1;
        let fl = SendWqe::new(&f).flush();
        assert_eq!(
            (fl.va, fl.len, fl.rkey, fl.placement, fl.selectivity),
            (SendWqe::new(&f).rdma_remote_addr(), 200, 0x77, 1, 1)
        );
        assert_eq!(SendWqe::new(&f[..40]).flush().placement, 0);
        // A short copy decodes as zeros, never out of bounds.
        let short = SendWqe::new(&b[..10]);
        assert_eq!(
            (short.opcode(), short.length(), short.sge(0)),
            (Some(WrOpcode::RdmaWrite), 0, None)
        );
        assert_eq!(
            WrOpcode::from_raw(3).map(WrOpcode::completion),
            Some(WcOpcode::Send)
        );
        assert_eq!(
            WrOpcode::from_raw(0).map(WrOpcode::completion),
            Some(WcOpcode::RdmaWrite)
        );
        assert_eq!(
            WrOpcode::from_raw(4).map(WrOpcode::completion),
            Some(WcOpcode::RdmaRead)
        );
        assert_eq!(WrOpcode::from_raw(16), None);
        assert_eq!(WrOpcode::from_raw(u32::MAX), None);
        for (i, op) in WrOpcode::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
        }
        assert_eq!(recv_wr_id(&9u64.to_ne_bytes()), 9);
    }

    #[test]
    fn recv_wqe_fields() {
        let mut b = [0u8; RECV_WQE_HEADER + 2 * SGE_SIZE];
        b[0..8].copy_from_slice(&77u64.to_ne_bytes());
        b[28..32].copy_from_slice(&2u32.to_ne_bytes());
        b[56..64].copy_from_slice(&0x2000u64.to_ne_bytes());
        b[64..68].copy_from_slice(&60u32.to_ne_bytes());
        b[68..72].copy_from_slice(&0x207u32.to_ne_bytes());
        let w = RecvWqe::new(&b);
        assert_eq!((w.wr_id(), w.num_sge()), (77, 2));
        assert_eq!(
            w.sge(1),
            Some(Sge {
                addr: 0x2000,
                len: 60,
                lkey: 0x207
            })
        );
        assert_eq!(w.sge(2), None);
        assert_eq!(RecvWqe::new(&b[..20]).num_sge(), 0);
    }
}
