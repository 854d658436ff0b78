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

# gid_index DEV [PREFIX]: the index of DEV's first GID starting with PREFIX (the IPv4-mapped
# RoCE v2 GID if none is given).
gid_index() {
	local f prefix=${2:-0000:0000:0000:0000:0000:ffff:}
	for f in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		case "$(cat "$f" 2>/dev/null)" in "$prefix"*) basename "$f"; return ;; esac
	done
	return 1
}

# counter DEV NAME: what `rdma statistic` shows for NAME on DEV port 1.
counter() {
	rdma statistic show link "$1"/1 | awk -v n="$2" '{for (i = 1; i < NF; i++) if ($i == n) {print $(i + 1); exit}}'
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

# wait_port NS PORT: true once a server in NS listens on TCP PORT (within 10 s).
wait_port() {
	for _ in $(seq 100); do
		ip netns exec "$1" ss -Hltn sport = :"$2" | grep -q "$2" && return 0
		sleep 0.1
	done
	return 1
}
