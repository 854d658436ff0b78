#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs inside the guest (scripts/bench.sh boots it). Two netns joined by veth; for each MTU and
# repetition, each driver in turn (alternating order) runs perftest, then kernel TCP runs iperf3.
# Appends one JSON object per measurement to OUT.
#   usage: bench-guest.sh OUT C_RXE_KO [INCAST]
# INCAST: the path of ferroce_incast.sh (selftests, built), whose table ends the run.
# Environment: BENCH_REPS (3), BENCH_SIZES (64 .. 1 MiB, powers of 4), BENCH_MTUS ("1500 9000"),
# BENCH_SECONDS (2, per bandwidth run), BENCH_QPS (QP counts of the 64 KiB write sweep,
# "1 2 4 8 16 64"), BENCH_PROFILE (1: a perf profile of each driver, see profile()),
# BENCH_HOSTS (0: no runs with each netns on a CPU of its own, see split_hosts()),
# BENCH_INCAST (0: no incast table), BENCH_NVME (0: no NVMe-oF figures), BENCH_NVME_SECONDS (10,
# per fio run), BENCH_FERROCE_PARAMS (module parameters for ferroce, e.g. stream_highpri=1).
set -uo pipefail
out=$1 c_rxe=$2 incast=${3:-}
ferroce_params=${BENCH_FERROCE_PARAMS:-}
out_dir=$(dirname "$out")
reps=${BENCH_REPS:-3}
sizes=${BENCH_SIZES:-"64 256 1024 4096 16384 65536 262144 1048576"}
mtus=${BENCH_MTUS:-"1500 9000"}
secs=${BENCH_SECONDS:-2}
qps=${BENCH_QPS:-"1 2 4 8 16 64"}
here=$(cd "$(dirname "$0")" && pwd)
export PATH=/usr/sbin:/sbin:$PATH
# Documentation addresses (RFC 5737), on a veth inside this guest only.
ip0=192.0.2.1 ip1=192.0.2.2

emit() { # DRIVER MTU TEST SIZE REP VALUE UNIT
	[ -n "${NO_EMIT:-}" ] && return
	printf '{"driver":"%s","mtu":%s,"test":"%s","size":%s,"rep":%s,"value":%s,"unit":"%s"}\n' "$@" >>"$out"
}

