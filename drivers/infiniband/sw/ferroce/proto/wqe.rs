// SPDX-License-Identifier: GPL-2.0

//! The fields ferroce reads from rxe work queue entries and writes into completion entries,
//! at their offsets in rdma-core's rxe ABI (`rdma_user_rxe.h`, `struct ib_uverbs_wc`).
//!
//! WQEs come from user memory: the decoders take whatever bytes are there and only map them to
//! values; nothing here trusts them.

/// Size of `struct ib_uverbs_wc`.
pub(crate) const UVERBS_WC_SIZE: usize = 48;

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
    Recv = 1 << 7,
}

impl WcOpcode {
    /// The completion opcode of a send WR opcode (`IB_UVERBS_WR_*`); `None` if unknown.
    pub(crate) const fn for_send_wr(wr_opcode: u32) -> Option<Self> {
        Some(match wr_opcode {
            0 | 1 => Self::RdmaWrite,
            2 | 3 | 9 => Self::Send,
            4 | 11 => Self::RdmaRead,
            5 | 12 => Self::CompSwap,
            6 | 13 => Self::FetchAdd,
            7 => Self::LocalInv,
            8 => Self::BindMw,
            10 => Self::Tso,
            14 => Self::Flush,
            15 => Self::AtomicWrite,
            _ => return None,
        })
    }
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
    pub(crate) port_num: u8,
}

impl Completion {
    /// A flush-error completion of a WR of `qp_num`.
    pub(crate) const fn flushed(wr_id: u64, opcode: WcOpcode, qp_num: u32) -> Self {
        Self {
            wr_id,
            status: WcStatus::WrFlushErr,
            opcode,
            byte_len: 0,
            qp_num,
            src_qp: 0,
            wc_flags: 0,
            port_num: 1,
        }
    }

    /// The 48 bytes user space reads.
    pub(crate) fn encode(&self) -> [u8; UVERBS_WC_SIZE] {
        let mut b = [0u8; UVERBS_WC_SIZE];
        b[0..8].copy_from_slice(&self.wr_id.to_ne_bytes());
        b[8..12].copy_from_slice(&(self.status as u32).to_ne_bytes());
        b[12..16].copy_from_slice(&(self.opcode as u32).to_ne_bytes());
        b[20..24].copy_from_slice(&self.byte_len.to_ne_bytes());
        b[28..32].copy_from_slice(&self.qp_num.to_ne_bytes());
        b[32..36].copy_from_slice(&self.src_qp.to_ne_bytes());
        b[36..40].copy_from_slice(&self.wc_flags.to_ne_bytes());
        b[46] = self.port_num;
        b
    }
}

/// Bytes of a send WQE that [`SendWqe::decode`] reads (`wr_id`, `opcode`, `send_flags`).
pub(crate) const SEND_WQE_PREFIX: usize = 20;

/// The start of a `struct rxe_send_wqe` (its `struct rxe_send_wr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendWqe {
    pub(crate) wr_id: u64,
    pub(crate) opcode: u32,
    pub(crate) send_flags: u32,
}

impl SendWqe {
    pub(crate) fn decode(b: &[u8; SEND_WQE_PREFIX]) -> Self {
        let u32_at = |o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let mut id = [0u8; 8];
        id.copy_from_slice(&b[0..8]);
        Self {
            wr_id: u64::from_ne_bytes(id),
            opcode: u32_at(12),
            send_flags: u32_at(16),
        }
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
            port_num: 1,
        };
        let b = c.encode();
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
        let mut b = [0u8; SEND_WQE_PREFIX];
        b[0..8].copy_from_slice(&42u64.to_ne_bytes());
        b[12..16].copy_from_slice(&3u32.to_ne_bytes());
        b[16..20].copy_from_slice(&2u32.to_ne_bytes());
        let w = SendWqe::decode(&b);
        assert_eq!((w.wr_id, w.opcode, w.send_flags), (42, 3, 2));
        assert_eq!(WcOpcode::for_send_wr(3), Some(WcOpcode::Send));
        assert_eq!(WcOpcode::for_send_wr(0), Some(WcOpcode::RdmaWrite));
        assert_eq!(WcOpcode::for_send_wr(4), Some(WcOpcode::RdmaRead));
        assert_eq!(WcOpcode::for_send_wr(16), None);
        assert_eq!(WcOpcode::for_send_wr(u32::MAX), None);
        assert_eq!(recv_wr_id(&9u64.to_ne_bytes()), 9);
    }
}
