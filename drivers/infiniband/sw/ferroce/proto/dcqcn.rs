// SPDX-License-Identifier: GPL-2.0

//! ECN congestion control: DCQCN (Zhu et al., SIGCOMM 2015) as NVIDIA NICs run it, with
//! their parameter names (mlx5's `cc_params`) and defaults.
//!
//! The notification point (the receiver of a CE-marked packet) answers with a CNP, at most one
//! per QP per `np_min_time_between_cnps` ([`CnpGate`]). The reaction point (the sender) keeps a
//! current rate `rc` and a target rate `rt` per QP ([`Dcqcn`]): a CNP cuts `rc` by `alpha / 2`
//! (at most by `100 - rp_min_dec_fac` percent, at most once per
//! `rp_rate_reduce_monitor_period`) and raises `alpha`; without CNPs `alpha` decays every
//! `rp_dce_tcp_rtt`, and every `rp_time_reset` and every `rp_byte_reset` × 64 bytes sent the
//! rate climbs back: fast recovery (`rc` halfway to `rt`) for `rp_threshold` steps, then
//! additive (`rt += rp_ai_rate`) and, once both the timer and the byte counter are past the
//! threshold, hyper increase (`rt += rp_hai_rate`). `alpha` is a fraction of 1024 in the
//! parameters, of 2^20 in a QP.
//!
//! Time is in nanoseconds from any fixed origin. The parameters give rates in Mb/s, as mlx5
//! does; a QP's rates are kept in kb/s, so that a cut of a few percent of a slow rate is not
//! rounded away (at 14 Mb/s, a cut by an `alpha` under 1/7 is less than 1 Mb/s).

/// `alpha` is `ALPHA_ONE` at 1.0 in the parameters.
const ALPHA_ONE: u32 = 1024;
/// Bits of `alpha` a QP keeps below the parameters' 1024ths: its decay by `g / 1024` per
/// period would otherwise round a small `alpha` down by a whole 1024th each time, to 0 within
/// a few periods, so that CNPs a few periods apart (a slow rate) never raise it.
const ALPHA_FRAC: u32 = 10;
/// Decays of `alpha` applied at most at once: past this many it is 0 (or all but, for the
/// slowest decay) whatever the parameters.
const MAX_DECAYS: u64 = 1 << 14;
/// Increase steps applied at most at once: past this many, `rc` and `rt` are at the line rate
/// whatever the parameters (each step adds at least 1 Mb/s to `rt` and halves the gap to it).
const MAX_STEPS: u64 = 1 << 20;

/// One parameter: its mlx5 name, default and accepted range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParamInfo {
    pub(crate) name: &'static str,
    /// `name` for C: a debugfs file's.
    pub(crate) c_name: &'static core::ffi::CStr,
    pub(crate) default: u32,
    pub(crate) min: u32,
    pub(crate) max: u32,
}

impl ParamInfo {
    /// Whether `v` is within the parameter's range.
    pub(crate) const fn accepts(&self, v: u32) -> bool {
        v >= self.min && v <= self.max
    }
}

