#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# ferroce moving data between two namespaces over veth with unmodified rdma-core tools, at MTU
# 1500 and 9000 over IPv4, at MTU 1500 over IPv6, and between two QPs of one device (loopback),
# and with a lossy, reordering link; the counters must show the traffic. Payloads are checked
# byte for byte by ferroce_xfer (SEND, WRITE, READ on RC, UC and UD); rdma-core's own "-c"
# looks at one byte per page, so its pingpongs only prove delivery (and fail here if they print
# their mismatch message).

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"

A=ferroce_data_a
B=ferroce_data_b
trap ns_cleanup EXIT

ktap_print_header
XFER="$(cd "$(dirname "$0")" && pwd)/ferroce_xfer"
require rdma ip ss tc rping ibv_ud_pingpong ibv_rc_pingpong ibv_uc_pingpong ibv_srq_pingpong ib_write_bw ib_read_bw ib_send_bw ib_write_lat \
	ib_send_lat ib_atomic_bw ib_atomic_lat timeout tshark tcpdump "$XFER"
MTUS="1500 9000"
RC_SIZES="1 65536"
PERFTESTS="ib_send_bw ib_write_bw ib_read_bw ib_write_lat ib_send_lat"
# Per MTU: UD and RC pingpong, rping, perftest, UC, and six byte-exact transfers.
ktap_set_plan $((2 * (2 + 2 + 5 + 2 + 6) + 1 + 1 + 1 + 8 + 3 + 3 + 1 + 8 + 1))

modprobe rdma_rxe || ktap_exit_fail_msg "modprobe rdma_rxe failed"
ip netns add "$A" && ip netns add "$B" || ktap_exit_fail_msg "cannot create namespaces"
ip -n "$A" link add va type veth peer name vb netns "$B" || ktap_exit_fail_msg "cannot create veth"
ip -n "$A" addr add 10.71.0.1/24 dev va
ip -n "$B" addr add 10.71.0.2/24 dev vb
ip -n "$A" addr add fd71::1/64 dev va nodad
ip -n "$B" addr add fd71::2/64 dev vb nodad
ip -n "$A" link set va up
ip -n "$B" link set vb up
# The loopback tests' out-of-band TCP stays in A. (RoCE needs no lo: ferroce loops back itself.)
ip -n "$A" link set lo up
# add_devices: fer0 on va in A, fer1 on vb in B.
add_devices() {
	ip netns exec "$A" rdma link add fer0 type rxe netdev va &&
		ip netns exec "$B" rdma link add fer1 type rxe netdev vb
}
add_devices || ktap_exit_fail_msg "rdma link add fer0 and fer1"

# await_gids: sets GA, GB, GA6 and GB6, the devices' IPv4 and IPv6 GID indices.
await_gids() {
	for _ in $(seq 50); do
		GA=$(gid_index fer0) && GB=$(gid_index fer1) && GA6=$(gid_index fer0 fd71:) &&
			GB6=$(gid_index fer1 fd71:) && return 0
		sleep 0.1
	done
	return 1
}
await_gids
[ -n "$GA" ] && [ -n "$GB" ] || ktap_exit_fail_msg "no IPv4 GIDs"
[ -n "$GA6" ] && [ -n "$GB6" ] || ktap_exit_fail_msg "no IPv6 GIDs"

