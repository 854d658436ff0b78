#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make soak: what depends on timing, in loops, with the counts at the end.
#  - ferroce_loss.sh with LOSS_RUNS (default 20) runs of each case: ibv_rc_pingpong 64 KiB x 50,
#    ib_write_bw 64 KiB x 200 and byte-exact RC WRITE and READ, under netem 1% loss + 1%
#    reordering, then under 5% loss;
#  - ferroce_data.sh SOAK_DATA_RUNS (default 3) times;
#  - ferroce_hostile.sh and ferroce_link.sh once each in their long forms (FERROCE_LONG: a 60 s
#    ring scribbler, a 30 s flood, 100 link create/delete cycles; make check runs them shorter);
#  - the interop suite (C rxe and ferroce guests on one wire) INTEROP_REPEAT (default 10) times
#    in a row;
#  - the kernel's rxe selftests against the C rxe, in a guest of their own (make check runs them
#    against ferroce): that they pass on this kernel at all.
# Exits non-zero if any run failed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

run_dir="$FERROCE_CACHE/runs/soak-$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$run_dir"
results="$run_dir/results"
: >"$results"
start=$SECONDS

step "build the kernel and the test programs"
build=$("$FERROCE_ROOT/scripts/build-kernel.sh")
tree=$(cat "$FERROCE_CACHE/current-tree")
build_selftests "$tree" || die "the selftest programs did not build"
st="$tree/tools/testing/selftests/ferroce"

step "loss and data loops in one guest"
cmd="cd $st && export FERROCE_STRICT=1 FERROCE_LONG=1 LOSS_RUNS=${LOSS_RUNS:-20};"
cmd+=" (./ferroce_loss.sh; echo \"exit \$?\") 2>&1 | tee $run_dir/loss.log;"
cmd+=" for i in \$(seq ${SOAK_DATA_RUNS:-3}); do (./ferroce_data.sh; echo \"exit \$?\") > $run_dir/data-\$i.log 2>&1; done;"
cmd+=" for t in hostile link; do (./ferroce_\$t.sh; echo \"exit \$?\") > $run_dir/long-\$t.log 2>&1; done;"
cmd+=" bash $FERROCE_ROOT/scripts/kernel-log-check.sh soak > $run_dir/kernel-log 2>&1"
GUEST_RWDIR="$run_dir" GUEST_TIMEOUT=${GUEST_TIMEOUT:-14400} "$FERROCE_ROOT/scripts/guest.sh" "$cmd" || true
python3 "$FERROCE_ROOT/scripts/ktap_results.py" soak ferroce_loss.sh "$(sed -n 's/^exit //p' "$run_dir/loss.log" | tail -1)" \
	<"$run_dir/loss.log" >>"$results"
for f in "$run_dir"/data-*.log "$run_dir"/long-*.log; do
	[ -e "$f" ] || continue
	python3 "$FERROCE_ROOT/scripts/ktap_results.py" soak "$(basename "$f" .log)" \
		"$(sed -n 's/^exit //p' "$f" | tail -1)" <"$f" >>"$results"
done
grep -E '^(pass|fail) ' "$run_dir/kernel-log" >>"$results" || echo "fail soak kernel-log" >>"$results"

step "interop, ${INTEROP_REPEAT:-10} times"
INTEROP_REPEAT=${INTEROP_REPEAT:-10} "$FERROCE_ROOT/scripts/interop.sh" "$results" \
	>"$run_dir/interop.log" 2>&1 || true

step "the kernel's rxe selftests against the C rxe"
c_rxe_results="$run_dir/c-rxe-results"
: >"$c_rxe_results"
GUEST_RWDIR="$run_dir" GUEST_TIMEOUT=${GUEST_TIMEOUT:-14400} "$FERROCE_ROOT/scripts/guest.sh" \
	"FERROCE_SUITES=selftests.rdma.c-rxe $FERROCE_ROOT/scripts/guest-check.sh $c_rxe_results $tree $build" \
	>"$run_dir/c-rxe-selftests.log" 2>&1 || echo "fail soak c-rxe-selftests/guest (the guest run failed)" >>"$results"
cat "$c_rxe_results" >>"$results"
# Every script ran whole, no skip but the one allowed: as make check judged them.
if python3 "$FERROCE_ROOT/scripts/check_summary.py" "$c_rxe_results" \
	"$FERROCE_ROOT/scripts/expected-results-c-rxe" >>"$run_dir/c-rxe-selftests.log" 2>&1; then
	echo "pass soak c-rxe-selftests/summary" >>"$results"
else
	echo "fail soak c-rxe-selftests/summary (see $run_dir/c-rxe-selftests.log)" >>"$results"
fi

step "counts"
# One line per test name: how many of its runs passed.
sed -E 's/^(pass|fail|skip) ([^ ]+) [^ ]+\/[0-9]+ /\1 \2 /; s/, run [0-9]+$//; s/^(pass|fail|skip) interop interop\/[0-9]+ /\1 interop /' \
	"$results" | sort | uniq -c | sort -k3 | awk '{c=$1; $1=""; print c " x" $0}'
echo "soak took $((SECONDS - start)) s; logs in $run_dir"
! grep -q '^fail ' "$results"
