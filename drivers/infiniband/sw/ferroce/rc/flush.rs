// SPDX-License-Identifier: GPL-2.0

//! The RC responder's FLUSH (IBA 1.5): what was written before it to a range, or to the whole
//! region its key names, is placed before it is answered.
//!
//! Every request's bytes are copied into the region by the CPU before the next request is
//! taken, so when a FLUSH is taken they are in memory already; a full fence makes them visible
//! to every CPU before the answer leaves (global visibility). Persistence needs persistent
//! memory, which ferroce does not offer: `IB_DEVICE_FLUSH_PERSISTENT` is not advertised, the
//! core refuses regions that ask for it, so a FLUSH for persistence finds no key that allows it.
//!
//! As an ATOMIC WRITE, it is answered by a zero-length READ response, from a READ resource: a
//! duplicate gets the answer again. The whole region is named by a region's key only: memory
//! windows are not bound with FLUSH rights.

use crate::{
    net::recv::Packet,
    proto::{
        responder::Refusal,
        wqe::{access, placement, selectivity},
    },
    qp::QpCtx,
    rc::{read, resp::granted},
};
use core::sync::atomic::{fence, Ordering};
use kernel::{prelude::*, rdma::attr::Access};

/// FLUSHes still to be answered, beyond the QP's `max_dest_rd_atomic`, before one more is
/// refused.
const FLUSHES_BEYOND_GRANTED: u8 = 16;

/// Takes a FLUSH in sequence: checks it, places the writes before it, and keeps the empty READ
/// resource whose response answers it (sent by [`crate::rc::read::answer`]).
pub(crate) fn start(cx: &mut QpCtx<'_>, pkt: &Packet<'_>) -> Result<(), Refusal> {
    let (Some(feth), Some(reth)) = (pkt.ext.feth, pkt.ext.reth) else {
        return Err(Refusal::Invalid);
    };
    let known = placement::GLOBAL | placement::PERSISTENT;
    if feth.placement == 0
        || feth.placement & !known != 0
        || feth.selectivity > selectivity::REGION
        || !pkt.payload.is_empty()
        || pkt.bth.pad != 0
    {
        return Err(Refusal::Invalid);
    }
    // The QP must grant, and the key carry, each placement asked for.
    let mut rights = 0;
    if feth.placement & placement::GLOBAL != 0 {
        granted(cx, Access::FlushGlobal)?;
        rights |= access::FLUSH_GLOBAL;
    }
    if feth.placement & placement::PERSISTENT != 0 {
        granted(cx, Access::FlushPersistent)?;
        rights |= access::FLUSH_PERSISTENT;
    }
    // Requesters do not count FLUSHes against the READ and atomic resources they were granted
    // (C rxe's does not): one is taken beyond them, up to a bound, behind READs still
    // answered, and answered after them.
    let granted = cx.inner.attr.max_dest_rd_atomic;
    cx.inner
        .resp
        .resources
        .admit(granted.saturating_add(FLUSHES_BEYOND_GRANTED))?;
    let reaches = if feth.selectivity == selectivity::REGION {
        // The whole region: the RETH's address and length mean nothing.
        cx.dev()
            .mrs
            .remote_whole(cx.shared.pd, reth.rkey, rights)
            .is_some()
    } else {
        cx.remote(reth.rkey, reth.va, reth.dma_len, rights)
            .is_some()
    };
    if !reaches {
        return Err(Refusal::Access);
    }
    cx.inner.resp.resources.make_room(granted.max(1))?;
    fence(Ordering::SeqCst);
    read::keep_empty_answer(cx, pkt, reth)
}
