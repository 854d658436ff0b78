#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# ECN congestion control (DCQCN) between two ferroce devices in two namespaces.
# With it on (the default): the requester's data packets leave ECT(0) (seen on the wire by
# tcpdump); with netem marking every ECT packet of the requester's veth CE (`loss 100% ecn`
# marks instead of dropping), the responder counts each marked packet, answers with CNPs at
# most one per np_min_time_between_cnps, the requester handles each CNP, and (loaded again
# with parameters under which each CNP halves the rate and nothing raises it) its rate falls,
# paced, to rp_min_rate, with fq under netem (departure times kept) and without (the pacer's
# horizon and timer), with no ACK timeout.
# With it off (`modprobe rdma_rxe cc=0`): nothing leaves ECN-capable, nothing is marked, no
# CNP is sent. At run time, through debugfs (ferroce/<dev>/cc_enable, cc_params/<mlx5 name>):
# every parameter with NVIDIA's default, out-of-range values refused (EINVAL) and nothing
# changed, the switch turned off and on, the parameters of the rate test, and
# parameters under which the arithmetic predicts the paced rate exactly.

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"

A=ferroce_ecn_a
B=ferroce_ecn_b
XFER="$(cd "$(dirname "$0")" && pwd)/ferroce_xfer"
trap ns_cleanup EXIT
# Microseconds between two CNPs of a QP: long enough that the bound is tight under TCG.
CNP_GAP_US=2000

ktap_print_header
require rdma ip ss tc tcpdump ib_write_bw timeout
[ -x "$XFER" ] || missing "ferroce_xfer is not built"
ktap_set_plan 13

# setup MODPROBE_ARGS...: fresh namespaces and devices, fer0 in A, fer1 in B. perftest's TCP
# exchange takes a second veth (10.75.0.x): netem on the first drops whatever is not
# ECN-capable, TCP's handshake and ARP among it (A and B know each other's address for good).
setup() {
	ns_cleanup
	modprobe rdma_rxe "$@" || ktap_exit_fail_msg "modprobe rdma_rxe $*"
	two_devices 10.74.0
	ip -n "$A" link add vc type veth peer name vd netns "$B" &&
		ip -n "$A" addr add 10.75.0.1/24 dev vc && ip -n "$B" addr add 10.75.0.2/24 dev vd &&
		ip -n "$A" link set vc up && ip -n "$B" link set vd up &&
		ip -n "$B" neigh replace 10.74.0.1 dev vb nud permanent \
			lladdr "$(ip -n "$A" -br link show va | awk '{print $3}')" &&
		ip -n "$A" neigh replace 10.74.0.2 dev va nud permanent \
			lladdr "$(ip -n "$B" -br link show vb | awk '{print $3}')" ||
		ktap_exit_fail_msg "cannot set up the side veth"
}

# delta DEV NAME BEFORE: how much NAME on DEV grew since BEFORE.
delta() {
	echo $(($(counter "$1" "$2") - $3))
}

# write_n N: N 64 KiB WRITEs from fer1 (B) to fer0 (A), at MTU 1024; all complete.
write_n() {
	ip netns exec "$A" timeout 120 ib_write_bw -d fer0 -x "$GA" -m 1024 -s 65536 -n "$1" -F \
		>/tmp/ferroce_ecn_srv.log 2>&1 &
	local srv=$! rc=0
	wait_port "$A" 18515 || { kill "$srv"; return 1; }
	ip netns exec "$B" timeout 120 ib_write_bw -d fer1 -x "$GB" -m 1024 -s 65536 -n "$1" -F \
		10.75.0.1 >/tmp/ferroce_ecn_cli.log 2>&1 || rc=$?
	wait "$srv" || rc=$?
	[ "$rc" -eq 0 ] || tail -3 /tmp/ferroce_ecn_cli.log | sed 's/^/# cli: /'
	return "$rc"
}

