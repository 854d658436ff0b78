#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs inside the guest (scripts/check.sh boots it): our KUnit suites, our kselftests, the
# kernel's rxe selftests against ferroce, and a clean kernel log. Appends one line per subtest,
# "pass|fail|skip SUITE NAME", to RESULTS (see scripts/check_summary.py).
# FERROCE_SUITES names the suites to run: by default "kunit selftests.ferroce
# selftests.rdma.ferroce"; make soak runs "selftests.rdma.c-rxe" (the kernel's rxe selftests
# against the C rxe: whether they pass on this kernel at all, a reference for ours).
#   usage: guest-check.sh RESULTS TREE BUILD
set -uo pipefail
results=$1 tree=$2 build=$3
selftests="$tree/tools/testing/selftests"
c_rxe="$build/rxe-c/rdma_rxe.ko"
here=$(cd "$(dirname "$0")" && pwd)

record() { # STATUS SUITE NAME
	echo "$1 $2 $3" >>"$results"
	printf '[%s] %s: %s\n' "$1" "$2" "$3"
}

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
# kmemleak scans on its own every 10 minutes, each holding a vCPU for seconds under TCG (3.7 s
# on a fresh boot, longer as objects pile up): within a test that measures a rate, a rate
# missed. The kernel-log check at the end scans twice and finds whatever those would have.
echo scan=off >/sys/kernel/debug/kmemleak 2>/dev/null || true
export PATH=/usr/sbin:/sbin:$PATH
# In make check every tool is installed: a missing one fails the test that needs it.
export FERROCE_STRICT=1
# One round of each loss case at 1% here; make soak runs 1% and 5% in loops.
export LOSS_RUNS=${LOSS_RUNS:-1} LOSSES=${LOSSES:-1}

# unload_after SUITE NAME: the module must unload after each suite; a leaked reference is the
# suite's fault.
unload_after() {
	lsmod | grep -q '^rdma_rxe ' || return 0
	modprobe -r rdma_rxe 2>/dev/null || rmmod rdma_rxe 2>/dev/null ||
		record fail "$1" "$2/unload (rdma_rxe still loaded after it: $(lsmod | awk '$1 == "rdma_rxe" {print "refcount " $3}'))"
}

# The doc examples of our files under rust/kernel, as the kernel names their KUnit cases:
# rust/kernel/rdma/attr.rs's are rust_doctest_kernel_rdma_attr_rs_N.
our_doctests=$(cd "$here/.." && find rust/kernel -name '*.rs' | sed 's|^rust/kernel/||; s|[/.]|_|g' |
	sort | paste -sd'|')

# KUnit: the abstractions' suites and the kernel crate's doc examples ran at boot, the driver's
# run when the module loads; debugfs keeps their KTAP results. Of the doc examples only ours
# count (the rest are the kernel's own).
kunit() {
	modprobe rdma_rxe || { record fail kunit "ferroce_proto/modprobe"; return; }
	local f suite line name ours w1 w2 w3 w4
	for f in /sys/kernel/debug/kunit/*/results; do
		suite=$(basename "$(dirname "$f")")
		case $suite in
		ferroce_* | rust_rdma_* | rust_net_*) ours='' ;;
		rust_doctests_kernel) ours="^rust_doctest_kernel_($our_doctests)_[0-9]+\$" ;;
		*) continue ;;
		esac
		echo "# KUnit $suite:"
		[ -n "$ours" ] || sed 's/^/#   /' "$f"
		# Test cases are the indented result lines; the suite's own line is not counted.
		while read -r line; do
			# "ok N NAME ..." or "not ok N NAME ...", without a process per line (hundreds of
			# doc examples under TCG).
			read -r w1 w2 w3 w4 _ <<<"$line"
			if [ "$w1" = not ]; then name=$w4; else name=$w3; fi
			[ -z "$ours" ] || [[ $name =~ $ours ]] || continue
			[ -z "$ours" ] || echo "#   $line"
			case "$line" in
			"ok "*"# SKIP"*) record skip kunit "$suite/$name" ;;
			"ok "*) record pass kunit "$suite/$name" ;;
			"not ok "*) record fail kunit "$suite/$name" ;;
			esac
		done < <(grep -E '^[[:space:]]+(not )?ok [0-9]+ ' "$f" | sed 's/^[[:space:]]*//')
	done
	unload_after kunit ferroce_proto
}

