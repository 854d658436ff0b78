// SPDX-License-Identifier: GPL-2.0

//! Device and port attributes: what `query_device`, `query_port` and `get_port_immutable` report.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{bindings, prelude::*};

crate::impl_flags!(
    /// Access rights (`IB_ACCESS_*`) of a QP's responder or of a memory region. Bits the core
    /// defines that have no [`Access`] here are kept as the core passed them.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::rdma::attr::{Access, AccessFlags};
    ///
    /// let qp = AccessFlags::from_raw(Access::RemoteWrite as u32);
    /// assert!(qp.contains(Access::RemoteWrite));
    /// assert!(!qp.contains(Access::RemoteRead));
    /// ```
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct AccessFlags(u32);

    /// One `IB_ACCESS_*` right.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Access {
        /// Local writes (by the HCA into the region).
        LocalWrite = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
        /// RDMA WRITE from the peer.
        RemoteWrite = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
        /// RDMA READ from the peer.
        RemoteRead = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ,
        /// Atomics from the peer.
        RemoteAtomic = bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC,
        /// Memory windows may be bound to the region.
        MwBind = bindings::ib_access_flags_IB_ACCESS_MW_BIND,
        /// FLUSH for global visibility from the peer.
        FlushGlobal = bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL,
        /// FLUSH for persistence from the peer.
        FlushPersistent = bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT,
    }
);

impl AccessFlags {
    /// Flags as the core passes them.
    pub const fn from_raw(bits: u32) -> Self {
        Self(bits)
    }

    /// The raw bits, unknown ones included.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

/// What a device's RDMA atomics are atomic against (`enum ib_atomic_cap`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AtomicCap {
    /// No atomics.
    #[default]
    None = bindings::ib_atomic_cap_IB_ATOMIC_NONE,
    /// Atomic against other atomics through this device.
    Hca = bindings::ib_atomic_cap_IB_ATOMIC_HCA,
    /// Atomic against everything, CPU accesses included.
    Glob = bindings::ib_atomic_cap_IB_ATOMIC_GLOB,
}

/// IB MTU (`enum ib_mtu`): the payload size of one RoCE packet.
///
/// # Examples
///
/// ```
/// use kernel::{prelude::*, rdma::attr::Mtu};
///
/// assert_eq!(Mtu::from_bytes(1024)?, Mtu::Mtu1024);
/// assert_eq!(Mtu::Mtu4096.bytes(), 4096);
/// // Only the five IB sizes are MTUs.
/// assert!(Mtu::from_bytes(1500).is_err());
/// # Ok::<(), Error>(())
/// ```
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = bindings::ib_mtu_IB_MTU_256,
    /// 512 bytes.
    Mtu512 = bindings::ib_mtu_IB_MTU_512,
    /// 1024 bytes.
    Mtu1024 = bindings::ib_mtu_IB_MTU_1024,
    /// 2048 bytes.
    Mtu2048 = bindings::ib_mtu_IB_MTU_2048,
    /// 4096 bytes.
    Mtu4096 = bindings::ib_mtu_IB_MTU_4096,
}

impl Mtu {
    /// The IB MTU of exactly `bytes` (256, 512, 1024, 2048 or 4096).
    pub fn from_bytes(bytes: u32) -> Result<Self> {
        Ok(match bytes {
            256 => Self::Mtu256,
            512 => Self::Mtu512,
            1024 => Self::Mtu1024,
            2048 => Self::Mtu2048,
            4096 => Self::Mtu4096,
            _ => return Err(EINVAL),
        })
    }

    /// The IB MTU of an `enum ib_mtu` value from a caller; `EINVAL` for any other value.
    pub fn from_raw(code: u32) -> Result<Self> {
        Ok(match code {
            bindings::ib_mtu_IB_MTU_256 => Self::Mtu256,
            bindings::ib_mtu_IB_MTU_512 => Self::Mtu512,
            bindings::ib_mtu_IB_MTU_1024 => Self::Mtu1024,
            bindings::ib_mtu_IB_MTU_2048 => Self::Mtu2048,
            bindings::ib_mtu_IB_MTU_4096 => Self::Mtu4096,
            _ => return Err(EINVAL),
        })
    }

