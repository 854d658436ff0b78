#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# ferroce torn down under traffic: `rdma link del`, removal of the netdev and module unload while
# RC traffic (ib_write_bw and rping, so rdma_cm too) runs between two namespaces. Each must finish
# promptly, take the devices away, leave no process stuck in the kernel, and leave a driver that
# moves data again. The check run reads the kernel log and kmemleak afterwards.

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"

A=ferroce_down_a
B=ferroce_down_b
trap ns_cleanup EXIT

ktap_print_header
require rdma ip ss rping ib_write_bw timeout stdbuf
ktap_set_plan 7

# setup: namespaces A and B over veth, fer0 on A's end and fer1 on B's, both with a RoCE GID;
# whatever an earlier case left of them goes first.
setup() {
	modprobe rdma_rxe || return 1
	rdma link del fer0 2>/dev/null
	rdma link del fer1 2>/dev/null
	ip -n "$A" link del va 2>/dev/null
	ip netns add "$A" 2>/dev/null
	ip netns add "$B" 2>/dev/null
	ip -n "$A" link add va type veth peer name vb netns "$B" || return 1
	ip -n "$A" addr add 10.72.0.1/24 dev va
	ip -n "$B" addr add 10.72.0.2/24 dev vb
	ip -n "$A" link set va up && ip -n "$B" link set vb up && ip -n "$A" link set lo up || return 1
	ip netns exec "$A" rdma link add fer0 type rxe netdev va || return 1
	ip netns exec "$B" rdma link add fer1 type rxe netdev vb || return 1
	for _ in $(seq 50); do
		GA=$(gid_index fer0) && GB=$(gid_index fer1) && return 0
		sleep 0.1
	done
	return 1
}

# start_traffic: ib_write_bw for a minute and an endless rping, from B to A; true once fer1 is
# seen sending and rping is seen completing round trips.
start_traffic() {
	local s0 s1 p0 p1
	ip netns exec "$A" timeout -k 5 120 ib_write_bw -d fer0 -x "$GA" -s 65536 -D 60 -F \
		>/tmp/ferroce_down_srv.log 2>&1 &
	wait_port "$A" 18515 || return 1
	ip netns exec "$B" timeout -k 5 120 ib_write_bw -d fer1 -x "$GB" -s 65536 -D 60 -F 10.72.0.1 \
		>/tmp/ferroce_down_cli.log 2>&1 &
	ip netns exec "$A" timeout -k 5 120 rping -s -a 10.72.0.1 -C 1000000 >/dev/null 2>&1 &
	sleep 2
	ip netns exec "$B" timeout -k 5 120 stdbuf -oL rping -c -a 10.72.0.1 -C 1000000 -v \
		>/tmp/ferroce_down_rping.log 2>&1 &
	# stop_traffic finds them by namespace; the shell need not report their deaths.
	disown -a
	sleep 3
	s0=$(counter fer1 sent_pkts) p0=$(grep -c "ping data" /tmp/ferroce_down_rping.log)
	sleep 1
	s1=$(counter fer1 sent_pkts) p1=$(grep -c "ping data" /tmp/ferroce_down_rping.log)
	echo "# fer1 sent_pkts $s0 -> $s1 in 1 s; rping round trips $p0 -> $p1"
	[ -n "$s0" ] && [ -n "$s1" ] && [ "$s1" -gt "$((s0 + 100))" ] && [ "$p1" -gt "$p0" ]
}

# stop_traffic: kills what still runs in either namespace; true once every process has gone
# (none is stuck in the kernel).
stop_traffic() {
	local ns left
	for ns in "$A" "$B"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
	for _ in $(seq 100); do
		left=$(for ns in "$A" "$B"; do ip netns pids "$ns" 2>/dev/null; done | wc -l)
		[ "$left" = 0 ] && break
		sleep 0.1
	done
	[ "$left" = 0 ] || echo "# $left processes did not die"
	[ "$left" = 0 ]
}

# gone DEV...: none of the devices is registered any more (within 10 s).
gone() {
	local d left
	for _ in $(seq 100); do
		left=0
		for d in "$@"; do [ -e /sys/class/infiniband/"$d" ] && left=1; done
		[ "$left" = 0 ] && return 0
		sleep 0.1
	done
	echo "# still registered: $(ls /sys/class/infiniband)"
	return 1
}

# under_traffic DEV[,DEV] CMD...: CMD while traffic runs; it must succeed within 30 s, the
# devices must be gone, and every process must die. (ktap_test_result splits its arguments.)
under_traffic() {
	local devs=$1 t0 rc=0
	shift
	start_traffic || { echo "# no traffic before $*"; stop_traffic; return 1; }
	t0=$(date +%s%N)
	timeout 30 "$@" || rc=$?
	echo "# $* under traffic: exit $rc after $((($(date +%s%N) - t0) / 1000000)) ms"
	gone ${devs//,/ } || rc=1
	stop_traffic || rc=1
	[ "$rc" -eq 0 ]
}

# moves_data: a fresh pair of devices carries a short, complete ib_write_bw.
moves_data() {
	setup || { echo "# setup failed"; return 1; }
	ip netns exec "$A" timeout 60 ib_write_bw -d fer0 -x "$GA" -s 65536 -n 100 -F >/dev/null 2>&1 &
	local srv=$! rc=0
	wait_port "$A" 18515 || return 1
	ip netns exec "$B" timeout 60 ib_write_bw -d fer1 -x "$GB" -s 65536 -n 100 -F 10.72.0.1 \
		>/tmp/ferroce_down_cli.log 2>&1 || rc=1
	wait "$srv" || rc=1
	[ "$rc" = 0 ] || tail -3 /tmp/ferroce_down_cli.log | sed 's/^/# cli: /'
	return "$rc"
}

module_gone() { ! grep -q '^rdma_rxe ' /proc/modules; }

setup || ktap_exit_fail_msg "setup failed"
ktap_test_result "rdma link del under traffic" under_traffic fer1 rdma link del fer1
ktap_test_result "data moves again after link del" moves_data
ktap_test_result "netdev removal under traffic" under_traffic fer0,fer1 ip -n "$A" link del va
ktap_test_result "data moves again after netdev removal" moves_data
ktap_test_result "module unload under traffic" under_traffic fer0,fer1 modprobe -r rdma_rxe
ktap_test_result "the module is gone" module_gone
ktap_test_result "data moves again after module unload" moves_data

ktap_finished
