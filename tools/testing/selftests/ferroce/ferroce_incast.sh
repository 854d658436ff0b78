#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Incast through a bottleneck, with DCQCN off and on, side by side. Three senders (namespaces ferroce_ic_s1..3, devices fs1..3) each WRITE the same amount into one receiver
# (ferroce_ic_r, fr) through a router (ferroce_ic_sw) whose port towards the receiver is the
# bottleneck: tbf at BOTTLENECK with a RED queue below it that marks ECN-capable packets CE and
# drops the others. A fourth sender (ferroce_ic_p, fp) probes the same queue with 8-byte RDMA
# WRITEs (ib_write_lat) meanwhile. Control traffic (ferroce_xfer's and perftest's TCP) takes
# veths of its own straight to the receiver.
#
# With congestion control on, the senders' packets leave ECT(0): RED marks them, the receiver
# answers with CNPs and each sender's DCQCN rate settles near its share; off, they leave not
# ECN-capable and RED drops them, which go-back-N resends. Reported as a table: bottleneck drops
# and marks, go-back-N rounds (sequence NAKs and ACK timeouts), aggregate goodput, Jain's
# fairness index over the senders (their bytes delivered within the first MARK seconds, a
# window all share), the probe's median and 99th percentile latency, and RED's backlog sampled
# a few times a second while every sender runs (median and 90th percentile). Required with
# DCQCN on: at least 10x fewer drops per message than off, fairness >= 0.9, a lower probe p99
# than off, a median backlog under RED's upper threshold; every byte checked by ferroce_xfer in
# both runs.
#
# TCG is slow: the bottleneck is well below what the senders can send together, so the qdisc,
# not the CPU, sets the pace; DCQCN is set for that fabric (see DCQCN below).
# INCAST_SAMPLE=1 writes the queue's backlog and fs1's counters every few tenths of a second
# to /tmp/ferroce_ic.samples (for diagnosis).

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"

SW=ferroce_ic_sw
R=ferroce_ic_r
HOSTS="ferroce_ic_s1 ferroce_ic_s2 ferroce_ic_s3 ferroce_ic_p"
XFER="$(cd "$(dirname "$0")" && pwd)/ferroce_xfer"
# In Mb/s, as tc spells it.
BOTTLENECK=${INCAST_BOTTLENECK:-10mbit}
# 64 KiB WRITEs per sender: about 15 s at a third of the bottleneck. With DCQCN off, go-back-N
# delivers about 1 Mb/s of the 10: a third as many show the same drops and queue in a third of
# the time (150 s for 96).
MESSAGES=${INCAST_MESSAGES:-96}
MESSAGES_OFF=${INCAST_MESSAGES_OFF:-$((MESSAGES / 3))}
PROBES=${INCAST_PROBES:-200}
SENDERS=3
# The senders' ACK timeout, 4.096 us << 16 = 268 ms: longer than the queue (RED's limit, 48 ms
# at 10 Mb/s) and a TCG guest's hiccups, so that it fires for a lost packet, not for one still
# queued; with 67 ms (ferroce_xfer's default) and DCQCN off, most go-back-N rounds came from
# timeouts, and a sender now and then ran out of retries in the faster make bench kernel.
ACK_TIMEOUT=16
# Seconds of the window fairness is measured over: DCQCN on, each sender takes about 26 s.
MARK=20
GO=/tmp/ferroce_ic_go
LOG=/tmp/ferroce_ic

ktap_print_header
require rdma ip tc timeout ib_write_lat awk
[ -x "$XFER" ] || missing "ferroce_xfer is not built"
ktap_set_plan 7