    /// The MTU in bytes.
    pub fn bytes(self) -> u32 {
        256 << (self as u32 - 1)
    }
}

/// Logical port state (`enum ib_port_state`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// Down.
    Down = bindings::ib_port_state_IB_PORT_DOWN,
    /// Active: packets flow.
    Active = bindings::ib_port_state_IB_PORT_ACTIVE,
}

/// Physical port state (`enum ib_port_phys_state`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhysState {
    /// Administratively up, waiting for a link.
    Polling = 2,
    /// Administratively down.
    Disabled = 3,
    /// Link up.
    LinkUp = 5,
}

/// Device attributes (`struct ib_device_attr`), the fields a RoCE provider sets; others are 0.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceAttrs {
    /// Firmware version.
    pub fw_ver: u64,
    /// System image GUID, big-endian as on the wire.
    pub sys_image_guid: u64,
    /// Largest memory region, bytes.
    pub max_mr_size: u64,
    /// Supported page sizes, bit mask.
    pub page_size_cap: u64,
    /// IEEE vendor id.
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Queue pairs.
    pub max_qp: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// `IB_DEVICE_*` capability flags.
    pub device_cap_flags: u64,
    /// `IBK_*` kernel capability flags.
    pub kernel_cap_flags: u64,
    /// Scatter/gather entries per send WR.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive WR.
    pub max_recv_sge: u32,
    /// Scatter/gather entries per RDMA READ.
    pub max_sge_rd: u32,
    /// Completion queues.
    pub max_cq: u32,
    /// Entries per completion queue.
    pub max_cqe: u32,
    /// Memory regions.
    pub max_mr: u32,
    /// Protection domains.
    pub max_pd: u32,
    /// What atomics are atomic against.
    pub atomic_cap: AtomicCap,
    /// Outstanding RDMA READ/atomic requests a QP can receive.
    pub max_qp_rd_atom: u32,
    /// Outstanding RDMA READ/atomic requests the device can receive in total.
    pub max_res_rd_atom: u32,
    /// Outstanding RDMA READ/atomic requests a QP can issue.
    pub max_qp_init_rd_atom: u32,
    /// Memory windows.
    pub max_mw: u32,
    /// Multicast groups.
    pub max_mcast_grp: u32,
    /// QPs per multicast group.
    pub max_mcast_qp_attach: u32,
    /// QP attachments to multicast groups in total.
    pub max_total_mcast_qp_attach: u32,
    /// Address handles.
    pub max_ah: u32,
    /// Shared receive queues.
    pub max_srq: u32,
    /// Work requests per SRQ.
    pub max_srq_wr: u32,
    /// Scatter/gather entries per SRQ WR.
    pub max_srq_sge: u32,
    /// Pages in a fast-registration page list.
    pub max_fast_reg_page_list_len: u32,
    /// Partition keys.
    pub max_pkeys: u16,
    /// Local CA ACK delay (IBTA encoding).
    pub local_ca_ack_delay: u8,
}

impl DeviceAttrs {
    pub(crate) fn write_to(&self, a: &mut bindings::ib_device_attr) {
        a.fw_ver = self.fw_ver;
        a.sys_image_guid = self.sys_image_guid;
        a.max_mr_size = self.max_mr_size;
        a.page_size_cap = self.page_size_cap;
        a.vendor_id = self.vendor_id;
        a.vendor_part_id = self.vendor_part_id;
        a.hw_ver = self.hw_ver;
        a.max_qp = self.max_qp;
        a.max_qp_wr = self.max_qp_wr;
        a.device_cap_flags = self.device_cap_flags;
        a.kernel_cap_flags = self.kernel_cap_flags;
        a.max_send_sge = self.max_send_sge;
        a.max_recv_sge = self.max_recv_sge;
        a.max_sge_rd = self.max_sge_rd;
        a.max_cq = self.max_cq;
        a.max_cqe = self.max_cqe;
        a.max_mr = self.max_mr;
        a.max_pd = self.max_pd;
        a.atomic_cap = self.atomic_cap as u32;
        a.max_qp_rd_atom = self.max_qp_rd_atom;
        a.max_res_rd_atom = self.max_res_rd_atom;
        a.max_qp_init_rd_atom = self.max_qp_init_rd_atom;
        a.max_mw = self.max_mw;
        a.max_mcast_grp = self.max_mcast_grp;
        a.max_mcast_qp_attach = self.max_mcast_qp_attach;
        a.max_total_mcast_qp_attach = self.max_total_mcast_qp_attach;
        a.max_ah = self.max_ah;
        a.max_srq = self.max_srq;
        a.max_srq_wr = self.max_srq_wr;
        a.max_srq_sge = self.max_srq_sge;
        a.max_fast_reg_page_list_len = self.max_fast_reg_page_list_len;
        a.max_pkeys = self.max_pkeys;
        a.local_ca_ack_delay = self.local_ca_ack_delay;
    }
}

