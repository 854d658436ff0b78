// SPDX-License-Identifier: GPL-2.0

//! RDMA providers.
//!
//! To implement an RDMA provider (a driver that registers `ib_device`s):
//!
//! - implement [`ops::Driver`] with `#[vtable]`: its associated types are the private data of
//!   the device, user context and protection domain; its methods fill `ib_device_ops`;
//! - create devices with [`device::Device::register`], typically from a [`link::LinkOps`]
//!   `newlink` (for software providers bound to a netdev);
//! - keep a [`device::DriverDevices`] in the module so that unloading unregisters every device.
//!
//! The RDMA core allocates the device and every verbs object; the provider's data lives right
//! after the C struct and is dropped by the matching destroy callback.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

pub mod ah;
pub mod attr;
pub mod client;
pub mod cq;
pub mod device;
mod event;
pub mod link;
pub mod mad;
pub mod mmap;
pub mod mr;
pub mod mw;
mod object;
pub mod ops;
pub mod pd;
pub mod pool;
pub mod qp;
pub mod slot;
pub mod srq;
pub mod stats;
mod ucontext;
pub mod udata;
pub mod umem;
pub mod virt_dma;
pub mod wr;
