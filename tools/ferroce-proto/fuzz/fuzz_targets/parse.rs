// SPDX-License-Identifier: GPL-2.0

//! Feeds arbitrary UDP payloads to the RoCEv2 packet parser and the ICRC check.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ferroce_proto::api::fuzz_parse(data);
});
