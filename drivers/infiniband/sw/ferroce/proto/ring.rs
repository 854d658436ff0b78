// SPDX-License-Identifier: GPL-2.0

//! Index math of the rings shared with rdma-core's rxe provider (`struct rxe_queue_buf`).
//!
//! A ring is a 384-byte header (element size, index mask, and the producer and consumer indices
//! on their own cache lines) followed by a power-of-two number of slots. Indices are stored
//! masked; one slot stays empty so that full and empty differ. User space owns one index and
//! may write anything there, so every index read from the ring is masked before use.

/// Offset of `log2_elem_size`.
pub(crate) const LOG2_ELEM_SIZE_OFFSET: usize = 0;
/// Offset of `index_mask`.
pub(crate) const INDEX_MASK_OFFSET: usize = 4;
/// Offset of `producer_index`.
pub(crate) const PRODUCER_OFFSET: usize = 128;
/// Offset of `consumer_index`.
pub(crate) const CONSUMER_OFFSET: usize = 256;
/// Offset of the first slot.
pub(crate) const HEADER_LEN: usize = 384;

/// The shape of one ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    mask: u32,
    log2_elem: u32,
}

impl Geometry {
    /// A ring holding at least `entries` elements of `elem_size` bytes; `None` if `entries` is 0
    /// or above `max_entries`, or if the ring would not fit in `u32` bytes.
    pub(crate) fn new(entries: u32, elem_size: usize, max_entries: u32) -> Option<Self> {
        if entries == 0 || entries > max_entries || elem_size == 0 {
            return None;
        }
        let slots = entries.checked_add(1)?.checked_next_power_of_two()?;
        let elem = u32::try_from(elem_size).ok()?.checked_next_power_of_two()?;
        let this = Self {
            mask: slots - 1,
            log2_elem: elem.trailing_zeros(),
        };
        u32::try_from(this.bytes()?).ok()?;
        Some(this)
    }

    /// How many elements fit (one slot stays free).
    pub(crate) const fn capacity(&self) -> u32 {
        self.mask
    }

    /// The mask stored in the header.
    pub(crate) const fn mask(&self) -> u32 {
        self.mask
    }

    /// `log2` of the slot stride.
    pub(crate) const fn log2_elem(&self) -> u32 {
        self.log2_elem
    }

    /// The whole ring's size in bytes.
    pub(crate) fn bytes(&self) -> Option<usize> {
        let slots = usize::try_from(self.mask).ok()?.checked_add(1)?;
        slots.checked_shl(self.log2_elem)?.checked_add(HEADER_LEN)
    }

    /// Byte offset of the slot of `index` (any value: it is masked).
    pub(crate) fn slot_offset(&self, index: u32) -> usize {
        // The shift cannot overflow: `bytes()` fit in a `u32` when the ring was made.
        HEADER_LEN + (((index & self.mask) as usize) << self.log2_elem)
    }

    /// The index after `index`.
    pub(crate) const fn next(&self, index: u32) -> u32 {
        index.wrapping_add(1) & self.mask
    }

    /// Elements between `cons` and `prod` (both masked first).
    pub(crate) const fn count(&self, prod: u32, cons: u32) -> u32 {
        (prod & self.mask).wrapping_sub(cons & self.mask) & self.mask
    }

    /// Whether a producer at `prod` must wait for a consumer at `cons`.
    pub(crate) const fn is_full(&self, prod: u32, cons: u32) -> bool {
        self.next(prod) == cons & self.mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_up_and_keep_a_free_slot() {
        let g = Geometry::new(1, 48, 32767).unwrap();
        assert_eq!((g.capacity(), g.log2_elem()), (1, 6));
        let g = Geometry::new(100, 48, 32767).unwrap();
        assert_eq!(g.capacity(), 127);
        assert_eq!(g.bytes(), Some(HEADER_LEN + 128 * 64));
        let g = Geometry::new(32767, 48, 32767).unwrap();
        assert_eq!(g.capacity(), 32767);
        assert_eq!(Geometry::new(128, 64, 1 << 20).unwrap().capacity(), 255);
    }

    #[test]
    fn refuses_zero_too_many_and_overflow() {
        assert_eq!(Geometry::new(0, 48, 10), None);
        assert_eq!(Geometry::new(11, 48, 10), None);
        assert_eq!(Geometry::new(u32::MAX, 48, u32::MAX), None);
        assert_eq!(Geometry::new(1 << 30, 64, u32::MAX), None);
        assert_eq!(Geometry::new(1, 0, 10), None);
    }

    #[test]
    fn indices_wrap_and_hostile_values_are_masked() {
        let g = Geometry::new(3, 64, 10).unwrap();
        assert_eq!(g.mask(), 3);
        assert_eq!(g.next(3), 0);
        assert_eq!(g.count(1, 3), 2);
        assert_eq!(g.count(0xffff_ff01, 0x7fff_fff3), 2);
        assert!(g.is_full(2, 3));
        assert!(!g.is_full(3, 3));
        // A garbage index still lands on a slot inside the ring.
        let last = g.bytes().unwrap() - 64;
        assert_eq!(g.slot_offset(u32::MAX), last);
        assert_eq!(g.slot_offset(4), HEADER_LEN);
    }
}