# pair TOOL ARGS...: TOOL's server in A on fer0, its client in B on fer1 (or in CLI_NS on
# CLI_DEV); both must succeed. GIDOPT is the tool's GID index option.
GIDOPT=-g
pair() {
	local tool=$1 srv cli rc=0 cns=${CLI_NS:-$B} cdev=${CLI_DEV:-fer1}
	shift
	ip netns exec "$A" timeout 120 "$tool" -d fer0 $GIDOPT "$GA" "$@" >/tmp/ferroce_data_srv.log 2>&1 &
	srv=$!
	# The client connects once: wait for the server's out-of-band TCP port.
	wait_port "$A" 18515
	ip netns exec "$cns" timeout 120 "$tool" -d "$cdev" $GIDOPT "$GB" "$@" 10.71.0.1 \
		>/tmp/ferroce_data_cli.log 2>&1
	cli=$?
	wait "$srv" || rc=$?
	# rdma-core's pingpongs print this on a mismatch, and exit 0 all the same.
	if grep -q "invalid data" /tmp/ferroce_data_srv.log /tmp/ferroce_data_cli.log; then
		grep -h "invalid data" /tmp/ferroce_data_srv.log /tmp/ferroce_data_cli.log | head -3 | sed 's/^/# /'
		return 1
	fi
	if [ "$cli" -ne 0 ] || [ "$rc" -ne 0 ]; then
		echo "# $tool $*: client $cli, server $rc"
		# Errors go to stderr, unbuffered: ahead of the buffered output they follow.
		grep -hiE "error|fail|couldn|exceed|status" /tmp/ferroce_data_srv.log \
			/tmp/ferroce_data_cli.log | head -6 | sed 's/^/# /'
		sed 's/^/# srv: /' /tmp/ferroce_data_srv.log | tail -5
		sed 's/^/# cli: /' /tmp/ferroce_data_cli.log | tail -5
		counters_shown fer0 fer1
		return 1
	fi
	# perftest's result row (size, iterations, figures), for the record.
	awk '$1 ~ /^[0-9]+$/ && NF >= 4 {print "# " FILENAME ": " $0}' /tmp/ferroce_data_cli.log | tail -1
}

# rping_pair COUNT: rping (rdma_cm over QP1, then SEND/READ/WRITE on an RC QP) for COUNT
# round trips, validating the data (-V) and showing it (-v): the client must show every one.
# RPING_ADDR is the server's address (IPv4 unless set); the client runs in CLI_NS (or B).
rping_pair() {
	local n=$1 srv cli rc=0 shown i addr=${RPING_ADDR:-10.71.0.1} cns=${CLI_NS:-$B}
	ip netns exec "$A" timeout 300 rping -s -a "$addr" -C "$n" -V >/tmp/ferroce_rping_srv.log 2>&1 &
	srv=$!
	# rdma_cm has no port to watch: retry while the server is not listening yet.
	for i in $(seq 10); do
		sleep 1
		# stderr apart: unbuffered, it could split a buffered "ping data" line.
		ip netns exec "$cns" timeout 300 rping -c -a "$addr" -C "$n" -v -V >/tmp/ferroce_rping_cli.log \
			2>/tmp/ferroce_rping_cli.err
		cli=$?
		[ "$cli" -eq 0 ] && break
		grep -qiE "rdma_connect|REJECTED|unreachable|connect error" /tmp/ferroce_rping_cli.err || break
	done
	wait "$srv" || rc=$?
	shown=$(grep -c "ping data: rdma-ping-" /tmp/ferroce_rping_cli.log)
	echo "# rping -C $n: client $cli, server $rc, $shown pings shown"
	if [ "$cli" -ne 0 ] || [ "$rc" -ne 0 ] || [ "$shown" -ne "$n" ]; then
		tail -3 /tmp/ferroce_rping_srv.log | sed 's/^/# srv: /'
		tail -3 /tmp/ferroce_rping_cli.log | sed 's/^/# cli: /'
		tail -3 /tmp/ferroce_rping_cli.err | sed 's/^/# cli stderr: /'
		return 1
	fi
}

# set_mtu MTU: both ends.
set_mtu() {
	ip -n "$A" link set va mtu "$1" && ip -n "$B" link set vb mtu "$1"
}

# ud_pingpong MTU: ibv_ud_pingpong with the largest message, and fer0 counted the packets.
ud_pingpong() {
	local size before after
	# The largest UD message is the IB MTU (the largest one under the link MTU).
	size=$([ "$1" -ge 4200 ] && echo 4096 || echo 1024)
	before=$(counter fer0 rcvd_pkts)
	pair ibv_ud_pingpong -s "$size" -n 500 -c || return 1
	after=$(counter fer0 rcvd_pkts)
	[ "$((after - before))" -ge 500 ] || { echo "# fer0 rcvd_pkts rose by $((after - before))"; return 1; }
}