emit_failed() { # DRIVER MTU TEST SIZE REP UNIT WHY
	[ -n "${NO_EMIT:-}" ] && return
	printf '{"driver":"%s","mtu":%s,"test":"%s","size":%s,"rep":%s,"value":null,"unit":"%s","failed":"%s"}\n' \
		"$@" >>"$out"
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

load_module() { # DRIVER
	if [ "$1" = c-rxe ]; then insmod "$c_rxe"; else modprobe rdma_rxe $ferroce_params; fi
}

load_driver() { # DRIVER
	load_module "$1" || return 1
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
	local want i
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${3//./ })
	# One process for the whole table (1024 entries), inside NS (whose sysfs shows DEV).
	i=$(ip netns exec "$1" sh -c 'grep -slx "$0" /sys/class/infiniband/"$1"/ports/1/gids/*' \
		"$want" "$2" | sed 's|.*/||' | sort -n | head -n 1)
	echo "${i:-1}"
}

# The TSC rate the kernel calibrated once at boot, for latency in cycles (see perftest()).
tsc_mhz=$(dmesg | sed -n 's/.*tsc: Refined TSC clocksource calibration: \([0-9.]*\) MHz.*/\1/p' | tail -n 1)
[ -n "$tsc_mhz" ] || tsc_mhz=$(dmesg | sed -n 's/.*tsc: Detected \([0-9.]*\) MHz.*/\1/p' | tail -n 1)
if [ -n "$tsc_mhz" ]; then
	echo "# bench: latency from TSC cycles at the kernel's $tsc_mhz MHz"
else
	echo "# bench: no TSC rate in the kernel log; latency as perftest converts it"
fi

# cpu_ticks: "user kernel idle" clock ticks of all CPUs so far (/proc/stat; kernel = system,
# irq and softirq: both drivers, the veth and UDP stack, perftest's system calls; idle takes in
# iowait).
cpu_ticks() {
	awk '$1 == "cpu" {print $2 + $3, $4 + $7 + $8, $5 + $6; exit}' /proc/stat
}

# wire_bytes: bytes both veth ends sent so far, headers, ICRC and ACKs included (the drivers'
# own byte counters differ: the C rxe counts whole packets, ferroce payload).
wire_bytes() {
	echo $(($(ip netns exec bn0 cat /sys/class/net/v0/statistics/tx_bytes) +
		$(ip netns exec bn1 cat /sys/class/net/v1/statistics/tx_bytes)))
}

# split_hosts 1|0: with 1, each netns is a host with a CPU of its own: bn0 (the client) CPU 0,
# bn1 (the server) CPU 1. perftest's processes are pinned there and what each veth end receives
# is steered there (RPS), as a NIC's receive queue is serviced apart from the sender; without it
# veth receives on the sending CPU, inside its transmit. This confines what runs in system calls
# and softirq (all of ferroce's data path), not work queues: the C rxe does nearly all its
# processing in an unbound one, which runs on either CPU, the other host's too.
split_hosts() {
	local m0=0 m1=0 rc=0 set='for q in /sys/class/net/$1/queues/rx-*/rps_cpus; do echo $0 >"$q" || exit 1; done'
	[ "$1" = 1 ] && m0=1 m1=2
	hosts=0
	ip netns exec bn0 sh -c "$set" "$m0" v0 || rc=1
	ip netns exec bn1 sh -c "$set" "$m1" v1 || rc=1
	[ "$rc" = 0 ] && hosts=$1
	return $rc
}
hosts=0

# backlog_drops: packets the kernel dropped so far for a full receive backlog, all CPUs
# (/proc/net/softnet_stat's second column). Steered receive (split_hosts) can overflow it.
backlog_drops() {
	local n=0 d
	while read -r _ d _; do n=$((n + 16#$d)); done </proc/net/softnet_stat
	echo "$n"
}

# nap SECONDS: sleeps without starting a process (a read that times out on a pipe nobody writes
# to): with the CPUs busy, starting /bin/sleep under TCG took a large part of a second.
exec {nap_fd}<> <(:)
nap() { read -rt "$1" -u "$nap_fd" || :; }

# dev_bytes PID DEV: sets BYTES to what DEV, in PID's network namespace, received and sent so far
# (/proc/PID/net/dev), starting no process: steady() samples it while a run goes on.
dev_bytes() {
	local line name
	BYTES=
	while IFS= read -r line; do
		name=${line%%:*}
		[ "${name##* }" = "$2" ] || continue
		set -- ${line#*:}
		BYTES=$(($1 + $9))
		return 0
	done <"/proc/$1/net/dev"
	return 1
}

# steady SRV_PID CLIENT_PID: sets STEADY to the Gb/s that crossed the server's veth end (v1, both
# ways: wire bytes with headers, ACKs and any resends, not goodput) in SECONDS of the run's steady
# state, from 1 s after its traffic began (perftest's warm-up margin, -f 1), while traffic still
# flows after it. perftest's figure counts only completions it polls inside its window, and it
# polls once per round of posts over all QPs (tx_depth each): when a driver does its work inside
# the post, as ferroce does on veth, a round can outlast the window, and the count misses or
# overcounts what moved. This rate does not depend on when anyone polls.
steady() {
	local b0 b1 t0 t1 t2 i
	STEADY=
	dev_bytes "$1" v1 || return 1
	b0=$BYTES
	for ((i = 0; i < 400; i++)); do
		kill -0 "$2" 2>/dev/null || return 1
		dev_bytes "$1" v1 && ((BYTES - b0 > 262144)) && break
		nap 0.05
	done
	t0=$EPOCHREALTIME
	nap 1
	dev_bytes "$1" v1 || return 1
	b1=$BYTES t1=$EPOCHREALTIME
	# In slices: a client that ends early ends the wait.
	for ((i = 0; i < secs * 4; i++)); do
		kill -0 "$2" 2>/dev/null || return 1
		nap 0.25
	done
	dev_bytes "$1" v1 || return 1
	b0=$BYTES t2=$EPOCHREALTIME
	# perftest moves data for SECONDS + 2 s from its start: the window must end well inside
	# that, and traffic must still flow after it.
	nap 0.2
	dev_bytes "$1" v1 && ((BYTES > b0)) || return 1
	STEADY=$(awk -v b=$((b0 - b1)) -v t0="$t0" -v t1="$t1" -v t2="$t2" -v s="$secs" \
		'BEGIN {if (b > 0 && t2 > t1 && t2 - t0 <= s + 1.6) printf "%.4f", b * 8 / (t2 - t1) / 1e9}')
	[ -n "$STEADY" ]
}

# perftest DRIVER MTU TOOL SIZE REP [extra args]: server in bn1, client in bn0.
perftest() {
	local drv=$1 mtu=$2 tool=$3 size=$4 rep=$5 port=$((18515 + RANDOM % 1000)) g0 g1 res val rc
	shift 5
	# Each side on its own CPU (split_hosts); its figures are reported apart ("-hosts").
	local on0=() on1=() suffix=""
	[ "$hosts" = 1 ] && on0=(taskset -c 0) on1=(taskset -c 1) suffix=-hosts
	# Duration mode measures between margins (-f) at both ends: perftest's default margin of
	# 2 s left a 2 s run nothing to measure, which it printed as 0 Gb/s.
	local mode=(-D $((secs + 2)) -f 1)
	# perftest signals one send in 100 (-Q, CQ moderation) and counts iterations by those
	# completions, so the count moves in steps of 100 messages: with 1 MiB messages, or 64 KiB
	# on 16 QPs, more than a TCG run moves in its window (it printed 0 Gb/s although the data
	# moved). Now at most 1 MiB, over all QPs, per round of signaled sends, a step under 2% of
	# what the slowest run moves; both drivers run with the same arguments.
	local qps=1 cq_mod
	[[ " $* " =~ \ -q\ ([0-9]+) ]] && qps=${BASH_REMATCH[1]}
	cq_mod=$((1048576 / (size * qps)))
	((cq_mod > 100)) && cq_mod=100
	((cq_mod < 1)) && cq_mod=1
	mode+=(-Q "$cq_mod")
	# Latency in TSC cycles (-C), turned into microseconds here: perftest's own conversion
	# calibrates the TSC against gettimeofday per run, gives 0 MHz when the fit is poor (about one
	# run in twelve under TCG) and then prints "inf" and exits 0.
	[[ $tool == *_lat ]] && mode=(-n 1000 ${tsc_mhz:+-C})
	g0=$(gid_index bn0 r0 $ip0) g1=$(gid_index bn1 r1 $ip1)
	ip netns exec bn1 "${on1[@]}" timeout 90 "$tool" -d r1 -x "$g1" -s "$size" "${mode[@]}" -F -p "$port" "$@" \
		--report_gbits >/dev/null 2>&1 &
	local srv=$!
	# The client connects once: wait for the server's port.
	for _ in $(seq 100); do
		ip netns exec bn1 ss -Hltn sport = :"$port" | grep -q "$port" && break
		sleep 0.1
	done
	# What the CPUs did during a 64 KiB bandwidth run, and the bytes both devices sent.
	local cpu="" u0 k0 i0 u1 k1 i1 w0 w1 d0 d1
	[[ -z ${NO_EMIT:-} && $tool == *_bw && $size == 65536 ]] && cpu=1
	# The processes that read them run outside the CPU window.
	[ -n "$cpu" ] && { w0=$(wire_bytes); d0=$(backlog_drops); read -r u0 k0 i0 < <(cpu_ticks); }
	rc=0
	local cli_out cli st="" want_st=""
	cli_out=$(mktemp)
	ip netns exec bn0 "${on0[@]}" timeout 90 "$tool" -d r0 -x "$g0" -s "$size" "${mode[@]}" -F -p "$port" "$@" \
		--report_gbits $ip1 >"$cli_out" 2>&1 &
	cli=$!
	# Bandwidth runs: the steady rate on the wire as well (steady()).
	[[ -z ${NO_EMIT:-} && $tool == *_bw && $tool != ib_atomic_bw ]] && want_st=1
	[ -n "$want_st" ] && steady "$srv" "$cli" && st=$STEADY
	wait "$cli" || rc=$?
	res=$(cat "$cli_out")
	rm -f "$cli_out"
	[ -n "$cpu" ] && { read -r u1 k1 i1 < <(cpu_ticks); w1=$(wire_bytes); d1=$(backlog_drops); }
	# A server whose client failed would wait for it until its timeout.
	for _ in 1 2 3 4 5; do kill -0 "$srv" 2>/dev/null || break; sleep 1; done
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	val=$(echo "$res" | "$here/perftest-figure.sh" "$tool" "$size" "$secs" "${tsc_mhz:-}")
	unit=Gb/s
	[[ $tool == *_lat ]] && unit=us
	[[ $tool == ib_atomic_bw ]] && unit=Mop/s
	local name
	name="$tool$( [ $# -gt 0 ] && echo "$*" | tr -d ' ')$suffix"
	# The steady rate stands on its own: most useful when perftest's count failed.
	if [ -n "$st" ]; then
		emit "$drv" "$mtu" "steady-$name" "$size" "$rep" "$st" Gb/s
		echo "  $drv mtu=$mtu steady-$name size=$size rep=$rep: $st Gb/s on the wire"
	elif [ -n "$want_st" ]; then
		emit_failed "$drv" "$mtu" "steady-$name" "$size" "$rep" Gb/s \
			"no steady window inside the run (traffic stopped or started late)"
	fi
	# A failed run, or one that measured nothing, is a failure: never a zero in the medians.
	if [ "$rc" -eq 0 ] && [[ $val =~ ^[0-9.]+$ ]] && awk -v v="$val" 'BEGIN {exit !(v > 0)}'; then
		emit "$drv" "$mtu" "$name" "$size" "$rep" "$val" "$unit"
		echo "  $drv mtu=$mtu $name size=$size rep=$rep: $val $unit"
		[ -n "$cpu" ] &&
			printf '{"driver":"%s","mtu":%s,"test":"cpu-%s","size":%s,"rep":%s,"user":%s,"kernel":%s,"idle":%s,"hz":%s,"cpus":%s,"bytes":%s,"drops":%s}\n' \
				"$drv" "$mtu" "$name" "$size" "$rep" $((u1 - u0)) $((k1 - k0)) $((i1 - i0)) \
				"$(getconf CLK_TCK)" "$(nproc)" $((w1 - w0)) $((d1 - d0)) >>"$out"
	else
		local why
		why=$(echo "$res" | grep -iE "error|fail|couldn|unable|timeout|exceeded|correlation" | tail -n 1 | tr -d '"\\' | cut -c1-120)
		[ -z "$why" ] && [ "$rc" -eq 0 ] && why="no iterations completed in the ${secs} s window"
		why="exit $rc${why:+: $why}${val:+ (figure $val)}"
		echo "  $drv mtu=$mtu $name size=$size rep=$rep: FAILED ($why)"
		echo "$res" | tail -n 3 | sed 's/^/    /'
		emit_failed "$drv" "$mtu" "$name" "$size" "$rep" "$unit" "$why"
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

# memory DRIVER: kernel bytes per RC QP and per MR (scripts/bench-mem.py), once per driver.
memory() {
	local res
	res=$(ip netns exec bn0 python3 "$here/bench-mem.py" r0 "$(gid_index bn0 r0 $ip0)" 200 1000 2>&1 | tail -n 1)
	if echo "$res" | python3 -c 'import json,sys; json.loads(sys.stdin.read())' 2>/dev/null; then
		printf '{"driver":"%s","test":"memory","result":%s}\n' "$1" "$res" >>"$out"
		echo "  $1 memory: $res"
	else
		echo "  $1 memory: FAILED ($res)"
		printf '{"driver":"%s","test":"memory","result":null,"failed":"%s"}\n' "$1" \
			"$(echo "$res" | tr -d '"\\' | cut -c1-120)" >>"$out"
	fi
}

# sent_pkts: packets both devices sent so far (both drivers count them).
sent_pkts() {
	{ rdma statistic show link r0/1; rdma statistic show link r1/1; } |
		awk '{for (i = 1; i < NF; i++) if ($i == "sent_pkts") s += $(i + 1)} END {print s + 0}'
}

# profile DRIVER MTU TOOL SIZE: one run of TOOL under `perf record` (software clock, all CPUs);
# its samples per packet both devices sent and per byte both veth ends sent, and the top symbols,
# go to the report.
profile() {
	# perf's data in the guest's own /tmp: written to the 9p share, it held no samples.
	local drv=$1 mtu=$2 tool=$3 size=$4 pdata="/tmp/perf-$1-$3-$4.data"
	command -v perf >/dev/null || { echo "  profile: no perf"; return; }
	local p0 p1 w0 w1
	p0=$(sent_pkts)
	w0=$(wire_bytes)
	perf record -a -e cpu-clock -F 999 -o "$pdata" -- sleep $((secs + 6)) >/dev/null 2>&1 &
	local perfpid=$!
	sleep 1
	NO_EMIT=1 perftest "$drv" "$mtu" "$tool" "$size" 0 >/dev/null
	wait "$perfpid" 2>/dev/null
	p1=$(sent_pkts)
	w1=$(wire_bytes)
	local pkts=$((p1 - p0)) bytes=$((w1 - w0)) samples top syms layered
	# Samples per symbol, busiest first, idle left out (scripts/perf-symbols.sh); shares are
	# of the rest (the header's count, "10K", was also rounded). Every symbol goes to the
	# report's layers; the top ones name themselves.
	syms=$(perf report -i "$pdata" --stdio --no-children --no-demangle -n --sort dso,sym -q 2>/dev/null |
		"$here/perf-symbols.sh")
	samples=$(echo "$syms" | awk -F'|' '{s += $1} END {print s + 0}')
	top=$(echo "$syms" | awk -F'|' -v all="$samples" 'all > 0 && $1 * 50 >= all {
		printf "%s%s=%.1f%%", sep, $4, 100 * $1 / all; sep = ";"; if (++n == 15) exit}')
	layered=$(echo "$syms" | paste -sd ';')
	printf '{"driver":"%s","mtu":%s,"test":"profile-%s","size":%s,"samples":%s,"hz":999,"pkts":%s,"bytes":%s,"top":"%s","syms":"%s"}\n' \
		"$drv" "$mtu" "$tool" "$size" "${samples:-0}" "$pkts" "$bytes" "$top" "$layered" >>"$out"
	echo "  $drv profile $tool $size: ${samples:-0} samples, $pkts packets, $bytes bytes"
	rm -f "$pdata"
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
# The kernel's log as it is written, line by line: a guest that dies mid-run leaves its reason.
stdbuf -oL dmesg -w >"$out_dir/guest-dmesg.log" 2>&1 &
dmesg_pid=$!
trap 'kill $dmesg_pid 2>/dev/null' EXIT
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
			# Atomic rate: FETCH_ADD and CMP_SWAP, one QP, 8 bytes (Mop/s).
			perftest "$drv" "$mtu" ib_atomic_bw 8 "$rep"
			perftest "$drv" "$mtu" ib_atomic_bw 8 "$rep" -A CMP_AND_SWAP
			# Bandwidth against QP count, 64 KiB writes.
			for q in $qps; do perftest "$drv" "$mtu" ib_write_bw 65536 "$rep" -q "$q"; done
			for tool in ib_write_lat ib_send_lat; do
				for size in 8 4096; do perftest "$drv" "$mtu" "$tool" "$size" "$rep"; done
			done
			# 64 KiB bandwidth again with each netns a host of one CPU (BENCH_HOSTS=0: not).
			# Not SEND: its server polls its CQ, and pinned to its host's only CPU it would
			# starve a driver that works in a kworker there.
			if [ "${BENCH_HOSTS:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
				if split_hosts 1; then
					for tool in ib_write_bw ib_read_bw; do
						perftest "$drv" "$mtu" "$tool" 65536 "$rep"
					done
				else
					echo "  $drv mtu=$mtu rep=$rep: could not give each netns a CPU (RPS)"
				fi
				# Steering left on would taint every later run.
				split_hosts 0 || { echo "could not undo RPS: stopping"; exit 1; }
			fi
			if [ "$rep" = 1 ] && [ "$mtu" = "${mtus%% *}" ]; then
				memory "$drv"
				if [ "${BENCH_PROFILE:-0}" = 1 ]; then
					profile "$drv" "$mtu" ib_write_bw 65536
					profile "$drv" "$mtu" ib_read_bw 65536
					profile "$drv" "$mtu" ib_send_bw 65536
					profile "$drv" "$mtu" ib_write_lat 8
					profile "$drv" "$mtu" ib_atomic_bw 8
				fi
			fi
			unload_driver
		done
		iperf "$mtu" 1 "$rep"
		iperf "$mtu" 4 "$rep"
	done
done
teardown_net

# nvmeof DRIVER REP: NVMe over Fabrics on one device of DRIVER, target and host in this guest
# (as blktests runs it): nvmet exports a null_blk (no memory behind it: the transport is what is
# measured) over rdma, nvme-rdma connects, fio reads 4 KiB at random (IOPS, 16 deep) and 1 MiB
# in sequence (MB/s, 4 deep) for BENCH_NVME_SECONDS each.
nvmeof() {
	local drv=$1 rep=$2 nqn=nqn.2026-11.org.ferroce:bench cfg=/sys/kernel/config dev="" d job
	local rw bs depth test size unit val sub
	sub=$cfg/nvmet/subsystems/$nqn
	load_module "$drv" || return 1
	ip link add nvb0 type veth peer name nvb1 && ip addr add 192.0.2.101/24 dev nvb0 &&
		ip link set nvb0 up && ip link set nvb1 up && rdma link add rn0 type rxe netdev nvb0 &&
		modprobe null_blk nr_devices=0 && modprobe nvmet_rdma && modprobe nvme_rdma &&
		mkdir -p "$cfg/nullb/bench" && echo 1024 >"$cfg/nullb/bench/size" &&
		echo 1 >"$cfg/nullb/bench/power" && mkdir -p "$sub/namespaces/1" &&
		echo 1 >"$sub/attr_allow_any_host" && echo /dev/bench >"$sub/namespaces/1/device_path" &&
		echo 1 >"$sub/namespaces/1/enable" && mkdir -p "$cfg/nvmet/ports/1" &&
		echo rdma >"$cfg/nvmet/ports/1/addr_trtype" && echo ipv4 >"$cfg/nvmet/ports/1/addr_adrfam" &&
		echo 192.0.2.101 >"$cfg/nvmet/ports/1/addr_traddr" &&
		echo 4420 >"$cfg/nvmet/ports/1/addr_trsvcid" &&
		ln -s "$sub" "$cfg/nvmet/ports/1/subsystems/$nqn" &&
		nvme connect -t rdma -a 192.0.2.101 -s 4420 -n "$nqn" \
			-q nqn.2014-08.org.nvmexpress:uuid:6f6a6c3e-6d1c-4d0a-9f4f-feffe0ce0003 \
			-I 6f6a6c3e-6d1c-4d0a-9f4f-feffe0ce0003 >/dev/null
	for _ in $(seq 100); do
		for d in /sys/block/nvme*; do
			[ "$(cat "$d/device/subsysnqn" 2>/dev/null)" = "$nqn" ] && dev=/dev/${d##*/}
		done
		[ -b "$dev" ] && break
		sleep 0.1
	done
	for job in "randread 4k 16 nvmeof-randread 4096 kIOPS" "read 1M 4 nvmeof-read 1048576 MB/s"; do
		read -r rw bs depth test size unit <<<"$job"
		val=null
		[ -b "$dev" ] && val=$(timeout 120 fio --name=bench --filename="$dev" --ioengine=libaio \
			--direct=1 --rw="$rw" --bs="$bs" --iodepth="$depth" --time_based \
			--runtime="${BENCH_NVME_SECONDS:-10}" --output-format=json 2>/dev/null |
			python3 -c 'import json, sys
r = json.load(sys.stdin)["jobs"][0]["read"]
print(r["iops"] / 1000 if sys.argv[1] == "kIOPS" else r["bw_bytes"] / 1e6)' "$unit" 2>/dev/null)
		if [[ $val =~ ^[0-9.]+$ ]] && awk -v v="$val" 'BEGIN {exit !(v > 0)}'; then
			emit "$drv" 1500 "$test" "$size" "$rep" "$val" "$unit"
			echo "  $drv $test rep=$rep: $val $unit"
		else
			emit_failed "$drv" 1500 "$test" "$size" "$rep" "$unit" \
				"$([ -b "$dev" ] && echo "fio measured nothing" || echo "no NVMe-oF device")"
			echo "  $drv $test rep=$rep: FAILED"
		fi
	done
	nvme disconnect -n "$nqn" >/dev/null 2>&1
	rm -f "$cfg/nvmet/ports/1/subsystems/$nqn"
	rmdir "$cfg/nvmet/ports/1" 2>/dev/null
	[ -d "$sub" ] && echo 0 >"$sub/namespaces/1/enable"
	rmdir "$sub/namespaces/1" "$sub" 2>/dev/null
	[ -d "$cfg/nullb/bench" ] && echo 0 >"$cfg/nullb/bench/power" && rmdir "$cfg/nullb/bench"
	rdma link del rn0 2>/dev/null
	ip link del nvb0 2>/dev/null
	modprobe -r nvme_rdma nvmet_rdma nvmet null_blk 2>/dev/null
	modprobe -r rdma_rxe 2>/dev/null || rmmod rdma_rxe 2>/dev/null
}

if [ "${BENCH_NVME:-1}" = 1 ]; then
	echo "# bench: NVMe-oF (nvmet and nvme-rdma over one device)"
	for rep in $(seq "$reps"); do
		if [ $((rep % 2)) = 1 ]; then order="ferroce c-rxe"; else order="c-rxe ferroce"; fi
		for drv in $order; do nvmeof "$drv" "$rep"; done
	done
fi

# Incast through a bottleneck, DCQCN off and on (the kselftest's table; BENCH_INCAST=0 skips it).
if [ -n "$incast" ] && [ "${BENCH_INCAST:-1}" = 1 ]; then
	echo "# bench: incast (ferroce_incast.sh)"
	res=$(bash "$incast" 2>&1)
	echo "$res" | grep -E '^(ok|not ok|# (dcqcn|off|on) )' | sed 's/^/  /'
	# Only well-formed lines: one the script could not fill in would break the whole report.
	n=$(echo "$res" | sed -n 's/^# incast-json {\(.*\)}$/{"driver":"ferroce","test":"incast",\1}/p' |
		python3 -c 'import json, sys
for line in sys.stdin:
    try:
        json.loads(line)
    except ValueError:
        continue
    print(line, end="")' | tee -a "$out" | wc -l)
	# Failed checks are reported beside the figures.
	bad=$(echo "$res" | grep -E '^(not ok|Bail out|1\.\.0)' | head -n 3 | tr -d '"\\' | tr '\n' ';')
	{ [ "$n" = 2 ] && [ -z "$bad" ]; } ||
		printf '{"driver":"ferroce","test":"incast","failed":"%s"}\n' "${bad:-no figures}" >>"$out"
fi
echo "# bench: done"
