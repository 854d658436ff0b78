// SPDX-License-Identifier: GPL-2.0

//! ECN congestion control of a device: its switch and parameters, the ECN mark of what it
//! sends, and what a QP does with a congestion mark or a CNP it receives. The arithmetic is in
//! [`crate::proto::dcqcn`].
//!
//! While it is on (the module parameter `cc`, by default), packets leave ECN-capable; a
//! CE-marked packet for an RC, UC or UD QP is answered with a CNP to its sender, at most one
//! per QP per `np_min_time_between_cnps`; a CNP for a QP cuts that QP's DCQCN rate, at which its
//! requester then paces its packets: each gets a departure time (EDT, which `fq` honours), and
//! the requester schedules a few packets ahead at most ([`PACE_HORIZON_NS`]).

use crate::{
    ah::Av,
    counters::{Counter, Counters},
    net::recv::Packet,
    proto::{
        bth::Bth,
        build::Path,
        dcqcn::{self, CcParams, CnpGate, Dcqcn, ParamInfo},
        opcode::{OpKind, Opcode},
        packet::ExtHeaders,
        psn::Psn,
    },
    qp::QpCtx,
};
use core::{
    fmt,
    sync::atomic::{AtomicBool, AtomicU32, Ordering},
};
use kernel::{
    debugfs::{Dir, Scope},
    prelude::*,
    rdma::qp::QpType,
    time::{Delta, Instant, Monotonic},
    uaccess::UserSliceReader,
};

/// The rate ceiling when `rp_max_rate` is 0, Mb/s: a soft device has no line rate of its own.
pub(crate) const LINE_MBPS: u32 = 100_000;

/// One parameter, as its debugfs file sets it.
struct Knob {
    /// Its index in [`CcParams::INFO`].
    index: usize,
    value: AtomicU32,
}

impl Knob {
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.value.load(Ordering::Relaxed))
    }

    /// A value out of the parameter's range is refused with `EINVAL`, never clamped.
    fn store(&self, r: &mut UserSliceReader) -> Result {
        let v = read_u32(r)?;
        let info = &CcParams::INFO[self.index];
        if !info.accepts(v) {
            return Err(out_of_range(info, v));
        }
        self.value.store(v, Ordering::Relaxed);
        Ok(())
    }
}

/// The switch, as its debugfs file sets it: 1 on, 0 off.
struct Switch(AtomicBool);

impl Switch {
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", u32::from(self.0.load(Ordering::Relaxed)))
    }

    fn store(&self, r: &mut UserSliceReader) -> Result {
        let on = match read_u32(r)? {
            0 => false,
            1 => true,
            v => {
                pr_warn!("ferroce: cc_enable={v} refused: 0 or 1\n");
                return Err(EINVAL);
            }
        };
        self.0.store(on, Ordering::Relaxed);
        Ok(())
    }
}

/// `v` for the parameter `info` is refused: a log line, and `EINVAL`.
fn out_of_range(info: &ParamInfo, v: u32) -> Error {
    pr_warn!(
        "ferroce: {}={v} refused: out of range ({}..={})\n",
        info.name,
        info.min,
        info.max
    );
    EINVAL
}

/// A decimal number written to a debugfs file.
fn read_u32(r: &mut UserSliceReader) -> Result<u32> {
    let mut buf = [0u8; 16];
    let n = r.len();
    let buf = buf.get_mut(..n).ok_or(EINVAL)?;
    r.read_slice(buf)?;
    let text = core::str::from_utf8(buf).map_err(|_| EINVAL)?;
    text.trim().parse().map_err(|_| EINVAL)
}

/// What a device's debugfs directory sets: `cc_enable` and `cc_params/<mlx5 name>`.
struct Settings {
    enabled: Switch,
    params: [Knob; CcParams::COUNT],
}

/// A device's congestion control: its switch and parameters, which the module parameters set
/// when the device is created and its debugfs files at any time after. Each packet reads them
/// afresh; a change applies from the next packet on.
pub(crate) struct Cc {
    settings: Pin<KBox<Scope<Settings>>>,
    /// The origin of the clock the DCQCN arithmetic reads.
    epoch: Instant<Monotonic>,
}

impl Cc {
    /// From the module parameters, with its files in `dir`/`name` (`EINVAL`, and a log line,
    /// for a module parameter out of its range).
    pub(crate) fn new(dir: &Dir, name: &CStr) -> Result<Self> {
        let initial = from_module_params()?;
        let settings = Settings {
            enabled: Switch(AtomicBool::new(crate::module_parameters::cc.value())),
            params: core::array::from_fn(|index| Knob {
                index,
                value: AtomicU32::new(initial.get(index).unwrap_or_default()),
            }),
        };
        let files = dir.scope(Ok::<_, Error>(settings), name, |s: &Settings, dir| {
            dir.read_write_callback_file(c"cc_enable", &s.enabled, &Switch::show, &Switch::store);
            let params = dir.dir(c"cc_params");
            for knob in &s.params {
                let name = CcParams::INFO[knob.index].c_name;
                params.read_write_callback_file(name, knob, &Knob::show, &Knob::store);
            }
        });
        Ok(Self {
            settings: KBox::pin_init(files, GFP_KERNEL)?,
            epoch: Instant::now(),
        })
    }