macro_rules! params {
    ($($(#[$doc:meta])* $field:ident: $default:literal, $min:literal ..= $max:literal;)*) => {
        /// The congestion-control parameters of one device.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) struct CcParams {
            $($(#[$doc])* pub(crate) $field: u32,)*
        }

        impl CcParams {
            /// Every parameter, in the order of [`CcParams::get`] and [`CcParams::set`].
            pub(crate) const INFO: &'static [ParamInfo] = &[
                $(ParamInfo {
                    name: stringify!($field),
                    c_name: match core::ffi::CStr::from_bytes_with_nul(
                        concat!(stringify!($field), "\0").as_bytes(),
                    ) {
                        Ok(c) => c,
                        Err(_) => panic!("a parameter name with a NUL"),
                    },
                    default: $default,
                    min: $min,
                    max: $max,
                },)*
            ];

            /// NVIDIA's defaults.
            pub(crate) const DEFAULT: Self = Self { $($field: $default,)* };

            /// How many parameters there are.
            pub(crate) const COUNT: usize = Self::INFO.len();

            /// Parameter `i` of [`CcParams::INFO`] is `value(i)`, unchecked: for values that
            /// went through [`CcParams::set`] once.
            pub(crate) fn from_fn(mut value: impl FnMut(usize) -> u32) -> Self {
                let mut n = 0;
                Self {
                    $($field: {
                        n += 1;
                        value(n - 1)
                    },)*
                }
            }

            /// The value of parameter `i` of [`CcParams::INFO`].
            pub(crate) fn get(&self, i: usize) -> Option<u32> {
                let mut n = 0;
                $(
                    if n == i {
                        return Some(self.$field);
                    }
                    n += 1;
                )*
                let _ = n;
                None
            }

            /// Sets parameter `i` of [`CcParams::INFO`]; a value out of its range is refused,
            /// never clamped.
            pub(crate) fn set(&mut self, i: usize, v: u32) -> Result<(), ParamError> {
                let info = Self::INFO.get(i).ok_or(ParamError::NoSuchParam)?;
                if !info.accepts(v) {
                    return Err(ParamError::OutOfRange);
                }
                let mut n = 0;
                $(
                    if n == i {
                        self.$field = v;
                    }
                    n += 1;
                )*
                let _ = n;
                Ok(())
            }
        }
    };
}

params! {
    /// `alpha` weight, in 1024ths: a CNP sets `alpha = alpha * g / 1024 + (1023 - g)` (so that
    /// it stays within 10 bits), each `rp_dce_tcp_rtt` without one `alpha = alpha * g / 1024`.
    rp_dce_tcp_g: 1019, 0..=1023;
    /// Microseconds between `alpha` decays.
    rp_dce_tcp_rtt: 1, 1..=131_071;
    /// `alpha` of a QP that has not had a CNP yet, in 1024ths.
    rp_initial_alpha_value: 1023, 0..=1023;
    /// The rate a first CNP starts from, Mb/s; 0: the line rate.
    rp_rate_to_set_on_first_cnp: 0, 0..=400_000;
    /// A cut leaves at least this percentage of the rate.
    rp_min_dec_fac: 50, 1..=100;
    /// The floor of the rate, Mb/s.
    rp_min_rate: 1, 1..=400_000;
    /// The ceiling of the rate, Mb/s; 0: the line rate.
    rp_max_rate: 0, 0..=400_000;
    /// The cut is `rc * alpha >> rp_gd` (11: `rc * alpha / 2`).
    rp_gd: 11, 0..=15;
    /// Microseconds within which a second CNP does not cut the rate again.
    rp_rate_reduce_monitor_period: 4, 0..=131_071;
    /// Microseconds between timer increase steps.
    rp_time_reset: 300, 1..=131_071;
    /// Units of 64 bytes sent between byte-counter increase steps.
    rp_byte_reset: 32_767, 1..=32_767;
    /// Steps of fast recovery (F of the paper).
    rp_threshold: 1, 1..=31;
    /// Additive increase of the target rate, Mb/s.
    rp_ai_rate: 5, 1..=100_000;
    /// Hyper increase of the target rate, Mb/s.
    rp_hai_rate: 50, 1..=100_000;
    /// 1: every CNP sets the target rate to the current one.
    rp_clamp_tgt_rate: 0, 0..=1;
    /// 1: a CNP sets the target rate to the current one if the timer raised the rate since
    /// the last CNP.
    rp_clamp_tgt_rate_ati: 1, 0..=1;
    /// Microseconds at least between two CNPs of one QP.
    np_min_time_between_cnps: 4, 0..=131_071;
    /// The DSCP CNPs leave with.
    np_cnp_dscp: 48, 0..=63;
}

/// Why a parameter write is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ParamError {
    NoSuchParam,
    OutOfRange,
}

impl CcParams {
    /// The rate ceiling for a link of `line_mbps`, in Mb/s.
    fn max_rate(&self, line_mbps: u32) -> u32 {
        match self.rp_max_rate {
            0 => line_mbps,
            m => m.min(line_mbps),
        }
        .max(self.rp_min_rate)
    }

    /// The rate ceiling for a link of `line_mbps`, in kb/s.
    fn max_kbps(&self, line_mbps: u32) -> u32 {
        kbps(self.max_rate(line_mbps))
    }
}

/// The ECN field's values (RFC 3168).
const ECN_MASK: u8 = 3;
const ECN_ECT0: u8 = 2;
const ECN_CE: u8 = 3;

/// The traffic class of a packet that reacts to congestion marks: the DSCP given, ECT(0).
/// An ECN field from the address vector is never sent as given: a CE mark set by a user would
/// make the receiver send CNPs to whoever it names.
pub(crate) const fn ect(tclass: u8) -> u8 {
    (tclass & !ECN_MASK) | ECN_ECT0
}

/// The traffic class of a packet that does not react to congestion marks: the DSCP given,
/// not ECN-capable.
pub(crate) const fn not_ect(tclass: u8) -> u8 {
    tclass & !ECN_MASK
}

/// The traffic class a CNP leaves with: `np_cnp_dscp`, not ECN-capable.
pub(crate) const fn cnp_tclass(p: &CcParams) -> u8 {
    (p.np_cnp_dscp as u8) << 2
}

/// Whether the IP header `ip` (IPv4 or IPv6, by its version) says Congestion Experienced.
pub(crate) fn is_ce(ip: &[u8]) -> bool {
    let ecn = match ip.first().map(|b| b >> 4) {
        Some(4) => ip.get(1).copied(),
        Some(6) => ip.get(1).map(|b| b >> 4),
        _ => None,
    };
    ecn.is_some_and(|e| e & ECN_MASK == ECN_CE)
}

const fn us(v: u32) -> u64 {
    v as u64 * 1000
}

/// `mbps` Mb/s in kb/s (the parameters' rates are at most 400 Gb/s: no overflow).
const fn kbps(mbps: u32) -> u32 {
    mbps.saturating_mul(1000)
}

/// The notification point of one QP: whether a CE-marked packet may be answered with a CNP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CnpGate {
    last: Option<u64>,
}