# rate: Gb/s of 64 KiB WRITEs from fer1 to fer0 over 3 s (duration mode, 1 s margins), from
# the iterations done in the window. Eight WRITEs outstanding (-t 8): with perftest's 128,
# 8 MiB queued at a few Mb/s, ferroce now and then completes none within the window (the same
# happens without congestion control with 128 1 MiB WRITEs; issue 14).
# The ACK timeout is 537 ms (-u 17), not perftest's default 14 (67 ms): under TCG a task
# pinned to a guest CPU now and then wakes 30-90 ms late (~100 times per paced run), and a
# message went unanswered for 80 ms, then arrived once, with no packet lost. Any ACK timeout
# still fails no_timeout; one armed in the first 4.4 s of the run fires within it.
rate() {
	local args=(-m 1024 -s 65536 -D 5 -f 1 -Q 1 -t 8 -u 17 -F)
	ip netns exec "$A" timeout 60 ib_write_bw -d fer0 -x "$GA" "${args[@]}" >/dev/null 2>&1 &
	local srv=$! out
	wait_port "$A" 18515 || { kill "$srv"; return 1; }
	out=$(ip netns exec "$B" timeout 60 ib_write_bw -d fer1 -x "$GB" "${args[@]}" 10.75.0.1 2>&1)
	wait "$srv"
	echo "$out" | awk '$1 == 65536 && $2 ~ /^[0-9]+$/ {printf "%.4f\n", $2 * 65536 * 8 / 3 / 1e9; exit}'
}

# ecn_seen WANT: the ECN field of the first 20 RoCE packets fer1 sends is WANT (0x0 or 0x2).
ecn_seen() {
	local cap=/tmp/ferroce_ecn.pcap bad
	rm -f "$cap"
	ip netns exec "$A" timeout 60 tcpdump -i va -nn -c 20 -w "$cap" \
		"udp dst port 4791 and src host 10.74.0.2" >/dev/null 2>&1 &
	local dump=$!
	sleep 1
	write_n 20 || { kill "$dump"; return 1; }
	wait "$dump"
	local n=0 other=0 tos
	for tos in $(tcpdump -r "$cap" -nn -v 2>/dev/null | sed -n 's/.*(tos \(0x[0-9a-f]*\).*/\1/p'); do
		n=$((n + 1))
		(((tos & 3) != $1)) && other=$((other + 1))
	done
	echo "# $n packets seen, $other with another ECN field"
	[ "$n" -eq 20 ] && [ "$other" -eq 0 ]
}

# mark: every ECT packet fer1 sends is marked CE on its way; fq under netem honours the
# departure times the pacer sets.
mark() {
	tc -n "$B" qdisc replace dev vb root handle 1: netem loss 100% ecn &&
		tc -n "$B" qdisc add dev vb parent 1:1 fq || ktap_exit_fail_msg "netem ecn on vb"
}

setup np_min_time_between_cnps=$CNP_GAP_US
ktap_test_result "congestion control on: data packets leave ECT(0)" ecn_seen 0x2

# mlx5's cc_params and NVIDIA's defaults; np_min_time_between_cnps as loaded.
DEFAULTS="rp_dce_tcp_g=1019 rp_dce_tcp_rtt=1 rp_initial_alpha_value=1023
	rp_rate_to_set_on_first_cnp=0 rp_min_dec_fac=50 rp_min_rate=1 rp_max_rate=0 rp_gd=11
	rp_rate_reduce_monitor_period=4 rp_time_reset=300 rp_byte_reset=32767 rp_threshold=1
	rp_ai_rate=5 rp_hai_rate=50 rp_clamp_tgt_rate=0 rp_clamp_tgt_rate_ati=1
	np_min_time_between_cnps=$CNP_GAP_US np_cnp_dscp=48"
knobs() {
	local kv n=0 got
	for kv in $DEFAULTS; do
		got=$(cat "$(cc_file fer1 "cc_params/${kv%=*}")") || return 1
		[ "$got" = "${kv#*=}" ] || { echo "# ${kv%=*}: $got, want ${kv#*=}"; return 1; }
		n=$((n + 1))
	done
	echo "# $n parameters, cc_enable $(cat "$(cc_file fer1 cc_enable)")"
	[ "$n" -eq 18 ] && [ "$(ls "$(cc_file fer1 cc_params)" | wc -l)" -eq 18 ] &&
		[ "$(cat "$(cc_file fer1 cc_enable)")" = 1 ]
}
ktap_test_result "debugfs: every DCQCN parameter under its mlx5 name, with its default" knobs

