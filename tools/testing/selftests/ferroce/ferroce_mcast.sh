#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# UD multicast: QPs attached to a group receive what is sent to it, over IPv4 and IPv6, from
# another device or their own; the netdev is in the group (IGMP, MLD) while the group has
# members; rdma_cm's mckey between two namespaces; crafted multicast packets are checked once,
# then by each member.

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"
MCAST="$(cd "$(dirname "$0")" && pwd)/ferroce_mcast"
INJECT="$(cd "$(dirname "$0")" && pwd)/roce_inject.py"

A=ferroce_mcast_a
B=ferroce_mcast_b
trap ns_cleanup EXIT

ktap_print_header
require rdma ip mckey timeout stdbuf python3 "$MCAST"
ktap_set_plan 8

modprobe rdma_rxe || ktap_exit_fail_msg "modprobe rdma_rxe failed"
two_devices 10.74.0
ip -n "$A" addr add fd74::1/64 dev va nodad
ip -n "$B" addr add fd74::2/64 dev vb nodad
for _ in $(seq 50); do
	[ -n "$(gid_index fer0 fd74:)" ] && [ -n "$(gid_index fer1 fd74:)" ] && break
	sleep 0.1
done

ktap_test_result "multicast verbs: limits, errors, 56 QPs a group, 8192 groups" \
	indented ip netns exec "$A" "$MCAST" verbs fer0 10.74.0.1
ktap_test_result "IPv4 group: every attached QP receives, Q_Key checked, IGMP membership" \
	indented ip netns exec "$A" "$MCAST" fanout fer0 10.74.0.1 fer1 10.74.0.2 239.1.2.3
ktap_test_result "IPv6 group: every attached QP receives, Q_Key checked, MLD membership" \
	indented ip netns exec "$A" "$MCAST" fanout fer0 fd74::1 fer1 fd74::2 ff0e::1:2:3
ktap_test_result "IPv4 group: a sender on the same device reaches its members" \
	indented ip netns exec "$A" "$MCAST" loopback fer0 10.74.0.1 239.1.2.4
ktap_test_result "IPv6 group: a sender on the same device reaches its members" \
	indented ip netns exec "$A" "$MCAST" loopback fer0 fd74::1 ff0e::1:2:4

# mckey NUM: rdma_cm multicast (join, attach, UD sends to the group), a receiver in A and a
# sender in B, NUM messages.
mckey_pair() {
	local n=$1 rcv rc
	# Line-buffered: its progress is read while it runs.
	ip netns exec "$A" timeout 90 stdbuf -oL mckey -m 239.2.2.2 -b 10.74.0.1 -C "$n" \
		>/tmp/ferroce_mckey_rcv.log 2>&1 &
	rcv=$!
	# It says so once it joined, attached and posted its receives.
	for _ in $(seq 300); do
		grep -q "receiving data transfers" /tmp/ferroce_mckey_rcv.log && break
		sleep 0.1
	done
	ip netns exec "$B" timeout 60 mckey -m 239.2.2.2 -b 10.74.0.2 -s -C "$n" \
		>/tmp/ferroce_mckey_snd.log 2>&1 || rc=$?
	wait "$rcv" || rc=$?
	sed 's/^/# rcv: /' /tmp/ferroce_mckey_rcv.log | tail -3
	[ -z "${rc:-}" ] && grep -q "data transfers complete" /tmp/ferroce_mckey_rcv.log && return
	counters_shown fer0 fer1
	return 1
}
ktap_test_result "mckey: rdma_cm multicast between two namespaces, 50 messages" mckey_pair 50

# hold GROUP: three QPs of fer0 on GROUP, in a process (HOLD, its pid) that keeps them until
# /tmp/ferroce_mcast_done exists; fails if they are not attached within 30 s.
hold() {
	rm -f /tmp/ferroce_mcast_ready /tmp/ferroce_mcast_done
	ip netns exec "$A" "$MCAST" hold fer0 10.74.0.1 "$1" /tmp/ferroce_mcast_ready \
		/tmp/ferroce_mcast_done >/tmp/ferroce_mcast_hold.log 2>&1 &
	HOLD=$!
	for _ in $(seq 300); do [ -e /tmp/ferroce_mcast_ready ] && return; sleep 0.1; done
	return 1
}