impl CnpGate {
    /// A QP that has sent no CNP.
    pub(crate) const fn new() -> Self {
        Self { last: None }
    }

    /// Whether a CNP may leave at `now`; if so, it counts as sent.
    pub(crate) fn allow(&mut self, now: u64, p: &CcParams) -> bool {
        if let Some(last) = self.last {
            if now.wrapping_sub(last) < us(p.np_min_time_between_cnps) {
                return false;
            }
        }
        self.last = Some(now);
        true
    }
}

/// What a CNP did at the reaction point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CnpEffect {
    /// The rate was cut.
    Cut,
    /// Within the monitor period of the last cut: only `alpha` moved.
    AlphaOnly,
}

/// The reaction point of one QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dcqcn {
    /// Not limited until the first CNP.
    limited: bool,
    /// Current and target rate, kb/s.
    rc: u32,
    rt: u32,
    alpha: u32,
    /// When `alpha` last decayed (none before the first CNP), the rate was last cut, the
    /// timer last stepped.
    alpha_at: Option<u64>,
    cut_at: Option<u64>,
    timer_at: u64,
    /// Increase steps since the last CNP, by timer and by byte counter.
    t: u32,
    bc: u32,
    /// Bytes sent towards the next byte-counter step.
    bytes: u64,
    /// Whether a timer step raised the rate since the last CNP.
    timer_raised: bool,
}

