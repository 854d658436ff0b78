#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# ferroce's receive path against crafted RoCEv2 packets: the UDP 4791 sockets (per namespace,
# IPv4 and IPv6, opened with the first device and closed with the last), malformed packets from
# a raw socket in a peer namespace, each dropped and counted by reason in `rdma statistic`, and
# hostile requests and rings against live RC QPs.

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"
INJECT="$(cd "$(dirname "$0")" && pwd)/roce_inject.py"

A=ferroce_rx_a
B=ferroce_rx_b
trap ns_cleanup EXIT

ktap_print_header
require rdma ip ss python3 /usr/bin/python3
ktap_set_plan 19

modprobe rdma_rxe || ktap_exit_fail_msg "modprobe rdma_rxe failed"
ip netns add "$A" && ip netns add "$B" || ktap_exit_fail_msg "cannot create namespaces"
ip -n "$A" link add va type veth peer name vb netns "$B" || ktap_exit_fail_msg "cannot create veth"
ip -n "$A" addr add 10.70.0.1/24 dev va
ip -n "$B" addr add 10.70.0.2/24 dev vb
ip -n "$A" addr add fd70::1/64 dev va nodad
ip -n "$B" addr add fd70::2/64 dev vb nodad
ip -n "$A" link set va up
ip -n "$B" link set vb up

# listening NS FAMILY: whether UDP 4791 is bound in NS (4 or 6).
listening() { ip netns exec "$1" ss -Huln -"$2" sport = :4791 | grep -q 4791; }

# fer0_counter NAME: the value `rdma statistic` shows for fer0 port 1.
fer0_counter() { counter fer0 "$1"; }

# sends CASE COUNTER [N] [ARGS...]: injecting CASE N times (from B) raises COUNTER by exactly N
# and no other drop counter.
sends() {
	local case=$1 name=$2 n=${3:-1} before after total_before total_after
	shift 3 2>/dev/null || shift $#
	before=$(fer0_counter "$name")
	total_before=$(drops)
	ip netns exec "$B" python3 "$INJECT" --src 10.70.0.2 --dst 10.70.0.1 --count "$n" "$@" "$case" \
		>/dev/null || return 1
	# Reception is asynchronous to the sender; give softirq a moment.
	for _ in $(seq 25); do
		after=$(fer0_counter "$name")
		[ "$((after - before))" -ge "$n" ] && break
		sleep 0.2
	done
	total_after=$(drops)
	echo "# $case: $name $before -> $after, all drops $total_before -> $total_after"
	[ "$((after - before))" -eq "$n" ] && [ "$((total_after - total_before))" -eq "$n" ]
}
drops() {
	rdma statistic show link fer0/1 | awk '{s = 0; for (i = 1; i < NF; i++) if ($i ~ /^rcvd_drop_/) s += $(i + 1); print s}'
}

opens_sockets_in_its_namespace() {
	! listening "$A" 4 || return 1
	ip netns exec "$A" rdma link add fer0 type rxe netdev va || return 1
	listening "$A" 4 && listening "$A" 6 || return 1
	# Only in that namespace.
	! listening "$B" 4
}
ktap_test_result "rdma link add opens UDP 4791 (IPv4 and IPv6) in the netdev's namespace" \
	opens_sockets_in_its_namespace

counters_listed() {
	local c
	for c in rcvd_pkts sent_pkts rcvd_drop_bad_icrc rcvd_drop_truncated rcvd_drop_bad_qpn; do
		[ -n "$(fer0_counter "$c")" ] || return 1
	done
	[ -r /sys/class/infiniband/fer0/ports/1/hw_counters/rcvd_drop_bad_icrc ]
}
ktap_test_result "rdma statistic and sysfs hw_counters list the port counters" counters_listed

ktap_test_result "a well-formed packet for an unknown QPN is dropped as bad_qpn" \
	sends good rcvd_drop_bad_qpn 1
