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

    /// `path` as data packets take it: ECN-capable while congestion control is on.
    pub(crate) fn mark(&self, path: Path) -> Path {
        if self.enabled {
            let tclass = dcqcn::ect(path.tclass());
            path.with_tclass(tclass)
        } else {
            path
        }
    }
}

/// How far ahead of now a QP schedules its packets, in ns. Past it, while its last packet has
/// not left yet, the QP waits for the ACK that packet asked for (it leaves before its ACK can
/// come back, so the QP always comes back): what waits in the qdisc stays short, and far from
/// the ACK timeout. Without a qdisc that honours departure times, this alone paces, in bursts
/// of about this long.
const PACE_HORIZON_NS: u64 = 500_000;

/// When a data packet may leave.
pub(crate) enum Pace {
    /// Now: the QP is not limited.
    Now,
    /// At `depart`; `ask_ack`: the next packet will wait, so this one asks for the ACK that
    /// brings the QP back.
    At {
        depart: Instant<Monotonic>,
        ask_ack: bool,
    },
    /// Not yet: it would leave beyond the horizon.
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
}

impl QpCc {
    pub(crate) const fn new() -> Self {
        Self {
            gate: CnpGate::new(),
            rate: Dcqcn::new(&CcParams::DEFAULT),
            last: 0,
            next: 0,
        }
    }

    /// When a data packet of `wire_len` bytes may leave, at the QP's rate; `Wait` only if
    /// `may_wait` (an ACK will bring the QP back: not for UC, which gets none).
    pub(crate) fn pace(&mut self, cc: &Cc, wire_len: usize, may_wait: bool) -> Pace {
        if !cc.enabled {
            return Pace::Now;
        }
        let now = cc.now();
        self.rate.advance(now, &cc.params, LINE_MBPS);
        let Some(mbps) = self.rate.rate() else {
            self.next = now;
            return Pace::Now;
        };
        let start = self.next.max(now);
        if may_wait && self.last > now && start > now + PACE_HORIZON_NS {
            return Pace::Wait;
        }
        self.last = start;
        // Bits over Mb/s is microseconds.
        let bytes = wire_len as u64;
        self.next = start + (bytes * 8 * 1000).div_ceil(u64::from(mbps.max(1)));
        self.rate.on_sent(bytes, &cc.params, LINE_MBPS);
        // CAST: nanoseconds since the device was created fit in an i64 for 292 years.
        Pace::At {
            depart: cc.epoch + Delta::from_nanos(start as i64),
            ask_ack: start > now && self.next > now + PACE_HORIZON_NS,
        }
    }
}

/// A packet for `qp` came CE-marked: counted and, for RC and UC QPs, answered with a CNP to
/// its sender unless one left within `np_min_time_between_cnps`. Never for a CNP or an ACK.
pub(crate) fn on_ce(
    qp: &Qp<Ferroce>,
    shared: &QpShared,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
    counters: &Counters,
) {
    counters.inc(Counter::NpEcnMarked);
    let cc = &qp.device().data().cc;
    if !cc.enabled
        || matches!(pkt.info.kind, OpKind::Cnp | OpKind::Ack | OpKind::AtomicAck)
        || !matches!(shared.qp_type(), QpType::Rc | QpType::Uc)
    {
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
