#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Every test: host cargo tests, the kernel build, then in one guest boot our KUnit suites, our
# kselftests, the kernel's rxe selftests against ferroce, and a clean kernel log;
# then two guests on one wire, one with the C rxe and one with ferroce. Every subtest is one
# result line; scripts/check_summary.py judges them against scripts/expected-results (every
# suite must have run whole, no failure, no skip that is not allowed) and prints
# "N passed, N failed, N skipped". Exits non-zero on any failure or if nothing ran.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

start=$SECONDS
# FERROCE_QUICK=1 (make check-quick): the groups marked "quick" in scripts/expected-results, in
# one guest boot, no interop.
quick=
[ "${FERROCE_QUICK:-}" != 1 ] || quick=1
run_dir="$FERROCE_CACHE/runs/check-$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$run_dir"
results="$run_dir/results"
: >"$results"
times=()
step_start=$SECONDS
# timed NAME: closes the previous step's timer and starts NAME's.
timed() {
	[ -z "${FERROCE_STEP:-}" ] || times+=("$(printf '%6d s  %s' $((SECONDS - step_start)) "$FERROCE_STEP")")
	step_start=$SECONDS
	step "$1"
}

timed "host tests (cargo test)"
need cargo
log="$run_dir/cargo-test.log"
rc=0
(cd "$FERROCE_ROOT/tools/ferroce-proto" && cargo test --locked 2>&1) | tee "$log" || rc=$?
sed -nE 's/^test (.+) \.\.\. (ok|FAILED|ignored)$/\2 \1/p' "$log" | while read -r st name; do
	case $st in ok) s=pass ;; ignored) s=skip ;; *) s=fail ;; esac
	echo "$s host cargo/$name"
done >>"$results"
if [ "$rc" -ne 0 ] && ! grep -q '^fail host cargo/' "$results"; then
	echo "fail host cargo/build (cargo test failed without a failing test: build error?)" >>"$results"
fi

# unittest_results NAME SCRIPT: runs a host unittest script, one result line per case.
unittest_results() {
	local name=$1 log="$run_dir/$1.log" rc=0
	python3 "$2" -v >"$log" 2>&1 || rc=$?
	cat "$log"
	python3 "$FERROCE_ROOT/scripts/ktap_results.py" host "$name" "$rc" \
		< <(echo "1..1"; cat "$log"; [ "$rc" -eq 0 ] && echo "ok 1 $name" || echo "not ok 1 $name") \
		>>"$results"
}

timed "host tests (roce_inject_test.py)"
unittest_results roce_inject_test.py "$FERROCE_ROOT/tools/testing/selftests/ferroce/roce_inject_test.py"

timed "host tests (the driver has no unsafe)"
# Every unsafe block and every use of the C bindings lives in the abstractions.
if grep -rnE '\bunsafe\b|bindings::' "$FERROCE_ROOT/drivers/infiniband/sw/ferroce" \
	--include='*.rs' | grep -vE '^[^:]+:[0-9]+:\s*//'; then
	echo "fail host driver-has-no-unsafe (unsafe or bindings:: under drivers/infiniband/sw/ferroce)" >>"$results"
else
	echo "pass host driver-has-no-unsafe" >>"$results"
fi

timed "host tests (the documentation's file map matches the tree)"
if python3 "$FERROCE_ROOT/scripts/doc_file_map.py" "$FERROCE_ROOT" >"$run_dir/doc-file-map.log" 2>&1; then
	echo "pass host doc-file-map" >>"$results"
else
	cat "$run_dir/doc-file-map.log" >&2
	echo "fail host doc-file-map (see $run_dir/doc-file-map.log)" >>"$results"
fi

timed "host tests (rustfmt)"
# As the kernel's .rustfmt.toml says (edition 2021, the defaults).
if find "$FERROCE_ROOT/drivers/infiniband/sw/ferroce" "$FERROCE_ROOT/rust/kernel" \
	"$FERROCE_ROOT/tools/ferroce-proto" "$FERROCE_ROOT/tools/ferroce-bench" \
	-name target -prune -o -name '*.rs' -print0 |
	xargs -0 rustfmt --edition 2021 --check >"$run_dir/rustfmt.log" 2>&1; then
	echo "pass host rustfmt" >>"$results"
else
	grep '^Diff in' "$run_dir/rustfmt.log" | head -5
	echo "fail host rustfmt (rustfmt --check: see $run_dir/rustfmt.log)" >>"$results"
fi

timed "build the kernel"
build=$("$FERROCE_ROOT/scripts/build-kernel.sh")
tree=$(cat "$FERROCE_CACHE/current-tree")

timed "host tests (clippy: the build linted the abstractions, the macros and the driver)"
# build-kernel.sh builds with CLIPPY=1 and -Dwarnings, so a lint fails the build. Here: that
# the kernel crate, the macros and the driver in the build did go through clippy with those
# flags (unlinted in lib.sh).
clippy_bad=$(unlinted "$build")
if [ -z "$clippy_bad" ]; then
	echo "pass host clippy" >>"$results"
else
	echo "fail host clippy (not built by clippy-driver with -Dwarnings: $(echo $clippy_bad))" >>"$results"
fi

timed "host tests (harness_test.py: the harness fails what it should)"
FERROCE_TREE=$tree unittest_results harness_test.py "$FERROCE_ROOT/scripts/harness_test.py"

timed "build the test programs"
build_selftests "$tree" || die "the selftest programs did not build"

timed "guest tests${quick:+ (quick)}"
rc=0
GUEST_RWDIR="$run_dir" GUEST_TIMEOUT=${GUEST_TIMEOUT:-3600} "$FERROCE_ROOT/scripts/guest.sh" \
	"FERROCE_QUICK=$quick $FERROCE_ROOT/scripts/guest-check.sh $results $tree $build" 2>&1 |
	tee "$run_dir/guest.log" || rc=$?
if [ "$rc" -ne 0 ]; then
	why=$(crash_reason "$run_dir/guest.log" "$run_dir/crashes")
	echo "fail guest guest/run (the guest run failed: exit $rc$why)" >>"$results"
fi

if [ -z "$quick" ]; then
	timed "interop guests (C rxe and ferroce on one wire)"
	rc=0
	"$FERROCE_ROOT/scripts/interop.sh" "$results" 2>&1 | tee "$run_dir/interop.log" || rc=$?
	if [ "$rc" -ne 0 ]; then
		why=$(crash_reason "$run_dir/interop.log" "$run_dir/crashes")
		if [ -n "$why" ] || ! grep -qE '^fail (interop|kernel-log) ' "$results"; then
			echo "fail interop interop/run (the interop run failed: exit $rc$why)" >>"$results"
		fi
	fi
fi

timed "summary"
echo "step times:"
printf '  %s\n' "${times[@]}"
echo "check took $((SECONDS - start)) s; logs in $run_dir"
# A dead guest's last words, just above the summary: a log cut short still shows them.
if [ -s "$run_dir/crashes" ]; then
	echo "guest consoles, from the kernel's first oops, BUG or panic line on:"
	sed 's/^/  | /' "$run_dir/crashes"
fi
python3 "$FERROCE_ROOT/scripts/check_summary.py" "$results" "$FERROCE_ROOT/scripts/expected-results" \
	${quick:+--quick}