# refused FILE VALUE: writing VALUE fails (EINVAL) and leaves FILE as it was.
refused() {
	local f before err
	f=$(cc_file fer1 "$1") before=$(cat "$f")
	err=$( (echo "$2" >"$f") 2>&1) && { echo "# $1=$2 accepted"; return 1; }
	case "$err" in *"Invalid argument"*) ;; *) echo "# $1=$2: $err"; return 1 ;; esac
	[ "$(cat "$f")" = "$before" ]
}
bad_values() {
	refused cc_params/rp_min_dec_fac 0 && refused cc_params/rp_min_dec_fac 101 &&
		refused cc_params/rp_gd 16 && refused cc_params/np_cnp_dscp 64 &&
		refused cc_params/rp_ai_rate 0 && refused cc_params/rp_ai_rate abc &&
		refused cc_params/rp_time_reset 131072 && refused cc_enable 2 || return 1
	# In range: taken, and read back.
	echo 80 >"$(cc_file fer1 cc_params/rp_min_dec_fac)" &&
		[ "$(cat "$(cc_file fer1 cc_params/rp_min_dec_fac)")" = 80 ] &&
		echo 50 >"$(cc_file fer1 cc_params/rp_min_dec_fac)"
}
ktap_test_result "debugfs: out-of-range values are refused (EINVAL), nothing changes" bad_values

switched_off() {
	echo 0 >"$(cc_file fer1 cc_enable)" || return 1
	ecn_seen 0x0 || return 1
	echo 1 >"$(cc_file fer1 cc_enable)" && ecn_seen 0x2
}
ktap_test_result "debugfs: cc_enable 0 at run time, packets leave not ECN-capable; 1, ECT(0) again" \
	switched_off

mark

marked_writes() {
	local m0 c0 h0 s0 t0 t1 marked cnps handled sent us
	m0=$(counter fer0 np_ecn_marked_roce_packets) c0=$(counter fer0 np_cnp_sent)
	h0=$(counter fer1 rp_cnp_handled) s0=$(counter fer1 sent_pkts)
	t0=$(date +%s%N)
	write_n 200 || return 1
	t1=$(date +%s%N)
	marked=$(delta fer0 np_ecn_marked_roce_packets "$m0") cnps=$(delta fer0 np_cnp_sent "$c0")
	handled=$(delta fer1 rp_cnp_handled "$h0") sent=$(delta fer1 sent_pkts "$s0")
	us=$(((t1 - t0) / 1000))
	echo "# $sent packets sent, $marked marked; $cnps CNPs sent in $us us, $handled handled"
	# Each packet the requester sent arrived marked (veth loses nothing); at most one CNP per
	# QP per gap, and every CNP reached the requester. ib_write_bw runs one QP each way.
	[ "$sent" -ge 12800 ] && [ "$marked" -eq "$sent" ] &&
		[ "$cnps" -ge 1 ] && [ "$cnps" -le $((us / CNP_GAP_US + 1)) ] &&
		[ "$handled" -eq "$cnps" ]
}
ktap_test_result "CE-marked packets are counted and answered by CNPs, one per gap at most" \
	marked_writes
no_retry_ran_out() {
	test "$(($(counter fer0 retry_exceeded_err) + $(counter fer1 retry_exceeded_err)))" -eq 0
}
ktap_test_result "no retry ran out" no_retry_ran_out

# The rate CNPs cut to. A CE mark on every packet costs the guest a CNP each way, and that alone
# slowed perftest from 46 to 16 Mb/s with no cut at all (rp_min_dec_fac 100), further than
# DCQCN did with NVIDIA's defaults and an additive increase of 1 Mb/s (18-19): there alpha
# decays every microsecond, so a CNP every few hundred cuts under 1%, and the target stays at
# the line rate until a timer step (a simulation of dcqcn.rs fed a CNP per packet averaged 43.5
# Mb/s of the 45 its sender could do). So the rate is judged by where it ends, not by how far
# it fell. Here nothing raises the rate and alpha stays near 1 (alpha's decay and the timer
# step at their longest, 131 ms; the target clamped to the rate at each CNP), so each CNP
# halves the rate down to rp_min_rate, 5 Mb/s on the wire: 4794 kb/s of payload at MTU 1024,
# reached within some twenty CNPs, one per ms at most (np_min_time_between_cnps 1000).
# Measured 4.2-4.9 Mb/s by perftest's window (its 64 KiB iterations, +-9% from run to run),
# from 21-40 Mb/s unmarked. Asserted: the rate within 80-110% of the floor, and the unmarked
# rate at least twice it.
RATE_FLOOR_KBPS=4794
setup
for dev in fer0 fer1; do
	cc_set "$dev" rp_dce_tcp_rtt=131071 rp_time_reset=131071 rp_clamp_tgt_rate=1 rp_min_rate=5 \
		np_min_time_between_cnps=1000 ||
		ktap_exit_fail_msg "cannot set the rate test's parameters on $dev"
