// SPDX-License-Identifier: GPL-2.0

//! Feeds arbitrary event scripts to the RC engine's decisions: the requester's window, the
//! responder's sequencer and a READ resource (see `ferroce_proto::api::fuzz_rc`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ferroce_proto::api::fuzz_rc(data);
});
