// SPDX-License-Identifier: GPL-2.0

//! Prints bytes per second (or operations per second) for ferroce's pure hot paths, with zlib's
//! C `crc32()` as the reference for the CRC. Output: a Markdown table on stdout and, with
//! `--json FILE`, the raw figures.

use ferroce_proto::api;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Runs `f` repeatedly for about `budget`, returns the best per-call time over 5 rounds.
fn time_per_call(budget: Duration, mut f: impl FnMut()) -> Duration {
    // Calibrate the batch so a round takes about budget/5.
    let mut batch = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        if t.elapsed() >= budget / 50 || batch >= 1 << 30 {
            break;
        }
        batch *= 2;
    }
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..batch * 10 {
            f();
        }
        best = best.min(t.elapsed() / (batch * 10) as u32);
    }
    best
}

fn zlib_crc32(data: &[u8]) -> u32 {
    // SAFETY: `data` is a valid slice for its length; zlib reads exactly that many bytes.
    unsafe { libz_sys::crc32(0, data.as_ptr(), data.len() as libz_sys::uInt) as u32 }
}

struct Row {
    name: String,
    bytes: usize,
    ns: f64,
}

fn main() {
    let json = std::env::args().skip_while(|a| a != "--json").nth(1);
    let budget = Duration::from_millis(400);
    let ip: [u8; 20] = [
        0x45, 0x02, 0x04, 0x3c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0, 0, 192, 0, 2, 1, 192, 0, 2,
        2,
    ];
    let udp = [0xc0, 0x01, 0x12, 0xb7, 0x04, 0x28, 0, 0];
    let mut bth = [0u8; 12];
    api::bth_build(0x0a, 0x11, 7, true, &mut bth);
    let mut rows = Vec::new();

    for size in [1024usize, 4096] {
        let payload: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
        // Correctness before speed: ours and zlib agree on the same bytes.
        assert_eq!(!api::crc32_raw(!0, &payload), zlib_crc32(&payload));
        let ns = time_per_call(budget, || {
            black_box(api::icrc_ipv4(
                black_box(&ip),
                &udp,
                &bth,
                black_box(&payload),
            ));
        });
        rows.push(Row {
            name: format!("icrc_ipv4 ferroce ({size} B payload)"),
            bytes: size + 40,
            ns: ns.as_nanos() as f64,
        });
        let ns = time_per_call(budget, || {
            black_box(api::crc32_raw(!0, black_box(&payload)));
        });
        rows.push(Row {
            name: format!("crc32 ferroce slice-by-8 ({size} B)"),
            bytes: size,
            ns: ns.as_nanos() as f64,
        });
        let ns = time_per_call(budget, || {
            black_box(zlib_crc32(black_box(&payload)));
        });
        rows.push(Row {
            name: format!("crc32 zlib C reference ({size} B)"),
            bytes: size,
            ns: ns.as_nanos() as f64,
        });
    }
    let mut out = [0u8; 12];
    let mut psn = 0u32;
    let batch = 1024u32;
    let ns = time_per_call(budget, || {
        for i in 0..batch {
            api::bth_build(0x0a, 0x11, psn.wrapping_add(i), i % 64 == 0, &mut out);
            black_box(&out);
        }
        psn = psn.wrapping_add(batch);
    });
    rows.push(Row {
        name: "bth build (per header)".into(),
        bytes: 12,
        ns: ns.as_nanos() as f64 / f64::from(batch),
    });
    let ns = time_per_call(budget, || {
        for _ in 0..batch {
            black_box(api::bth_parse(black_box(&bth)));
        }
    });
    rows.push(Row {
        name: "bth parse (per header)".into(),
        bytes: 12,
        ns: ns.as_nanos() as f64 / f64::from(batch),
    });

    println!("| host micro-benchmark | ns/op | MB/s | Mops/s |");
    println!("| --- | ---: | ---: | ---: |");
    for r in &rows {
        let mbps = r.bytes as f64 / r.ns * 1e3;
        println!(
            "| {} | {:.1} | {:.0} | {:.2} |",
            r.name,
            r.ns,
            mbps,
            1e3 / r.ns
        );
    }
    for size in [1024, 4096] {
        let find = |p: &str| {
            rows.iter()
                .find(|r| r.name.starts_with(p) && r.name.contains(&format!("({size} B)")))
                .map(|r| r.ns)
        };
        if let (Some(ours), Some(zlib)) = (find("crc32 ferroce"), find("crc32 zlib")) {
            println!(
                "\ncrc32 at {size} B: ferroce / zlib throughput = {:.2}",
                zlib / ours
            );
        }
    }
    if let Some(path) = json {
        let body: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"name\":\"{}\",\"bytes\":{},\"ns_per_op\":{:.2}}}",
                    r.name, r.bytes, r.ns
                )
            })
            .collect();
        std::fs::write(&path, format!("[{}]\n", body.join(",")))
            .unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    }
}
