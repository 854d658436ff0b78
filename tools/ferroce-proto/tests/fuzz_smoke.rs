// SPDX-License-Identifier: GPL-2.0

//! Deterministic stand-in for the fuzzers: random and mutated packets through `fuzz_parse`, and
//! random event scripts through `fuzz_rc`, so `cargo test` covers the parser's and the RC
//! engine's invariants without libFuzzer.

use ferroce_proto::api::{build_packet, drop_reason_names, fuzz_parse, fuzz_rc, known_opcodes};
use std::collections::HashMap;

/// Marsaglia's xorshift64: small, fast and the same on every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number below `n` (`n` > 0); the modulo bias does not matter here.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }
}

const ITERATIONS: usize = 200_000;
const MAX_RANDOM_LEN: usize = 2100;

/// Valid packets of every known opcode, with a few payload lengths each.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for op in known_opcodes() {
        for len in [0, 1, 3, 4, 64, 257, 1024] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let pkt = build_packet(op, 100 + len as u32, &payload).unwrap();
            if fuzz_parse(&pkt).is_ok() {
                seeds.push(pkt);
            }
        }
    }
    seeds
}

fn mutate(rng: &mut XorShift, pkt: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(3) {
        match rng.below(4) {
            0 if !pkt.is_empty() => {
                let bit = rng.below(pkt.len() * 8);
                pkt[bit / 8] ^= 1 << (bit % 8);
            }
            // Mostly the headers, where the parser looks.
            1 if !pkt.is_empty() => {
                let at = rng.below(pkt.len().min(44));
                pkt[at] = rng.next() as u8;
            }
            2 => {
                let len = rng.below(pkt.len() + 1);
                pkt.truncate(len);
            }
            _ => {
                let extra = rng.below(8);
                let at = pkt.len().saturating_sub(4);
                for _ in 0..extra {
                    pkt.insert(at, rng.next() as u8);
                }
            }
        }
    }
}

#[test]
fn parse_survives_random_and_mutated_packets() {
    let seeds = seeds();
    let opcodes = known_opcodes();
    assert!(
        seeds.len() >= opcodes.len(),
        "every opcode has a valid seed"
    );
    for s in &seeds {
        assert!(fuzz_parse(s).is_ok());
    }

    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut outcomes: HashMap<&'static str, usize> = HashMap::new();
    let mut buf = Vec::new();
    for i in 0..ITERATIONS {
        buf.clear();
        if i % 2 == 0 {
            buf.resize(rng.below(MAX_RANDOM_LEN), 0);
            rng.fill(&mut buf);
            // Half of them with a known opcode and version 0, to get past the BTH.
            if i % 4 == 0 && buf.len() >= 2 {
                buf[0] = opcodes[rng.below(opcodes.len())];
                buf[1] &= 0xf0;
            }
        } else {
            buf.extend_from_slice(&seeds[rng.below(seeds.len())]);
            mutate(&mut rng, &mut buf);
        }
        let outcome = match fuzz_parse(&buf) {
            Ok(_) => "ok",
            Err(name) => name,
        };
        *outcomes.entry(outcome).or_default() += 1;
    }

    eprintln!("outcomes: {outcomes:?}");
    assert!(outcomes.get("ok").copied().unwrap_or(0) > 0, "{outcomes:?}");
    for name in drop_reason_names() {
        assert!(
            outcomes.get(name).copied().unwrap_or(0) > 0,
            "{name}: {outcomes:?}"
        );
    }
    let names = drop_reason_names();
    for name in outcomes.keys() {
        assert!(*name == "ok" || names.contains(name), "{name}");
    }
}

#[test]
fn rc_engine_survives_random_event_scripts() {
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    let mut script = vec![0u8; 4096];
    for _ in 0..2_000 {
        let len = 3 + rng.below(script.len() - 3);
        rng.fill(&mut script[..len]);
        fuzz_rc(&script[..len]);
    }
    // A peer replaying one READ request: its responses again and again, until the budget.
    // Its header: PSN 0, a READ of 5000 bytes, MTU 1024, rkey 21; then (rewind to the first
    // response with key 21, send up to 15 responses), again and again.
    let replay: Vec<u8> = [0u8, 0, 0, 0x88, 0x13, 0, 0, 2, 21]
        .into_iter()
        .chain([12u8, 21, 13, 15].repeat(3000))
        .collect();
    fuzz_rc(&replay);
    // Near the wrap and at zero, with the same scripts.
    for start in [[0xff, 0xff, 0xff], [0xc0, 0xff, 0xff], [0, 0, 0]] {
        script[..3].copy_from_slice(&start);
        fuzz_rc(&script);
    }
}
