// SPDX-License-Identifier: GPL-2.0

//! The RC requester's retry budgets (IBA 9.7.6.1.3 and 9.7.5.2.8): how many retries (after an
//! ACK timeout or a sequence NAK) and how many RNR NAKs in a row, without progress, before the
//! oldest WQE fails. Progress (any answer that moves the window, a NAK included, or a read
//! response that lands) fills both again.

/// `rnr_retry` 7: retry forever.
const RNR_RETRY_FOREVER: u8 = 7;

/// What is left of a QP's budgets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Retries {
    retries: u8,
    rnr: u8,
}

impl Retries {
    /// Full budgets: the QP's `retry_cnt` and `rnr_retry` (3 bits each).
    pub(crate) const fn new(retry_cnt: u8, rnr_retry: u8) -> Self {
        Self {
            retries: retry_cnt,
            rnr: rnr_retry,
        }
    }

    /// An ACK timeout, or a sequence NAK that answers nothing new: whether to send again (one
    /// retry used) or fail the WQE.
    pub(crate) fn retry(&mut self) -> bool {
        match self.retries.checked_sub(1) {
            Some(left) => {
                self.retries = left;
                true
            }
            None => false,
        }
    }

    /// An RNR NAK's delay ran out: whether to send again or fail the WQE.
    pub(crate) fn rnr(&mut self) -> bool {
        match self.rnr {
            0 => false,
            RNR_RETRY_FOREVER => true,
            _ => {
                self.rnr -= 1;
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_cnt_resends_and_no_more() {
        for cnt in 0..=7u8 {
            let mut r = Retries::new(cnt, 0);
            for _ in 0..cnt {
                assert!(r.retry());
            }
            assert!(!r.retry(), "retry_cnt {cnt}");
            assert!(!r.retry());
        }
    }

    #[test]
    fn rnr_retry_seven_is_forever() {
        let mut r = Retries::new(0, 7);
        for _ in 0..10_000 {
            assert!(r.rnr());
        }
        for cnt in 0..7u8 {
            let mut r = Retries::new(7, cnt);
            for _ in 0..cnt {
                assert!(r.rnr());
            }
            assert!(!r.rnr(), "rnr_retry {cnt}");
            // The other budget is its own.
            assert!(r.retry());
        }
    }

    #[test]
    fn progress_fills_both_again() {
        let mut r = Retries::new(2, 1);
        assert!(r.retry() && r.rnr());
        assert_eq!(r, Retries::new(1, 0));
        r = Retries::new(2, 1);
        assert!(r.retry() && r.retry() && r.rnr());
        assert!(!r.retry() && !r.rnr());
    }
}