# iters SIZE: enough round trips to cross many messages, few for the largest.
iters() {
	case $1 in 1048576) echo 8 ;; 65536) echo 50 ;; *) echo 200 ;; esac
}

# streams_started: the streams both devices' RC requesters started so far (tx_streams).
streams_started() {
	echo $(($(counter fer0 tx_streams) + $(counter fer1 tx_streams)))
}

# streams_for TOOL: whether perf's run of TOOL streams. Only the 64 KiB RDMA WRITEs do (see
# leaves_to_work() in rc/req.rs): SENDs, READs and short WRITEs do not.
streams_for() {
	[ "$1" = ib_write_bw ]
}

# perf TOOL: a short perftest run; latency tools with small messages; it starts streams as
# streams_for says.
perf() {
	local size=65536 s0 s1
	[[ $1 == *_lat ]] && size=64
	s0=$(streams_started)
	GIDOPT=-x pair "$1" -s "$size" -n 200 -F || return 1
	s1=$(streams_started)
	echo "# streams started: $((s1 - s0))"
	if streams_for "$1"; then
		[ "$s1" -gt "$s0" ]
	else
		[ "$s1" -eq "$s0" ]
	fi
}

# uc_writes: ib_write_bw over UC completes, and every WRITE it sent reached fer0 whole: the
# link loses nothing, so neither may the receiver. A UC QP never streams.
uc_writes() {
	local before after s0 s1
	before=$(counter fer0 rx_write_requests) s0=$(streams_started)
	GIDOPT=-x pair ib_write_bw -c UC -s 65536 -n 200 -F || return 1
	after=$(counter fer0 rx_write_requests) s1=$(streams_started)
	echo "# fer0 rx_write_requests +$((after - before)) of 200; streams started: $((s1 - s0))"
	[ "$((after - before))" -eq 200 ] && [ "$s1" -eq "$s0" ]
}

# xfer ARGS...: ferroce_xfer's server in A on fer0, its client in B on fer1 (or CLI_NS/CLI_DEV):
# messages of several sizes, every byte checked; the checking side's summary is shown.
xfer() {
	local srv cli rc=0 cns=${CLI_NS:-$B} cdev=${CLI_DEV:-fer1}
	ip netns exec "$A" timeout 300 "$XFER" -d fer0 -g "$GA" "$@" >/tmp/ferroce_xfer_srv.log 2>&1 &
	srv=$!
	ip netns exec "$cns" timeout 300 "$XFER" -d "$cdev" -g "$GB" "$@" "${XFER_ADDR:-10.71.0.1}" \
		>/tmp/ferroce_xfer_cli.log 2>&1
	cli=$?
	wait "$srv" || rc=$?
	grep -h "byte-exact" /tmp/ferroce_xfer_srv.log /tmp/ferroce_xfer_cli.log | sed 's/^/# /'
	if [ "$cli" -ne 0 ] || [ "$rc" -ne 0 ]; then
		echo "# ferroce_xfer $*: client $cli, server $rc"
		tail -4 /tmp/ferroce_xfer_srv.log | sed 's/^/# srv: /'
		tail -4 /tmp/ferroce_xfer_cli.log | sed 's/^/# cli: /'
		return 1
	fi
}