cleanup() {
	local ns d
	[ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2>/dev/null
	[ -n "${BACKLOG:-}" ] && touch "$LOG.stop" && wait "$BACKLOG" 2>/dev/null
	for ns in $HOSTS $R $SW; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null
	done
	for ns in $HOSTS $R $SW; do
		for _ in $(seq 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
	done
	for d in fs1 fs2 fs3 fp fr; do rdma link del "$d" 2>/dev/null; done
	for ns in $HOSTS $R $SW; do ip netns del "$ns" 2>/dev/null; done
	modprobe -r rdma_rxe 2>/dev/null
	rm -f "$GO"
}
trap cleanup EXIT

# host K, dev_of K: the namespace of sender K (4: the probe), and its device.
host() {
	local k=$1
	set -- $HOSTS
	eval echo "\${$k}"
}
dev_of() { [ "$1" = 4 ] && echo fp || echo "fs$1"; }

# static_neigh NS DEV ADDR PEER_NS PEER_DEV: NS reaches ADDR on DEV at PEER_DEV's MAC, for good.
# ARP through the bottleneck would meet RED like any packet that is not ECN-capable: an entry
# that then failed to refresh (every 15 to 45 s) stalled every flow through it for seconds, and
# each sender ran out of retries at once.
static_neigh() {
	local mac
	mac=$(ip -n "$4" -br link show dev "$5" | awk '{print $3}')
	[ -n "$mac" ] && ip -n "$1" neigh replace "$3" lladdr "$mac" dev "$2" nud permanent
}

setup() {
	local k ns
	cleanup
	modprobe rdma_rxe || ktap_exit_fail_msg "modprobe rdma_rxe"
	ip netns add "$SW" && ip netns add "$R" || ktap_exit_fail_msg "cannot create namespaces"
	ip netns exec "$SW" sysctl -qw net.ipv4.ip_forward=1
	ip -n "$R" link add dv type veth peer name ur netns "$SW" &&
		ip -n "$R" addr add 10.80.9.2/24 dev dv && ip -n "$SW" addr add 10.80.9.1/24 dev ur &&
		ip -n "$R" link set dv up && ip -n "$SW" link set ur up &&
		ip -n "$R" route add 10.80.0.0/16 via 10.80.9.1 &&
		static_neigh "$SW" ur 10.80.9.2 "$R" dv && static_neigh "$R" dv 10.80.9.1 "$SW" ur ||
		ktap_exit_fail_msg "cannot wire the receiver"
	for k in 1 2 3 4; do
		ns=$(host $k)
		ip netns add "$ns" &&
			ip -n "$ns" link add dv type veth peer name "u$k" netns "$SW" &&
			ip -n "$ns" addr add "10.80.$k.2/24" dev dv &&
			ip -n "$SW" addr add "10.80.$k.1/24" dev "u$k" &&
			ip -n "$ns" link set dv up && ip -n "$SW" link set "u$k" up &&
			ip -n "$ns" route add 10.80.0.0/16 via "10.80.$k.1" &&
			static_neigh "$SW" "u$k" "10.80.$k.2" "$ns" dv &&
			static_neigh "$ns" dv "10.80.$k.1" "$SW" "u$k" &&
			tc -n "$ns" qdisc replace dev dv root fq &&
			ip -n "$ns" link add cv type veth peer name "c$k" netns "$R" &&
			ip -n "$ns" addr add "10.81.$k.2/24" dev cv &&
			ip -n "$R" addr add "10.81.$k.1/24" dev "c$k" &&
			ip -n "$ns" link set cv up && ip -n "$R" link set "c$k" up &&
			ip netns exec "$ns" rdma link add "$(dev_of $k)" type rxe netdev dv ||
			ktap_exit_fail_msg "cannot wire sender $k"
	done
	ip netns exec "$R" rdma link add fr type rxe netdev dv || ktap_exit_fail_msg "rdma link add fr"
	# Every hop keeps a flow in order, as a NIC's receive queue does: without RPS, veth queues a
	# packet on the sending CPU's backlog, a QP whose packets leave from two CPUs is reordered,
	# and each reordering costs a go-back-N round that bursts into the queue (54-159 rounds a
	# run with DCQCN on without RPS, 20-66 with it).
	rps_all "$R" dv && rps_all "$SW" ur || ktap_exit_fail_msg "cannot set RPS"
	for k in 1 2 3 4; do
		rps_all "$(host $k)" dv && rps_all "$SW" "u$k" || ktap_exit_fail_msg "cannot set RPS"
	done
	for _ in $(seq 50); do
		GR=$(gid_index fr) && G1=$(gid_index fs1) && G2=$(gid_index fs2) &&
			G3=$(gid_index fs3) && G4=$(gid_index fp) && break
		sleep 0.1
	done
	[ -n "$G4" ] || ktap_exit_fail_msg "no IPv4 GIDs"
}

# RED's upper threshold, bytes: past it every packet is marked (the check at the end judges the
# queue against it).
RED_MAX=18000

# bottleneck: the receiver's port of the router sends at BOTTLENECK through RED, which marks
# ECN-capable packets and drops the others; made afresh, so its counters start at 0.
bottleneck() {
	tc -n "$SW" qdisc del dev ur root 2>/dev/null
	tc -n "$SW" qdisc add dev ur root handle 1: tbf rate "$BOTTLENECK" burst 3000 limit 100000 &&
		tc -n "$SW" qdisc add dev ur parent 1:1 handle 10: red limit 60000 min 6000 \
			max "$RED_MAX" avpkt 1100 burst 20 bandwidth "$BOTTLENECK" probability 0.2 ecn
}

# red_stat FIELD: RED's "dropped" or "marked" count at the bottleneck.
red_stat() {
	tc -n "$SW" -s qdisc show dev ur | awk -v f="$1" '
		/^qdisc red/ {red = 1; next} /^qdisc/ {red = 0}
		red && f == "dropped" && /dropped/ {sub(/.*dropped /, ""); sub(/,.*/, ""); print; exit}
		red && f == "marked" && /marked/ {for (i = 1; i < NF; i++) if ($i == "marked") {print $(i + 1); exit}}'
}

# resends: the senders' go-back-N rounds (sequence NAKs and ACK timeouts).
resends() {
	local d n v sum=0
	for d in fs1 fs2 fs3; do
		for n in rcvd_seq_err completer_retry_err; do
			v=$(counter "$d" "$n")
			sum=$((sum + ${v:-0}))
		done
	done
	echo "$sum"
}

# The fabric's DCQCN settings, as an operator sets them for its link speed and round trip (mlx5
# users do it in the same files): NVIDIA's defaults are for 100 Gb/s links with microsecond round
# trips; here the bottleneck is BOTTLENECK and a round trip takes a millisecond or more. The
# timers are multiplied by SCALE, and the rates are the bottleneck's: the first CNP starts a QP
# at it (not at the 100 Gb/s a soft device's line rate stands for), the ceiling is 4x it, and
# the increase steps are its 10th and 2nd. Every CNP clamps the target to the rate (as in the
# paper): with CNPs a millisecond apart, the timer that clamps it by default never runs between
# two, and the target would stay at the ceiling. What is not named keeps its default.
SCALE=${INCAST_SCALE:-400}
MBPS=${BOTTLENECK%mbit}
# rp_time_reset (300 us x SCALE) may be 131071 us at most.
[[ $MBPS =~ ^[0-9]+$ && $SCALE =~ ^[0-9]+$ ]] && [ "$MBPS" -ge 1 ] && [ "$SCALE" -ge 1 ] &&
	[ "$SCALE" -le 436 ] || ktap_exit_fail_msg "INCAST_BOTTLENECK (Nmbit) or INCAST_SCALE (1-436)"
[[ "$MESSAGES $MESSAGES_OFF" =~ ^[0-9]+\ [0-9]+$ ]] && [ "$MESSAGES" -ge 1 ] && [ "$MESSAGES_OFF" -ge 1 ] ||
	ktap_exit_fail_msg "INCAST_MESSAGES and INCAST_MESSAGES_OFF (INCAST_MESSAGES / 3) must be 1 or more"
DCQCN="rp_time_reset=$((300 * SCALE)) rp_dce_tcp_rtt=$((1 * SCALE))
	rp_rate_reduce_monitor_period=$((4 * SCALE)) np_min_time_between_cnps=$((4 * SCALE))
	rp_rate_to_set_on_first_cnp=$MBPS rp_max_rate=$((4 * MBPS)) rp_ai_rate=$(((MBPS + 9) / 10))
	rp_hai_rate=$(((MBPS + 1) / 2)) rp_clamp_tgt_rate=1"

# set_cc ON: cc_enable on every device, and the fabric's DCQCN settings.
set_cc() {
	local d
	for d in fs1 fs2 fs3 fp fr; do
		echo "$1" >"$(cc_file "$d" cc_enable)" && cc_set "$d" $DCQCN || return 1
	done
}

# probe PID...: 8-byte WRITE latency through the queue (ib_write_lat), into $LOG.lat_cli.
# perftest calibrates its clock when it starts; in a loaded TCG guest that fails now and then
# ("Correlation coefficient r^2 < 0.9": about one start in six here, twice in a row once in 20
# runs), and every figure then reads "inf": up to four tries. A try counts only if a sender
# (PID...) still loaded the queue when it ended. Fails if none counted.
probe() {
	local try
	for try in 1 2 3 4; do
		kill -0 "$@" 2>/dev/null || { echo "# probe try $try: the senders are done"; return 1; }
		rm -f "$LOG.lat_cli"
		ip netns exec "$R" timeout 600 ib_write_lat -d fr -x "$GR" -s 8 -n "$PROBES" -F \
			-p 18520 >"$LOG.lat_srv" 2>&1 &
		wait_port "$R" 18520 || return 1
		ip netns exec "$(host 4)" timeout 600 ib_write_lat -d fp -x "$G4" -s 8 -n "$PROBES" \
			-F -p 18520 10.81.4.1 >"$LOG.lat_cli" 2>&1 || return 1
		wait $! 2>/dev/null
		if ! probe_figure 8 | grep -qE '^[0-9]+(\.[0-9]+)?$'; then
			echo "# probe try $try: perftest could not calibrate its clock: $(grep -m1 r^2 "$LOG.lat_cli")"
		elif ! kill -0 "$@" 2>/dev/null; then
			echo "# probe try $try: the senders were done before the probe"
			return 1
		else
			return 0
		fi
	done
	return 1
}

# probe_figure COLUMN: a figure of the probe's result row, microseconds, as perftest printed it:
# 5 the typical (median) latency, 8 the 99th percentile.
probe_figure() {
	awk -v c="$1" '$1 == 8 && $2 ~ /^[0-9]+$/ {print $c; exit}' "$LOG.lat_cli"
}

# all_alive PID...: whether every one of them still runs (kill -0 succeeds if any does).
all_alive() {
	local p
	for p; do kill -0 "$p" 2>/dev/null || return 1; done
}

# backlog_sampler STOP: RED's backlog in bytes, a few times a second until the file STOP
# exists, a line each into $LOG.backlog. One tc takes every request from a pipe: a tc started
# for each reading took seconds under TCG while the senders ran. The pause between two is a read
# that times out on a pipe nobody writes to: a sleep process a time gave about one reading a
# second.
backlog_sampler() {
	local pause
	exec {pause}<> <(:)
	while [ ! -e "$1" ]; do
		echo "qdisc show dev ur"
		read -rt 0.2 -u "$pause"
	done | tc -s -j -n "$SW" -batch - 2>"$LOG.backlog_err" |
		awk '{i = index($0, "\"kind\":\"red\""); if (!i) next; s = substr($0, i)
			if (match(s, /"backlog":[0-9]+/)) print substr(s, RSTART + 10, RLENGTH - 10)}' \
			>"$LOG.backlog"
}

# backlog_figures: the samples' count, median and 90th percentile, in bytes.
backlog_figures() {
	sort -n "$LOG.backlog" | awk '{v[NR] = $1}
		END {n = int(NR * 0.9); if (n < NR * 0.9) n++
			if (NR) print NR, v[int((NR + 1) / 2)], v[n]; else print 0, "-", "-"}'
}

# incast ON MESSAGES: one run; fills RUN_* with its figures. Fails if a transfer fails
# (ferroce_xfer checks every byte) or the probe reports nothing.
incast() {
	local k pids=() rc=0 resends0 n=$2
	set_cc "$1" && bottleneck || return 1
	resends0=$(resends)
	rm -f "$GO" "$LOG".srv?
	for k in $(seq "$SENDERS"); do
		ip netns exec "$R" timeout 600 "$XFER" -d fr -g "$GR" -t rc -o write -s 65536 \
			-n "$n" -w 16 -p $((18600 + k)) --timeout 120 --mark "$MARK" \
			>"$LOG.srv$k" 2>&1 &
		pids+=($!)
	done
	for k in $(seq "$SENDERS"); do
		wait_port "$R" $((18600 + k)) || rc=1
	done
	if [ "$rc" -ne 0 ]; then
		echo "# a server did not listen"
		kill "${pids[@]}" 2>/dev/null
		return 1
	fi
	for k in $(seq "$SENDERS"); do
		ip netns exec "$(host $k)" timeout 600 "$XFER" -d "fs$k" -g "$(eval echo "\$G$k")" \
			-t rc -o write -s 65536 -n "$n" -w 16 -p $((18600 + k)) --timeout 120 \
			--ack-timeout "$ACK_TIMEOUT" --start-on "$GO" "10.81.$k.1" >"$LOG.cli$k" 2>&1 &
		pids+=($!)
	done
	sleep 1
	touch "$GO"
	if [ -n "${INCAST_SAMPLE:-}" ]; then
		: >"$LOG.samples"
		(for _ in $(seq 120); do
			echo "# t $(date +%s.%N | cut -c7-14) backlog $(tc -n "$SW" -s qdisc show dev ur |
				awk '/^qdisc red/ {r = 1} r && /backlog/ {print $2; exit}')" \
				"drops $(red_stat dropped) fs1 $(rdma statistic show link fs1/1 | awk '{for (i = 1; i < NF; i++)
					if ($i ~ /^(sent_pkts|rp_cnp_handled|completer_retry_err|rcvd_seq_err)$/)
					printf "%s ", $(i + 1)}')"
			sleep 0.2
		done) >>"$LOG.samples" &
		SAMPLER=$!
	fi
	# The probe and the backlog's samples start once the queue has filled; the samples stop when
	# the first sender is done.
	sleep 3
	rm -f "$LOG.stop"
	backlog_sampler "$LOG.stop" &
	BACKLOG=$!
	probe "${pids[@]:$SENDERS}" || rc=1
	while all_alive "${pids[@]:$SENDERS}"; do sleep 0.5; done
	touch "$LOG.stop"
	wait "$BACKLOG"
	BACKLOG=
	for k in "${pids[@]}"; do
		wait "$k" || rc=1
	done
	[ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2>/dev/null
	SAMPLER=
	read -r RUN_SAMPLES RUN_QMEDIAN RUN_QP90 < <(backlog_figures)
	RUN_DROPS=$(red_stat dropped) RUN_MARKED=$(red_stat marked)
	RUN_RESENDS=$(($(resends) - resends0))
	# Each sender's Mb/s within the first MARK seconds, which all share (the bytes its
	# receiver had checked by then); the goodput is every byte over the time to the last.
	RUN_RATES=$(for k in $(seq "$SENDERS"); do
		awk -v m="$MARK" '/bytes delivered within the first/ {printf "%.3f ", $2 * 8 / m / 1e6}' \
			"$LOG.srv$k"
	done)
	RUN_BYTES=$(cat "$LOG".srv? | awk '/byte-exact/ {b = $0; sub(/.*\(/, "", b)
		sub(/ bytes.*/, "", b); s += b} END {print s + 0}')
	RUN_GOODPUT=$(cat "$LOG".srv? | awk '/byte-exact/ && $NF == "s" {b = $0; sub(/.*\(/, "", b)
		sub(/ bytes.*/, "", b); s += b; if ($(NF - 1) > t) t = $(NF - 1)}
		END {if (t > 0) printf "%.3f\n", s * 8 / t / 1e6}')
	RUN_P99=$(probe_figure 8) RUN_MEDIAN=$(probe_figure 5)
	if [ "$rc" -ne 0 ] || [ "$(echo $RUN_RATES | wc -w)" -ne "$SENDERS" ] ||
		! [[ "$RUN_QMEDIAN $RUN_QP90" =~ ^[0-9]+\ [0-9]+$ ]] ||
		! [[ "$RUN_P99 $RUN_MEDIAN" =~ ^[0-9]+(\.[0-9]+)?\ [0-9]+(\.[0-9]+)?$ ]] ||
		[ -z "$RUN_GOODPUT" ] || ! [[ "$RUN_DROPS $RUN_MARKED" =~ ^[0-9]+\ [0-9]+$ ]]; then
		for f in "$LOG".srv1 "$LOG".srv2 "$LOG".srv3 "$LOG".cli1 "$LOG".cli2 "$LOG".cli3 \
			"$LOG".lat_cli "$LOG".backlog_err; do
			tail -3 "$f" | sed "s|^|# ${f##*.}: |"
		done
		echo "# backlog: $RUN_SAMPLES samples, median $RUN_QMEDIAN, p90 $RUN_QP90"
		counters_shown fs1 fs2 fs3 fp fr
		return 1
	fi
	return 0
}

# jain RATES...: Jain's fairness index, (sum x)^2 / (n sum x^2); null if nothing moved.
jain() {
	echo "$@" | awk '{s = 0; q = 0; for (i = 1; i <= NF; i++) {s += $i; q += $i * $i}
		if (q > 0) printf "%.3f\n", s * s / (NF * q); else print "null"}'
}

