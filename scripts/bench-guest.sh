#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs inside the guest (scripts/bench.sh boots it). Two netns joined by veth; for each MTU and
# repetition, each driver in turn (alternating order) runs perftest, then kernel TCP runs iperf3.
# Appends one JSON object per measurement to OUT.
#   usage: bench-guest.sh OUT C_RXE_KO
# Environment: BENCH_REPS (3), BENCH_SIZES (64 .. 1 MiB, powers of 4), BENCH_MTUS ("1500 9000"),
# BENCH_SECONDS (2, per bandwidth run).
set -uo pipefail
out=$1 c_rxe=$2
reps=${BENCH_REPS:-3}
sizes=${BENCH_SIZES:-"64 256 1024 4096 16384 65536 262144 1048576"}
mtus=${BENCH_MTUS:-"1500 9000"}
secs=${BENCH_SECONDS:-2}
export PATH=/usr/sbin:/sbin:$PATH
# Documentation addresses (RFC 5737), on a veth inside this guest only.
ip0=192.0.2.1 ip1=192.0.2.2

emit() { # DRIVER MTU TEST SIZE REP VALUE UNIT
	printf '{"driver":"%s","mtu":%s,"test":"%s","size":%s,"rep":%s,"value":%s,"unit":"%s"}\n' "$@" >>"$out"
}

setup_net() {
	ip netns add bn0 && ip netns add bn1
	ip link add v0 netns bn0 type veth peer name v1 netns bn1
	ip -n bn0 link set v0 mtu "$1" up && ip -n bn1 link set v1 mtu "$1" up
	ip -n bn0 link set lo up && ip -n bn1 link set lo up
	ip -n bn0 addr add $ip0/24 dev v0 && ip -n bn1 addr add $ip1/24 dev v1
}

teardown_net() {
	ip netns del bn0 2>/dev/null
	ip netns del bn1 2>/dev/null
	sleep 1
}

load_driver() { # DRIVER
	if [ "$1" = c-rxe ]; then insmod "$c_rxe"; else modprobe rdma_rxe; fi || return 1
	ip netns exec bn0 rdma link add r0 type rxe netdev v0 2>/dev/null &&
		ip netns exec bn1 rdma link add r1 type rxe netdev v1 2>/dev/null
}

unload_driver() {
	ip netns exec bn0 rdma link del r0 2>/dev/null
	ip netns exec bn1 rdma link del r1 2>/dev/null
	modprobe -r rdma_rxe 2>/dev/null || rmmod rdma_rxe 2>/dev/null
}

