#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn bench-guest.sh's raw JSON lines into a Markdown report (medians, spread, ratios, runs
that failed and why, bandwidth against QP count, CPU per byte, kernel memory per QP and MR,
profiles), a JSON file with every raw figure, and a PNG of bandwidth against message size and QP
count.

A failed or empty measurement is never a zero: it is left out of the medians and counted, so
every figure says how many of its runs succeeded ("n=2/3")."""

import json
import os
import re
import statistics
import sys
from collections import defaultdict, namedtuple

raw_path, out_dir, accel = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(line) for line in open(raw_path) if line.strip()]
micro = []
if len(sys.argv) > 4:
    try:
        micro = json.load(open(sys.argv[4]))
    except (OSError, ValueError):
        micro = []

groups = defaultdict(list)
runs = defaultdict(int)
failures = []
unavailable = set()
memory = {}
profiles = []
incast = []
cpu = defaultdict(list)
for r in rows:
    test = r.get("test")
    if test == "unavailable":
        unavailable.add(r["driver"])
    elif test == "memory":
        memory[r["driver"]] = r.get("result") or {"failed": r.get("failed")}
    elif test.startswith("profile-"):
        profiles.append(r)
    elif test.startswith("cpu-"):
        if r.get("bytes"):
            cpu[(r["driver"], r["mtu"], test[4:], r["size"])].append(r)
    elif test == "incast":
        incast.append(r)
    else:
        key = (r["driver"], r["mtu"], test, r["size"])
        runs[key] += 1
        if r.get("value") is not None:
            groups[key].append(r["value"])
        else:
            failures.append(r)


# Layers of a profile, first match wins: (name, module pattern, symbol pattern); a symbol
# sampled in user space has the module "[.]" prefixed to its name by layer_counts().
LAYERS = [
    ("driver", r"^\[rdma_rxe\]$", r""),
    # ferroce's Rust abstractions and their C helpers, built into the kernel.
    ("driver", r"", r"^(rust_helper_|_R.*6kernel)"),
    ("ICRC", r"", r"^(crc32|kernel_fpu_|irq_fpu_usable)"),
    ("user space", r"", r"^\[\.\] "),
    ("RDMA core", r"^\[(ib_core|ib_uverbs|rdma_cm|ib_cm|iw_cm|rdma_ucm)\]$", r""),
    ("RDMA core", r"", r"^(_|__)?(ib_|rdma_|uverbs_)"),
    ("copies", r"", r"^(__)?(memcpy|memmove|memset|copy_page$|rep_movs|rep_stos|_copy_|copy_user|"
     r"__copy_|copy_mc_|clear_page|skb_copy_bits|skb_store_bits)"),
    # Before the allocator: freeing an skb is the stack's.
    ("network stack", r"", r"^(__|___)?(ip6?_|ipv6_|ipv4_|udp|veth|netif_|netdev|dev_|sch_|pfifo|"
     r"qdisc|nf_|skb|kfree_skb|consume_skb|napi|net_rx_action|process_backlog|dst_|fib|rt6_|"
     r"neigh|eth_|validate_xmit|inet|icmp|sk_|sock_|csum|build_skb|alloc_skb|tcp_|rps_|"
     r"enqueue_to_backlog|do_xdp|xdp_|xfrm|raw_local_deliver|bpf_net|gro_|ipt_|nft_|"
     r"handle_softirqs|do_softirq|__do_softirq)"),
    ("allocator", r"", r"^(__|___)?(kmem_cache_|kmalloc|kfree|slab|__slab|kmalloc_|alloc_pages|"
     r"free_pages|free_unref|get_page_from_freelist|rmqueue|page_frag|pcpu_|put_page|"
     r"prep_new_page|mod_objcg|obj_cgroup|__memcg|memcg|refill_obj)"),
    # cpu-clock samples fall when interrupts come back on: work done with them off (under
    # spin_lock_irqsave, as the C rxe's hot path runs) is counted at its unlock.
    ("interrupts back on", r"", r"^(_raw_|queued_|native_queued|__local_bh|local_bh|irq_|"
     r"__irq|sysvec|asm_sysvec|__sysvec)"),
]
LAYER_NAMES = list(dict.fromkeys(name for name, _, _ in LAYERS)) + ["other kernel"]


def layer_of(module, sym):
    """The layer of one sampled symbol: `module` as perf names it, `sym` with "[.] " before a
    user-space one."""
    for name, mod_re, sym_re in LAYERS:
        if (not mod_re or re.search(mod_re, module)) and (not sym_re or re.search(sym_re, sym)):
            return name
    return "other kernel"


def layer_counts(syms):
    """Samples per layer from a profile's "count|module|[k] or [.]|symbol;..." list."""
    counts = defaultdict(int)
    for entry in syms.split(";"):
        parts = entry.split("|", 3)
        if len(parts) != 4 or not parts[0].isdigit():
            continue
        count, module, where, sym = parts
        if where == "[.]":
            sym = "[.] " + sym
        counts[layer_of(module, sym)] += int(count)
    return counts


