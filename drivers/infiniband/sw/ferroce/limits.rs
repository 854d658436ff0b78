// SPDX-License-Identifier: GPL-2.0

//! What a ferroce device advertises: the one table of limits and capabilities.
//!
//! Only what the driver implements, or is built to implement next, is advertised; the values
//! follow C rxe's where the two agree (rdma-core and applications size resources from them).

use kernel::rdma::attr::{device_cap, kernel_cap, AtomicCap, DeviceAttrs};

/// IEEE OUI-less vendor id, as rxe reports (rdma-core does not match on it).
const VENDOR_ID: u32 = 0x00ff_ffff;

/// Device attributes; `sys_image_guid` is filled per device.
pub(crate) const DEVICE_LIMITS: DeviceAttrs = DeviceAttrs {
    fw_ver: 0,
    sys_image_guid: 0,
    max_mr_size: u64::MAX,
    page_size_cap: 0xffff_f000,
    vendor_id: VENDOR_ID,
    vendor_part_id: 0,
    hw_ver: 0,
    max_qp: (1 << 20) - 16,
    // As C rxe. The ring is the process's (mapped, vmalloc'd as C rxe's); the kernel's own
    // copies of send WQEs are only of those under way (`rc::req::STARTED_MAX`).
    max_qp_wr: 1 << 20,
    device_cap_flags: device_cap::RC_RNR_NAK_GEN
        | device_cap::PORT_ACTIVE_EVENT
        | device_cap::SYS_IMAGE_GUID
        | device_cap::ATOMIC_WRITE
        | device_cap::MEM_WINDOW
        | device_cap::MEM_WINDOW_TYPE_2B
        | device_cap::SRQ_RESIZE
        | device_cap::FLUSH_GLOBAL
        | device_cap::MEM_MGT_EXTENSIONS,
    kernel_cap_flags: kernel_cap::ALLOW_USER_UNREG,
    max_send_sge: 32,
    max_recv_sge: 32,
    max_sge_rd: 32,
    max_cq: 1 << 20,
    max_cqe: (1 << 15) - 1,
    max_mr: (1 << 19) - 1,
    max_pd: 1 << 20,
    // Atomics are the CPU's own (cmpxchg, xadd on the pinned page): atomic against each other
    // from every QP and device, without a lock; IB_ATOMIC_GLOB would also promise atomicity
    // against the process's plain stores, which no RDMA device can.
    atomic_cap: AtomicCap::Hca,
    max_qp_rd_atom: 128,
    max_res_rd_atom: 0x3f000,
    max_qp_init_rd_atom: 128,
    // Memory windows as C rxe's; their key indices follow the regions' (see `mw.rs`).
    max_mw: (1 << 19) - 1,
    // Multicast as C rxe's.
    max_mcast_grp: 8192,
    max_mcast_qp_attach: 56,
    max_total_mcast_qp_attach: 0x7_0000,
    max_ah: (1 << 15) - 1,
    // As C rxe's. Like a QP's rings, an SRQ's is vmalloc'd memory the process sizes and maps
    // (2^21 slots of 27 SGEs are 1 GiB, as on C rxe); the kernel copies one WQE at a time out.
    max_srq: (1 << 20) - 0x2_0001,
    max_srq_wr: 1 << 20,
    max_srq_sge: 27,
    // As C rxe's: a fast region maps up to 512 pages (`frwr.rs`).
    max_fast_reg_page_list_len: 512,
    max_pkeys: 1,
    local_ca_ack_delay: 15,
};

/// GID table entries per port.
pub(crate) const GID_TABLE_LEN: i32 = 1024;
/// P_Key table entries per port: only the default P_Key.
pub(crate) const PKEY_TABLE_LEN: u16 = 1;
/// The default (full-membership) P_Key.
pub(crate) const DEFAULT_PKEY: u16 = 0xffff;
/// Largest message, bytes.
pub(crate) const MAX_MSG_SIZE: u32 = 1 << 31;
