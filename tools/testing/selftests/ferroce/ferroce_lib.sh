# SPDX-License-Identifier: GPL-2.0
#
# Helpers the ferroce kselftests share, after ktap_helpers.sh; they set A and B, the names of
# their two namespaces.

# require CMD...: skips the whole test unless it runs as root and every CMD is there. Under
# FERROCE_STRICT (make check, whose harness installs every tool) a missing tool is a failure.
require() {
	local c
	[ "$EUID" -eq 0 ] || missing "must run as root"
	for c in "$@"; do
		command -v "$c" >/dev/null || missing "missing $c"
	done
}

# long SHORT LONG: SHORT in make check, LONG under make soak (FERROCE_LONG=1): how long to run a
# test whose length adds confidence but no coverage.
long() {
	if [ -n "${FERROCE_LONG:-}" ]; then echo "$2"; else echo "$1"; fi
}

# missing WHY: the test cannot run here; a skip, or under FERROCE_STRICT a failure.
missing() {
	if [ -n "${FERROCE_STRICT:-}" ]; then
		ktap_exit_fail_msg "$1 (FERROCE_STRICT: make check installs every tool)"
	fi
	ktap_skip_all "$1"
	exit "$KSFT_SKIP"
}

# ns_cleanup: kills what runs in A and B, removes the devices, the namespaces and the module.
ns_cleanup() {
	ip netns pids "$A" 2>/dev/null | xargs -r kill 2>/dev/null
	ip netns pids "$B" 2>/dev/null | xargs -r kill 2>/dev/null
	rdma link del fer0 2>/dev/null
	rdma link del fer1 2>/dev/null
	ip netns del "$A" 2>/dev/null
	ip netns del "$B" 2>/dev/null
	modprobe -r rdma_rxe 2>/dev/null
}

# two_devices NET [THIRD]: namespaces A and B joined by a veth, va in A with NET.1 and vb in B
# with NET.2 (NET as in 10.73.0), fer0 on va and fer1 on vb; sets GA and GB, their IPv4 GID
# indices. With THIRD, a namespace of that name also sits on the wire: a macvlan on vb (mvb,
# NET.3) sends to A through vb as if it were B, one on va (mva, NET.4) to B as if it were A.
two_devices() {
	ip netns add "$A" && ip netns add "$B" || ktap_exit_fail_msg "cannot create namespaces"
	ip -n "$A" link add va type veth peer name vb netns "$B" || ktap_exit_fail_msg "cannot create veth"
	ip -n "$A" addr add "$1.1/24" dev va
	ip -n "$B" addr add "$1.2/24" dev vb
	ip -n "$A" link set va up
	ip -n "$B" link set vb up
	if [ -n "${2:-}" ]; then
		ip netns add "$2" &&
			ip -n "$A" link add mva link va type macvlan mode bridge &&
			ip -n "$A" link set mva netns "$2" &&
			ip -n "$B" link add mvb link vb type macvlan mode bridge &&
			ip -n "$B" link set mvb netns "$2" &&
			ip -n "$2" addr add "$1.3/32" dev mvb && ip -n "$2" addr add "$1.4/32" dev mva &&
			ip -n "$2" link set mvb up && ip -n "$2" link set mva up &&
			ip -n "$2" route add "$1.1/32" dev mvb && ip -n "$2" route add "$1.2/32" dev mva ||
			ktap_exit_fail_msg "cannot put namespace $2 on the wire"
	fi
	ip netns exec "$A" rdma link add fer0 type rxe netdev va || ktap_exit_fail_msg "rdma link add fer0"
	ip netns exec "$B" rdma link add fer1 type rxe netdev vb || ktap_exit_fail_msg "rdma link add fer1"
	for _ in $(seq 50); do
		GA=$(gid_index fer0) && GB=$(gid_index fer1) && break
		sleep 0.1
	done
	[ -n "$GA" ] && [ -n "$GB" ] || ktap_exit_fail_msg "no IPv4 GIDs"
}