setup
echo "# $SENDERS senders x $MESSAGES 64 KiB RDMA WRITEs ($MESSAGES_OFF with DCQCN off) into one" \
	"receiver through $BOTTLENECK (tbf + RED ecn), a 4th probing with $PROBES 8-byte WRITEs"
echo "# DCQCN settings (us, Mb/s):" $DCQCN
# The figures of each run, by "RUN field" (RUN: off, on).
declare -A FIG
run() {
	incast "$2" "$3" || return 1
	FIG[$1 bytes]=$RUN_BYTES FIG[$1 drops]=$RUN_DROPS FIG[$1 marked]=$RUN_MARKED
	FIG[$1 resends]=$RUN_RESENDS FIG[$1 rates]=$RUN_RATES FIG[$1 p99]=$RUN_P99
	FIG[$1 median]=$RUN_MEDIAN FIG[$1 samples]=$RUN_SAMPLES FIG[$1 qmedian]=$RUN_QMEDIAN
	FIG[$1 qp90]=$RUN_QP90
	FIG[$1 goodput]=$RUN_GOODPUT FIG[$1 jain]=$(jain $RUN_RATES)
}
run off 0 "$MESSAGES_OFF" || ktap_exit_fail_msg "DCQCN off: the incast run failed"
run on 1 "$MESSAGES" || ktap_exit_fail_msg "DCQCN on: the incast run failed"