# crafted ARGS...: with three QPs of fer0 on 239.3.3.3, roce_inject ARGS from B; prints what
# each QP received.
crafted() {
	local rc=0
	hold 239.3.3.3 || rc=1
	ip netns exec "$B" python3 "$INJECT" --src 10.74.0.2 "$@" >/dev/null || rc=1
	touch /tmp/ferroce_mcast_done
	wait "$HOLD" || rc=1
	cat /tmp/ferroce_mcast_hold.log
	return $rc
}
# A packet with a bad ICRC is dropped once, not once per member; one with a wrong Q_Key once
# per member (each checks its own); an RC request to the group, the multicast QPN to a unicast
# address and a unicast QPN to a group are for no one; a good one reaches all three, counted
# once as received.
crafted_checked_once_then_per_member() {
	local icrc qkey qpn rcvd marked cnps out g="--dst 239.3.3.3 --qpn 0xffffff"
	ip -n "$B" route add 224.0.0.0/4 dev vb 2>/dev/null
	icrc=$(counter fer0 rcvd_drop_bad_icrc) qkey=$(counter fer0 rcvd_drop_bad_qkey)
	qpn=$(counter fer0 rcvd_drop_bad_qpn)
	out=$(crafted $g --count 4 bad_icrc) || return 1
	echo "$out" | sed 's/^/# /'
	out=$(crafted $g --count 2 --qkey 0x9999 good_ud) || return 1
	echo "$out" | sed 's/^/# /'
	out=$(crafted $g good && crafted --dst 10.74.0.1 --qpn 0xffffff --qkey 0x1234567 good_ud &&
		crafted --dst 239.3.3.3 --qpn 0x11 --qkey 0x1234567 good_ud) || return 1
	echo "$out" | sed 's/^/# /'
	rcvd=$(counter fer0 rcvd_pkts) marked=$(counter fer0 np_ecn_marked_roce_packets)
	cnps=$(counter fer0 np_cnp_sent)
	# CE-marked: counted once each, and no member answers a group's sender with a CNP.
	out=$(crafted $g --count 5 --qkey 0x1234567 --tos 3 good_ud) || return 1
	echo "$out" | sed 's/^/# /'
	rcvd=$(($(counter fer0 rcvd_pkts) - rcvd))
	marked=$(($(counter fer0 np_ecn_marked_roce_packets) - marked))
	cnps=$(($(counter fer0 np_cnp_sent) - cnps))
	icrc=$(($(counter fer0 rcvd_drop_bad_icrc) - icrc))
	qkey=$(($(counter fer0 rcvd_drop_bad_qkey) - qkey))
	qpn=$(($(counter fer0 rcvd_drop_bad_qpn) - qpn))
	echo "# bad ICRC drops +$icrc (4 sent), bad Q_Key drops +$qkey (2 sent, 3 members)," \
		"bad QPN drops +$qpn (3 sent), received +$rcvd (5 sent), CE-marked +$marked, CNPs +$cnps"
	[ "$icrc" -eq 4 ] && [ "$qkey" -eq 6 ] && [ "$qpn" -eq 3 ] && [ "$rcvd" -eq 5 ] &&
		[ "$marked" -eq 5 ] && [ "$cnps" -eq 0 ] &&
		[ "$(echo "$out" | grep -c 'received 5$')" -eq 3 ]
}
ktap_test_result "crafted multicast: ICRC checked once, Q_Key by each member, CE counted once, no CNP" \
	crafted_checked_once_then_per_member

# The device goes while QPs of a process are in a group: the netdev leaves the group, the
# process survives, and a new device works.
removed_while_attached() {
	local rc left=0
	hold 239.6.6.6 && ip netns exec "$A" grep -q 060606EF /proc/net/igmp || return 1
	rdma link del fer0 || return 1
	for _ in $(seq 100); do
		ip netns exec "$A" grep -q 060606EF /proc/net/igmp || { left=1; break; }
		sleep 0.1
	done
	touch /tmp/ferroce_mcast_done
	wait "$HOLD"
	rc=$?
	echo "# the process exited with $rc (its device is gone: not by a signal)"
	[ "$left" = 1 ] && [ "$rc" -lt 128 ] &&
		ip netns exec "$A" rdma link add fer0 type rxe netdev va &&
		indented ip netns exec "$A" "$MCAST" loopback fer0 10.74.0.1 239.6.6.7
}
ktap_test_result "device removed while QPs are attached: the group is left" removed_while_attached

ktap_finished