def summary(key):
    v = groups.get(key)
    if not v:
        return None
    return statistics.median(v), min(v), max(v), len(v), runs.get(key, len(v))


def fmt(s, unit, key=None):
    if s is None:
        n = runs.get(key, 0) if key else 0
        return f"failed (0/{n})" if n else "n/a"
    med, lo, hi, n, total = s
    return f"{med:.3g} {unit} ({lo:.3g}-{hi:.3g}, n={n}/{total})"


def ratio(a, b):
    if a is None or b is None or b[0] == 0:
        return "n/a"
    return f"{a[0] / b[0]:.2f}"


def own_cost_rows(kernel):
    """Table rows, per profiled run both drivers have: kernel us per packet (user space left
    out), each driver's own (its module, and the work counted where interrupts come back on),
    the C rxe's kernel time over ferroce's without its own (with only its module left out),
    and the measured ratio."""
    rows = []
    for (drv, mtu, run, size), us in sorted(kernel.items()):
        other = kernel.get(("c-rxe", mtu, run, size))
        # A rate only: a latency run is not set by kernel time per packet alone.
        if drv != "ferroce" or other is None or not run.endswith("_bw"):
            continue
        f_total = sum(v for k, v in us.items() if k != "user space")
        c_total = sum(v for k, v in other.items() if k != "user space")
        f_own = us["driver"] + us["interrupts back on"]
        c_own = other["driver"] + other["interrupts back on"]

        def over(rest):
            return f"{c_total / rest:.2f}" if rest > 0 else "n/a"
        measured = ratio(summary(("ferroce", mtu, run, size)), summary(("c-rxe", mtu, run, size)))
        rows.append(f"| {run} {size} B | {f_total:.1f} | {c_total:.1f} | {f_own:.1f} | "
                    f"{c_own:.1f} | {over(f_total - f_own)} ({over(f_total - us['driver'])}) | "
                    f"{measured} |")
    return rows


def ratio_if_run(mtu, t, size):
    """ferroce / C rxe of test T; "" if neither driver ran it (a column the bench left out)."""
    fk, ck = ("ferroce", mtu, t, size), ("c-rxe", mtu, t, size)
    if fk not in runs and ck not in runs:
        return ""
    return ratio(summary(fk), summary(ck))


def steady(mtu, t, size):
    """ferroce / C rxe of a bandwidth run's steady rate on the wire; "" if it has none."""
    return ratio_if_run(mtu, STEADY + t, size)


def qp_count(test):
    m = re.fullmatch(r"ib_write_bw-q(\d+)", test)
    return int(m.group(1)) if m else None


mtus = sorted({r["mtu"] for r in rows if "mtu" in r and r.get("test") not in (None, "memory")})
NVME = (("nvmeof-randread", 4096, "kIOPS", "fio 4 KiB random read, 16 deep"),
        ("nvmeof-read", 1048576, "MB/s", "fio 1 MiB sequential read, 4 deep"))
