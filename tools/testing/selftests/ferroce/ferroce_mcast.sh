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
require rdma ip mckey timeout python3 "$MCAST"
ktap_set_plan 7

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
	ip netns exec "$A" timeout 60 mckey -m 239.2.2.2 -b 10.74.0.1 -C "$n" \
		>/tmp/ferroce_mckey_rcv.log 2>&1 &
	rcv=$!
	sleep 1
	ip netns exec "$B" timeout 60 mckey -m 239.2.2.2 -b 10.74.0.2 -s -C "$n" \
		>/tmp/ferroce_mckey_snd.log 2>&1 || rc=$?
	wait "$rcv" || rc=$?
	sed 's/^/# rcv: /' /tmp/ferroce_mckey_rcv.log | tail -3
	[ -z "${rc:-}" ] && grep -q "data transfers complete" /tmp/ferroce_mckey_rcv.log
}
ktap_test_result "mckey: rdma_cm multicast between two namespaces, 50 messages" mckey_pair 50

# crafted CASE ARGS...: with three QPs of fer0 on 239.3.3.3, CASE sent from B to the group
# (QPN 0xffffff); prints the drop counters' changes and what each QP received.
crafted() {
	local rc=0
	rm -f /tmp/ferroce_mcast_ready /tmp/ferroce_mcast_done
	ip netns exec "$A" "$MCAST" hold fer0 10.74.0.1 239.3.3.3 /tmp/ferroce_mcast_ready \
		/tmp/ferroce_mcast_done >/tmp/ferroce_mcast_hold.log 2>&1 &
	for _ in $(seq 100); do [ -e /tmp/ferroce_mcast_ready ] && break; sleep 0.1; done
	ip netns exec "$B" python3 "$INJECT" --src 10.74.0.2 --dst 239.3.3.3 --qpn 0xffffff \
		"$@" >/dev/null || rc=1
	sleep 1
	touch /tmp/ferroce_mcast_done
	wait $! || rc=1
	cat /tmp/ferroce_mcast_hold.log
	return $rc
}
# A packet with a bad ICRC is dropped once, not once per member; one with a wrong Q_Key once
# per member (each checks its own); a good one reaches all three.
crafted_checked_once_then_per_member() {
	local icrc qkey out
	ip -n "$B" route add 224.0.0.0/4 dev vb 2>/dev/null
	icrc=$(fer0_drops rcvd_drop_bad_icrc)
	qkey=$(fer0_drops rcvd_drop_bad_qkey)
	out=$(crafted --count 4 bad_icrc) || return 1
	echo "$out" | sed 's/^/# /'
	out=$(crafted --count 2 --qkey 0x9999 good_ud) || return 1
	echo "$out" | sed 's/^/# /'
	out=$(crafted --count 5 --qkey 0x1234567 good_ud) || return 1
	echo "$out" | sed 's/^/# /'
	icrc=$(($(fer0_drops rcvd_drop_bad_icrc) - icrc))
	qkey=$(($(fer0_drops rcvd_drop_bad_qkey) - qkey))
	echo "# bad ICRC drops +$icrc (4 sent), bad Q_Key drops +$qkey (2 sent, 3 members)"
	[ "$icrc" -eq 4 ] && [ "$qkey" -eq 6 ] && [ "$(echo "$out" | grep -c 'received 5$')" -eq 3 ]
}
fer0_drops() { counter fer0 "$1"; }
ktap_test_result "crafted multicast: ICRC checked once, Q_Key by each member" \
	crafted_checked_once_then_per_member

ktap_finished
