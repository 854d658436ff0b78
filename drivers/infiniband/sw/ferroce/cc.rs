// SPDX-License-Identifier: GPL-2.0

//! ECN congestion control of a device: its switch and parameters, the ECN mark of what it
//! sends, and what a QP does with a congestion mark or a CNP it receives. The arithmetic is in
//! [`crate::proto::dcqcn`].
//!
//! While it is on (the module parameter `cc`, by default), packets leave ECN-capable; a
//! CE-marked packet for an RC or UC QP is answered with a CNP to its sender, at most one per QP
//! per `np_min_time_between_cnps`; a CNP for a QP cuts that QP's DCQCN rate, at which its
//! requester then paces its packets: each gets a departure time (EDT, which `fq` honours), and
//! the requester schedules at most [`PACE_HORIZON_NS`] ahead.

use crate::{
    counters::{Counter, Counters},
    device::Ferroce,
    proto::{
        bth::Bth,
        build::Path,
        dcqcn::{self, CcParams, CnpGate, Dcqcn},
        opcode::{OpKind, Opcode},
        packet::ExtHeaders,
        psn::Psn,
    },
    qp::{QpInner, QpShared},
    recv::Packet,
};
use kernel::{
    prelude::*,
    rdma::qp::{Qp, QpType},
    time::{Delta, Instant, Monotonic},
};

/// The rate ceiling when `rp_max_rate` is 0, Mb/s: a soft device has no line rate of its own.
pub(crate) const LINE_MBPS: u32 = 100_000;

/// A device's congestion control, fixed when the device is created.
pub(crate) struct Cc {
    enabled: bool,
    params: CcParams,
    /// The origin of the clock the DCQCN arithmetic reads.
    epoch: Instant<Monotonic>,
}

impl Cc {
    /// From the module parameters; `EINVAL` (and a log line) for a value out of its range.
    pub(crate) fn from_module_params() -> Result<Self> {
        let mut params = CcParams::DEFAULT;
        let given = [
            (
                "np_min_time_between_cnps",
                crate::module_parameters::np_min_time_between_cnps.value(),
            ),
            ("rp_ai_rate", crate::module_parameters::rp_ai_rate.value()),
        ];
        for (name, value) in given {
            let i = CcParams::INFO
                .iter()
                .position(|p| p.name == name)
                .ok_or(EINVAL)?;
            if params.set(i, value).is_err() {
                let info = &CcParams::INFO[i];
                pr_warn!(
                    "ferroce: {name}={value} is out of range ({}..={})\n",
                    info.min,
                    info.max
                );
                return Err(EINVAL);
            }
        }
        Ok(Self {
            enabled: crate::module_parameters::cc.value(),
            params,
            epoch: Instant::now(),
        })
    }

    /// Nanoseconds on the device's clock.
    fn now(&self) -> u64 {
        // CAST: the monotonic clock does not go back past the epoch.
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The instant `ns` on the device's clock.
    fn at(&self, ns: u64) -> Instant<Monotonic> {
        // CAST: nanoseconds since the device was created fit in an i64 for 292 years.
        self.epoch + Delta::from_nanos(ns as i64)
    }

    /// `path` as an RC or UC QP's packets take it: ECN-capable while congestion control is
    /// on, and never with an ECN field of the address vector's own.
    pub(crate) fn mark(&self, path: Path) -> Path {
        if !self.enabled {
            return unmarked(path);
        }
        let tclass = dcqcn::ect(path.tclass());
        path.with_tclass(tclass)
    }
}

/// `path` as packets that do not react to congestion take it (UD: neither CNPs nor pacing
/// yet): not ECN-capable, so a marking queue drops them rather than marks them.
pub(crate) fn unmarked(path: Path) -> Path {
    let tclass = dcqcn::not_ect(path.tclass());
    path.with_tclass(tclass)
}

/// How far ahead of now a QP schedules its packets, in ns. Past it, while its last packet has
/// not left yet, the QP waits: for the ACK that packet asked for (RC requests) or for its
/// timer, armed for when the next may go (see [`crate::rc_comp::wake_paced`]). What waits in
/// the qdisc stays short, and far from the ACK timeout. Without a qdisc that honours departure
/// times, this alone paces, in bursts of about this long.
const PACE_HORIZON_NS: u64 = 500_000;
/// Packets a QP schedules ahead at most: `fq` drops a flow's packets past 100.
const PACE_AHEAD_PKTS: u64 = 64;

/// When a packet may leave.
pub(crate) enum Pace {
    /// Now: the QP is not limited.
    Now,
    /// At `depart`; `ask_ack`: the next packet will wait, so this one (an RC request) asks for
    /// the ACK that brings the QP back early.
    At {
        depart: Instant<Monotonic>,
        ask_ack: bool,
    },
    /// Not yet: it would leave beyond the horizon. The QP's timer is to bring it back
    /// ([`QpCc::take_wake`]).
    Wait,
}

/// A QP's congestion-control state.
pub(crate) struct QpCc {
    /// Notification point: when the last CNP left.
    gate: CnpGate,
    /// Reaction point: the rate CNPs allow.
    rate: Dcqcn,
    /// When the last paced packet leaves, and the next may, on the device's clock.
    last: u64,
    next: u64,
    /// After a wait: when the next packet may be scheduled.
    wake: Option<Instant<Monotonic>>,
    /// The wake-up the QP's timer is armed for, until its work ran past it (see
    /// [`crate::rc_comp::wake_paced`]).
    pub(crate) wake_at: Option<Instant<Monotonic>>,
}

impl QpCc {
    pub(crate) const fn new() -> Self {
        Self {
            gate: CnpGate::new(),
            rate: Dcqcn::new(&CcParams::DEFAULT),
            last: 0,
            next: 0,
            wake: None,
            wake_at: None,
        }
    }