# Runs with each netns a host of one CPU (bench-guest.sh's split_hosts) are reported apart.
HOSTS = "-hosts"
# A bandwidth run's rate on the wire in its steady state (bench-guest.sh's steady()), which does
# not rest on when perftest polls: shown beside the run's own figure.
STEADY = "steady-"
tests = sorted({k[2] for k in runs if k[0] != "tcp" and qp_count(k[2]) is None
                and not k[2].startswith(("nvmeof-", STEADY)) and not k[2].endswith(HOSTS)})
sweep = sorted({qp_count(k[2]) for k in runs if qp_count(k[2]) is not None})
lines = [f"# ferroce benchmark ({accel})\n",
         "Guest kernel: the make check config without lockdep, kmemleak and atomic-sleep checks "
         "(scripts/kconfig/bench.config); 2 vCPUs, two netns joined by veth (a software path: "
         "figures that only veth would show are not claimed for a NIC).\n"]
# bench.sh's BENCH_FERROCE_PARAMS: ferroce's figures are then those of a tuned module.
params = os.environ.get("BENCH_FERROCE_PARAMS", "").strip()
if params:
    lines.append(f"ferroce was loaded with module parameters: {params} (not its defaults).\n")
if accel != "KVM":
    lines.append("TCG caveat: the guest runs under QEMU's software CPU emulation, about 50x slower "
                 "than native and noisy. Compare drivers only through the ratios below, measured in "
                 "the same boot, alternating, with medians over the repetitions.\n")
for drv in sorted(unavailable):
    lines.append(f"{drv}: not available in some repetitions (no rdma link or no data path).\n")

for mtu in mtus:
    tcp1 = summary(("tcp", mtu, "iperf3-P1", 0))
    tcp4 = summary(("tcp", mtu, "iperf3-P4", 0))
    lines.append(f"\n## MTU {mtu}\n")
    lines.append(f"Kernel TCP (iperf3): 1 stream {fmt(tcp1, 'Gb/s')}; 4 streams {fmt(tcp4, 'Gb/s')}\n")
    lines.append("| test | size | ferroce | C rxe | ferroce / C rxe | ferroce / TCP 1 stream | "
                 "steady on the wire: ferroce / C rxe |")
    lines.append("| --- | ---: | --- | --- | ---: | ---: | ---: |")
    for t in tests:
        unit = "us" if t.endswith("_lat") else "Mop/s" if t.startswith("ib_atomic_bw") else "Gb/s"
        for size in sorted({k[3] for k in runs if k[2] == t and k[1] == mtu}):
            fk, ck = ("ferroce", mtu, t, size), ("c-rxe", mtu, t, size)
            ours, c = summary(fk), summary(ck)
            vs_tcp = "" if unit != "Gb/s" else ratio(ours, tcp1)
            lines.append(f"| {t} | {size} | {fmt(ours, unit, fk)} | {fmt(c, unit, ck)} | "
                         f"{ratio(ours, c)} | {vs_tcp} | {steady(mtu, t, size)} |")
    if sweep:
        lines.append(f"\n### 64 KiB ib_write_bw against QP count (MTU {mtu})\n")
        lines.append("| QPs | ferroce | C rxe | ferroce / C rxe | steady on the wire: ferroce / C rxe |")
        lines.append("| ---: | --- | --- | ---: | ---: |")
        for q in sweep:
            fk, ck = ("ferroce", mtu, f"ib_write_bw-q{q}", 65536), ("c-rxe", mtu, f"ib_write_bw-q{q}", 65536)
            ours, c = summary(fk), summary(ck)
            lines.append(f"| {q} | {fmt(ours, 'Gb/s', fk)} | {fmt(c, 'Gb/s', ck)} | {ratio(ours, c)} | "
                         f"{steady(mtu, f'ib_write_bw-q{q}', 65536)} |")
    split = sorted({k[2] for k in runs if k[1] == mtu and k[2].endswith(HOSTS)
                    and not k[2].startswith(STEADY)})
    if split:
        lines.append(f"\n### 64 KiB bandwidth with each netns a host of one CPU (MTU {mtu})\n")
        lines.append("The client's netns on CPU 0, the server's on CPU 1: perftest pinned, and what "
                     "each veth end receives steered to its CPU (RPS), as a NIC's receive queue is "
                     "serviced apart from the sender. In the first table veth receives on the "
                     "sending CPU, inside its transmit. This confines system calls and softirq "
                     "(all of ferroce's data path), not work queues: the C rxe does nearly all its "
                     "processing in an unbound one, which may run on the other host's CPU. SEND "
                     "is left out: its server polls its CQ on its host's only CPU. Reported apart: "
                     "the targets are judged on the first table's runs.\n")
        lines.append("| test | ferroce | C rxe | ferroce / C rxe | ferroce, split / shared | "
                     "C rxe, split / shared | steady on the wire: ferroce / C rxe |")
        lines.append("| --- | --- | --- | ---: | ---: | ---: | ---: |")
        for t in split:
            base = t[:-len(HOSTS)]
            fk, ck = ("ferroce", mtu, t, 65536), ("c-rxe", mtu, t, 65536)
            ours, c = summary(fk), summary(ck)
            lines.append(f"| {base} | {fmt(ours, 'Gb/s', fk)} | {fmt(c, 'Gb/s', ck)} | "
                         f"{ratio(ours, c)} | {ratio(ours, summary(('ferroce', mtu, base, 65536)))} | "
                         f"{ratio(c, summary(('c-rxe', mtu, base, 65536)))} | {steady(mtu, t, 65536)} |")
    lines.append("")

