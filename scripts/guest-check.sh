#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs inside the guest (scripts/check.sh boots it): our KUnit suites, our kselftests, the
# kernel's rxe selftests against the C rxe, and a clean kernel log. Appends one line per test,
# "pass|fail|skip <suite> <name>", to RESULTS.
#   usage: guest-check.sh RESULTS TREE BUILD
set -uo pipefail
results=$1 tree=$2 build=$3
selftests="$tree/tools/testing/selftests"
c_rxe="$build/rxe-c/rdma_rxe.ko"

record() { # STATUS SUITE NAME
	echo "$1 $2 $3" >>"$results"
	printf '[%s] %s: %s\n' "$1" "$2" "$3"
}

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
export PATH=/usr/sbin:/sbin:$PATH

# KUnit: the abstractions' suites ran at boot, the driver's run when the module loads; debugfs
# keeps their KTAP results.
kunit() {
	modprobe rdma_rxe || { record fail kunit modprobe-rdma_rxe; return; }
	local found=0 f suite line
	for f in /sys/kernel/debug/kunit/{ferroce_*,rust_rdma_*,rust_net_*}/results; do
		[ -f "$f" ] || continue
		found=1
		suite=$(basename "$(dirname "$f")")
		echo "# KUnit $suite:"; sed 's/^/#   /' "$f"
		# Test cases are the indented result lines; the suite's own line is not counted.
		while read -r line; do
			case "$line" in
			"ok "*"# SKIP"*) record skip "kunit.$suite" "$(echo "$line" | awk '{print $3}')" ;;
			"ok "*) record pass "kunit.$suite" "$(echo "$line" | awk '{print $3}')" ;;
			"not ok "*) record fail "kunit.$suite" "$(echo "$line" | awk '{print $4}')" ;;
			esac
		done < <(grep -E '^[[:space:]]+(not )?ok [0-9]+ ' "$f")
	done
	[ "$found" = 1 ] || record fail kunit "no ferroce KUnit suite ran"
	modprobe -r rdma_rxe || record fail kunit rmmod-rdma_rxe
}

# run_kselftest SUITE TIMEOUT SCRIPT: one test, judged by its exit code (0 pass, 4 skip).
run_kselftest() {
	local rc=0
	echo "# $1: $(basename "$3")"
	(cd "$(dirname "$3")" && timeout -k 10 "$2" "./$(basename "$3")") 2>&1 | sed 's/^/#   /'
	rc=${PIPESTATUS[0]}
	case $rc in
	0) record pass "$1" "$(basename "$3")" ;;
	4) record skip "$1" "$(basename "$3")" ;;
	124) record fail "$1" "$(basename "$3") (timed out)" ;;
	*) record fail "$1" "$(basename "$3") (exit $rc)" ;;
	esac
	lsmod | grep -q '^rdma_rxe ' && modprobe -r rdma_rxe
}

dmesg -C
echo "# guest kernel $(uname -r), $(nproc) CPUs"
# The root file system is 9p: the first exec of a tool reads it and its libraries slowly, which
# makes tests that start a server and "sleep 1" race under TCG. Load them once up front.
for tool in rping ibv_devices ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong ib_write_bw ib_read_bw \
	ib_send_bw ib_write_lat ib_send_lat tc rdma ss ip ping; do
	command -v "$tool" >/dev/null && "$tool" --help >/dev/null 2>&1
done
kunit

export FERROCE_C_RXE=$c_rxe
# The Makefile's TEST_PROGS (other scripts there are helpers, e.g. one side of the interop test).
for t in $(sed -n 's/^TEST_PROGS := //p' "$selftests/ferroce/Makefile"); do
	run_kselftest selftests.ferroce 900 "$selftests/ferroce/$t"
done

# The kernel's own rxe selftests, unmodified, against ferroce.
for t in "$selftests"/rdma/rxe_*.sh; do
	run_kselftest selftests.rdma.ferroce 400 "$t"
done

# The kernel's own rxe selftests, unmodified, against the C rxe: modprobe loads it instead of ours.
mkdir -p /run/modprobe.d
echo "install rdma_rxe /sbin/insmod $c_rxe" >/run/modprobe.d/ferroce-c-rxe.conf
for t in "$selftests"/rdma/rxe_*.sh; do
	run_kselftest selftests.rdma.c-rxe 400 "$t"
done
rm -f /run/modprobe.d/ferroce-c-rxe.conf

# The log after all of it: no warning, bug, lockdep report or leak.
if [ -w /sys/kernel/debug/kmemleak ]; then
	echo scan >/sys/kernel/debug/kmemleak
	leaks=$(cat /sys/kernel/debug/kmemleak)
	if [ -z "$leaks" ]; then record pass kernel-log kmemleak; else
		echo "$leaks" | head -n 40 | sed 's/^/#   /'; record fail kernel-log kmemleak; fi
else
	record fail kernel-log "kmemleak not available"
fi
bad=$(dmesg | grep -E 'WARNING:|BUG:|Oops|Call Trace|possible circular locking|lockdep|UBSAN|KASAN' || true)
if [ -z "$bad" ]; then record pass kernel-log "no WARN/BUG/lockdep"; else
	echo "$bad" | head -n 40 | sed 's/^/#   /'; record fail kernel-log "no WARN/BUG/lockdep"; fi
exit 0
