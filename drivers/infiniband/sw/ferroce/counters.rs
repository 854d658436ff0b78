// SPDX-License-Identifier: GPL-2.0

//! Port counters, shown by `rdma statistic` and in sysfs `hw_counters`.
//!
//! The first seventeen carry C rxe's names and meaning, so existing scripts keep working (as
//! there, `ack_deferred` counts the responses handed to the requester's completer, whatever it
//! then makes of them: one beyond what was sent counts in `rcvd_drop_bad_psn` too); the
//! `rcvd_drop_*` ones count each reason a received packet was dropped; the RC request and error
//! counters after them carry mlx5's names (`resp_invalid_request` is ours: mlx5 has none), and
//! so do the congestion-control ones after those (see [`crate::cc`]); `tx_streams`, last, is
//! ours: the streams RC requesters started (see [`crate::rc::req::leaves_to_work`]).

use crate::proto::pma::PortCounters;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::rdma::stats::StatDesc;

macro_rules! counters {
    ($($variant:ident => $name:literal,)*) => {
        /// One port counter.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        pub(crate) enum Counter {
            $(
                $variant,
            )*
        }

        /// The counters' names, in [`Counter`] order.
        pub(crate) static DESCS: [StatDesc; Counter::COUNT] = [$(StatDesc::new($name),)*];

        impl Counter {
            /// How many counters there are.
            pub(crate) const COUNT: usize = [$(stringify!($variant),)*].len();
        }
    };
}

counters! {
    SentPkts => c"sent_pkts",
    RcvdPkts => c"rcvd_pkts",
    DuplicateRequest => c"duplicate_request",
    OutOfSeqRequest => c"out_of_seq_request",
    RcvdRnrErr => c"rcvd_rnr_err",
    SendRnrErr => c"send_rnr_err",
    RcvdSeqErr => c"rcvd_seq_err",
    AckDeferred => c"ack_deferred",
    RetryExceededErr => c"retry_exceeded_err",
    RetryRnrExceededErr => c"retry_rnr_exceeded_err",
    CompleterRetryErr => c"completer_retry_err",
    SendErr => c"send_err",
    LinkDowned => c"link_downed",
    RdmaSends => c"rdma_sends",
    RdmaRecvs => c"rdma_recvs",
    SentBytes => c"sent_bytes",
    RcvdBytes => c"rcvd_bytes",
    DropIcrc => c"rcvd_drop_bad_icrc",
    DropTruncated => c"rcvd_drop_truncated",
    DropBadHeader => c"rcvd_drop_bad_header",
    DropUnknownOpcode => c"rcvd_drop_unknown_opcode",
    DropBadLength => c"rcvd_drop_bad_length",
    DropBadQpn => c"rcvd_drop_bad_qpn",
    DropNoMem => c"rcvd_drop_nomem",
    DropBadState => c"rcvd_drop_bad_state",
    DropBadQkey => c"rcvd_drop_bad_qkey",
    DropNoRecvWqe => c"rcvd_drop_no_recv_wqe",
    DropBacklog => c"rcvd_drop_backlog",
    DropBadPsn => c"rcvd_drop_bad_psn",
    DropBadPkey => c"rcvd_drop_bad_pkey",
    DropBadAddress => c"rcvd_drop_bad_address",
    RxWriteRequests => c"rx_write_requests",
    RxReadRequests => c"rx_read_requests",
    RxAtomicRequests => c"rx_atomic_requests",
    RespRemoteAccessErrors => c"resp_remote_access_errors",
    RespLocalLengthError => c"resp_local_length_error",
    RespCqeError => c"resp_cqe_error",
    RespInvalidRequest => c"resp_invalid_request",
    ReqRemoteAccessErrors => c"req_remote_access_errors",
    ReqRemoteInvalidRequest => c"req_remote_invalid_request",
    NpEcnMarked => c"np_ecn_marked_roce_packets",
    NpCnpSent => c"np_cnp_sent",
    RpCnpHandled => c"rp_cnp_handled",
    RpCnpIgnored => c"rp_cnp_ignored",
    StreamsStarted => c"tx_streams",
}

/// A device's counters. Plain atomics: a few increments per packet, read rarely.
pub(crate) struct Counters([AtomicU64; Counter::COUNT]);

impl Counters {
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; Counter::COUNT])
    }

    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    pub(crate) fn add(&self, c: Counter, n: u64) {
        self.0[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(&self, c: Counter) -> u64 {
        self.0[c as usize].load(Ordering::Relaxed)
    }

    /// The counters a performance management agent reports.
    pub(crate) fn pma(&self) -> PortCounters {
        PortCounters {
            xmit_bytes: self.get(Counter::SentBytes),
            rcv_bytes: self.get(Counter::RcvdBytes),
            xmit_packets: self.get(Counter::SentPkts),
            rcv_packets: self.get(Counter::RcvdPkts),
            link_downed: self.get(Counter::LinkDowned),
        }
    }

    /// Copies the values, in [`Counter`] order, into `out`.
    pub(crate) fn read_into(&self, out: &mut [u64]) {
        for (o, c) in out.iter_mut().zip(self.0.iter()) {
            *o = c.load(Ordering::Relaxed);
        }
    }
}
