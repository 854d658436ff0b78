// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 protocol logic that needs only `core`.
//!
//! Every file under `proto/` is compiled twice: into the kernel module and into the host crate
//! `tools/ferroce-proto`, where `cargo test` and the fuzzers run it. No kernel types here.
//! What only the tests and fuzzers use (whole-buffer parsing, names for statistics) sits behind
//! `cfg(ferroce_host)`, which only the host build sets: anything else the module leaves unused
//! is dead code, and the kernel build says so.

pub(crate) mod aeth;
pub(crate) mod bth;
pub(crate) mod build;
pub(crate) mod dcqcn;
pub(crate) mod eui64;
pub(crate) mod icrc;
pub(crate) mod mtu;
pub(crate) mod netdev_pattern;
pub(crate) mod opcode;
pub(crate) mod packet;
pub(crate) mod pma;
pub(crate) mod psn;
pub(crate) mod read;
pub(crate) mod responder;
pub(crate) mod retry;
pub(crate) mod ring;
pub(crate) mod timeouts;
pub(crate) mod window;
pub(crate) mod wqe;
pub(crate) mod wqe_out;

/// The IANA UDP destination port of RoCEv2.
pub(crate) const ROCE_V2_UDP_PORT: u16 = 4791;
