// SPDX-License-Identifier: GPL-2.0

//! Packet sequence numbers: 24-bit counters that wrap, compared within half the space.

/// A 24-bit packet sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Psn(u32);

impl Psn {
    /// Number of bits in a PSN.
    pub(crate) const BITS: u32 = 24;
    /// Mask of the valid PSN bits.
    pub(crate) const MASK: u32 = (1 << Self::BITS) - 1;

    /// Makes a PSN from the low 24 bits of `value`; the upper bits are ignored, as on the wire.
    pub(crate) const fn new(value: u32) -> Self {
        Self(value & Self::MASK)
    }

    /// Returns the PSN as a 24-bit number.
    pub(crate) const fn get(self) -> u32 {
        self.0
    }

    /// Returns the PSN `n` packets later, wrapping at 2^24.
    pub(crate) const fn add(self, n: u32) -> Self {
        Self::new(self.0.wrapping_add(n))
    }

    /// Signed distance from `other` to `self`, in [-2^23, 2^23).
    ///
    /// Positive when `self` comes after `other` in sequence order. This is the comparison IBTA
    /// uses for duplicate and out-of-sequence detection.
    pub(crate) const fn diff(self, other: Psn) -> i32 {
        // Shift the 24-bit difference into the top of an i32 and back, sign-extending it.
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// Whether `self` is before `other` in sequence order.
    pub(crate) const fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }
}

#[cfg(test)]
mod tests {
    use super::Psn;

    #[test]
    fn new_keeps_24_bits() {
        assert_eq!(Psn::new(0x1ab_cdef).get(), 0xab_cdef);
        assert_eq!(Psn::new(Psn::MASK).get(), 0xff_ffff);
    }

    #[test]
    fn add_wraps_at_2_pow_24() {
        assert_eq!(Psn::new(0xff_fffe).add(3), Psn::new(1));
        assert_eq!(Psn::new(5).add(Psn::MASK + 1), Psn::new(5));
    }

    #[test]
    fn diff_is_signed_across_the_wrap() {
        assert_eq!(Psn::new(2).diff(Psn::new(0xff_fffe)), 4);
        assert_eq!(Psn::new(0xff_fffe).diff(Psn::new(2)), -4);
        assert_eq!(Psn::new(7).diff(Psn::new(7)), 0);
        // Exactly half the space away counts as "before": the range is [-2^23, 2^23).
        assert_eq!(Psn::new(1 << 23).diff(Psn::new(0)), -(1 << 23));
        assert_eq!(Psn::new((1 << 23) - 1).diff(Psn::new(0)), (1 << 23) - 1);
    }

    #[test]
    fn before_orders_within_the_window() {
        assert!(Psn::new(0xff_ffff).before(Psn::new(0)));
        assert!(!Psn::new(0).before(Psn::new(0xff_ffff)));
        assert!(!Psn::new(3).before(Psn::new(3)));
    }
}