# xfer_all MTU: SEND, WRITE and READ on RC, SEND and WRITE on UC, SEND on UD, each with
# messages from 1 byte to 1 MiB (UD: up to the MTU), every byte checked.
xfer_all() {
	local m=$1 sizes=1,1000,4096,4097,65536,262144,1048577
	ktap_test_result "RC SEND, byte-exact, MTU $2" xfer -t rc -o send -m "$m" -s $sizes -n 28 -w 7
	ktap_test_result "RC WRITE, byte-exact, MTU $2" xfer -t rc -o write -m "$m" -s $sizes -n 28 -w 7
	ktap_test_result "RC READ, byte-exact, MTU $2" xfer -t rc -o read -m "$m" -s $sizes -n 28 -w 7
	ktap_test_result "UC SEND, byte-exact, MTU $2" xfer -t uc -o send -m "$m" -s 1,4097,65536 -n 30 -w 6
	ktap_test_result "UC WRITE, byte-exact, MTU $2" xfer -t uc -o write -m "$m" -s 1,4097,65536 -n 30 -w 6
	ktap_test_result "UD SEND, byte-exact, MTU $2" xfer -t ud -o send -m "$m" -s "1,700,$m" -n 60 -w 12
}

for mtu in $MTUS; do
	set_mtu "$mtu"
	ib_mtu=$([ "$mtu" -ge 4200 ] && echo 4096 || echo 1024)
	ktap_test_result "ibv_ud_pingpong at MTU $mtu (500 iterations, -c)" ud_pingpong "$mtu"
	ktap_test_result "rping -C 500 -v -V at MTU $mtu" rping_pair 500
	for size in $RC_SIZES; do
		ktap_test_result "ibv_rc_pingpong at MTU $mtu, $size bytes (-c)" \
			pair ibv_rc_pingpong -m "$ib_mtu" -s "$size" -n "$(iters "$size")" -r 16 -c
	done
	for tool in $PERFTESTS; do
		streamed="not streamed"
		streams_for "$tool" && streamed=streamed
		ktap_test_result "$tool at MTU $mtu ($streamed)" perf "$tool"
	done
	ktap_test_result "UC: ibv_uc_pingpong at MTU $mtu, 64 KiB (-c)" \
		pair ibv_uc_pingpong -m "$ib_mtu" -s 65536 -n 50 -r 16 -c
	ktap_test_result "UC: ib_write_bw -c UC at MTU $mtu, every write arrived, none streamed" uc_writes
	xfer_all "$ib_mtu" "$mtu"
done

# ip6_received: IPv6 packets A's and B's stacks have taken in.
ip6_received() {
	local ns n sum=0
	for ns in "$A" "$B"; do
		n=$(ip netns exec "$ns" awk '$1 == "Ip6InReceives" {print $2}' /proc/net/snmp6)
		sum=$((sum + n))
	done
	echo "$sum"
}

# ipv6 TOOL ARGS...: TOOL over the fd71:: GIDs, and the packets went out as IPv6.
ipv6() {
	local before after
	before=$(ip6_received)
	GA=$GA6 GB=$GB6 "$@" || return 1
	after=$(ip6_received)
	echo "# Ip6InReceives in A and B: $before -> $after"
	[ "$((after - before))" -ge 10 ]
}

set_mtu 1500
# Deep send queues: 2048 WQEs posted at once, four times what the requester starts ahead of
# the completer (rc::req::STARTED_MAX); the rest start as completions come. Every byte checked.
deep_queue() {
	xfer -t rc -o write -m 1024 -s 64,1,2000 -n 4096 -w 2048 &&
		xfer -t rc -o send -m 1024 -s 64,1 -n 4096 -w 2048 &&
		xfer -t rc -o read -m 1024 -s 64,3000 -n 2048 -w 2048 &&
		xfer -t uc -o write -m 1024 -s 64,1 -n 2048 -w 2048
}
ktap_test_result "RC WRITE, SEND, READ and UC WRITE: 2048 WQEs posted at once, byte-exact" \
	deep_queue
# rdma-core's SRQ pingpong: 16 RC QPs per side, every receive from one SRQ.
ktap_test_result "SRQ: ibv_srq_pingpong, 16 QPs on one SRQ, 4 KiB x 100 each (-c)" \
	pair ibv_srq_pingpong -m 1024 -s 4096 -n 100 -q 16 -r 64 -c