# run_kselftest SUITE TIMEOUT SCRIPT: its subtests, counted from its KTAP output.
run_kselftest() {
	local rc name out
	name=$(basename "$3")
	out=$(mktemp)
	echo "# $1: $name"
	local t0=$SECONDS
	# The log shows each line's second since the script started; the parser reads it bare.
	(cd "$(dirname "$3")" && timeout -k 10 "$2" "./$name") 2>&1 | tee "$out" |
		while IFS= read -r l; do printf '#%5d  %s\n' $((SECONDS - t0)) "$l"; done
	rc=${PIPESTATUS[0]}
	times+=("$(printf '%6d s  %s %s' $((SECONDS - t0)) "$1" "$name")")
	python3 "$here/ktap_results.py" "$1" "$name" "$rc" <"$out" | while read -r line; do
		[ -n "$line" ] && record ${line%% *} "$(echo "$line" | cut -d' ' -f2)" "$(echo "$line" | cut -d' ' -f3-)"
	done
	rm -f "$out"
	unload_after "$1" "$name"
}

times=()
# The kernel log from boot on is checked at the end: nothing is cleared.
echo "# guest kernel $(uname -r), $(nproc) CPUs"
# The root file system is 9p: the first exec of a tool reads it and its libraries slowly, which
# makes tests that start a server and "sleep 1" race under TCG. Load them once up front.
for tool in rping ibv_devices ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong ib_write_bw ib_read_bw \
	ib_send_bw ib_write_lat ib_send_lat tc rdma ss ip ping; do
	command -v "$tool" >/dev/null && "$tool" --help >/dev/null 2>&1
done
export FERROCE_C_RXE=$c_rxe
# A stand-in for a hardware RoCE device (ferroce_hw.sh).
export FERROCE_ROCE_STANDIN=$build/roce-standin/roce_standin.ko
# Checks of verbs only kernel consumers reach (ferroce_verbs.sh).
export FERROCE_KVERBS=$build/kverbs/ferroce_kverbs.ko
# The Makefile's TEST_PROGS (other scripts there are helpers, e.g. one side of the interop test);
# scripts/expected-results says which must have run.
# wanted SUITE SCRIPT: whether this run includes SCRIPT (make check-quick: only the groups
# scripts/expected-results marks quick).
suites=" ${FERROCE_SUITES:-kunit selftests.ferroce selftests.rdma.ferroce} "
wanted() {
	[[ $suites == *" $1 "* ]] || return 1
	[ -z "${FERROCE_QUICK:-}" ] ||
		awk -v s="$1" -v g="$2" '$1 == s && $2 == g && $4 == "quick" {f = 1} END {exit !f}' \
			"$here/expected-results"
}
wanted kunit ferroce_proto && kunit

# ferroce_storage.sh runs last: its nvmet teardown may make lockdep report an upstream lock
# order and stop checking (see the script and kernel-log-check.sh).
LAST=ferroce_storage.sh
for t in $(sed -n 's/^TEST_PROGS := //p' "$selftests/ferroce/Makefile"); do
	[ "$t" = "$LAST" ] && continue
	wanted selftests.ferroce "$t" && run_kselftest selftests.ferroce 1200 "$selftests/ferroce/$t"
done

# The kernel's own rxe selftests, unmodified, against ferroce.
for t in "$selftests"/rdma/rxe_*.sh; do
	wanted selftests.rdma.ferroce "$(basename "$t")" && run_kselftest selftests.rdma.ferroce 400 "$t"
done

# The kernel's own rxe selftests, unmodified, against the C rxe: modprobe loads it instead of ours.
mkdir -p /run/modprobe.d
echo "install rdma_rxe /sbin/insmod $c_rxe" >/run/modprobe.d/ferroce-c-rxe.conf
for t in "$selftests"/rdma/rxe_*.sh; do
	wanted selftests.rdma.c-rxe "$(basename "$t")" && run_kselftest selftests.rdma.c-rxe 400 "$t"
done
rm -f /run/modprobe.d/ferroce-c-rxe.conf

wanted selftests.ferroce "$LAST" && run_kselftest selftests.ferroce 1200 "$selftests/ferroce/$LAST"

bash "$here/kernel-log-check.sh" main | tee -a "$results"
echo "# guest script times:"
printf '#%s\n' "${times[@]}"
exit 0