ktap_test_result "a bad ICRC is dropped and counted" sends bad_icrc rcvd_drop_bad_icrc 3
truncated() {
	sends truncated rcvd_drop_truncated 2 && sends short_icrc rcvd_drop_truncated 2
}
ktap_test_result "packets shorter than BTH+ICRC are dropped as truncated" truncated
ktap_test_result "an unknown opcode is dropped and counted" \
	sends unknown_opcode rcvd_drop_unknown_opcode 2
ktap_test_result "a BTH with transport version 1 is dropped as a bad header" \
	sends bad_version rcvd_drop_bad_header 2
bad_lengths() {
	sends bad_pad rcvd_drop_bad_length 1 && sends bad_length rcvd_drop_bad_length 1
}
ktap_test_result "pad beyond the payload, or payload on a READ request, is a bad length" \
	bad_lengths
# ipv6_received [ARGS...]: a good packet and one with a bad ICRC, sent over IPv6 with ARGS,
# are told apart.
ipv6_received() {
	local qpn0 qpn1 icrc0 icrc1
	qpn0=$(fer0_counter rcvd_drop_bad_qpn) icrc0=$(fer0_counter rcvd_drop_bad_icrc)
	ip netns exec "$B" python3 "$INJECT" --src fd70::2 --dst fd70::1 "$@" good >/dev/null || return 1
	ip netns exec "$B" python3 "$INJECT" --src fd70::2 --dst fd70::1 "$@" bad_icrc >/dev/null ||
		return 1
	for _ in $(seq 25); do
		qpn1=$(fer0_counter rcvd_drop_bad_qpn) icrc1=$(fer0_counter rcvd_drop_bad_icrc)
		[ "$((qpn1 - qpn0))" -ge 1 ] && [ "$((icrc1 - icrc0))" -ge 1 ] && break
		sleep 0.2
	done
	echo "# IPv6$*: bad_qpn $qpn0 -> $qpn1 (good ICRC), bad_icrc $icrc0 -> $icrc1 (bad ICRC)"
	# The good one passed the ICRC check (and found no QP); the bad one failed it.
	[ "$((qpn1 - qpn0))" -eq 1 ] && [ "$((icrc1 - icrc0))" -eq 1 ]
}
ktap_test_result "IPv6 packets are received and their ICRC checked" ipv6_received
# A datagram spliced from a file carries the file's pages, which may change while they are read
# (SKBFL_SHARED_FRAG): ferroce copies such a packet first, then judges it like any other.
ktap_test_result "packets spliced from a file's pages are copied, then their ICRC checked" \
	ipv6_received --splice

# UD sends posted through pyverbs on fer0 leave as valid RoCEv2 packets: a raw socket in B
# checks the ICRC, headers and payload; the sender checks completions and error statuses.
UD="$(cd "$(dirname "$0")" && pwd)/ferroce_ud.py"
ud_sends_on_the_wire() {
	local out cap qpn
	out=$(mktemp)
	ip netns exec "$B" /usr/bin/python3 "$UD" capture "$out" 2 &
	cap=$!
	sleep 1
	# From the init namespace: the kernel resolves the AH (numbered AHs), so the caller's own
	# routes do not matter.
	qpn=$(/usr/bin/python3 "$UD" send fer0 10.70.0.2 | sed -n 's/^qpn //p') || { kill "$cap"; return 1; }
	[ -n "$qpn" ] || { kill "$cap"; return 1; }
	wait "$cap" || { echo "# capture saw too few packets"; return 1; }
	indented /usr/bin/python3 "$UD" check "$out" 10.70.0.1 10.70.0.2 "$qpn"
	local rc=$?
	rm -f "$out"
	[ "$rc" -eq 0 ] && [ "$(fer0_counter sent_pkts)" -ge 2 ]
}
ktap_test_result "UD sends leave as RoCEv2 packets with valid ICRC and the posted payload" \
	ud_sends_on_the_wire