impl Dcqcn {
    /// A QP that has had no CNP: at the line rate. Its `alpha` is set by the first CNP.
    pub(crate) const fn new() -> Self {
        Self {
            limited: false,
            rc: 0,
            rt: 0,
            alpha: 0,
            alpha_at: None,
            cut_at: None,
            timer_at: 0,
            t: 0,
            bc: 0,
            bytes: 0,
            timer_raised: false,
        }
    }

    /// The rate the QP may send at, kb/s; `None` while it is not limited (no CNP yet, or it
    /// has climbed back to the line rate).
    pub(crate) fn rate_kbps(&self) -> Option<u32> {
        self.limited.then_some(self.rc)
    }

    /// `alpha`, in 2^20ths.
    #[cfg(ferroce_host)]
    pub(crate) fn alpha(&self) -> u32 {
        self.alpha
    }

    /// The target rate, kb/s, while limited.
    #[cfg(ferroce_host)]
    pub(crate) fn target_kbps(&self) -> Option<u32> {
        self.limited.then_some(self.rt)
    }

    /// A CNP for this QP arrived at `now`.
    pub(crate) fn on_cnp(&mut self, now: u64, p: &CcParams, line_mbps: u32) -> CnpEffect {
        let max = p.max_kbps(line_mbps);
        if self.alpha_at.is_none() {
            // The first CNP: `alpha` starts where the parameters say now.
            self.alpha = p.rp_initial_alpha_value << ALPHA_FRAC;
        }
        self.advance(now, p, line_mbps);
        self.decay_alpha(now, p);
        if !self.limited {
            let first = match p.rp_rate_to_set_on_first_cnp {
                0 => max,
                r => kbps(r).clamp(kbps(p.rp_min_rate), max),
            };
            self.limited = true;
            self.rc = first;
            self.rt = max;
        }
        let effect = match self.cut_at {
            Some(at) if now.wrapping_sub(at) < us(p.rp_rate_reduce_monitor_period) => {
                CnpEffect::AlphaOnly
            }
            _ => {
                if p.rp_clamp_tgt_rate == 1 || (p.rp_clamp_tgt_rate_ati == 1 && self.timer_raised) {
                    self.rt = self.rc;
                }
                let by_alpha =
                    (u64::from(self.rc) * u64::from(self.alpha)) >> (p.rp_gd + ALPHA_FRAC);
                let most = u64::from(self.rc) * u64::from(100 - p.rp_min_dec_fac) / 100;
                let cut = by_alpha.min(most) as u32;
                self.rc = (self.rc - cut).max(kbps(p.rp_min_rate));
                self.cut_at = Some(now);
                CnpEffect::Cut
            }
        };
        self.alpha = (self.alpha * p.rp_dce_tcp_g) / ALPHA_ONE
            + ((ALPHA_ONE - 1 - p.rp_dce_tcp_g) << ALPHA_FRAC);
        self.alpha_at = Some(now);
        self.timer_at = now;
        self.t = 0;
        self.bc = 0;
        self.bytes = 0;
        self.timer_raised = false;
        effect
    }

    /// Time passes until `now`: `alpha` decays and the timer steps the rate up.
    pub(crate) fn advance(&mut self, now: u64, p: &CcParams, line_mbps: u32) {
        if !self.limited {
            return;
        }
        self.decay_alpha(now, p);
        let steps = now.saturating_sub(self.timer_at) / us(p.rp_time_reset);
        self.timer_at += steps * us(p.rp_time_reset);
        for _ in 0..steps.min(MAX_STEPS) {
            self.t = self.t.saturating_add(1);
            self.timer_raised = true;
            if !self.step(p, line_mbps) {
                return;
            }
        }
    }