    /// Whether congestion control is on.
    pub(crate) fn enabled(&self) -> bool {
        self.settings.enabled.0.load(Ordering::Relaxed)
    }

    /// The parameters as they are now.
    fn params(&self) -> CcParams {
        let knobs = &self.settings.params;
        CcParams::from_fn(|i| knobs[i].value.load(Ordering::Relaxed))
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
        if !self.enabled() {
            return unmarked(path);
        }
        let tclass = dcqcn::ect(path.tclass());
        path.with_tclass(tclass)
    }
}

/// The parameters the module parameters give: `EINVAL` (and a log line) for a value out of
/// its range.
fn from_module_params() -> Result<CcParams> {
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
            return Err(out_of_range(&CcParams::INFO[i], value));
        }
    }
    Ok(params)
}

/// `path` as packets that do not react to congestion take it (UD sends are not paced, and
/// READ responses not yet): not ECN-capable, so a marking queue drops them rather than marks
/// them.
pub(crate) fn unmarked(path: Path) -> Path {
    let tclass = dcqcn::not_ect(path.tclass());
    path.with_tclass(tclass)
}

/// How far ahead of now a QP schedules its packets, in ns: [`PACE_BURST_PKTS`] packets' time,
/// within these bounds. Past it, the QP waits: for the ACK its last packet asked for (RC
/// requests) or for its timer, armed for when the next may go (see
/// [`crate::rc::comp::wake_paced`]). Each wait costs a timer's round and an ACK, so a slow QP
/// waits once per few packets; what waits in the qdisc stays short, and far from the ACK
/// timeout. Without a qdisc that honours departure times, this alone paces, in bursts of
/// about this long.
const PACE_HORIZON_NS: core::ops::RangeInclusive<u64> = 500_000..=2_000_000;
/// Packets a QP schedules ahead, where [`PACE_HORIZON_NS`] allows.
const PACE_BURST_PKTS: u64 = 8;
/// Packets a QP schedules ahead at most, and as many again when it catches up: `fq` drops a
/// flow's packets past 100.
const PACE_AHEAD_PKTS: u64 = 32;

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
    /// [`crate::rc::comp::wake_paced`]).
    pub(crate) wake_at: Option<Instant<Monotonic>>,
}

impl QpCc {
    pub(crate) const fn new() -> Self {
        Self {
            gate: CnpGate::new(),
            rate: Dcqcn::new(),
            last: 0,
            next: 0,
            wake: None,
            wake_at: None,
        }
    }

    /// When a packet of `wire_len` bytes (from the IP header) may leave, at the QP's rate: the
    /// lower of its DCQCN rate (while congestion control is on) and `limit_kbps`
    /// (`IB_QP_RATE_LIMIT`; 0: none).
    pub(crate) fn pace(&mut self, cc: &Cc, limit_kbps: u32, wire_len: usize) -> Pace {
        let dcqcn = cc.enabled() && self.rate.rate_kbps().is_some();
        // Unlimited (nearly always): no clock read per packet. Any `next` before now starts
        // the next limited stretch now.
        if !dcqcn && limit_kbps == 0 {
            self.next = 0;
            return Pace::Now;
        }
        let now = cc.now();
        let params = dcqcn.then(|| cc.params());
        let mut kbps = u64::from(limit_kbps);
        if let Some(p) = &params {
            self.rate.advance(now, p, LINE_MBPS);
            if let Some(rate) = self.rate.rate_kbps() {
                let rate = u64::from(rate.max(1));
                kbps = if kbps == 0 { rate } else { kbps.min(rate) };
            }
        }
        if kbps == 0 {
            self.next = 0;
            return Pace::Now;
        }
        let bytes = wire_len as u64;
        // Bits over kb/s is milliseconds.
        let len = (bytes * 8 * 1_000_000).div_ceil(kbps);
        let horizon = (len * PACE_BURST_PKTS)
            .clamp(*PACE_HORIZON_NS.start(), *PACE_HORIZON_NS.end())
            .min(len * PACE_AHEAD_PKTS);
        // A QP back later than its next packet was due (a timer's or a worker's latency)
        // catches up by one horizon at most: its rate over time stays the one set.
        let start = self.next.max(now.saturating_sub(horizon));
        if start > now + horizon {
            // However long a packet's time (a low rate, a large MTU), it waits in the qdisc one
            // horizon at most: far less than the ACK timeout.
            self.wake = Some(cc.at(start - horizon));
            return Pace::Wait;
        }
        self.last = start;
        self.next = start + len;
        if let Some(p) = &params {
            self.rate.on_sent(bytes, p, LINE_MBPS);
        }
        Pace::At {
            depart: cc.at(start),
            // Also when this one leaves late: no packet that is to wait goes without it.
            ask_ack: self.next > now + horizon,
        }
    }