if any(k[2].startswith("nvmeof-") for k in runs):
    lines.append("\n## NVMe over Fabrics (nvmet and nvme-rdma over one device in the guest)\n")
    lines.append("A null_blk with no memory behind it, so the transport is what is measured.\n")
    lines.append("| fio | ferroce | C rxe | ferroce / C rxe |")
    lines.append("| --- | --- | --- | ---: |")
    for test, size, unit, what in NVME:
        fk, ck = ("ferroce", 1500, test, size), ("c-rxe", 1500, test, size)
        ours, c = summary(fk), summary(ck)
        lines.append(f"| {what} | {fmt(ours, unit, fk)} | {fmt(c, unit, ck)} | {ratio(ours, c)} |")
    lines.append("")


CpuUse = namedtuple("CpuUse", "busy kern_ns user_ns runs cpus wire_gbps drops")


def run_secs(r):
    """A CPU record's wall time: all CPUs' ticks over the CPUs."""
    return max(1, r["user"] + r["kernel"] + r["idle"]) / r["hz"] / r["cpus"]


def cpu_use(key):
    """Over a run's reps: medians of CPUs busy, kernel and user CPU ns per byte sent, and the
    rate on the wire; the runs, and the backlog drops summed."""
    rs = cpu.get(key)
    if not rs:
        return None
    busy = [(r["user"] + r["kernel"]) / r["hz"] / run_secs(r) for r in rs]
    kern = [r["kernel"] * 1e9 / r["hz"] / r["bytes"] for r in rs]
    user = [r["user"] * 1e9 / r["hz"] / r["bytes"] for r in rs]
    # Both veth ends' bytes over the run's time: a rate that does not rest on perftest's count
    # of completions, set-up included.
    wire = [r["bytes"] * 8 / run_secs(r) / 1e9 for r in rs]
    # Packets the receive backlogs dropped, over all the runs (older records have no figure).
    drops = sum(r.get("drops", 0) for r in rs)
    return CpuUse(statistics.median(busy), statistics.median(kern), statistics.median(user),
                  len(rs), rs[0]["cpus"], statistics.median(wire), drops)

