#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# User verbs objects of a ferroce device through unmodified rdma-core (pyverbs and the rxe
# provider): our CQ ring tests, and rdma-core's own pyverbs tests for what exists so far.

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"
DIR="$(cd "$(dirname "$0")" && pwd)"
PY=/usr/bin/python3
RDMA_CORE_TESTS=/usr/share/doc/rdma-core/tests
WORK=$(mktemp -d)

cleanup() {
	rdma link del fer0 2>/dev/null
	ip link del fvv0 2>/dev/null
	modprobe -r rdma_rxe 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

ktap_print_header
require rdma ip "$PY"
"$PY" -c 'import pyverbs' 2>/dev/null || missing "pyverbs missing"
[ -d "$RDMA_CORE_TESTS" ] || missing "rdma-core tests missing"
ktap_set_plan 19

modprobe rdma_rxe || ktap_exit_fail_msg "modprobe rdma_rxe failed"
ip link add fvv0 type veth peer name fvv1 || ktap_exit_fail_msg "cannot create veth"
ip addr add 192.0.2.11/24 dev fvv0
ip link set fvv0 up
ip link set fvv1 up
rdma link add fer0 type rxe netdev fvv0 || ktap_exit_fail_msg "rdma link add failed"

ktap_test_result "CQ rings: sizes, limits, polling, arming, resize (ferroce_cq.py)" \
	"$PY" "$DIR/ferroce_cq.py" fer0
ktap_test_result "memory regions: keys, access, refusals, unpinning, reregistration (ferroce_mr.py)" \
	"$PY" "$DIR/ferroce_mr.py" fer0 192.0.2.11
ktap_test_result "queue pairs: rings, numbers, state machine, query (ferroce_qp.py)" \
	"$PY" "$DIR/ferroce_qp.py" fer0
ktap_test_result "error state flushes posted WRs into the CQ rings; scribbled rings (ferroce_flush.py)" \
	"$PY" "$DIR/ferroce_flush.py" fer0
ktap_test_result "deep send queues: WQEs start as reached; SQD and the error state (ferroce_sq.py)" \
	"$PY" "$DIR/ferroce_sq.py" fer0 192.0.2.11

# node_desc: sysfs writes reach modify_device; what was written is what is read.
node_desc_settable() {
	local f=/sys/class/infiniband/fer0/node_desc
	printf 'ferroce node 7' >"$f" || return 1
	[ "$(cat "$f")" = "ferroce node 7" ] || return 1
	# 64 bytes at most are kept, as the core passes them.
	printf '%080d' 0 >"$f" || return 1
	[ "$(cat "$f")" = "$(printf '%064d' 0)" ]
}
ktap_test_result "node description set through sysfs (modify_device)" node_desc_settable

# Verbs only kernel consumers reach: ferroce_kverbs.ko (built with the kernel, path in
# FERROCE_KVERBS) runs the checks ONLY names as it loads, and refuses to load if one fails.
kernel_verbs() {
	local ko=${FERROCE_KVERBS:-}
	[ -f "$ko" ] || { echo "no ferroce_kverbs.ko (FERROCE_KVERBS)"; return 1; }
	insmod "$ko" dev=fer0 only="$1" || { dmesg | grep ferroce_kverbs | tail -n 12; return 1; }
	rmmod ferroce_kverbs
}
ktap_test_result "kernel verbs: an address handle reads back as created (rdma_query_ah)" \
	kernel_verbs ah
ktap_test_result "kernel verbs: RC and UC QPs send (3 packets, immediate, inline), refuse what they cannot, fail a bad lkey, drain" \
	kernel_verbs qps
ktap_test_result "kernel verbs: FRWR gives a peer WRITE and READ across pages until SEND_WITH_INV or LOCAL_INV (after earlier WRs)" \
	kernel_verbs frwr

# rdma-core ships its tests partly gzipped.
cp -r "$RDMA_CORE_TESTS" "$WORK/tests"
gunzip -f "$WORK"/tests/*.gz
# rdma_core_tests TEST...: rdma-core's own tests, each of which must run (a skip fails here:
# these are tests the device supports).
rdma_core_tests() {
	local log="$WORK/rdma-core.log"
	(cd "$WORK/tests" && PYTHONPATH="$WORK/tests" "$PY" run_tests.py --dev fer0 -v "$@") >"$log" 2>&1
	local rc=$?
	sed 's/^/# /' "$log"
	[ "$rc" -eq 0 ] && grep -qE '^OK$' "$log"
}
ktap_test_result "rdma-core pyverbs: test_pd" rdma_core_tests tests.test_pd
ktap_test_result "rdma-core pyverbs: test_cq.CQAPITest" rdma_core_tests tests.test_cq.CQAPITest
ktap_test_result "rdma-core pyverbs: test_device.DeviceTest" rdma_core_tests tests.test_device.DeviceTest
# RC, UC and UD creation, query and modify (raw packet QPs are not a RoCE feature).
ktap_test_result "rdma-core pyverbs: test_qp.QPTest (RC, UC, UD)" \
	rdma_core_tests -k _rc_ -k _uc_ -k _ud_ tests.test_qp.QPTest
# RC atomics, through both post-send APIs (XRC is not a RoCE soft-device feature here).
AT=tests.test_atomic.AtomicTest
ktap_test_result "rdma-core pyverbs: test_atomic (RC)" rdma_core_tests \
	$AT.test_atomic_cmp_and_swap $AT.test_atomic_fetch_and_add $AT.test_atomic_invalid_qp_access \
	$AT.test_atomic_invalid_mr_access $AT.test_atomic_non_aligned_addr \
	$AT.test_atomic_invalid_lkey $AT.test_atomic_invalid_rkey
ktap_test_result "rdma-core pyverbs: test_qpex atomics and atomic write (RC)" rdma_core_tests \
	tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_cmp_swp \
	tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_fetch_add \
	tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_write
# A send posted to a QP not yet in RTS fails at once (EINVAL), as on the C rxe.
ktap_test_result "rdma-core pyverbs: test_qpex post_send in a bad QP state" rdma_core_tests \
	tests.test_qpex.QpExTestCase.test_post_send_qp_state_bad_flow

# The port's performance management agent (process_mad) behind sysfs's counters, after the
# traffic above: the extended (64-bit) counters without the IETF ones (the port has no
# unicast or multicast counts), data in units of four bytes, as the port's.
pma_counters_match() {
	local d=/sys/class/infiniband/fer0/ports/1/counters xd rd xp rp ld before after
	[ -e "$d/port_xmit_data" ] && [ ! -e "$d/unicast_xmit_packets" ] || return 1
	before=$(rdma statistic show link fer0/1)
	xd=$(cat "$d/port_xmit_data") && rd=$(cat "$d/port_rcv_data") &&
		xp=$(cat "$d/port_xmit_packets") && rp=$(cat "$d/port_rcv_packets") &&
		ld=$(cat "$d/link_downed") || return 1
	after=$(rdma statistic show link fer0/1)
	[ "$before" = "$after" ] || { echo "# traffic meanwhile"; return 1; }
	echo "# port_xmit_data $xd (sent_bytes $(counter fer0 sent_bytes)), port_rcv_data $rd" \
		"(rcvd_bytes $(counter fer0 rcvd_bytes))"
	echo "# port_xmit_packets $xp (sent_pkts $(counter fer0 sent_pkts)), port_rcv_packets $rp" \
		"(rcvd_pkts $(counter fer0 rcvd_pkts)), link_downed $ld"
	[ "$xp" -gt 0 ] &&
		[ "$xd" -eq $(($(counter fer0 sent_bytes) / 4)) ] &&
		[ "$rd" -eq $(($(counter fer0 rcvd_bytes) / 4)) ] &&
		[ "$xp" -eq "$(counter fer0 sent_pkts)" ] && [ "$rp" -eq "$(counter fer0 rcvd_pkts)" ] &&
		[ "$ld" -eq "$(counter fer0 link_downed)" ]
}
ktap_test_result "PMA counters in sysfs (process_mad) match the port's" pma_counters_match

# removed_under_a_process HOW: a process holds mapped CQ/QP rings, a pinned MR and a PD while
# the device goes (HOW: "netdev" deletes the veth, "rmmod" unloads the module). The process
# must survive and exit cleanly, and the module must unload afterwards.
removed_under_a_process() {
	local out="$WORK/holder.out"
	rdma dev show fer0 >/dev/null 2>&1 || {
		modprobe rdma_rxe && ip link add fvv0 type veth peer name fvv1 && ip link set fvv0 up &&
			rdma link add fer0 type rxe netdev fvv0
	} || return 1
	coproc HOLDER { "$PY" "$DIR/ferroce_holder.py" fer0 >"$out" 2>&1; }
	local i
	for i in $(seq 100); do grep -q ready "$out" && break; sleep 0.1; done
	grep -q ready "$out" || { cat "$out"; return 1; }
	case $1 in
	netdev) ip link del fvv0 ;;
	rmmod) modprobe -r rdma_rxe ;;
	esac || return 1
	for i in $(seq 50); do rdma dev show fer0 >/dev/null 2>&1 || break; sleep 0.2; done
	echo >&"${HOLDER[1]}"
	wait "$HOLDER_PID"
	local rc=$?
	sed 's/^/# /' "$out"
	[ "$rc" -eq 0 ] && grep -q done "$out" && ! rdma dev show fer0 >/dev/null 2>&1 &&
		{ ! lsmod | grep -q '^rdma_rxe ' || modprobe -r rdma_rxe; }
}
ktap_test_result "netdev deleted under a process holding rings, MR, QP: it survives" \
	removed_under_a_process netdev
ktap_test_result "module unloaded under a process holding rings, MR, QP: it survives" \
	removed_under_a_process rmmod

ktap_finished