# gid_index NS DEV IP: the RoCE v2 GID index that carries IP.
gid_index() {
	local want f
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${3//./ })
	for f in /sys/class/infiniband/"$2"/ports/1/gids/*; do
		[ "$(ip netns exec "$1" cat "$f" 2>/dev/null)" = "$want" ] && { basename "$f"; return; }
	done
	echo 1
}

# perftest DRIVER MTU TOOL SIZE REP [extra args]: server in bn1, client in bn0.
perftest() {
	local drv=$1 mtu=$2 tool=$3 size=$4 rep=$5 port=$((18515 + RANDOM % 1000)) g0 g1 res val
	shift 5
	local mode=(-D "$secs")
	[[ $tool == *_lat ]] && mode=(-n 1000)
	g0=$(gid_index bn0 r0 $ip0) g1=$(gid_index bn1 r1 $ip1)
	ip netns exec bn1 timeout 90 "$tool" -d r1 -x "$g1" -s "$size" "${mode[@]}" -F -p "$port" "$@" \
		--report_gbits >/dev/null 2>&1 &
	local srv=$!
	sleep 1
	res=$(ip netns exec bn0 timeout 90 "$tool" -d r0 -x "$g0" -s "$size" "${mode[@]}" -F -p "$port" "$@" \
		--report_gbits $ip1 2>&1)
	# A server whose client failed would wait for it until its timeout.
	for _ in 1 2 3 4 5; do kill -0 "$srv" 2>/dev/null || break; sleep 1; done
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	# The result row starts with the message size; bandwidth tools give BW average in column 4,
	# latency tools t_typical in column 5.
	if [[ $tool == *_lat ]]; then
		val=$(echo "$res" | awk -v s="$size" '$1 == s && NF >= 5 {print $5; exit}')
		unit=us
	else
		val=$(echo "$res" | awk -v s="$size" '$1 == s && NF >= 4 {print $4; exit}')
		unit=Gb/s
	fi
	if [[ $val =~ ^[0-9.]+$ ]]; then
		emit "$drv" "$mtu" "$tool$( [ $# -gt 0 ] && echo "$*" | tr -d ' ')" "$size" "$rep" "$val" "$unit"
		echo "  $drv mtu=$mtu $tool $* size=$size rep=$rep: $val $unit"
	else
		echo "  $drv mtu=$mtu $tool size=$size rep=$rep: no result"
		echo "$res" | tail -n 3 | sed 's/^/    /'
		emit "$drv" "$mtu" "$tool$( [ $# -gt 0 ] && echo "$*" | tr -d ' ')" "$size" "$rep" null "$unit"
	fi
}

# perftest_ok DRIVER: whether a short write test between the two devices completes.
perftest_ok() {
	local g0 g1 srv ok=1
	g0=$(gid_index bn0 r0 $ip0) g1=$(gid_index bn1 r1 $ip1)
	ip netns exec bn1 timeout 30 ib_write_bw -d r1 -x "$g1" -s 4096 -n 10 -F -p 18400 >/dev/null 2>&1 &
	srv=$!
	sleep 1
	ip netns exec bn0 timeout 30 ib_write_bw -d r0 -x "$g0" -s 4096 -n 10 -F -p 18400 $ip1 >/dev/null 2>&1 || ok=0
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	[ "$ok" = 1 ] || echo "  $1: perftest probe failed"
	[ "$ok" = 1 ]
}

iperf() { # MTU STREAMS REP
	local res val
	ip netns exec bn1 timeout 60 iperf3 -s -1 >/dev/null 2>&1 &
	local srv=$!
	sleep 1
	res=$(ip netns exec bn0 timeout 60 iperf3 -c $ip1 -t 3 -P "$2" -J 2>/dev/null)
	wait "$srv" 2>/dev/null
	val=$(echo "$res" | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9)' 2>/dev/null)
	[[ $val =~ ^[0-9.]+$ ]] || val=null
	emit tcp "$1" "iperf3-P$2" 0 "$3" "$val" Gb/s
	echo "  tcp mtu=$1 iperf3 -P $2 rep=$3: $val Gb/s"
}

echo "# bench: guest kernel $(uname -r), $(nproc) CPUs, reps=$reps, ${secs}s per bandwidth run"
for mtu in $mtus; do
	teardown_net
	setup_net "$mtu" || { echo "network setup failed"; exit 1; }
	for rep in $(seq "$reps"); do
		# Alternate which driver goes first, so drift in the guest does not favour one.
		if [ $((rep % 2)) = 1 ]; then order="ferroce c-rxe"; else order="c-rxe ferroce"; fi
		for drv in $order; do
			# A driver without a data path still creates links: probe one small run first.
			if ! load_driver "$drv" || ! perftest_ok "$drv"; then
				echo "  $drv mtu=$mtu rep=$rep: not available (no rxe link or no data path)"
				emit "$drv" "$mtu" unavailable 0 "$rep" null none
				unload_driver
				continue
			fi
			for tool in ib_write_bw ib_read_bw ib_send_bw; do
				for size in $sizes; do perftest "$drv" "$mtu" "$tool" "$size" "$rep"; done
			done
			perftest "$drv" "$mtu" ib_write_bw 65536 "$rep" -q 8
			for tool in ib_write_lat ib_send_lat; do
				for size in 8 4096; do perftest "$drv" "$mtu" "$tool" "$size" "$rep"; done
			done
			unload_driver
		done
		iperf "$mtu" 1 "$rep"
		iperf "$mtu" 4 "$rep"
	done
done
teardown_net
echo "# bench: done"
