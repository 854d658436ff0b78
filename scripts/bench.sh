#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench: ferroce against the C rxe and kernel TCP in one guest boot, plus host
# micro-benchmarks of the pure hot paths. Writes bench.md, bench.json and bench.png; prints the
# table. It reports figures; it never fails on them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out="${BENCH_OUT:-$FERROCE_CACHE/runs/bench-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"

step "host micro-benchmarks"
(cd "$FERROCE_ROOT/tools/ferroce-bench" && cargo run --locked --release -q -- --json "$out/micro.json") \
	|| die "host micro-benchmarks failed"

step "build the kernel (without debugging aids)"
build=$(FERROCE_KCONFIG_EXTRA="$FERROCE_ROOT/scripts/kconfig/bench.config" "$FERROCE_ROOT/scripts/build-kernel.sh")

# The incast table needs the selftests' ferroce_xfer; without it the bench runs without it.
tree=$(cat "$FERROCE_CACHE/current-tree")
incast=$tree/tools/testing/selftests/ferroce/ferroce_incast.sh
build_selftests "$tree" || { echo "selftests did not build: no incast" >&2; incast=; }

step "guest benchmark"
: >"$out/raw.jsonl"
accel=TCG
[ -r /dev/kvm ] && [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo && accel=KVM
GUEST_RWDIR="$out" GUEST_TIMEOUT=${GUEST_TIMEOUT:-5400} "$FERROCE_ROOT/scripts/guest.sh" \
	"BENCH_REPS=${BENCH_REPS:-3} BENCH_SECONDS=${BENCH_SECONDS:-2} ${BENCH_SIZES:+BENCH_SIZES='$BENCH_SIZES'} ${BENCH_MTUS:+BENCH_MTUS='$BENCH_MTUS'} ${BENCH_QPS:+BENCH_QPS='$BENCH_QPS'} ${BENCH_PROFILE:+BENCH_PROFILE='$BENCH_PROFILE'} ${BENCH_INCAST:+BENCH_INCAST='$BENCH_INCAST'} ${BENCH_HOSTS:+BENCH_HOSTS='$BENCH_HOSTS'} ${BENCH_NVME:+BENCH_NVME='$BENCH_NVME'} ${BENCH_NVME_SECONDS:+BENCH_NVME_SECONDS='$BENCH_NVME_SECONDS'} ${BENCH_FERROCE_PARAMS:+BENCH_FERROCE_PARAMS='$BENCH_FERROCE_PARAMS'} $FERROCE_ROOT/scripts/bench-guest.sh $out/raw.jsonl $build/rxe-c/rdma_rxe.ko $incast" \
	|| { tail -n 40 "$out/guest-dmesg.log" >&2 2>/dev/null; die "the guest benchmark run failed (its kernel log: $out/guest-dmesg.log)"; }
[ -s "$out/raw.jsonl" ] || die "the guest produced no figures"

step "report"
/usr/bin/python3 "$FERROCE_ROOT/scripts/bench-report.py" "$out/raw.jsonl" "$out" "$accel" "$out/micro.json" \
	|| die "report generation failed"
echo "bench results: $out (bench.md, bench.json, bench.png)"
