// SPDX-License-Identifier: GPL-2.0

//! The RC timers' encodings: the local ACK timeout of `ibv_modify_qp` and the RNR NAK timer
//! code (IBTA 9.7.5.2.8), both 5-bit codes.

/// RNR NAK delays in microseconds, by timer code.
const RNR_DELAY_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// How long a requester waits after an RNR NAK with timer `code`, in microseconds.
pub(crate) const fn rnr_delay_us(code: u8) -> u32 {
    RNR_DELAY_US[(code & 0x1f) as usize]
}

/// The local ACK timeout for `code` (4.096 µs × 2^code) in microseconds; `None` for 0, which
/// means "wait forever". Codes beyond 31 are treated as 31.
pub(crate) const fn ack_timeout_us(code: u8) -> Option<u64> {
    if code == 0 {
        return None;
    }
    let code = if code > 31 { 31 } else { code };
    Some((4096u64 << code) / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rnr_codes() {
        assert_eq!(rnr_delay_us(0), 655_360);
        assert_eq!(rnr_delay_us(1), 10);
        assert_eq!(rnr_delay_us(14), 1_280);
        assert_eq!(rnr_delay_us(31), 491_520);
        // Only five bits count.
        assert_eq!(rnr_delay_us(0x20 | 14), 1_280);
    }

    #[test]
    fn ack_timeouts() {
        assert_eq!(ack_timeout_us(0), None);
        // perftest and ibv_rc_pingpong use 14: about 67 ms.
        assert_eq!(ack_timeout_us(14), Some(67_108));
        assert_eq!(ack_timeout_us(31), Some(8_796_093_022));
        assert_eq!(ack_timeout_us(200), ack_timeout_us(31));
    }
}
