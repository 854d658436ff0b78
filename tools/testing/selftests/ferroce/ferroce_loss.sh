#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# RC over a lossy, reordering link, run after run: netem on both veth ends loses 1% and
# reorders 1% (1 ms delay), then loses 5%. Each run of ibv_rc_pingpong (64 KiB x 50), of
# ib_write_bw (64 KiB x 200) and of ferroce_xfer (RC WRITE and READ, every byte checked) must
# complete, with no retry-exceeded completion; the retransmissions each took are shown, and
# ib_write_bw's requester may send at most 4 packets in all per packet delivered.
#
# RoCE ACKs lose as much as the rest, but for ibv_rc_pingpong (see lossy_link in
# ferroce_lib.sh: it ends without a handshake); ib_write_bw and ferroce_xfer lose ACKs too.
# LOSS_RUNS (default 3) is how many runs of each, LOSSES (default "1 5") the loss rates in %;
# `make check` runs 1% once, `make soak` both rates 20 times.
# Last, a queue on the requester's side that drops: each packet it drops is counted in
# send_err, the requester waits for the queue to move, and every byte arrives; a queue that
# drops every packet fails the WQE once the retries run out.

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"

A=ferroce_loss_a
B=ferroce_loss_b
trap ns_cleanup EXIT
XFER="$(cd "$(dirname "$0")" && pwd)/ferroce_xfer"
RUNS=${LOSS_RUNS:-3}
LOSSES=${LOSSES:-1 5}