# indented CMD...: runs CMD with its output (stdout and stderr) as KTAP comments; returns its
# status.
indented() {
	"$@" 2>&1 | sed 's/^/# /'
	return "${PIPESTATUS[0]}"
}

# gid_index DEV [PREFIX]: the lowest index of DEV's GIDs that start with PREFIX (the IPv4-mapped
# RoCE v2 GID if none is given).
gid_index() {
	local i prefix=${2:-0000:0000:0000:0000:0000:ffff:}
	# One process reads the whole table (1024 entries): a `cat` per entry took minutes under TCG.
	i=$(grep -sH "^$prefix" /sys/class/infiniband/"$1"/ports/1/gids/* |
		awk '{sub(/.*\/gids\//, ""); sub(/:.*/, ""); if (n == "" || $0 + 0 < n) n = $0 + 0}
			END {print n}')
	[ -n "$i" ] && echo "$i"
}

# cc_file DEV NAME: the path of DEV's congestion-control setting NAME in debugfs (cc_enable, or
# cc_params/<mlx5 name>), debugfs mounted if it was not.
cc_file() {
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	echo "/sys/kernel/debug/ferroce/$1/$2"
}

# cc_set DEV NAME=VALUE...: DEV's DCQCN parameters cc_params/NAME set, in order; false at the
# first one refused.
cc_set() {
	local dev=$1 kv
	shift
	for kv in "$@"; do
		echo "${kv#*=}" >"$(cc_file "$dev" "cc_params/${kv%=*}")" || return 1
	done
}

# counter DEV NAME: what `rdma statistic` shows for NAME on DEV port 1.
counter() {
	rdma statistic show link "$1"/1 | awk -v n="$2" '{for (i = 1; i < NF; i++) if ($i == n) {print $(i + 1); exit}}'
}

# counters_shown DEV...: each device's non-zero counters, as comment lines (for a failure).
counters_shown() {
	local d
	for d in "$@"; do
		rdma statistic show link "$d"/1 | awk -v d="$d" '{s = ""; for (i = 3; i < NF; i += 2)
			if ($(i + 1) != 0) s = s " " $i "=" $(i + 1); print "# " d ":" s}'
	done
}

# xfer_kbps LOG: kb/s of payload that ferroce_xfer's server (its output in LOG) received. From
# "... N byte-exact (B bytes), L lost, X bad, S s, the last delivered at T s": the bytes
# delivered over the time until the last one (a lost UC message keeps the receiver waiting
# for stragglers after it, which is not the sender's time).
xfer_kbps() {
	awk '/byte-exact/ && $NF == "s" {b = $0; sub(/.*\(/, "", b); sub(/ bytes.*/, "", b)
		printf "%.0f\n", b * 8 / $(NF - 1) / 1000}' "$1"
}

# rps_all NS DEV: DEV's received packets are steered by flow to any CPU (RPS), each flow to
# one: in order, as a NIC's receive queue keeps them.
rps_all() {
	local n mask=""
	# In groups of 32 CPUs, the highest first, comma-separated: as the kernel parses CPU masks.
	for ((n = $(nproc --all); n > 0; n -= 32)); do
		mask=$(printf '%x' $(((1 << (n > 32 ? 32 : n)) - 1)))${mask:+,$mask}
	done
	ip netns exec "$1" sh -c "echo $mask >/sys/class/net/$2/queues/rx-0/rps_cpus"
}

# retransmits: what fer0 and fer1 counted as sent again (timeouts and sequence NAKs).
retransmits() {
	local d n sum=0
	for d in fer0 fer1; do
		for n in completer_retry_err rcvd_seq_err; do
			sum=$((sum + $(counter "$d" "$n")))
		done
	done
	echo "$sum"
}