    /// `alpha` decays for each period since it last moved (it does while unlimited too).
    fn decay_alpha(&mut self, now: u64, p: &CcParams) {
        let Some(at) = self.alpha_at else {
            return;
        };
        let period = us(p.rp_dce_tcp_rtt);
        let decays = now.saturating_sub(at) / period;
        self.alpha_at = Some(at + decays * period);
        // Each decay takes at least 1 off a non-zero alpha below 2^20.
        for _ in 0..decays.min(MAX_DECAYS) {
            if self.alpha == 0 {
                break;
            }
            self.alpha = self.alpha * p.rp_dce_tcp_g / ALPHA_ONE;
        }
    }

    /// `bytes` were sent.
    pub(crate) fn on_sent(&mut self, bytes: u64, p: &CcParams, line_mbps: u32) {
        if !self.limited {
            return;
        }
        let per = u64::from(p.rp_byte_reset) * 64;
        self.bytes += bytes;
        let steps = self.bytes / per;
        self.bytes %= per;
        for _ in 0..steps.min(MAX_STEPS) {
            self.bc = self.bc.saturating_add(1);
            if !self.step(p, line_mbps) {
                return;
            }
        }
    }

    /// One increase step; false once the QP is back at the ceiling and no longer limited.
    fn step(&mut self, p: &CcParams, line_mbps: u32) -> bool {
        let max = p.max_kbps(line_mbps);
        let f = p.rp_threshold;
        if self.t.max(self.bc) <= f {
            // Fast recovery: towards the rate before the cut.
        } else if self.t.min(self.bc) > f {
            self.rt = self.rt.saturating_add(kbps(p.rp_hai_rate)).min(max);
        } else {
            self.rt = self.rt.saturating_add(kbps(p.rp_ai_rate)).min(max);
        }
        // Rounded up, so the rate reaches the target.
        self.rc = ((u64::from(self.rc) + u64::from(self.rt)).div_ceil(2) as u32).min(max);
        if self.rc >= max {
            self.limited = false;
            self.rc = max;
            self.rt = max;
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: u32 = 10_000;
    const P: CcParams = CcParams::DEFAULT;

    #[test]
    fn parameters_by_index_round_trip() {
        let mut p = P;
        for (i, info) in CcParams::INFO.iter().enumerate() {
            assert_eq!(info.c_name.to_bytes(), info.name.as_bytes());
            assert!(info.accepts(info.default) && info.accepts(info.min) && info.accepts(info.max));
            assert_eq!(p.set(i, info.max), Ok(()), "{}", info.name);
        }
        assert_eq!(CcParams::COUNT, 18);
        let q = CcParams::from_fn(|i| p.get(i).unwrap());
        assert_eq!(q, p);
        assert_eq!(CcParams::from_fn(|i| CcParams::INFO[i].default), P);
        p.rp_gd = 7;
        assert_ne!(CcParams::from_fn(|i| q.get(i).unwrap()), p);
    }

    #[test]
    fn defaults_are_nvidias_and_bad_values_are_refused() {
        let mut p = P;
        let i = CcParams::INFO
            .iter()
            .position(|i| i.name == "rp_min_dec_fac")
            .unwrap();
        assert_eq!(p.get(i), Some(50));
        assert_eq!(p.set(i, 0), Err(ParamError::OutOfRange));
        assert_eq!(p.set(i, 101), Err(ParamError::OutOfRange));
        assert_eq!(p, P, "a refused value changes nothing");
        assert_eq!(p.set(i, 80), Ok(()));
        assert_eq!(p.rp_min_dec_fac, 80);
        assert_eq!(p.set(CcParams::INFO.len(), 1), Err(ParamError::NoSuchParam));
        assert_eq!(P.rp_dce_tcp_g, 1019);
        assert_eq!(P.rp_gd, 11);
        assert_eq!(P.rp_ai_rate, 5);
        assert_eq!(P.rp_hai_rate, 50);
        assert_eq!(P.rp_time_reset, 300);
        assert_eq!(P.rp_byte_reset, 32_767);
        assert_eq!(P.np_cnp_dscp, 48);
        for (i, info) in CcParams::INFO.iter().enumerate() {
            assert_eq!(P.get(i), Some(info.default), "{}", info.name);
            assert!(
                info.min <= info.default && info.default <= info.max,
                "{}",
                info.name
            );
        }
    }

    #[test]
    fn ecn_codepoints() {
        assert_eq!(ect(0), 2);
        assert_eq!(ect(106), 106, "DSCP 26 with ECT(0) stays");
        assert_eq!(ect(105), 106, "ECT(1) becomes ECT(0)");
        assert_eq!(ect(0xb8 | 3), 0xba, "a user's CE mark is not sent");
        assert_eq!(not_ect(0xbb), 0xb8);
        assert_eq!(cnp_tclass(&P), 0xc0);
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[1] = 0xbb;
        assert!(is_ce(&v4));
        v4[1] = 0xba;
        assert!(!is_ce(&v4));
        // IPv6: the traffic class straddles bytes 0 and 1.
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[1] = 0x30;
        assert!(is_ce(&v6));
        v6[1] = 0x2f;
        assert!(!is_ce(&v6));
        assert!(!is_ce(&[]));
    }

    #[test]
    fn the_gate_lets_one_cnp_through_per_interval() {
        let mut p = P;
        p.np_min_time_between_cnps = 50;
        let mut g = CnpGate::default();
        assert!(g.allow(1_000, &p));
        assert!(!g.allow(1_000, &p));
        assert!(!g.allow(50_999, &p));
        assert!(g.allow(51_000, &p));
        p.np_min_time_between_cnps = 0;
        assert!(g.allow(51_000, &p));
    }

    #[test]
    fn a_first_cnp_cuts_the_line_rate_by_alpha_over_two() {
        let mut d = Dcqcn::new();
        assert_eq!(d.rate_kbps(), None);
        assert_eq!(d.on_cnp(0, &P, LINE), CnpEffect::Cut);
        // alpha 1023/1024: the cut is 10 Gb/s * 1023 >> 11 = 4995117 kb/s, within the 50% floor.
        assert_eq!(d.rate_kbps(), Some(5_004_883));
        assert_eq!(d.target_kbps(), Some(LINE * 1000));
        // alpha = 1023/1024 * 1019/1024 + 4/1024, kept in 2^20ths.
        assert_eq!(d.alpha(), 1023 * 1019 + (4 << 10));
    }

    #[test]
    fn a_small_alpha_still_cuts_a_slow_rate() {
        let mut p = P;
        p.rp_rate_to_set_on_first_cnp = 14;
        p.rp_initial_alpha_value = 4;
        let mut d = Dcqcn::new();
        d.on_cnp(0, &p, LINE);
        // 14000 kb/s * 4 >> 11 = 27 kb/s (in whole Mb/s the cut would be 0: no cut at all).
        assert_eq!(d.rate_kbps(), Some(13_973));
    }

    #[test]
    fn cnps_ten_decays_apart_keep_alpha_up() {
        let mut p = P;
        p.rp_rate_reduce_monitor_period = 0;
        p.rp_initial_alpha_value = 0;
        let mut d = Dcqcn::new();
        // A CNP every 10 us, alpha decaying every 1 us: each CNP adds 4/1024, and the ten
        // decays and the CNP's own weighting take 1 - (1019/1024)^11, about 5.2%, off. Rounded
        // to 1024ths each decay would take a whole 1024th off and alpha would stay at 4/1024;
        // kept finer, it settles at 4 / 0.052, about 76/1024.
        for i in 0..2_000u64 {
            d.on_cnp(i * 10_000, &p, LINE);
        }
        let a = d.alpha() >> 10;
        assert!((74..=78).contains(&a), "alpha {a}/1024");
    }

    #[test]
    fn the_first_cnp_takes_the_initial_alpha_of_the_parameters_then() {
        let mut p = P;
        let mut d = Dcqcn::new();
        // Set after the QP was created, before its first CNP: alpha 512/1024 cuts by a quarter.
        p.rp_initial_alpha_value = 512;
        d.on_cnp(0, &p, LINE);
        assert_eq!(d.rate_kbps(), Some(7_500_000));
        // alpha = 512/1024 * 1019/1024 + 4/1024, in 2^20ths; later CNPs go on from there.
        assert_eq!(d.alpha(), 512 * 1019 + (4 << 10));
        p.rp_initial_alpha_value = 1023;
        d.on_cnp(5, &p, LINE);
        assert_eq!(d.rate_kbps(), Some(7_500_000), "within the monitor period");
        assert_eq!(
            d.alpha(),
            (512 * 1019 + (4 << 10)) * 1019 / 1024 + (4 << 10)
        );
    }

    #[test]
    fn the_cut_is_at_most_min_dec_fac_and_never_below_min_rate() {
        let mut p = P;
        p.rp_min_dec_fac = 80;
        let mut d = Dcqcn::new();
        d.on_cnp(0, &p, LINE);
        assert_eq!(d.rate_kbps(), Some(8_000_000), "a 20% cut at most");
        p.rp_min_dec_fac = 1;
        p.rp_min_rate = 3_000;
        p.rp_rate_reduce_monitor_period = 0;
        for i in 1..20 {
            d.on_cnp(i, &p, LINE);
        }
        assert_eq!(d.rate_kbps(), Some(3_000_000));
    }

    #[test]
    fn cnps_within_the_monitor_period_move_only_alpha() {
        let mut d = Dcqcn::new();
        d.on_cnp(0, &P, LINE);
        let a = d.alpha();
        assert_eq!(d.on_cnp(3_999, &P, LINE), CnpEffect::AlphaOnly);
        assert_eq!(d.rate_kbps(), Some(5_004_883));
        // Three decays (1 µs each), then the CNP's rise.
        let decayed = (0..3).fold(a, |a, _| a * 1019 / 1024);
        assert_eq!(d.alpha(), decayed * 1019 / 1024 + (4 << 10));
        assert_eq!(d.on_cnp(8_000, &P, LINE), CnpEffect::Cut);
        assert!(d.rate_kbps().unwrap() < 5_004_883);
    }

    #[test]
    fn alpha_decays_by_g_each_period_without_cnps() {
        let mut d = Dcqcn::new();
        d.on_cnp(0, &P, LINE);
        let a = 1023 * 1019 + (4 << 10);
        assert_eq!(d.alpha(), a);
        d.advance(1_000, &P, LINE);
        assert_eq!(d.alpha(), a * 1019 / 1024);
        d.advance(2_999, &P, LINE);
        assert_eq!(d.alpha(), a * 1019 / 1024 * 1019 / 1024);
        // Long enough without CNPs, alpha reaches 0, and the next cut is 0.
        d.advance(10_000_000, &P, LINE);
        assert_eq!(d.alpha(), 0);
    }

    #[test]
    fn the_timer_recovers_fast_then_additively_then_hyper() {
        let mut p = P;
        p.rp_threshold = 2;
        p.rp_byte_reset = 1;
        let mut d = Dcqcn::new();
        d.on_cnp(0, &p, LINE);
        let (rc, rt) = (d.rate_kbps().unwrap(), d.target_kbps().unwrap());
        assert_eq!((rc, rt), (5_004_883, 10_000_000));
        // Two timer steps of fast recovery: rc halfway to rt (rounded up), rt unchanged.
        d.advance(300_000, &p, LINE);
        assert_eq!(
            (d.rate_kbps(), d.target_kbps()),
            (Some(7_502_442), Some(10_000_000))
        );
        d.advance(600_000, &p, LINE);
        assert_eq!(
            (d.rate_kbps(), d.target_kbps()),
            (Some(8_751_221), Some(10_000_000))
        );
        // The byte counter alone still fast-recovers (t 2, bc 1).
        d.on_sent(64, &p, LINE);
        assert_eq!(
            (d.rate_kbps(), d.target_kbps()),
            (Some(9_375_611), Some(10_000_000))
        );
        // Then the target is at the line rate: the next step reaches it and ends the limit.
        d.advance(900_000, &p, LINE);
        assert_eq!(d.rate_kbps(), Some(9_687_806));
        for i in 4..40 {
            d.advance(i * 300_000, &p, LINE);
        }
        assert_eq!(
            d.rate_kbps(),
            None,
            "back at the line rate, no longer limited"
        );
    }

    #[test]
    fn additive_and_hyper_increase_raise_the_target() {
        let mut p = P;
        p.rp_threshold = 1;
        p.rp_byte_reset = 1;
        p.rp_clamp_tgt_rate = 1;
        let mut d = Dcqcn::new();
        d.on_cnp(0, &p, LINE);
        // Clamped: rt = rc before the cut.
        assert_eq!(d.target_kbps(), Some(10_000_000));
        p.rp_rate_reduce_monitor_period = 0;
        d.on_cnp(1, &p, LINE);
        let rc = d.rate_kbps().unwrap();
        assert_eq!(d.target_kbps(), Some(5_004_883));
        d.advance(300_001, &p, LINE); // t 1: fast recovery
        assert_eq!(d.target_kbps(), Some(5_004_883));
        d.advance(600_001, &p, LINE); // t 2, bc 0: additive, 5 Mb/s
        assert_eq!(d.target_kbps(), Some(5_009_883));
        d.on_sent(64, &p, LINE); // t 2, bc 1: additive
        assert_eq!(d.target_kbps(), Some(5_014_883));
        d.on_sent(64, &p, LINE); // t 2, bc 2: hyper, 50 Mb/s
        assert_eq!(d.target_kbps(), Some(5_064_883));
        assert!(d.rate_kbps().unwrap() > rc);
    }

    #[test]
    fn a_first_cnp_may_start_from_a_set_rate_and_the_ceiling_holds() {
        let mut p = P;
        p.rp_rate_to_set_on_first_cnp = 2_000;
        p.rp_max_rate = 8_000;
        let mut d = Dcqcn::new();
        d.on_cnp(0, &p, LINE);
        assert_eq!(d.rate_kbps(), Some(2_000_000 - (2_000_000 * 1023 >> 11)));
        assert_eq!(d.target_kbps(), Some(8_000_000));
        d.advance(u64::MAX / 2, &p, LINE);
        assert_eq!(d.rate_kbps(), None);
    }

    /// Deterministic xorshift, for the property test below.
    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn rate_and_alpha_stay_in_range_whatever_happens() {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200 {
            let mut p = P;
            for (i, info) in CcParams::INFO.iter().enumerate() {
                if rng(&mut seed) % 3 == 0 {
                    let span = u64::from(info.max - info.min) + 1;
                    p.set(i, info.min + (rng(&mut seed) % span) as u32).unwrap();
                }
            }
            let line = 1 + (rng(&mut seed) % 100_000) as u32;
            let max = p.max_kbps(line);
            let mut d = Dcqcn::new();
            let mut now = 0u64;
            for _ in 0..500 {
                now += rng(&mut seed) % 400_000;
                match rng(&mut seed) % 3 {
                    0 => {
                        d.on_cnp(now, &p, line);
                    }
                    1 => d.advance(now, &p, line),
                    _ => d.on_sent(rng(&mut seed) % 4_000_000, &p, line),
                }
                assert!(d.alpha() < ALPHA_ONE << ALPHA_FRAC);
                if let Some(rc) = d.rate_kbps() {
                    assert!(
                        rc >= kbps(p.rp_min_rate).min(max) && rc <= max,
                        "{rc} of {max}"
                    );
                    assert!(d.target_kbps().unwrap() <= max);
                }
            }
        }
    }
}