echo "# dcqcn | drops | CE marks | go-back-N | goodput Mb/s | Jain | probe median us | probe p99 us | backlog median B | backlog p90 B | per sender Mb/s in ${MARK} s"
for r in off on; do
	printf '# %-5s | %5s | %8s | %9s | %12s | %5s | %15s | %12s | %16s | %13s | %s\n' "$r" \
		"${FIG[$r drops]}" "${FIG[$r marked]}" "${FIG[$r resends]}" "${FIG[$r goodput]}" \
		"${FIG[$r jain]}" "${FIG[$r median]}" "${FIG[$r p99]}" "${FIG[$r qmedian]}" \
		"${FIG[$r qp90]}" "${FIG[$r rates]}"
done
echo "# backlog samples while every sender ran: off ${FIG[off samples]}, on ${FIG[on samples]}"
# The same, for make bench (scripts/bench-guest.sh).
for r in off on; do
	printf '# incast-json {"dcqcn":"%s","bottleneck":"%s","drops":%s,"marked":%s,"resends":%s,' \
		"$r" "$BOTTLENECK" "${FIG[$r drops]}" "${FIG[$r marked]}" "${FIG[$r resends]}"
	printf '"goodput_mbps":%s,"jain":%s,"median_us":%s,"p99_us":%s,' "${FIG[$r goodput]}" \
		"${FIG[$r jain]}" "${FIG[$r median]}" "${FIG[$r p99]}"
	printf '"backlog_median_b":%s,"backlog_p90_b":%s,"senders_mbps":"%s"}\n' \
		"${FIG[$r qmedian]}" "${FIG[$r qp90]}" "${FIG[$r rates]% }"
