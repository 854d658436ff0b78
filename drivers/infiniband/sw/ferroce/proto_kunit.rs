// SPDX-License-Identifier: GPL-2.0

//! KUnit suites for the protocol logic, run in the kernel when the module loads.
//!
//! The host crate tests the same files with `cargo test`; these prove the module's build of them.

#[kunit_tests(ferroce_proto)]
mod tests {
    use crate::proto::{psn::Psn, ROCE_V2_UDP_PORT};

    #[test]
    fn psn_wraps_and_orders() {
        assert_eq!(Psn::new(0xff_ffff).add(1), Psn::new(0));
        assert_eq!(Psn::new(1).diff(Psn::new(0xff_ffff)), 2);
        assert!(Psn::new(0xff_fff0).before(Psn::new(0x10)));
        assert!(!Psn::new(0x10).before(Psn::new(0xff_fff0)));
    }

    #[test]
    fn roce_v2_port() {
        assert_eq!(ROCE_V2_UDP_PORT, 4791);
    }
}
