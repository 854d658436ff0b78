#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Every test: host cargo tests, the kernel build, then in one guest boot our KUnit suites, our
# kselftests, the kernel's rxe selftests against the C rxe, and a clean kernel log; then two
# guests on one wire, one with the C rxe and one with ferroce.
# Ends with "N passed, N failed, N skipped"; exits non-zero on any failure or if nothing ran.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

passed=0 failed=0 skipped=0
start=$SECONDS
run_dir="$FERROCE_CACHE/runs/check-$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$run_dir"

step "host tests (cargo test)"
need cargo
log="$run_dir/cargo-test.log"
rc=0
(cd "$FERROCE_ROOT/tools/ferroce-proto" && cargo test --locked 2>&1) | tee "$log" || rc=$?
while read -r p f ig; do
	passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ig))
done < <(sed -nE 's/^test result: [a-zA-Z]+\. ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored.*/\1 \2 \3/p' "$log")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	echo "ferroce: cargo test failed without a test result (build error?)" >&2
	failed=$((failed + 1))
fi

step "host tests (roce_inject.py)"
log="$run_dir/roce-inject-test.log"
rc=0
python3 "$FERROCE_ROOT/tools/testing/selftests/ferroce/roce_inject_test.py" -v >"$log" 2>&1 || rc=$?
cat "$log"
n=$(sed -nE 's/^Ran ([0-9]+) tests? .*/\1/p' "$log")
if [ "$rc" -eq 0 ] && [ -n "$n" ] && [ "$n" -gt 0 ]; then
	passed=$((passed + n))
else
	f=$(grep -cE '\.\.\. (FAIL|ERROR)$' "$log" || true)
	failed=$((failed + (f > 0 ? f : 1)))
fi

step "build the kernel"
build=$("$FERROCE_ROOT/scripts/build-kernel.sh")
tree=$(cat "$FERROCE_CACHE/current-tree")

step "guest tests"
results="$run_dir/guest-results"
: >"$results"
rc=0
GUEST_RWDIR="$run_dir" GUEST_TIMEOUT=${GUEST_TIMEOUT:-1800} "$FERROCE_ROOT/scripts/guest.sh" \
	"$FERROCE_ROOT/scripts/guest-check.sh $results $tree $build" || rc=$?
if [ "$rc" -ne 0 ]; then
	echo "ferroce: the guest run failed (exit $rc)" >&2
	failed=$((failed + 1))
fi
[ -s "$results" ] || { echo "ferroce: the guest reported no results" >&2; failed=$((failed + 1)); }

step "interop guests (C rxe and ferroce on one wire)"
rc=0
"$FERROCE_ROOT/scripts/interop.sh" "$results" 2>&1 | tee "$run_dir/interop.log" || rc=$?
if [ "$rc" -ne 0 ] && ! grep -q '^fail interop' "$results"; then
	echo "ferroce: the interop run failed (exit $rc)" >&2
	failed=$((failed + 1))
fi
passed=$((passed + $(grep -c '^pass ' "$results" || true)))
failed=$((failed + $(grep -c '^fail ' "$results" || true)))
skipped=$((skipped + $(grep -c '^skip ' "$results" || true)))
if grep -q '^fail ' "$results"; then
	echo "failed tests:"; sed -n 's/^fail /  /p' "$results"
fi
if grep -q '^skip ' "$results"; then
	echo "skipped tests:"; sed -n 's/^skip /  /p' "$results"
fi

echo "check took $((SECONDS - start)) s; logs in $run_dir"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