# A process writes UD WQEs with address vectors of its own (ah_num 0): only the device's own
# addresses may be the source, on the wire and when the packet loops back to the device.
ktap_test_result "a UD WQE's own address vector cannot send from an address the device lacks" \
	indented /usr/bin/python3 "$UD" forged_source fer0 10.70.0.1 fd70::1 10.70.0.2 10.70.0.77 fd70::77

# The notification point for datagrams: a CE-marked one that reaches a UD QP (its Q_Key right)
# is counted and answered with a CNP to the QP in its DETH, at its source address, one per
# np_min_time_between_cnps; nothing for unmarked ones, a wrong Q_Key, or with cc_enable 0.
ktap_test_result "CE-marked datagrams to a UD QP are answered with CNPs to their sender's QP" \
	indented /usr/bin/python3 "$UD" ce_marked fer0 10.70.0.1 "$B" 10.70.0.2

# with_fer1 SCRIPT: SCRIPT's pyverbs cases on fer0, with fer1 in B as their real peer and B as
# the namespace crafted packets come from.
with_fer1() {
	local rc
	ip netns exec "$B" rdma link add fer1 type rxe netdev vb || return 1
	indented /usr/bin/python3 "$(cd "$(dirname "$0")" && pwd)/$1" fer0 10.70.0.1 "$B" \
		10.70.0.2 fer1
	rc=$?
	rdma link del fer1 || return 1
	[ "$rc" -eq 0 ]
}
# Live RC and UC QPs: crafted requests from B at a QP in RTS, WQEs scribbled into the shared
# send ring, a real peer that refuses requests, and UC peers.
ktap_test_result "live RC and UC QPs: crafted requests, scribbled rings, real peers" \
	with_fer1 ferroce_rc.py
# Shared receive queues: RC, UC and UD QPs of fer0 on one SRQ, senders on fer1, crafted packets.
ktap_test_result "shared receive queues: verbs, events, resize, RC/UC/UD traffic" \
	with_fer1 ferroce_srq.py
# RDMA FLUSH: fer0 flushes fer1's region; crafted FLUSHes from B.
ktap_test_result "RDMA FLUSH: requested, answered, duplicated, refused" \
	with_fer1 ferroce_rdma_flush.py

flood_of_everything() {
	local before after
	before=$(drops)
	ip netns exec "$B" python3 "$INJECT" --src 10.70.0.2 --dst 10.70.0.1 --count 200 all \
		>/dev/null || return 1
	sleep 1
	after=$(drops)
	echo "# drops $before -> $after"
	# 13 cases, 200 each; every one is dropped once (none reaches a QP: there are none yet).
	[ "$((after - before))" -eq 2600 ] && lsmod | grep -q '^rdma_rxe '
}
ktap_test_result "2600 mixed malformed packets: each dropped and counted once" flood_of_everything

second_device_shares_then_last_closes() {
	ip -n "$A" link add vc type veth peer name vd || return 1
	ip -n "$A" link set vc up
	ip netns exec "$A" rdma link add fer1 type rxe netdev vc || return 1
	rdma link del fer0 || return 1
	listening "$A" 4 || return 1
	rdma link del fer1 || return 1
	! listening "$A" 4 && ! listening "$A" 6
}
ktap_test_result "devices share a namespace's sockets; the last one closes them" \
	second_device_shares_then_last_closes

namespace_teardown_closes() {
	ip netns exec "$A" rdma link add fer0 type rxe netdev va || return 1
	listening "$A" 4 || return 1
	ip netns del "$A" || return 1
	local i
	for i in $(seq 50); do
		rdma dev show fer0 >/dev/null 2>&1 || break
		sleep 0.2
	done
	! rdma dev show fer0 >/dev/null 2>&1 && modprobe -r rdma_rxe
}
ktap_test_result "deleting the namespace removes the device, and the module unloads" \
	namespace_teardown_closes

ktap_finished