# streams: eight RC QPs stream 64 KiB WRITEs for 4 s (each QP's first WRITE starts a stream),
# which a worker sends beside the poster's CPU: each QP's packets arrive in the order sent, and
# no QP runs out of retries. Sent from two CPUs at once, a QP's packets overtook each other
# between the CPUs' receive backlogs: about one request in a hundred came out of sequence, and
# some runs ended in RETRY_EXC_ERR. One in a thousand is allowed here (a worker that moves to
# another CPU mid-stream).
streams() {
	local ooo0 ooo1 re0 re1 p0 p1 s0 s1
	ooo0=$(counter fer0 out_of_seq_request) re0=$(retransmits) p0=$(counter fer0 rcvd_pkts)
	s0=$(streams_started)
	GIDOPT=-x pair ib_write_bw -q 8 -s 65536 -D 4 -f 1 -F || return 1
	ooo1=$(counter fer0 out_of_seq_request) re1=$(retransmits) p1=$(counter fer0 rcvd_pkts)
	s1=$(streams_started)
	echo "# fer0: $((p1 - p0)) packets, $((ooo1 - ooo0)) requests out of sequence; $((re1 - re0)) resends; $((s1 - s0)) streams started"
	[ "$((p1 - p0))" -gt 1000 ] && [ "$((1000 * (ooo1 - ooo0)))" -le "$((p1 - p0))" ] &&
		[ "$((s1 - s0))" -ge 8 ] || { counters_shown fer0 fer1; return 1; }
}
ktap_test_result "8 RC QPs stream 64 KiB WRITEs for 4 s: in order, no QP fails" streams

# reload PARAMS...: rdma_rxe loaded again with PARAMS, fer0 and fer1 back on the same veth.
reload() {
	rdma link del fer0 && rdma link del fer1 && modprobe -r rdma_rxe &&
		modprobe rdma_rxe "$@" && add_devices && await_gids
}

# stream_nice WANT: a 64 KiB ib_write_bw streams, and every unbound worker seen running fer0's
# or fer1's work meanwhile (the stream's: the QPs' own work is per CPU) has nice value WANT.
stream_nice() {
	local run seen
	GIDOPT=-x pair ib_write_bw -s 65536 -D 3 -F &
	run=$!
	# Until the run ends: a worker shows "+fer0" only while it runs fer0's work.
	seen=$(while kill -0 "$run" 2>/dev/null; do
		ps -eo ni=,comm= | awk '$2 ~ /^kworker\/u[0-9]+:[0-9]+H?[+]fer[01]$/ {print $1}'
		sleep 0.1
	done | sort -u | xargs)
	wait "$run" || return 1
	echo "# nice of the workers seen sending streams: ${seen:-none seen}"
	[ "$seen" = "$1" ]
}

# stream_priority: streams run at normal priority unless stream_highpri=1 asks for high
# priority (nice -20: an unprivileged process gets that only when the administrator asks).
stream_priority() {
	local rc=0
	stream_nice 0 || rc=1
	reload stream_highpri=1 || return 1
	stream_nice -20 || rc=1
	reload || return 1
	return $rc
}
ktap_test_result "a stream's workers run at nice 0, at nice -20 with stream_highpri=1" stream_priority
ktap_test_result "IPv6: ibv_ud_pingpong (200 iterations, -c)" \
	ipv6 pair ibv_ud_pingpong -s 1024 -n 200 -c
ktap_test_result "IPv6: ibv_rc_pingpong 64 KiB x 20 (-c)" \
	ipv6 pair ibv_rc_pingpong -m 1024 -s 65536 -n 20 -r 16 -c
GIDOPT=-x ktap_test_result "IPv6: ib_write_bw 64 KiB x 100" ipv6 pair ib_write_bw -s 65536 -n 100 -F
GIDOPT=-x ktap_test_result "IPv6: ib_read_bw 64 KiB x 100" ipv6 pair ib_read_bw -s 65536 -n 100 -F
RPING_ADDR=fd71::1 ktap_test_result "IPv6: rping -C 100 -v -V (rdma_cm over IPv6)" \
	ipv6 rping_pair 100