done

all_bytes() {
	local off=$((SENDERS * MESSAGES_OFF * 65536)) on=$((SENDERS * MESSAGES * 65536))
	echo "# bytes checked: off ${FIG[off bytes]} of $off, on ${FIG[on bytes]} of $on"
	[ "${FIG[off bytes]}" -eq "$off" ] && [ "${FIG[on bytes]}" -eq "$on" ]
}
ktap_test_result "both runs delivered every byte, checked byte for byte (ferroce_xfer)" all_bytes
ktap_test_result "DCQCN off: RED dropped packets (the bottleneck is the qdisc)" \
	test "${FIG[off drops]}" -ge 10
# Per message sent, as the runs send different amounts.
fewer_drops() {
	[ $((${FIG[on drops]} * 10 * MESSAGES_OFF)) -le $((${FIG[off drops]} * MESSAGES)) ]
}
ktap_test_result "DCQCN on: at least 10x fewer drops per message than off (${FIG[on drops]} in $MESSAGES vs ${FIG[off drops]} in $MESSAGES_OFF)" fewer_drops
handled() {
	local d
	[ "${FIG[on marked]}" -gt 0 ] || return 1
	for d in fs1 fs2 fs3; do
		[ "$(counter "$d" rp_cnp_handled)" -gt 0 ] || { echo "# $d handled no CNP"; return 1; }
	done
}
ktap_test_result "DCQCN on: RED marked packets, every sender handled CNPs" handled
fair() { [ "${FIG[on jain]}" != null ] && awk -v j="${FIG[on jain]}" 'BEGIN {exit !(j >= 0.9)}'; }
ktap_test_result "DCQCN on: Jain's fairness index over the senders in ${MARK} s >= 0.9 (${FIG[on jain]})" fair
# Off, the probe's own packets are dropped (not ECN-capable) and wait for its ACK timeout.
lower_p99() { awk -v a="${FIG[on p99]}" -v b="${FIG[off p99]}" 'BEGIN {exit !(a < b)}'; }
ktap_test_result "DCQCN on: the probe's p99 latency is lower than off (${FIG[on p99]} vs ${FIG[off p99]} us)" \
	lower_p99
# The queue DCQCN keeps: under RED's upper threshold (18000 bytes, where every packet is marked;
# senders that do not slow down keep it near RED's limit, 60000). Its transients fill it now and
# then (the drops above, the 90th percentile), so the median is judged. Read from RED itself: the
# probe's round trip also pays for the loaded TCG guest's scheduling (2.4 to 2.9 ms on a path
# without the queue, in two runs), which had taken its median over the threshold once in five
# make check runs. The sampler waits for a CPU as the probe does, so it reads the queue when one
# is free; with DCQCN's cuts turned off (rp_min_dec_fac=100) its median was 47608 bytes, and as
# set here 0 to 2164 in four runs (101-135 samples), the 90th percentile 45-53 KB.
short_queue() {
	[ "${FIG[on samples]}" -ge 20 ] || { echo "# only ${FIG[on samples]} backlog samples"; return 1; }
	[ "${FIG[on qmedian]}" -lt "$RED_MAX" ]
}
ktap_test_result "DCQCN on: RED's median backlog while every sender ran is under its upper threshold (${FIG[on qmedian]} vs $RED_MAX bytes, ${FIG[on samples]} samples)" \
	short_queue

ktap_finished
