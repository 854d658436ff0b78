// SPDX-License-Identifier: GPL-2.0

//! Host build of ferroce's core-only protocol files, for `cargo test`, benchmarks and fuzzing.
//!
//! `proto` is the driver's own `drivers/infiniband/sw/ferroce/proto/`, compiled unchanged; its
//! items are crate-private, so `api` exposes what benchmarks and fuzzers need.

#[path = "../../../drivers/infiniband/sw/ferroce/proto/mod.rs"]
mod proto;

// The CRC-32 `proto` builds on; the module uses the kernel's.
use proto::icrc::table_crc32 as crc32_le;

pub mod api;
