#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Wire interop with the C rxe: two guests on one QEMU dgram network over loopback, one running
# the C rxe and one ferroce, run perftest, the pingpongs, rping and mckey against each other in both
# directions, over IPv4 and (ib_write_bw, rping) IPv6
# (tools/testing/selftests/ferroce/interop_guest.sh is each side).
# Appends "pass|fail|skip interop interop/<n> <name>" lines to RESULTS (default: print only),
# and each guest's kernel log check ("kernel-log interop-<driver>/...").
#   usage: scripts/interop.sh [RESULTS]
set -euo pipefail
. "$(dirname "$0")/lib.sh"

results=${1:-/dev/null}
build=$(cat "$FERROCE_CACHE/current-build" 2>/dev/null) || die "no kernel built yet (run make kernel)"
tree=$(cat "$FERROCE_CACHE/current-tree")
c_rxe="$build/rxe-c/rdma_rxe.ko"
[ -f "$c_rxe" ] || die "no C rxe module at $c_rxe"
side="FERROCE_LOG_CHECK=$FERROCE_ROOT/scripts/kernel-log-check.sh $tree/tools/testing/selftests/ferroce/interop_guest.sh"
# INTEROP_ONLY="N ...": run only those tests (debugging); the others are reported as skipped,
# which fails make check.
[ -z "${INTEROP_ONLY:-}" ] || side="INTEROP_ONLY='$INTEROP_ONLY' $side"
# INTEROP_REPEAT=N: the whole list N times in a row (make soak).
repeat=${INTEROP_REPEAT:-1}
side="INTEROP_REPEAT=$repeat $side"
[ -x "$tree/tools/testing/selftests/ferroce/ferroce_xfer" ] || die "ferroce_xfer is not built"
# Not under /tmp: a guest whose writable folder is there gets a fresh /tmp, which would hide a
# checkout under /tmp (and its kernel-log-check.sh) from it.
mkdir -p "$FERROCE_CACHE/runs"
work=$(mktemp -d -p "$FERROCE_CACHE/runs" interop-XXXXXX)
trap 'rm -rf "$work"' EXIT

# Two UDP ports on loopback, one per guest's end of the wire.
base=$((20000 + RANDOM % 20000))
net() { # LOCAL_PORT REMOTE_PORT MAC
	echo "-netdev dgram,id=ix,local.type=inet,local.host=127.0.0.1,local.port=$1,remote.type=inet,remote.host=127.0.0.1,remote.port=$2 -device virtio-net-pci,netdev=ix,mac=$3"
}
step "interop: C rxe (10.72.0.1) and ferroce (10.72.0.2) guests"
GUEST_CPUS=1 GUEST_TIMEOUT=$((1500 * repeat)) GUEST_QEMU_OPTS="$(net "$base" $((base + 1)) 52:54:00:fe:00:01)" \
	"$FERROCE_ROOT/scripts/guest.sh" \
	"$side c-rxe 52:54:00:fe:00:01 10.72.0.1 10.72.0.2 c-rxe $c_rxe" >"$work/c-rxe.log" 2>&1 &
c_pid=$!
GUEST_CPUS=1 GUEST_TIMEOUT=$((1500 * repeat)) GUEST_QEMU_OPTS="$(net $((base + 1)) "$base" 52:54:00:fe:00:02)" \
	"$FERROCE_ROOT/scripts/guest.sh" \
	"$side ferroce 52:54:00:fe:00:02 10.72.0.2 10.72.0.1 c-rxe" >"$work/ferroce.log" 2>&1 &
f_pid=$!
rc=0
wait "$c_pid" || rc=1
wait "$f_pid" || rc=1

for s in c-rxe ferroce; do
	echo "--- $s guest"
	# The console's lines apart: a guest whose kernel died gets its excerpt (check.sh's summary
	# shows the first).
	grep -E '^(ok|not ok|#|result:) ' "$work/$s.log" ||
		tail -n 20 "$work/$s.log" | grep -vE "$CONSOLE_STAMP" || true
	crash_excerpt "$work/$s.log"
done
# A test passes when both of its sides do.
n=$(grep -cE '^(ok|not ok) [0-9]+ ' "$work/ferroce.log" || true)
[ "$n" -gt 0 ] || { echo "fail interop interop/no-results" >>"$results"; rc=1; }
for i in $(seq "$n"); do
	name=$(sed -nE "s/^(ok|not ok) $i [0-9]+: ([^ ]+) .*/\2/p" "$work/ferroce.log" | head -n1)
	dir=$([ $((i % 2)) = 1 ] && echo "ferroce-to-c-rxe-server" || echo "c-rxe-to-ferroce-server")
	if grep -qE "^ok $i .*# SKIP" "$work/ferroce.log"; then
		# Left out by INTEROP_ONLY: a skip, which check_summary.py does not allow.
		echo "skip interop interop/$i $name $dir" >>"$results"
	elif grep -qE "^ok $i " "$work/c-rxe.log" && grep -qE "^ok $i " "$work/ferroce.log"; then
		echo "pass interop interop/$i $name $dir" >>"$results"
	else
		echo "fail interop interop/$i $name $dir" >>"$results"; rc=1
	fi
done
# Each guest's kernel log, kmemleak and module unload.
for s in c-rxe ferroce; do
	if grep -q "^result: .* kernel-log interop-$s/" "$work/$s.log"; then
		sed -n 's/^result: //p' "$work/$s.log" >>"$results"
	else
		echo "fail kernel-log interop-$s/log (the guest reported no log check)" >>"$results"; rc=1
	fi
	grep -q "^result: fail" "$work/$s.log" && rc=1
done
exit "$rc"