    /// When a packet of `wire_len` bytes (from the IP header) may leave, at the QP's rate.
    pub(crate) fn pace(&mut self, cc: &Cc, wire_len: usize) -> Pace {
        // Unlimited (nearly always): no clock read per packet. Any `next` before now starts
        // the next limited stretch now.
        if !cc.enabled || self.rate.rate().is_none() {
            self.next = 0;
            return Pace::Now;
        }
        let now = cc.now();
        self.rate.advance(now, &cc.params, LINE_MBPS);
        let Some(mbps) = self.rate.rate() else {
            self.next = 0;
            return Pace::Now;
        };
        let bytes = wire_len as u64;
        // Bits over Mb/s is microseconds.
        let len = (bytes * 8 * 1000).div_ceil(u64::from(mbps.max(1)));
        let horizon = PACE_HORIZON_NS.min(len * PACE_AHEAD_PKTS);
        let start = self.next.max(now);
        if self.last > now && start > now + horizon {
            // Either holds no longer by then.
            self.wake = Some(cc.at(self.last.min(start - horizon)));
            return Pace::Wait;
        }
        self.last = start;
        self.next = start + len;
        self.rate.on_sent(bytes, &cc.params, LINE_MBPS);
        Pace::At {
            depart: cc.at(start),
            ask_ack: start > now && self.next > now + horizon,
        }
    }

    /// When the QP's work is to come back after a [`Pace::Wait`], once.
    pub(crate) fn take_wake(&mut self) -> Option<Instant<Monotonic>> {
        self.wake.take()
    }
}

/// A packet for an RC or UC `qp`, of its transport and from its peer, came CE-marked: counted,
/// and answered with a CNP to its sender unless one left within `np_min_time_between_cnps`.
/// Never for a CNP or an ACK.
pub(crate) fn on_ce(
    qp: &Qp<Ferroce>,
    shared: &QpShared,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
    counters: &Counters,
) {
    counters.inc(Counter::NpEcnMarked);
    let cc = &qp.device().data().cc;
    if !cc.enabled || matches!(pkt.info.kind, OpKind::Cnp | OpKind::Ack | OpKind::AtomicAck) {
        return;
    }
    let Some(path) = inner.path(qp.qpn()) else {
        return;
    };
    if !inner.cc.gate.allow(cc.now(), &cc.params) {
        return;
    }
    let mut bth = Bth::new(Opcode::Cnp as u8, inner.attr.dest_qp_num, Psn::default());
    bth.becn = true;
    let path = path.with_tclass(dcqcn::cnp_tclass(&cc.params));
    if let Ok(Ok(())) = shared.with_path(qp, path, |x| x.send(&bth, &ExtHeaders::default(), &[])) {
        counters.inc(Counter::NpCnpSent);
    }
}

/// A CNP came for `qp` (from its peer, for RC and UC: the caller checked): it cuts the rate
/// of an RC or UC QP that sends, while congestion control is on. Any other is ignored: UD
/// sends are not paced, and a QP that does not send has no rate to cut.
pub(crate) fn on_cnp(
    qp: &Qp<Ferroce>,
    shared: &QpShared,
    inner: &mut QpInner,
    counters: &Counters,
) {
    let cc = &qp.device().data().cc;
    if !cc.enabled
        || !matches!(shared.qp_type(), QpType::Rc | QpType::Uc)
        || !inner.attr.state.can_send()
    {
        counters.inc(Counter::RpCnpIgnored);
        return;
    }
    inner.cc.rate.on_cnp(cc.now(), &cc.params, LINE_MBPS);
    counters.inc(Counter::RpCnpHandled);
}
