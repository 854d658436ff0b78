// SPDX-License-Identifier: GPL-2.0

//! The rxe user ABI that `proto/` reads and writes by offset (it is also built on the host,
//! without kernel headers), checked here against `rdma_user_rxe.h` and `ib_user_verbs.h`: a
//! layout that drifts from the headers fails the build.

use crate::proto::{ring, wqe};
use core::mem::{offset_of, size_of};
use kernel::{
    rdma::{attr::Access, wr},
    uapi::{self, ib_uverbs_wc, rxe_av, rxe_queue_buf, rxe_recv_wqe, rxe_send_wqe, rxe_sge},
};
use wqe::{access, WcOpcode, WrOpcode};

/// Where a UD send WQE's address vector starts.
const AV: usize = offset_of!(rxe_send_wqe, wr.wr.ud.av);

const _: () = {
    use wqe::off;

    // struct rxe_send_wqe
    assert!(off::WR_ID == offset_of!(rxe_send_wqe, wr.wr_id));
    assert!(off::OPCODE == offset_of!(rxe_send_wqe, wr.opcode));
    assert!(off::SEND_FLAGS == offset_of!(rxe_send_wqe, wr.send_flags));
    assert!(off::IMM == offset_of!(rxe_send_wqe, wr.ex.imm_data));
    assert!(wqe::SEND_WQE_PREFIX == off::IMM);
    assert!(off::RDMA_REMOTE_ADDR == offset_of!(rxe_send_wqe, wr.wr.rdma.remote_addr));
    assert!(off::RDMA_RKEY == offset_of!(rxe_send_wqe, wr.wr.rdma.rkey));
    assert!(off::ATOMIC_REMOTE_ADDR == offset_of!(rxe_send_wqe, wr.wr.atomic.remote_addr));
    assert!(off::ATOMIC_COMPARE_ADD == offset_of!(rxe_send_wqe, wr.wr.atomic.compare_add));
    assert!(off::ATOMIC_SWAP == offset_of!(rxe_send_wqe, wr.wr.atomic.swap));
    assert!(off::ATOMIC_RKEY == offset_of!(rxe_send_wqe, wr.wr.atomic.rkey));
    assert!(off::MW_ADDR == offset_of!(rxe_send_wqe, wr.wr.mw.addr));
    assert!(off::MW_LENGTH == offset_of!(rxe_send_wqe, wr.wr.mw.length));
    assert!(off::MW_MR_LKEY == offset_of!(rxe_send_wqe, wr.wr.mw.mr_lkey));
    assert!(off::MW_MW_RKEY == offset_of!(rxe_send_wqe, wr.wr.mw.mw_rkey));
    assert!(off::MW_RKEY == offset_of!(rxe_send_wqe, wr.wr.mw.rkey));
    assert!(off::MW_ACCESS == offset_of!(rxe_send_wqe, wr.wr.mw.access));
    assert!(off::FLUSH_REMOTE_ADDR == offset_of!(rxe_send_wqe, wr.wr.flush.remote_addr));
    assert!(off::FLUSH_RKEY == offset_of!(rxe_send_wqe, wr.wr.flush.rkey));
    assert!(off::FLUSH_TYPE == offset_of!(rxe_send_wqe, wr.wr.flush.type_));
    assert!(off::FLUSH_LEVEL == offset_of!(rxe_send_wqe, wr.wr.flush.level));
    assert!(off::IMM == offset_of!(rxe_send_wqe, wr.ex.invalidate_rkey));
    // An ATOMIC WRITE's 8 bytes sit where inline data and SGEs start.
    assert!(wqe::SEND_WQE_HEADER == offset_of!(rxe_send_wqe, dma.__bindgen_anon_1));
    assert!(off::UD_REMOTE_QPN == offset_of!(rxe_send_wqe, wr.wr.ud.remote_qpn));
    assert!(off::UD_REMOTE_QKEY == offset_of!(rxe_send_wqe, wr.wr.ud.remote_qkey));
    assert!(off::UD_AH_NUM == offset_of!(rxe_send_wqe, wr.wr.ud.ah_num));
    assert!(off::UD_AV == AV);
    assert!(off::DMA_LENGTH == offset_of!(rxe_send_wqe, dma.length));
    assert!(off::DMA_NUM_SGE == offset_of!(rxe_send_wqe, dma.num_sge));
    // The SGEs (or inline data) follow the fixed part.
    assert!(wqe::SEND_WQE_HEADER == size_of::<rxe_send_wqe>());

    // struct rxe_av, within the WQE
    assert!(off::AV_NETWORK_TYPE == offset_of!(rxe_av, network_type));
    assert!(off::AV_FLOW_LABEL == offset_of!(rxe_av, grh.flow_label));
    assert!(off::AV_HOP_LIMIT == offset_of!(rxe_av, grh.hop_limit));
    assert!(off::AV_TCLASS == offset_of!(rxe_av, grh.traffic_class));
    assert!(off::AV_SADDR4 == offset_of!(rxe_av, sgid_addr._sockaddr_in.sin_addr));
    assert!(off::AV_DADDR4 == offset_of!(rxe_av, dgid_addr._sockaddr_in.sin_addr));
    assert!(off::AV_SADDR6 == offset_of!(rxe_av, sgid_addr._sockaddr_in6.sin6_addr));
    assert!(off::AV_DADDR6 == offset_of!(rxe_av, dgid_addr._sockaddr_in6.sin6_addr));

    // struct rxe_sge, struct rxe_recv_wqe
    assert!(wqe::SGE_SIZE == size_of::<rxe_sge>());
    assert!(wqe::sge_off::ADDR == offset_of!(rxe_sge, addr));
    assert!(wqe::sge_off::LENGTH == offset_of!(rxe_sge, length));
    assert!(wqe::sge_off::LKEY == offset_of!(rxe_sge, lkey));
    assert!(wqe::RECV_WQE_HEADER == size_of::<rxe_recv_wqe>());
    assert!(wqe::RECV_NUM_SGE == offset_of!(rxe_recv_wqe, dma.num_sge));
    assert!(wqe::RECV_WQE_PREFIX == size_of::<u64>() && offset_of!(rxe_recv_wqe, wr_id) == 0);

    // struct ib_uverbs_wc
    assert!(wqe::UVERBS_WC_SIZE == size_of::<ib_uverbs_wc>());
    assert!(wqe::wc_off::WR_ID == offset_of!(ib_uverbs_wc, wr_id));
    assert!(wqe::wc_off::STATUS == offset_of!(ib_uverbs_wc, status));
    assert!(wqe::wc_off::OPCODE == offset_of!(ib_uverbs_wc, opcode));
    assert!(wqe::wc_off::BYTE_LEN == offset_of!(ib_uverbs_wc, byte_len));
    assert!(wqe::wc_off::IMM_DATA == offset_of!(ib_uverbs_wc, ex.imm_data));
    assert!(wqe::wc_off::QP_NUM == offset_of!(ib_uverbs_wc, qp_num));
    assert!(wqe::wc_off::SRC_QP == offset_of!(ib_uverbs_wc, src_qp));
    assert!(wqe::wc_off::WC_FLAGS == offset_of!(ib_uverbs_wc, wc_flags));
    assert!(wqe::wc_off::PORT_NUM == offset_of!(ib_uverbs_wc, port_num));

    // struct rxe_queue_buf
    assert!(ring::LOG2_ELEM_SIZE_OFFSET == offset_of!(rxe_queue_buf, log2_elem_size));
    assert!(ring::INDEX_MASK_OFFSET == offset_of!(rxe_queue_buf, index_mask));
    assert!(ring::PRODUCER_OFFSET == offset_of!(rxe_queue_buf, producer_index));
    assert!(ring::CONSUMER_OFFSET == offset_of!(rxe_queue_buf, consumer_index));
    assert!(ring::HEADER_LEN == offset_of!(rxe_queue_buf, data));

    // Values
    assert!(
        access::LOCAL_WRITE as u64
            == uapi::ib_uverbs_access_flags_IB_UVERBS_ACCESS_LOCAL_WRITE as u64
    );
    assert!(
        access::REMOTE_WRITE as u64
            == uapi::ib_uverbs_access_flags_IB_UVERBS_ACCESS_REMOTE_WRITE as u64
    );
    assert!(
        access::REMOTE_READ as u64
            == uapi::ib_uverbs_access_flags_IB_UVERBS_ACCESS_REMOTE_READ as u64
    );
    assert!(
        access::REMOTE_ATOMIC as u64
            == uapi::ib_uverbs_access_flags_IB_UVERBS_ACCESS_REMOTE_ATOMIC as u64
    );
    // The MR table checks the same bits for user and kernel regions and QP rights.
    assert!(access::LOCAL_WRITE == Access::LocalWrite as u32);
    assert!(access::REMOTE_WRITE == Access::RemoteWrite as u32);
    assert!(access::REMOTE_READ == Access::RemoteRead as u32);
    assert!(access::REMOTE_ATOMIC == Access::RemoteAtomic as u32);
    assert!(access::MW_BIND == Access::MwBind as u32);
    assert!(
        access::FLUSH_GLOBAL as u64
            == uapi::ib_uverbs_access_flags_IB_UVERBS_ACCESS_FLUSH_GLOBAL as u64
    );
    assert!(
        access::FLUSH_PERSISTENT as u64
            == uapi::ib_uverbs_access_flags_IB_UVERBS_ACCESS_FLUSH_PERSISTENT as u64
    );
    assert!(access::FLUSH_GLOBAL == Access::FlushGlobal as u32);
    assert!(access::FLUSH_PERSISTENT == Access::FlushPersistent as u32);
    assert!(wqe::placement::GLOBAL as u64 == uapi::ib_placement_type_IB_FLUSH_GLOBAL as u64);
    assert!(
        wqe::placement::PERSISTENT as u64 == uapi::ib_placement_type_IB_FLUSH_PERSISTENT as u64
    );
    assert!(wqe::selectivity::RANGE as u64 == uapi::ib_selectivity_level_IB_FLUSH_RANGE as u64);
    assert!(wqe::selectivity::REGION as u64 == uapi::ib_selectivity_level_IB_FLUSH_MR as u64);
    // One per `enum ib_uverbs_wr_opcode` value, in order: ALL[i] is value i.
    let wr_opcodes = [
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE_WITH_IMM as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_IMM as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_CMP_AND_SWP as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_LOCAL_INV as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_BIND_MW as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_INV as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_TSO as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ_WITH_INV as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_MASKED_ATOMIC_CMP_AND_SWP as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_FLUSH as u64,
        uapi::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_WRITE as u64,
    ];
    assert!(wr_opcodes.len() == WrOpcode::ALL.len());
    let mut i = 0;
    while i < WrOpcode::ALL.len() {
        assert!(WrOpcode::ALL[i] as u64 == wr_opcodes[i]);
        i += 1;
    }
    // librxe writes IBV_SEND_* and reads IBV_WC_* flags, whose values are the kernel's.
    assert!(wqe::SEND_SIGNALED == wr::SendFlag::Signaled as u32);
    assert!(wqe::SEND_SOLICITED == wr::SendFlag::Solicited as u32);
    assert!(wqe::SEND_INLINE == wr::SendFlag::Inline as u32);
    assert!(wqe::WC_GRH == wr::WC_GRH);
    assert!(wqe::WC_WITH_IMM == wr::WC_WITH_IMM);
    assert!(wqe::NETWORK_IPV4 as u64 == uapi::RXE_NETWORK_TYPE_IPV4 as u64);
    assert!(wqe::NETWORK_IPV6 as u64 == uapi::RXE_NETWORK_TYPE_IPV6 as u64);
    assert!(WcOpcode::Send as u64 == uapi::ib_uverbs_wc_opcode_IB_UVERBS_WC_SEND as u64);
    assert!(WcOpcode::RdmaWrite as u64 == uapi::ib_uverbs_wc_opcode_IB_UVERBS_WC_RDMA_WRITE as u64);
    assert!(WcOpcode::RdmaRead as u64 == uapi::ib_uverbs_wc_opcode_IB_UVERBS_WC_RDMA_READ as u64);
    assert!(WcOpcode::CompSwap as u64 == uapi::ib_uverbs_wc_opcode_IB_UVERBS_WC_COMP_SWAP as u64);
    assert!(WcOpcode::FetchAdd as u64 == uapi::ib_uverbs_wc_opcode_IB_UVERBS_WC_FETCH_ADD as u64);
    assert!(WcOpcode::BindMw as u64 == uapi::ib_uverbs_wc_opcode_IB_UVERBS_WC_BIND_MW as u64);
    assert!(WcOpcode::LocalInv as u64 == uapi::ib_uverbs_wc_opcode_IB_UVERBS_WC_LOCAL_INV as u64);
    assert!(WcOpcode::Tso as u64 == uapi::ib_uverbs_wc_opcode_IB_UVERBS_WC_TSO as u64);
    assert!(WcOpcode::Flush as u64 == uapi::ib_uverbs_wc_opcode_IB_UVERBS_WC_FLUSH as u64);
    assert!(
        WcOpcode::AtomicWrite as u64 == uapi::ib_uverbs_wc_opcode_IB_UVERBS_WC_ATOMIC_WRITE as u64
    );
};