ktap_test_result "IPv6: RC WRITE, byte-exact" \
	ipv6 xfer -t rc -o write -m 1024 -s 1,4097,65536,1048576 -n 12 -w 4
ktap_test_result "IPv6: UD SEND, byte-exact" ipv6 xfer -t ud -o send -m 1024 -s 1,1024 -n 40 -w 8

# RC atomics through perftest (compare and swap, fetch and add, and their latency).
for op in CMP_AND_SWAP FETCH_AND_ADD; do
	GIDOPT=-x ktap_test_result "ib_atomic_bw $op x 200" pair ib_atomic_bw -A "$op" -n 200 -F
done
GIDOPT=-x ktap_test_result "ib_atomic_lat x 200" pair ib_atomic_lat -n 200 -F

# loopback TOOL ARGS...: both ends on fer0, in A. Nothing crosses the wire (fer1 receives
# nothing), and fer0 received every byte it sent.
loopback() {
	local s0 r0 p0 s1 r1 p1
	s0=$(counter fer0 sent_bytes) r0=$(counter fer0 rcvd_bytes) p0=$(counter fer1 rcvd_pkts)
	CLI_NS=$A CLI_DEV=fer0 GB=$GA "$@" || return 1
	s1=$(counter fer0 sent_bytes) r1=$(counter fer0 rcvd_bytes) p1=$(counter fer1 rcvd_pkts)
	echo "# fer0 sent_bytes +$((s1 - s0)), rcvd_bytes +$((r1 - r0)); fer1 rcvd_pkts +$((p1 - p0))"
	[ "$((s1 - s0))" -gt 0 ] && [ "$((s1 - s0))" -eq "$((r1 - r0))" ] && [ "$p1" -eq "$p0" ]
}

ktap_test_result "loopback (one device): ibv_rc_pingpong 64 KiB x 20 (-c)" \
	loopback pair ibv_rc_pingpong -m 1024 -s 65536 -n 20 -r 16 -c
ktap_test_result "loopback (one device): rping -C 100 -v -V" loopback rping_pair 100
ktap_test_result "loopback (one device): RC SEND, byte-exact" \
	loopback xfer -t rc -o send -m 1024 -s 1,4097,65536 -n 30 -w 6

# The check can fail: one byte of one message spoilt at its source, and the checking side
# (exit 1, "data mismatch") must say so.
catches_corruption() {
	if xfer -t rc -o send -m 1024 -s 4096 -n 8 -w 4 --corrupt 5; then
		echo "# a corrupted message went unnoticed"
		return 1
	fi
	grep -q "data mismatch in message 5" /tmp/ferroce_xfer_srv.log
}
ktap_test_result "ferroce_xfer fails on a corrupted payload" catches_corruption