/// Port attributes (`struct ib_port_attr`) that a RoCE provider reports.
#[derive(Clone, Copy, Debug)]
pub struct PortAttrs {
    /// Logical state.
    pub state: PortState,
    /// Physical state.
    pub phys_state: PhysState,
    /// Largest MTU the port supports.
    pub max_mtu: Mtu,
    /// MTU in use, derived from the netdev MTU.
    pub active_mtu: Mtu,
    /// The netdev MTU.
    pub phys_mtu: u32,
    /// GID table length.
    pub gid_tbl_len: i32,
    /// `IB_PORT_*` capability flags.
    pub port_cap_flags: u32,
    /// Largest message, bytes.
    pub max_msg_sz: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// Virtual lanes.
    pub max_vl_num: u8,
    /// Link width (`IB_WIDTH_*`).
    pub active_width: u8,
    /// Link speed (`IB_SPEED_*`).
    pub active_speed: u16,
}

impl PortAttrs {
    pub(crate) fn write_to(&self, a: &mut bindings::ib_port_attr) {
        a.state = self.state as u32;
        a.phys_state = self.phys_state as u8;
        a.max_mtu = self.max_mtu as u32;
        a.active_mtu = self.active_mtu as u32;
        a.phys_mtu = self.phys_mtu;
        a.gid_tbl_len = self.gid_tbl_len;
        a.port_cap_flags = self.port_cap_flags;
        a.max_msg_sz = self.max_msg_sz;
        a.pkey_tbl_len = self.pkey_tbl_len;
        a.max_vl_num = self.max_vl_num;
        a.active_width = self.active_width;
        a.active_speed = self.active_speed;
        // RoCE: no LID, no subnet manager; the GID prefix is link-local.
        a.subnet_prefix = 0xfe80_0000_0000_0000u64.to_be();
    }
}

/// What never changes about a port (`struct ib_port_immutable`).
#[derive(Clone, Copy, Debug)]
pub struct PortImmutable {
    /// P_Key table length.
    pub pkey_tbl_len: i32,
    /// GID table length.
    pub gid_tbl_len: i32,
    /// `RDMA_CORE_*` capability and protocol flags.
    pub core_cap_flags: u32,
    /// Largest MAD, bytes.
    pub max_mad_size: u32,
}

/// Driver ids (`enum rdma_driver_id`), which rdma-core matches its providers on.
pub mod driver_id {
    use crate::bindings;

    /// The soft-RoCE driver (`RDMA_DRIVER_RXE`).
    pub const RXE: u32 = bindings::rdma_driver_id_RDMA_DRIVER_RXE;
    /// The soft-iWARP driver (`RDMA_DRIVER_SIW`).
    pub const SIW: u32 = bindings::rdma_driver_id_RDMA_DRIVER_SIW;

    /// The drivers that run in software, on any netdev: a port of theirs is no hardware's.
    pub const SOFTWARE: [u32; 2] = [RXE, SIW];
}

/// Device capability flags (`IB_DEVICE_*`) for [`DeviceAttrs::device_cap_flags`].
pub mod device_cap {
    use crate::bindings;

