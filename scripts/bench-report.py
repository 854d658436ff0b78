#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn bench-guest.sh's raw JSON lines into a Markdown table (medians, spread, ratios), a JSON
file with every raw figure, and a PNG of bandwidth against message size."""

import json
import statistics
import sys
from collections import defaultdict

raw_path, out_dir, accel = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(raw_path) if l.strip()]
micro = []
if len(sys.argv) > 4:
    try:
        micro = json.load(open(sys.argv[4]))
    except (OSError, ValueError):
        micro = []

groups = defaultdict(list)
unavailable = set()
for r in rows:
    if r["test"] == "unavailable":
        unavailable.add(r["driver"])
        continue
    if r["value"] is not None:
        groups[(r["driver"], r["mtu"], r["test"], r["size"])].append(r["value"])


def summary(key):
    v = groups.get(key)
    if not v:
        return None
    return statistics.median(v), min(v), max(v), len(v)


def fmt(s, unit):
    if s is None:
        return "n/a"
    med, lo, hi, n = s
    return f"{med:.3g} {unit} ({lo:.3g}-{hi:.3g}, n={n})"


def ratio(a, b):
    if a is None or b is None or b[0] == 0:
        return "n/a"
    return f"{a[0] / b[0]:.2f}"


mtus = sorted({r["mtu"] for r in rows})
tests = sorted({k[2] for k in groups if k[0] != "tcp"})
lines = []
lines.append(f"# ferroce benchmark ({accel})\n")
lines.append("Guest kernel: the make check config without lockdep, kmemleak and atomic-sleep checks "
             "(scripts/kconfig/bench.config); 2 vCPUs, two netns joined by veth.\n")
if accel != "KVM":
    lines.append("TCG caveat: the guest runs under QEMU's software CPU emulation, about 50x slower than "
                 "native and noisy. Compare drivers only through the ratios below, measured in the same "
                 "boot, alternating, with medians over the repetitions.\n")
if "ferroce" in unavailable:
    lines.append("ferroce: not available yet (no data path: `rdma link add` or perftest fails), so its "
                 "figures and ratios read n/a.\n")
for mtu in mtus:
    tcp1 = summary(("tcp", mtu, "iperf3-P1", 0))
    tcp4 = summary(("tcp", mtu, "iperf3-P4", 0))
    lines.append(f"\n## MTU {mtu}\n")
    lines.append(f"Kernel TCP (iperf3): 1 stream {fmt(tcp1, 'Gb/s')}; 4 streams {fmt(tcp4, 'Gb/s')}\n")
    lines.append("| test | size | ferroce | C rxe | ferroce / C rxe | ferroce / TCP 1 stream |")
    lines.append("| --- | ---: | --- | --- | ---: | ---: |")
    for t in tests:
        unit = "us" if t.endswith("_lat") else "Gb/s"
        for size in sorted({k[3] for k in groups if k[2] == t and k[1] == mtu}):
            ours = summary(("ferroce", mtu, t, size))
            c = summary(("c-rxe", mtu, t, size))
            vs_tcp = "" if unit == "us" else ratio(ours, tcp1)
            lines.append(f"| {t} | {size} | {fmt(ours, unit)} | {fmt(c, unit)} | {ratio(ours, c)} | {vs_tcp} |")
    lines.append("")
lines.append("\nGoals (reported, not enforced): ferroce / C rxe >= 2.0 for 64 KiB write, read and send "
             "bandwidth; <= 0.6 for 8 B latency; ferroce >= TCP single stream.\n")
if micro:
    lines.append("\n## Host micro-benchmarks (pure hot paths)\n")
    lines.append("| benchmark | ns/op | MB/s |")
    lines.append("| --- | ---: | ---: |")
    for m in micro:
        lines.append(f"| {m['name']} | {m['ns_per_op']:.1f} | {m['bytes'] / m['ns_per_op'] * 1e3:.0f} |")
table = "\n".join(lines) + "\n"
open(f"{out_dir}/bench.md", "w").write(table)
json.dump({"accel": accel, "guest": rows, "host_micro": micro}, open(f"{out_dir}/bench.json", "w"), indent=1)
print(table)

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib missing: no plot", file=sys.stderr)
    sys.exit(1)

bw_tests = [t for t in tests if t.endswith("_bw")]
fig, axes = plt.subplots(len(mtus), len(bw_tests), figsize=(5 * max(1, len(bw_tests)), 4 * len(mtus)),
                         squeeze=False)
for i, mtu in enumerate(mtus):
    tcp1 = summary(("tcp", mtu, "iperf3-P1", 0))
    for j, t in enumerate(bw_tests):
        ax = axes[i][j]
        for drv, style in (("ferroce", "o-"), ("c-rxe", "s--")):
            pts = [(k[3], summary(k)[0]) for k in sorted(groups) if k[0] == drv and k[1] == mtu and k[2] == t]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=drv)
        if tcp1:
            ax.axhline(tcp1[0], color="grey", linestyle=":", label="TCP 1 stream")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{t}, MTU {mtu}")
        ax.set_xlabel("message size (B)")
        ax.set_ylabel("Gb/s (median)")
        ax.legend(fontsize=8)
fig.suptitle(f"ferroce vs C rxe vs TCP ({accel})")
fig.tight_layout()
fig.savefig(f"{out_dir}/bench.png", dpi=90)
print(f"plot: {out_dir}/bench.png")
