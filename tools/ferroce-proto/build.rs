// SPDX-License-Identifier: GPL-2.0

//! Marks this build as the host one: `proto/` items behind `cfg(ferroce_host)` serve the tests
//! and fuzzers only, and are left out of the module.

fn main() {
    println!("cargo:rustc-cfg=ferroce_host");
}
