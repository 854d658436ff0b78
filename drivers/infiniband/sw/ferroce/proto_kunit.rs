// SPDX-License-Identifier: GPL-2.0

//! KUnit suites for the protocol logic, run in the kernel when the module loads.
//!
//! The host crate tests the same files with `cargo test`; these prove the module's build of them.

use kernel::prelude::*;

#[kunit_tests(ferroce_proto)]
mod tests {
    use crate::proto::{
        bth::{Bth, BthError},
        icrc::{crc32_update, table_crc32, Icrc, ICRC_SEED},
        psn::Psn,
        ROCE_V2_UDP_PORT, //
    };

    #[test]
    fn psn_wraps_and_orders() {
        assert_eq!(Psn::new(0xff_ffff).add(1), Psn::new(0));
        assert_eq!(Psn::new(1).diff(Psn::new(0xff_ffff)), 2);
        assert!(Psn::new(0xff_fff0).before(Psn::new(0x10)));
        assert!(!Psn::new(0x10).before(Psn::new(0xff_fff0)));
    }

    #[test]
    fn crc32_and_icrc_seed() {
        assert_eq!(!crc32_update(!0, b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32_update(!0, &[0xff; 8]), ICRC_SEED);
    }

    /// The kernel's `crc32_le` takes a different path per length and alignment (tail bytes,
    /// carry-less folding from 16 or 64 bytes up): each must agree with the host's tables.
    #[test]
    fn kernel_crc32_matches_tables() {
        let data: [u8; 300] = core::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
        for start in 0..16 {
            for end in (start..data.len()).step_by(7) {
                let d = &data[start..end];
                assert_eq!(crc32_update(0x1234_5678, d), table_crc32(0x1234_5678, d));
            }
            // The ICRC's headers, in one call: IPv4 and IPv6.
            for len in [40, 60] {
                let d = &data[start..start + len];
                assert_eq!(crc32_update(0x1234_5678, d), table_crc32(0x1234_5678, d));
            }
        }
    }

    #[test]
    fn icrc_masks_ecn() {
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[1] = 0x02;
        let udp = [0xc0, 0x01, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00];
        let bth = [0x04, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 7];
        let before = Icrc::ipv4(&ip, &udp, &bth).finish();
        ip[1] = 0x03;
        assert_eq!(Icrc::ipv4(&ip, &udp, &bth).finish(), before);
    }

    #[test]
    fn bth_round_trip() {
        let cnp = [0x81, 0, 0xff, 0xff, 0x40, 0, 0, 0xd2, 0, 0, 0, 0];
        let bth = Bth::parse(&cnp);
        assert!(bth.is_ok());
        if let Ok(bth) = bth {
            assert!(bth.becn);
            assert_eq!(bth.dest_qpn, 0xd2);
            let mut out = [0u8; 12];
            bth.write(&mut out);
            assert_eq!(out, cnp);
        }
        assert_eq!(Bth::parse(&cnp[..4]), Err(BthError::Truncated));
    }

    #[test]
    fn roce_v2_port() {
        assert_eq!(ROCE_V2_UDP_PORT, 4791);
    }
}