    /// The next packet may go now: its time at the old rate no longer counts.
    pub(crate) fn restart(&mut self) {
        self.next = 0;
    }

    /// Whether the pacer holds the QP's next packet back: it has its wake-up.
    pub(crate) fn holds_back(&self) -> bool {
        self.wake.is_some() || self.wake_at.is_some()
    }

    /// When the QP's work is to come back after a [`Pace::Wait`], once.
    pub(crate) fn take_wake(&mut self) -> Option<Instant<Monotonic>> {
        self.wake.take()
    }
}

/// A packet for an RC or UC `qp`, of its transport and from its peer, came CE-marked: counted,
/// and answered with a CNP to its sender unless one left within `np_min_time_between_cnps`.
/// Never for a CNP or an ACK.
pub(crate) fn on_ce(cx: &mut QpCtx<'_>, pkt: &Packet<'_>, counters: &Counters) {
    counters.inc(Counter::NpEcnMarked);
    if matches!(pkt.info.kind, OpKind::Cnp | OpKind::Ack | OpKind::AtomicAck) {
        return;
    }
    if let Some(path) = cx.inner.path(cx.qp.qpn()) {
        let to = cx.inner.attr.dest_qp_num;
        send_cnp(cx, path, to, false, counters);
    }
}

/// Payload bytes a datagram needs to be answered with a CNP: with fewer, its packet would be
/// shorter than the CNP (BTH, DETH and ICRC against BTH, 16 reserved bytes and ICRC).
const CNP_TRIGGER_MIN_PAYLOAD: usize = 8;

/// A datagram for a UD `qp`, with its Q_Key, came CE-marked: counted, and answered with a CNP
/// to the QP that sent it (`src_qpn`, its DETH's), at the address it came from, as for RC.
///
/// UD has no peer to check the source against, so a forged datagram chooses where the CNP
/// goes: it gets one only if it is no shorter than the CNP, from a unicast address of another
/// host (not a broadcast, multicast, local or loopback one), and no more often than the QP's
/// gate lets one out.
pub(crate) fn on_datagram_ce(
    cx: &mut QpCtx<'_>,
    pkt: &Packet<'_>,
    src_qpn: u32,
    counters: &Counters,
) {
    counters.inc(Counter::NpEcnMarked);
    if cx.shared.qp_type() != QpType::Ud || pkt.payload.len() < CNP_TRIGGER_MIN_PAYLOAD {
        return;
    }
    // Back the way it came: from the address it reached to the one it left.
    let back = Av {
        sgid: pkt.hdr.dgid(),
        dgid: pkt.hdr.sgid(),
        tclass: 0,
        hop_limit: 0,
        flow_label: 0,
    };
    match back.path(cx.qp.qpn(), src_qpn) {
        Some(path) if !path.is_loopback() => send_cnp(cx, path, src_qpn, true, counters),
        _ => {}
    }
}

/// Sends a CNP along `path` to QP `to`, while congestion control is on and unless one left
/// `cx`'s QP within `np_min_time_between_cnps`; with `unicast`, only to another host.
fn send_cnp(cx: &mut QpCtx<'_>, path: Path, to: u32, unicast: bool, counters: &Counters) {
    let cc = &cx.dev().cc;
    if !cc.enabled() {
        return;
    }
    let params = cc.params();
    if !cx.inner.cc.gate.allow(cc.now(), &params) {
        return;
    }
    let mut bth = Bth::new(Opcode::Cnp as u8, to, Psn::default());
    bth.becn = true;
    let path = path.with_tclass(dcqcn::cnp_tclass(&params));
    let sent = cx.shared.with_path(cx.qp, path, |x| {
        if unicast && !x.is_unicast() {
            return Err(EHOSTUNREACH);
        }
        x.send(&bth, &ExtHeaders::default(), &[])
    });
    if let Ok(Ok(())) = sent {
        counters.inc(Counter::NpCnpSent);
    }
}

/// A CNP came for `qp` (from its peer, for RC and UC: the caller checked): it cuts the rate
/// of an RC or UC QP that sends, while congestion control is on. Any other is ignored: UD
/// sends are not paced, and a QP that does not send has no rate to cut.
pub(crate) fn on_cnp(cx: &mut QpCtx<'_>, counters: &Counters) {
    let cc = &cx.dev().cc;
    if !cc.enabled()
        || !matches!(cx.shared.qp_type(), QpType::Rc | QpType::Uc)
        || !cx.inner.attr.state.can_send()
    {
        counters.inc(Counter::RpCnpIgnored);
        return;
    }
    cx.inner.cc.rate.on_cnp(cc.now(), &cc.params(), LINE_MBPS);
    counters.inc(Counter::RpCnpHandled);
}
