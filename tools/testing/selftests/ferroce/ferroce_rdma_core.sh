#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma-core's whole pyverbs suite (tests/ as the distribution ships it) against a ferroce device,
# then against the C rxe in the same boot (FERROCE_C_RXE names its rdma_rxe.ko): the tallies side
# by side, and every test that passes on the C rxe must pass on ferroce (ODP excepted, for now).

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"
DIR="$(cd "$(dirname "$0")" && pwd)"
PY=/usr/bin/python3
RDMA_CORE_TESTS=/usr/share/doc/rdma-core/tests
WORK=$(mktemp -d)

cleanup() {
	rdma link del frc0 2>/dev/null
	ip link del frv0 2>/dev/null
	rmmod rdma_rxe 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

ktap_print_header
require rdma ip insmod "$PY"
"$PY" -c 'import pyverbs' 2>/dev/null || missing "pyverbs missing"
[ -d "$RDMA_CORE_TESTS" ] || missing "rdma-core tests missing"
ktap_set_plan 3

cp -r "$RDMA_CORE_TESTS" "$WORK/tests"
gunzip -f "$WORK"/tests/*.gz
ip link add frv0 type veth peer name frv1 || ktap_exit_fail_msg "cannot create veth"
ip addr add 192.0.2.31/24 dev frv0
ip link set frv0 up
ip link set frv1 up

# suite DRIVER LOAD...: loads a driver with LOAD, runs the whole suite on a device of it into
# $WORK/DRIVER.log, unloads it. Prints how long it took.
suite() {
	local driver=$1 start rc
	shift
	"$@" || { echo "# $driver: cannot load"; return 1; }
	rdma link add frc0 type rxe netdev frv0 || return 1
	start=$(date +%s)
	(cd "$WORK/tests" && PYTHONPATH="$WORK/tests" timeout 900 "$PY" run_tests.py --dev frc0 -v) \
		>"$WORK/$driver.log" 2>&1
	rc=$?
	echo "# $driver: run_tests.py exited $rc after $(($(date +%s) - start)) s"
	rdma link del frc0 && rmmod rdma_rxe
}
suite ferroce modprobe rdma_rxe
if [ -f "${FERROCE_C_RXE:-}" ]; then
	suite c-rxe insmod "$FERROCE_C_RXE"
else
	echo "# FERROCE_C_RXE not set: no reference run"
fi
touch "$WORK/ferroce.log" "$WORK/c-rxe.log"

# compare CHECK [quiet]: the table (unless quiet), and whether CHECK holds.
compare() {
	if [ -n "${2:-}" ]; then
		"$PY" "$DIR/rdma_core_compare.py" "$WORK/ferroce.log" "$WORK/c-rxe.log" "$1" >/dev/null
	else
		"$PY" "$DIR/rdma_core_compare.py" "$WORK/ferroce.log" "$WORK/c-rxe.log" "$1"
	fi
}
ktap_test_result "rdma-core pyverbs suite on ferroce: every test passes or skips" compare ferroce
ktap_test_result "every pyverbs test that passes on the C rxe passes on ferroce (ODP excepted)" \
	compare parity quiet
ktap_test_result "pyverbs memory windows (test_mr.MWTest): types 1 and 2, invalidation, all pass" \
	compare windows

ktap_finished