    // CAST: The flags are non-negative enum constants below 2^64.
    /// Generates RNR NAKs on reliable connections.
    pub const RC_RNR_NAK_GEN: u64 = bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN as u64;
    /// Reports port-active events.
    pub const PORT_ACTIVE_EVENT: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64;
    /// Has a system image GUID.
    pub const SYS_IMAGE_GUID: u64 = bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64;
    /// Has memory windows.
    pub const MEM_WINDOW: u64 = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64;
    /// Has type 2B memory windows (bound to one QP).
    pub const MEM_WINDOW_TYPE_2B: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64;
    /// Does RC ATOMIC WRITE (IBA 1.5).
    pub const ATOMIC_WRITE: u64 = bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE as u64;
    /// Answers FLUSH for global visibility.
    pub const FLUSH_GLOBAL: u64 = bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64;
    /// Resizes shared receive queues.
    pub const SRQ_RESIZE: u64 = bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64;
    /// Fast registration (`IB_WR_REG_MR`), local and remote invalidation.
    pub const MEM_MGT_EXTENSIONS: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
}

/// Kernel capability flags (`IBK_*`) for [`DeviceAttrs::kernel_cap_flags`].
pub mod kernel_cap {
    use crate::bindings;

    // CAST: The flags are non-negative enum constants below 2^64.
    /// `rdma link del` may unregister the device.
    pub const ALLOW_USER_UNREG: u64 = bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64;
}

/// Port capability flags (`IB_PORT_*`) for [`PortAttrs::port_cap_flags`].
pub mod port_cap {
    use crate::bindings;

    /// Supports the communication manager.
    pub const CM_SUP: u32 = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
}

/// Core capability flags (`RDMA_CORE_*`) for [`PortImmutable::core_cap_flags`].
pub mod core_cap {
    use crate::bindings;

    /// A RoCEv2 port: UDP encapsulation, MADs, CM, Ethernet address handles.
    pub const PORT_IBA_ROCE_UDP_ENCAP: u32 = bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
}

/// Size of a management datagram, bytes (`IB_MGMT_MAD_SIZE`).
pub const MGMT_MAD_SIZE: u32 = bindings::IB_MGMT_MAD_SIZE;

/// `IB_USER_VERBS_CMD_*` bits a provider adds to the uverbs command mask.
pub mod uverbs_cmd {
    use crate::bindings;

    /// `ibv_post_send`, which rxe-style providers use as the send doorbell.
    pub const POST_SEND: u64 = 1 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND;
    /// `ibv_req_notify_cq`.
    pub const REQ_NOTIFY_CQ: u64 =
        1 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
}

#[macros::kunit_tests(rust_rdma_attr)]
mod tests {
    use super::{Access, AccessFlags, Mtu};
    use crate::prelude::*;

    #[test]
    fn access_flags_are_the_cores_bits() {
        let all = [
            Access::LocalWrite,
            Access::RemoteWrite,
            Access::RemoteRead,
            Access::RemoteAtomic,
            Access::MwBind,
        ];
        for (i, f) in all.iter().enumerate() {
            // IB_ACCESS_LOCAL_WRITE is bit 0, the remote rights the next three, MW_BIND bit 4.
            assert_eq!(*f as u32, 1 << i);
            assert!(AccessFlags::from_raw(0x1f).contains(*f));
            assert!(!AccessFlags::from_raw(0x1f & !(*f as u32)).contains(*f));
        }
        // The FLUSH rights are bits 8 and 9.
        assert_eq!(Access::FlushGlobal as u32, 1 << 8);
        assert_eq!(Access::FlushPersistent as u32, 1 << 9);
        assert_eq!(AccessFlags::all_bits(), 0x31f);
    }

    #[test]
    fn mtu_bytes_round_trip() {
        for bytes in [256, 512, 1024, 2048, 4096] {
            assert_eq!(Mtu::from_bytes(bytes).map(Mtu::bytes), Ok(bytes));
        }
        assert_eq!(Mtu::from_bytes(1500), Err(EINVAL));
        for m in [Mtu::Mtu256, Mtu::Mtu1024, Mtu::Mtu4096] {
            assert_eq!(Mtu::from_raw(m as u32), Ok(m));
        }
        assert_eq!(Mtu::from_raw(0), Err(EINVAL));
        assert_eq!(Mtu::from_raw(6), Err(EINVAL));
        assert!(Mtu::Mtu1024 < Mtu::Mtu4096);
    }
}