done
plain=$(rate)
echo "# unmarked: $plain Gb/s"
slowed() {
	local r
	r=$(rate)
	echo "# marked: $r Gb/s, rp_min_rate's $RATE_FLOOR_KBPS kb/s of payload expected; unmarked: $plain Gb/s"
	[ -n "$r" ] && [ -n "$plain" ] &&
		awk -v r="$r" -v p="$plain" -v f="$RATE_FLOOR_KBPS" 'BEGIN {f /= 1e6
			exit !(r >= f * 0.8 && r <= f * 1.1 && p >= 2 * f)}'
}
mark
ktap_test_result "the requester's rate falls under CNPs to rp_min_rate (fq keeps the departure times)" slowed
ktap_test_result "no ACK timeout while paced" no_timeout
# Without fq the departure times mean nothing: the horizon alone paces, and the QP's timer
# brings it back when the next packet may go.
tc -n "$B" qdisc del dev vb root && tc -n "$B" qdisc add dev vb root netem loss 100% ecn ||
	ktap_exit_fail_msg "netem ecn without fq on vb"
ktap_test_result "the requester's rate falls under CNPs to rp_min_rate (without fq)" slowed
ktap_test_result "no ACK timeout while paced without fq" no_timeout

# The rate the arithmetic predicts, exactly: the first CNP sets the rate to
# rp_rate_to_set_on_first_cnp, rp_clamp_tgt_rate keeps the target at the rate, rp_min_dec_fac
# 100 makes every cut nothing, and with the timer step at its longest (131 ms) and the byte
# step at 2 MiB, the CNP each marked packet brings restarts both counters before any step:
# the QP sends at 4 Mb/s, 3835 kb/s of payload at MTU 1024 (44 bytes of headers per packet).
# With a CNP to handle per packet, 8 Mb/s was close to what make check's machine can do: it
# fell 10 to 40% short, by turns. Measured by ferroce_xfer's receiver, bytes over the
# transfer's time (perftest's iterations in a window of its -D mode varied by 9% as well).
predicted() {
	local r srv rc=0
	cc_set fer1 rp_rate_to_set_on_first_cnp=4 rp_clamp_tgt_rate=1 rp_min_dec_fac=100 \
		rp_time_reset=131071 || return 1
	ip netns exec "$A" timeout 120 "$XFER" -d fer0 -g "$GA" -t rc -m 1024 -s 65536 -n 24 \
		-w 16 >/tmp/ferroce_ecn_srv.log 2>&1 &
	srv=$!
	ip netns exec "$B" timeout 120 "$XFER" -d fer1 -g "$GB" -t rc -m 1024 -s 65536 -n 24 \
		-w 16 10.75.0.1 >/tmp/ferroce_ecn_cli.log 2>&1 || { rc=$?; kill "$srv" 2>/dev/null; }
	wait "$srv" || rc=$?
	sed 's/^/# /' /tmp/ferroce_ecn_srv.log
	[ "$rc" -eq 0 ] || { sed 's/^/# cli: /' /tmp/ferroce_ecn_cli.log; return 1; }
	r=$(xfer_kbps /tmp/ferroce_ecn_srv.log)
	echo "# marked, predicted 4 Mb/s on the wire: $r kb/s of payload, 3835 expected"
	[ -n "$r" ] && [ "$r" -ge $((3835 * 9 / 10)) ] && [ "$r" -le $((3835 * 11 / 10)) ]
}
setup
mark
ktap_test_result "the paced rate is the one the DCQCN arithmetic predicts, within 10%" predicted

setup cc=0
ktap_test_result "congestion control off: data packets leave not ECN-capable" ecn_seen 0x0
off() {
	write_n 50 || return 1
	echo "# marked $(counter fer0 np_ecn_marked_roce_packets), CNPs $(counter fer0 np_cnp_sent)"
	[ "$(counter fer0 np_ecn_marked_roce_packets)" -eq 0 ] && [ "$(counter fer0 np_cnp_sent)" -eq 0 ] &&
		[ "$(counter fer1 rp_cnp_handled)" -eq 0 ]
}
ktap_test_result "congestion control off: nothing marked, no CNP" off

ktap_finished