ktap_print_header
require rdma ip ss tc ibv_rc_pingpong ib_write_bw timeout "$XFER"
set -- $LOSSES
ktap_set_plan $(($# * 4 * RUNS + 2))

modprobe rdma_rxe || ktap_exit_fail_msg "modprobe rdma_rxe failed"
two_devices 10.73.0

# exceeded: the retries that ran out, on both devices.
exceeded() {
	echo $(($(counter fer0 retry_exceeded_err) + $(counter fer1 retry_exceeded_err)))
}

# run PORT SERVER_CMD... -- CLIENT_CMD...: the client starts once the server listens on TCP
# PORT; both sides complete, and nothing ran out of retries.
run() {
	local r0 e0 r1 e1 srv cli rc=0 port=$1 args i
	shift
	args=("$@")
	for i in "${!args[@]}"; do [ "${args[$i]}" = -- ] && break; done
	r0=$(retransmits) e0=$(exceeded)
	ip netns exec "$A" timeout 150 "${args[@]:0:$i}" >/tmp/ferroce_loss_srv.log 2>&1 &
	srv=$!
	if ! wait_port "$A" "$port"; then
		echo "# the server did not listen on TCP $port within 10 s"
		kill "$srv" 2>/dev/null
		wait "$srv"
		sed 's/^/# srv: /' /tmp/ferroce_loss_srv.log
		return 1
	fi
	ip netns exec "$B" timeout 150 "${args[@]:$((i + 1))}" >/tmp/ferroce_loss_cli.log 2>&1
	cli=$?
	wait "$srv" || rc=$?
	r1=$(retransmits) e1=$(exceeded)
	echo "# resends +$((r1 - r0)), retry exceeded +$((e1 - e0)); client $cli, server $rc"
	grep -h "byte-exact" /tmp/ferroce_loss_*.log | sed 's/^/# /'
	if grep -q "invalid data" /tmp/ferroce_loss_*.log; then
		echo "# pingpong reported invalid data"
		return 1
	fi
	if [ "$cli" -ne 0 ] || [ "$rc" -ne 0 ] || [ "$e1" -ne "$e0" ]; then
		tail -3 /tmp/ferroce_loss_srv.log | sed 's/^/# srv: /'
		tail -3 /tmp/ferroce_loss_cli.log | sed 's/^/# cli: /'
		return 1
	fi
}

# pingpong: ibv_rc_pingpong completes, and each side's ACKs (at least one per message) went
# through the lossless ACK band.
pingpong() {
	local a0 b0
	lossy_link "$loss" 0
	a0=$(acks_banded "$A" va) b0=$(acks_banded "$B" vb)
	run 18515 ibv_rc_pingpong -d fer0 -g "$GA" -m 1024 -s 65536 -n 50 -c -- \
		ibv_rc_pingpong -d fer1 -g "$GB" -m 1024 -s 65536 -n 50 -c 10.73.0.1 || return 1
	acks_spared "$a0" "$b0" 50
}
# write_bw: 200 WRITEs of 64 packets (MTU 1024) complete, and go-back-N sent at most 4
# packets in all per packet delivered: a window that stays large under loss resends all of
# it after each loss.
write_bw() {
	local s0 sent
	lossy_link "$loss" "$loss"
	s0=$(counter fer1 sent_pkts)
	run 18515 ib_write_bw -d fer0 -x "$GA" -m 1024 -s 65536 -n 200 -F -- \
		ib_write_bw -d fer1 -x "$GB" -m 1024 -s 65536 -n 200 -F 10.73.0.1 || return 1
	sent=$(($(counter fer1 sent_pkts) - s0))
	echo "# the requester sent $sent packets for 12800"
	[ "$sent" -le $((4 * 12800)) ]
}
xfer() {
	lossy_link "$loss" "$loss"
	run 18600 "$XFER" -d fer0 -g "$GA" "$@" -- "$XFER" -d fer1 -g "$GB" "$@" 10.73.0.1
}

for loss in $LOSSES; do
	for i in $(seq "$RUNS"); do
		ktap_test_result "$loss% loss: ibv_rc_pingpong 64 KiB x 50, run $i" pingpong
		ktap_test_result "$loss% loss: ib_write_bw 64 KiB x 200, run $i" write_bw
		ktap_test_result "$loss% loss: RC WRITE byte-exact, run $i" \
			xfer -t rc -o write -m 1024 -s 1,4097,65536,262144 -n 24 -w 8
		ktap_test_result "$loss% loss: RC READ byte-exact, run $i" \
			xfer -t rc -o read -m 1024 -s 1,4097,65536,262144 -n 24 -w 8
	done
done

# A queue on the requester's own side that drops: a tbf of 8 Mb/s with room for three packets
# takes fer1's RoCE packets (a u32 filter on UDP 4791; TCP and ARP go by). Each packet it
# drops comes back to the sender as NET_XMIT_DROP, which fer1 counts in send_err, as C rxe
# does, instead of losing it in silence. fer1 holds back the requests after it, goes back to
# it and waits for the queue to move: every byte arrives, at most 1024 packets are dropped
# for the 1024 delivered, and the transfer gets at least 3 Mb/s of the tbf's 8 (6.0 to 7.1
# measured; 4.5 with the host busy). Resending at once, go-back-N dropped 2.3 to 3.6 packets
# per one delivered, and got 1.8 to 2.2 Mb/s.
# roce_queue QDISC...: fer1's RoCE packets (a u32 filter on UDP 4791) go through QDISC, the
# rest (TCP, ARP) by.
roce_queue() {
	tc -n "$A" qdisc del dev va root 2>/dev/null
	tc -n "$B" qdisc del dev vb root 2>/dev/null
	tc -n "$B" qdisc add dev vb root handle 1: prio bands 2 \
		priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 &&
		tc -n "$B" qdisc add dev vb parent 1:1 handle 10: "$@" &&
		tc -n "$B" filter add dev vb parent 1: protocol ip prio 1 u32 \
			match ip protocol 17 0xff match ip dport 4791 0xffff flowid 1:1
}
qdisc_drops() {
	local e0 secs kbps drops errs
	roce_queue tbf rate 8mbit burst 4500 limit 4500 || return 1
	e0=$(counter fer1 send_err)
	run 18600 "$XFER" -d fer0 -g "$GA" -t rc -o write -m 1024 -s 65536 -n 16 -w 4 -- \
		"$XFER" -d fer1 -g "$GB" -t rc -o write -m 1024 -s 65536 -n 16 -w 4 10.73.0.1 ||
		return 1
	drops=$(tc -s -n "$B" qdisc show dev vb |
		awk '/^qdisc tbf 10:/ {getline; sub(/.*\(dropped /, ""); sub(/,.*/, ""); print}')
	errs=$(($(counter fer1 send_err) - e0))
	secs=$(sed -n 's/.*rc write, 16 messages: 16 byte-exact.* bad, \([0-9.]*\) s,.*/\1/p' \
		/tmp/ferroce_loss_*.log)
	kbps=$(awk -v s="$secs" 'BEGIN { if (s > 0) printf "%d", 16 * 65536 * 8 / 1000 / s }')
	echo "# the tbf dropped ${drops:-?} of fer1's packets; send_err +$errs;" \
		"1 MiB in ${secs:-?} s: ${kbps:-?} kb/s through 8000"
	# At most as many: a packet another CPU's enqueue defers is dropped with success returned.
	[ -n "$drops" ] && [ "$errs" -gt 0 ] && [ "$errs" -le "$drops" ] &&
		[ "$drops" -le 1024 ] && [ "${kbps:-0}" -ge 3000 ]
}
ktap_test_result "packets a qdisc drops on the sender are counted, and the sender waits for it" \
	qdisc_drops

# A queue that drops every RoCE packet (a pfifo with room for none). Waiting for it to move
# spends no retry, but the ACK timeout runs on: the send fails with RETRY_EXC_ERR within 5 s
# (retry_cnt 7, 67 ms timeouts: 1.1 s measured), as over a dead path, instead of waiting
# forever (as it did while the wait put off the ACK timeout).
qdisc_drops_all() {
	local e0 x0 t0 ms srv cli errs
	roce_queue pfifo limit 0 || return 1
	e0=$(counter fer1 send_err) x0=$(counter fer1 retry_exceeded_err)
	ip netns exec "$A" timeout 30 ibv_rc_pingpong -d fer0 -g "$GA" -p 18602 -s 4096 -n 1 \
		>/tmp/ferroce_loss_srv.log 2>&1 &
	srv=$!
	wait_port "$A" 18602 || { kill "$srv"; wait "$srv"; return 1; }
	t0=$(date +%s%N)
	ip netns exec "$B" timeout 20 ibv_rc_pingpong -d fer1 -g "$GB" -p 18602 -s 4096 -n 1 \
		10.73.0.1 >/tmp/ferroce_loss_cli.log 2>&1
	cli=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	kill "$srv" 2>/dev/null
	wait "$srv"
	tc -n "$B" qdisc del dev vb root
	errs=$(($(counter fer1 send_err) - e0))
	echo "# client exit $cli after $ms ms; send_err +$errs," \
		"retry_exceeded_err +$(($(counter fer1 retry_exceeded_err) - x0))"
	sed -n 's/^\(Failed status.*\)/# cli: \1/p' /tmp/ferroce_loss_cli.log
	[ "$cli" -ne 0 ] && [ "$ms" -lt 5000 ] && [ "$errs" -gt 0 ] &&
		grep -q 'Failed status transport retry counter exceeded' /tmp/ferroce_loss_cli.log &&
		[ "$(counter fer1 retry_exceeded_err)" -gt "$x0" ]
}
ktap_test_result "a qdisc that drops every packet fails the send with RETRY_EXC_ERR" \
	qdisc_drops_all

ktap_finished