# no_timeout: no ACK timer fired on fer0 or fer1 (a paced QP that waited without a wake-up
# would be brought back by its ACK timeout only).
no_timeout() {
	local d n
	for d in fer0 fer1; do
		for n in completer_retry_err retry_exceeded_err; do
			[ "$(counter "$d" "$n")" -eq 0 ] || { counters_shown fer0 fer1; return 1; }
		done
	done
}

# wait_port NS PORT: true once a server in NS listens on TCP PORT (within 10 s).
wait_port() {
	for _ in $(seq 100); do
		ip netns exec "$1" ss -Hltn sport = :"$2" | grep -q "$2" && return 0
		sleep 0.1
	done
	return 1
}

# lossy_link LOSS ACK_LOSS: netem on va (in A) and vb (in B), each packet delayed 1 ms and 1%
# reordered; LOSS% of the data packets lost, ACK_LOSS% of the RoCE ACKs and NAKs (BTH opcode
# 0x11 at UDP 4791, after a 20-byte IP header), which go through a band of their own.
# ibv_rc_pingpong wants ACK_LOSS 0: it ends without a handshake, each side destroying its QP
# once its own last WR completed, so a lost last ACK leaves the peer resending to a QP that is
# gone until its retries run out, on any RC implementation.
# The CM's DREQ (a MAD to QP 1 whose attribute, after BTH and DETH, is 0x0015) is never lost,
# for a like reason: rping's client destroys its cm_id right after sending it, which cancels
# ib_cm's resends, so a lost DREQ leaves the server waiting for a DISCONNECTED event that never
# comes, on any device. The CM's other MADs are lost like data: ib_cm resends those.
lossy_link() {
	local ns
	for ns in "$A va" "$B vb"; do
		set -- "$1" "$2" $ns
		tc -n "$3" qdisc replace dev "$4" root handle 1: prio bands 3 \
			priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 &&
			tc -n "$3" qdisc replace dev "$4" parent 1:1 handle 10: \
				netem delay 1ms reorder 1% loss "$2%" &&
			tc -n "$3" qdisc replace dev "$4" parent 1:2 handle 20: \
				netem delay 1ms reorder 1% loss "$1%" &&
			tc -n "$3" qdisc replace dev "$4" parent 1:3 handle 30: \
				netem delay 1ms reorder 1% &&
			tc -n "$3" filter replace dev "$4" parent 1: protocol ip prio 1 handle 800::1 \
				u32 match ip protocol 17 0xff match ip dport 4791 0xffff \
				match u8 0x11 0xff at 28 flowid 1:1 &&
			tc -n "$3" filter replace dev "$4" parent 1: protocol ip prio 1 handle 800::2 \
				u32 match ip protocol 17 0xff match ip dport 4791 0xffff \
				match u32 0x00000001 0x00ffffff at 32 match u16 0x0015 0xffff at 64 \
				flowid 1:3 ||
			ktap_exit_fail_msg "netem on $4"
	done
}

# banded NS DEV HANDLE: the packets DEV sent through lossy_link's band whose netem is HANDLE
# (0 without one).
banded() {
	tc -s -n "$1" qdisc show dev "$2" | awk -v h="$3" '$1 == "qdisc" {band = ($3 == h)}
		band && $1 == "Sent" {n = $4; exit} END {print n + 0}'
}

# acks_banded NS DEV: the packets DEV sent through lossy_link's ACK band.
acks_banded() {
	banded "$1" "$2" 10:
}

# dreqs_banded NS DEV: the packets DEV sent through lossy_link's band for the CM's DREQs.
dreqs_banded() {
	banded "$1" "$2" 30:
}

# acks_spared A0 B0 MIN: va and vb each sent at least MIN packets through the ACK band since
# acks_banded read A0 and B0 (the band matched the ACKs).
acks_spared() {
	local a b
	a=$(($(acks_banded "$A" va) - $1)) b=$(($(acks_banded "$B" vb) - $2))
	echo "# ACKs through their own band: $a from va, $b from vb"
	[ "$a" -ge "$3" ] && [ "$b" -ge "$3" ]
}