# dissected: tshark's InfiniBand dissector decodes a capture of SEND, WRITE and READ traffic (every
# packet, each RC opcode the tools use) with no malformed packet or warning.
dissected() {
	local pcap=/tmp/ferroce_data.pcap fields=/tmp/ferroce_data.fields cap bad ops want
	command -v tshark >/dev/null && command -v tcpdump >/dev/null || { echo "# no tshark/tcpdump"; return 1; }
	ip netns exec "$B" tcpdump -i vb -U -w "$pcap" udp port 4791 2>/dev/null &
	cap=$!
	sleep 1
	pair ibv_rc_pingpong -m 1024 -s 4096 -n 10 -r 16 -c &&
		GIDOPT=-x pair ib_write_bw -s 4096 -n 20 -F &&
		GIDOPT=-x pair ib_read_bw -s 4096 -n 20 -F || { kill "$cap"; return 1; }
	sleep 1
	kill "$cap"; wait "$cap" 2>/dev/null
	# One pass (tshark is slow to start under TCG): per packet its UDP port,
	# protocols, BTH opcode and expert severities. Every RoCEv2 datagram must be dissected as
	# InfiniBand with no expert item of warning severity (0x600000) or worse; a malformed
	# packet has one of error severity. tshark prints severities in decimal or in hex.
	tshark -r "$pcap" -T fields -E separator=/t -e udp.dstport -e frame.protocols \
		-e infiniband.bth.opcode -e _ws.expert.severity >"$fields" 2>/dev/null || return 1
	bad=$(awk -F'\t' 'function num(v, i, n) {
			if (tolower(v) !~ /^0x/) return v + 0
			for (i = 3; i <= length(v); i++)
				n = n * 16 + index("0123456789abcdef", tolower(substr(v, i, 1))) - 1
			return n
		}
		$1 == 4791 {bad = $2 !~ /:infiniband/
		n = split($4, s, ","); for (i = 1; i <= n; i++) if (num(s[i]) >= 6291456) bad = 1
		b += bad} END {print b + 0}' "$fields")
	ops=$(awk -F'\t' '$3 != "" {print $3}' "$fields" | sort -un | tr '\n' ' ')
	echo "# $(wc -l <"$fields") packets, opcodes: $ops; flagged: $bad"
	# SEND first/middle/last, WRITE first/middle/last, READ request/response first/middle/last, ACK.
	for want in 0 1 2 6 7 8 12 13 14 15 17; do
		[[ " $ops " == *" $want "* ]] || { echo "# opcode $want missing"; return 1; }
	done
	[ "$bad" -eq 0 ]
}

# lossy TOOL ARGS...: TOOL completes over a path losing 1% and reordering, and resends showed.
lossy() {
	local before after
	before=$(retransmits)
	pair "$@" || return 1
	after=$(retransmits)
	echo "# retransmit counters: $before -> $after"
	[ "$after" -gt "$before" ]
}

# lossy_rping COUNT: rping completes over the lossy path, and resends showed; the client's DREQ
# went through lossy_link's band that spares it.
lossy_rping() {
	local before after b0 b
	before=$(retransmits)
	b0=$(dreqs_banded "$B" vb)
	rping_pair "$1" || return 1
	after=$(retransmits)
	b=$(($(dreqs_banded "$B" vb) - b0))
	echo "# retransmit counters: $before -> $after; DREQs spared: $b"
	[ "$after" -gt "$before" ] && [ "$b" -ge 1 ]
}

set_mtu 1500
ktap_test_result "tshark decodes SEND, WRITE, READ and ACK packets as valid InfiniBand" dissected

# lossy_pingpong: the pingpong over the lossy path, its ACKs spared (see lossy_link).
lossy_pingpong() {
	local a0 b0
	a0=$(acks_banded "$A" va) b0=$(acks_banded "$B" vb)
	lossy ibv_rc_pingpong -m 1024 -s 65536 -n 50 -r 16 -c && acks_spared "$a0" "$b0" 50
}

lossy_link 1 0
ktap_test_result "1% loss + reordering: ibv_rc_pingpong 64 KiB x 50 (-c) and resends" \
	lossy_pingpong
lossy_link 1 1
ktap_test_result "1% loss + reordering: rping -C 200 -V and resends" lossy_rping 200
GIDOPT=-x ktap_test_result "1% loss + reordering: ib_write_bw 64 KiB x 200 and resends" \
	lossy ib_write_bw -s 65536 -n 200 -F
for op in send write read; do
	ktap_test_result "1% loss + reordering: RC ${op^^}, byte-exact" \
		xfer -t rc -o "$op" -m 1024 -s 1,4097,65536,262144 -n 24 -w 8
done
# UC and UD lose what the link loses; what arrives must still be exact.
ktap_test_result "1% loss + reordering: UC WRITE, what arrives is byte-exact" \
	xfer -t uc -o write -m 1024 -s 1,4097,16384 -n 60 -w 12 --allow-loss
ktap_test_result "1% loss + reordering: UD SEND, what arrives is byte-exact" \
	xfer -t ud -o send -m 1024 -s 1,1024 -n 100 -w 20 --allow-loss

ktap_finished