if cpu:
    lines.append("\n## CPU during the 64 KiB bandwidth runs (/proc/stat over each client run)\n")
    lines.append("Kernel is all system, irq and softirq time: the driver, the veth and UDP stack, "
                 "perftest's system calls and set-up (the window includes its connection and "
                 "memory registration). User is mostly perftest polling its CQ, so it follows "
                 "1/bandwidth. Per byte counts what both veth ends sent, headers and ACKs "
                 "included. On the wire is those bytes over the run's time, set-up included: "
                 "a rate that does not rest on perftest's count of completions. Medians over the "
                 "repetitions; backlog drops (packets the kernel dropped for a full receive "
                 "backlog) summed over them.\n")
    lines.append("| test | MTU | driver | CPUs busy | kernel ns/byte | user ns/byte | on the wire, Gb/s "
                 "| backlog drops | runs |")
    lines.append("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key in sorted(cpu, key=lambda k: (k[2], k[1], k[0])):
        u = cpu_use(key)
        lines.append(f"| {key[2]} | {key[1]} | {key[0]} | {u.busy:.2f} of {u.cpus} | {u.kern_ns:.1f} | "
                     f"{u.user_ns:.1f} | {u.wire_gbps:.3g} | {u.drops} | {u.runs} |")


def in_the_way(mtu, t, size):
    """The CPU figures of a missed bandwidth target's runs, ferroce against the C rxe."""
    ours, c = cpu_use(("ferroce", mtu, t, size)), cpu_use(("c-rxe", mtu, t, size))
    if ours is None or c is None or c.kern_ns == 0:
        return ""
    return (f"kernel CPU per byte {ours.kern_ns / c.kern_ns:.2f}x the C rxe's; CPUs busy "
            f"{ours.busy:.2f} (ferroce) vs {c.busy:.2f} (C rxe); on the wire {ours.wire_gbps:.3g} "
            f"vs {c.wire_gbps:.3g} Gb/s")


# The targets, side by side with what was measured.
lines.append("\n## Targets (reported, not enforced)\n")
lines.append("Met is judged on perftest's figures. Beside them, for bandwidth, the same runs' steady "
             "rate on the wire (bytes through the server's veth end both ways, from 1 s after the "
             "traffic starts, for the window's length: headers, ACKs and resends included, not "
             "goodput): perftest counts only the completions it polls in its window, and polls "
             "once per round of posts over all QPs, so for a driver that works inside the post "
             "(ferroce on veth) its count can miss or overcount what moved.\n")
lines.append("| target | MTU | ferroce / C rxe | met | steady on the wire | "
             "with a CPU per host (not judged) | CPU in these runs (see the CPU table) |")
lines.append("| --- | ---: | ---: | --- | ---: | ---: | --- |")
for mtu in mtus:
    for t, size, goal, cmp in (("ib_write_bw", 65536, 2.0, ">="), ("ib_read_bw", 65536, 2.0, ">="),
                               ("ib_send_bw", 65536, 2.0, ">="), ("ib_write_bw-q8", 65536, 2.0, ">="),
                               ("ib_write_lat", 8, 0.6, "<="), ("ib_send_lat", 8, 0.6, "<=")):
        ours, c = summary(("ferroce", mtu, t, size)), summary(("c-rxe", mtu, t, size))
        r = ratio(ours, c)
        met = "n/a" if r == "n/a" else ("yes" if (float(r) >= goal if cmp == ">=" else float(r) <= goal) else "no")
        why = in_the_way(mtu, t, size) if met == "no" else ""
        hosts = ratio_if_run(mtu, t + HOSTS, size)
        lines.append(f"| {t} {size} B ({cmp} {goal}) | {mtu} | {r} | {met} | {steady(mtu, t, size)} | "
                     f"{hosts} | {why} |")

if failures:
    lines.append("\n## Runs that failed (left out of the medians)\n")
    lines.append("| driver | MTU | test | size | rep | why |")
    lines.append("| --- | ---: | --- | ---: | ---: | --- |")
    for f in failures:
        lines.append(f"| {f['driver']} | {f['mtu']} | {f['test']} | {f['size']} | {f['rep']} | "
                     f"{f.get('failed', 'no result')} |")
else:
    lines.append("\nEvery run produced a figure.\n")

if memory:
    lines.append("\n## Kernel memory (scripts/bench-mem.py)\n")
    lines.append("RC QPs with 64+64 WRs, MRs of 4 KiB; each kind measured on its own, three times, "
                 "with caches dropped and slab caches shrunk before each reading: the kernel's "
                 "memory with them less before (median, spread). Left is what stayed per object "
                 "once they were destroyed (slab slack and late frees; a leak would show there).\n")
    if any(m.get("slab_caches_shrunk") == 0 for m in memory.values()):
        lines.append("No slab cache could be shrunk in this guest: the figures include slab "
                     "slack.\n")
    lines.append("| driver | bytes per QP | left per QP | bytes per MR | left per MR | QPs, MRs |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: |")

    def per_object(m, kind):
        spread = m.get(f"{kind}_spread")
        fig = f"{m[f'per_{kind}']:.0f}"
        return fig + (f" ({spread[0]:.0f}-{spread[1]:.0f})" if spread else "")

    for drv, m in sorted(memory.items()):
        if m.get("per_qp") is None:
            lines.append(f"| {drv} | failed: {m.get('failed')} | | | | |")
        else:
            lines.append(f"| {drv} | {per_object(m, 'qp')} | {m.get('qp_left', float('nan')):.0f} | "
                         f"{per_object(m, 'mr')} | {m.get('mr_left', float('nan')):.0f} | "
                         f"{m.get('qps', m.get('count'))}, {m.get('mrs', m.get('count'))} |")

if profiles:
    lines.append("\n## Profiles (perf, software clock at 999 Hz, both CPUs; one run each)\n")
    lines.append("CPU time leaves out samples in the idle loop's halt and poll; idle entry and "
                 "exit, and perf's own timer wakeups, remain. Per packet counts both devices' "
                 "packets sent, per byte what both veth ends sent.\n")
    lines.append("| driver | run | CPU ms | us/packet | ns/byte | top symbols (% of CPU time) |")
    lines.append("| --- | --- | ---: | ---: | ---: | --- |")
    for p in profiles:
        ms = p["samples"] * 1000.0 / p["hz"]
        per_pkt = ms * 1000.0 / p["pkts"] if p["pkts"] else float("nan")
        per_byte = ms * 1e6 / p["bytes"] if p["bytes"] else float("nan")
        top = ", ".join(f"{sym} {pct}".replace("|", "\\|")
                        for sym, _, pct in (t.rpartition("=") for t in p["top"].split(";")[:8] if t))
        lines.append(f"| {p['driver']} | {p['test'][8:]} {p['size']} B | {ms:.0f} | {per_pkt:.1f} | "
                     f"{per_byte:.2f} | {top} |")
    layered = [p for p in profiles if p.get("syms")]
    if layered:
        lines.append("\n### Where the CPU goes, by layer (us per packet sent, % of CPU time)\n")
        lines.append("Each symbol sampled is put in one layer by its module and name (see "
                     "`LAYERS` in scripts/bench-report.py). The driver is the rdma_rxe module "
                     "(either driver's) and, for ferroce, its Rust abstractions in the kernel; "
                     "the ICRC is the kernel's crc32 (with kernel_fpu_begin), which both call; user "
                     "space is every process sampled: perftest's polling and start-up, and the "
                     "bench's own commands. The clock's samples fall when interrupts come back "
                     "on, so work done with them off is counted in \"interrupts back on\": "
                     "the C rxe's hot path (it runs under spin_lock_irqsave), but also the "
                     "scheduler's and the stack's; compare the drivers with that column "
                     "beside them.\n")
        lines.append("| driver | run | " + " | ".join(LAYER_NAMES) + " |")
        lines.append("| --- | --- |" + " ---: |" * len(LAYER_NAMES))
        kernel = {}
        for p in layered:
            counts = layer_counts(p["syms"])
            total = sum(counts.values())
            ms = p["samples"] * 1000.0 / p["hz"]
            cells = []
            us = {}
            for name in LAYER_NAMES:
                share = counts.get(name, 0) / total if total else 0.0
                per_pkt = ms * 1000.0 * share / p["pkts"] if p["pkts"] else float("nan")
                us[name] = per_pkt
                cells.append(f"{per_pkt:.1f} ({100 * share:.0f}%)")
            if p["pkts"]:
                kernel[(p["driver"], p["mtu"], p["test"][8:], p["size"])] = us
            lines.append(f"| {p['driver']} | {p['test'][8:]} {p['size']} B | "
                         + " | ".join(cells) + " |")

        own = own_cost_rows(kernel)
        if own:
            lines.append("\nKernel time per packet for each driver, each driver's own share "
                         "(its module and \"interrupts back on\"), and the C rxe's kernel "
                         "time over ferroce's with its own share at zero (in brackets: with "
                         "only its module at zero). That estimates what work in ferroce alone "
                         "could change where kernel time per packet sets the rate; it is no "
                         "bound: user space, the other CPU and the spread between runs are not "
                         "in it. Beside it, the ratio perftest measured. Bandwidth runs "
                         "only.\n")
            lines.append("| run | ferroce us | C rxe us | ferroce's own us | C rxe's own us | "
                         "C rxe / ferroce without its own | measured ferroce / C rxe |")
            lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
            lines.extend(own)

if incast:
    lines.append("\n## Incast: 3 senders into 1 receiver through a bottleneck, DCQCN off and on\n")
    lines.append("tools/testing/selftests/ferroce/ferroce_incast.sh: RDMA WRITEs (every byte checked) "
                 "through tbf + RED (marks ECN-capable packets, drops the rest), an 8-byte "
                 "ib_write_lat probe sharing the queue; RED's backlog sampled while every sender "
                 "ran; go-back-N = sequence NAKs + ACK timeouts; "
                 "DCQCN off sends a third of the messages.\n")
    lines.append("| DCQCN | bottleneck | drops | CE marks | go-back-N | goodput Mb/s | Jain | "
                 "probe median us | probe p99 us | backlog median B | backlog p90 B | "
                 "per sender Mb/s in the first 20 s |")
    lines.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in incast:
        if "failed" in r:
            lines.append(f"| failed: {r['failed']} | | | | | | | | | | | |")
            continue
        lines.append(f"| {r['dcqcn']} | {r['bottleneck']} | {r['drops']} | {r['marked']} | "
                     f"{r['resends']} | {r['goodput_mbps']:.2f} | "
                     f"{'n/a' if r['jain'] is None else format(r['jain'], '.3f')} | "
                     f"{format(r['median_us'], '.0f') if 'median_us' in r else 'n/a'} | {r['p99_us']:.0f} | "
                     f"{r.get('backlog_median_b', 'n/a')} | {r.get('backlog_p90_b', 'n/a')} | "
                     f"{r['senders_mbps']} |")

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

bw_tests = [t for t in tests if t.endswith("_bw") and not t.startswith("ib_atomic_bw")]
cols = len(bw_tests) + (1 if sweep else 0)
fig, axes = plt.subplots(len(mtus), max(1, cols), figsize=(5 * max(1, cols), 4 * len(mtus)), squeeze=False)
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
    if sweep:
        ax = axes[i][len(bw_tests)]
        for drv, style in (("ferroce", "o-"), ("c-rxe", "s--")):
            pts = [(q, summary((drv, mtu, f"ib_write_bw-q{q}", 65536))) for q in sweep]
            pts = [(q, s[0]) for q, s in pts if s]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=drv)
        ax.set_xscale("log", base=2)
        ax.set_title(f"64 KiB ib_write_bw vs QPs, MTU {mtu}")
        ax.set_xlabel("QPs")
        ax.set_ylabel("Gb/s (median, aggregate)")
        ax.legend(fontsize=8)
fig.suptitle(f"ferroce vs C rxe vs TCP ({accel})")
fig.tight_layout()
fig.savefig(f"{out_dir}/bench.png", dpi=90)
print(f"plot: {out_dir}/bench.png")
