// SPDX-License-Identifier: GPL-2.0

//! The RC and UC transport: a QP's requester ([`req`]) sends its WQEs within a window of PSNs,
//! its completer ([`comp`]) moves that window on ACKs, NAKs, read responses, atomic ACKs and
//! timeouts ([`timer`]), and its responder ([`resp`], with [`read`] for RDMA READs and
//! [`atomic`] for atomics) takes the peer's requests in PSN order. The decisions (window moves,
//! PSN classification, syndromes, retry budgets) are `proto`'s, host-tested; these files hold
//! the QP's lock, memory and packets.

pub(crate) mod atomic;
pub(crate) mod comp;
pub(crate) mod flush;
pub(crate) mod read;
pub(crate) mod req;
pub(crate) mod resp;
pub(crate) mod timer;

use crate::{
    proto::{bth::Bth, opcode::Opcode, psn::Psn},
    qp::QpCtx,
};
use kernel::rdma::qp::QpAttr;

/// Payload bytes per packet on this QP's path.
pub(crate) fn path_mtu(cx: &QpCtx<'_>) -> u32 {
    let dev_mtu = cx.dev().ib_mtu();
    cx.inner
        .attr
        .path_mtu
        .map_or(dev_mtu, |m| m.bytes().min(dev_mtu))
}

/// The BTH of this QP's packets to its peer, before the per-packet flags.
pub(crate) fn bth(attr: &QpAttr, opcode: Opcode, psn: Psn) -> Bth {
    Bth::new(opcode as u8, attr.dest_qp_num, psn)
}
