#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# One side of the wire interop test (scripts/interop.sh boots two guests on one QEMU dgram
# network): this guest runs DRIVER (c-rxe or ferroce) on the NIC with MAC, the peer the other.
# Each test has a server on one side and a client on the other; the sides take turns, so both
# directions run. Tests marked "v6" use the IPv6 GIDs (fd72::<last IPv4 octet>; the tools'
# out-of-band exchange stays on IPv4). Tests marked "ce" run with --tclass=3: the C rxe puts the
# traffic class in the IP header as given, so its packets arrive CE-marked, as a marking switch
# would leave them (ferroce sends its own ECT(0)); ferroce answers the marked requests with
# CNPs, which the C rxe, without congestion control, must drop harmlessly; the ferroce side
# counts them where the C rxe is the requester. "xfer" is ferroce_xfer, which
# checks every byte; "mckey" sends UD datagrams to an IPv4 multicast group, from ferroce;
# "nvmeof": the server side exports a null_blk with nvmet over rdma, the client side connects
# with nvme-rdma and runs fio with crc32c verify (kernel RC QPs, FRWR and SEND_WITH_INV on the
# wire), then tells the target it is done over TCP. Prints
# KTAP for this side, then the kernel log check's result lines (FERROCE_LOG_CHECK names
# scripts/kernel-log-check.sh); the host needs both sides.
#   usage: interop_guest.sh DRIVER MAC SELF_IP PEER_IP FIRST_SERVER(c-rxe|ferroce) [C_RXE_KO]

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"
export PATH=/usr/sbin:/sbin:$PATH

driver=$1 mac=$2 self=$3 peer=$4 first=$5 c_rxe=${6:-}

ktap_print_header
# Tests, in order: TOOL ARGS (the server of odd ones is FIRST_SERVER's side).
TESTS=(
	"ib_write_bw -s 65536 -n 200 -F"
	"ib_write_bw -s 65536 -n 200 -F"
	"ib_read_bw -s 65536 -n 200 -F"
	"ib_read_bw -s 65536 -n 200 -F"
	"ib_atomic_bw -n 500 -F"
	"ib_atomic_bw -n 500 -F"
	"ib_atomic_bw -A CMP_AND_SWAP -n 500 -F"
	"ib_atomic_bw -A CMP_AND_SWAP -n 500 -F"
	"ibv_rc_pingpong -m 1024 -s 65536 -n 50 -c"
	"ibv_rc_pingpong -m 1024 -s 65536 -n 50 -c"
	"ibv_ud_pingpong -s 1024 -n 200 -c"
	"ibv_ud_pingpong -s 1024 -n 200 -c"
	"ibv_uc_pingpong -m 1024 -s 4096 -n 100 -c"
	"ibv_uc_pingpong -m 1024 -s 4096 -n 100 -c"
	"ibv_srq_pingpong -m 1024 -s 4096 -n 50 -q 8 -r 32 -c"
	"ibv_srq_pingpong -m 1024 -s 4096 -n 50 -q 8 -r 32 -c"
	"rping -C 200 -V"
	"rping -C 200 -V"
	"mckey -C 50"
	"mckey -c 4 -C 20"
	"v6 ib_write_bw -s 65536 -n 200 -F"
	"v6 ib_write_bw -s 65536 -n 200 -F"
	"v6 rping -C 100 -V"
	"v6 rping -C 100 -V"
	"ce ib_write_bw -s 65536 -n 200 -F --tclass=3"
	"ce ib_write_bw -s 65536 -n 200 -F --tclass=3"
	"xfer -t rc -o send -m 1024 -s 1,4097,65536,1048577 -n 16 -w 4"
	"xfer -t rc -o send -m 1024 -s 1,4097,65536,1048577 -n 16 -w 4"
	"xfer -t rc -o write -m 1024 -s 1,4097,65536,1048577 -n 16 -w 4"
	"xfer -t rc -o write -m 1024 -s 1,4097,65536,1048577 -n 16 -w 4"
	"xfer -t rc -o read -m 1024 -s 1,4097,65536,1048577 -n 16 -w 4"
	"xfer -t rc -o read -m 1024 -s 1,4097,65536,1048577 -n 16 -w 4"
	"xfer -t uc -o write -m 1024 -s 1,4097,65536 -n 18 -w 1 --allow-loss"
	"xfer -t uc -o write -m 1024 -s 1,4097,65536 -n 18 -w 1 --allow-loss"
	"xfer -t ud -o send -m 1024 -s 1,700,1024 -n 48 -w 12 --allow-loss"
	"xfer -t ud -o send -m 1024 -s 1,700,1024 -n 48 -w 12 --allow-loss"
	"nvmeof"
	"nvmeof"
)
XFER="$(cd "$(dirname "$0")" && pwd)/ferroce_xfer"
# INTEROP_REPEAT=N runs the whole list N times in a row (make soak); both sides must agree.
ONCE=("${TESTS[@]}")
for _ in $(seq 2 "${INTEROP_REPEAT:-1}"); do TESTS+=("${ONCE[@]}"); done
ktap_set_plan "${#TESTS[@]}"

case $driver in
c-rxe) insmod "$c_rxe" || ktap_exit_fail_msg "insmod $c_rxe" ;;
ferroce) modprobe rdma_rxe || ktap_exit_fail_msg "modprobe rdma_rxe" ;;
*) ktap_exit_fail_msg "unknown driver $driver" ;;
esac
ifc=$(ip -o link | awk -v m="$mac" 'tolower($0) ~ m {sub(":", "", $2); print $2; exit}')
[ -n "$ifc" ] || ktap_exit_fail_msg "no NIC with MAC $mac"
self6=$(printf 'fd72::%x' "${self##*.}") peer6=$(printf 'fd72::%x' "${peer##*.}")
ip addr add "$self/24" dev "$ifc" && ip addr add "$self6/64" dev "$ifc" nodad &&
	ip link set "$ifc" mtu 1500 up || ktap_exit_fail_msg "cannot set up $ifc"
rdma link add r0 type rxe netdev "$ifc" || ktap_exit_fail_msg "rdma link add on $ifc"
echo "# $driver on $ifc ($self), peer $peer"

gid="" gid6=""
for _ in $(seq 100); do
	gid=$(gid_index r0 "0000:0000:0000:0000:0000:ffff:$(printf '%02x%02x:%02x%02x' ${self//./ })") &&
		gid6=$(gid_index r0 "$(printf 'fd72:0000:0000:0000:0000:0000:0000:%04x' "${self##*.}")") &&
		break
	sleep 0.1
done
[ -n "$gid" ] || ktap_exit_fail_msg "no GID for $self"
[ -n "$gid6" ] || ktap_exit_fail_msg "no GID for $self6"
# The peer boots on its own time.
for _ in $(seq 300); do ping -c1 -W1 "$peer" >/dev/null 2>&1 && break; done
ping -c1 -W2 "$peer" >/dev/null 2>&1 || ktap_exit_fail_msg "peer $peer unreachable"

# cnps_sent: how many CNPs this side's device sent.
cnps_sent() {
	rdma statistic show link r0/1 | awk '{for (i = 1; i < NF; i++) if ($i == "np_cnp_sent") print $(i + 1)}'
}

NQN=nqn.2026-11.org.ferroce:interop
NVMET=/sys/kernel/config/nvmet
NULLB=/sys/kernel/config/nullb/interop
HOSTID=6f6a6c3e-6d1c-4d0a-9f4f-feffe0ce0002

# nvmeof_target PORT: a 128 MiB memory-backed null_blk exported over rdma at SELF:4420 until
# the host reports on TCP PORT; then the target goes and its modules unload. True when the
# host reported success ("done 0").
nvmeof_target() {
	local rc=0 sub=$NVMET/subsystems/$NQN
	: >/tmp/interop.log
	modprobe null_blk nr_devices=0 && modprobe nvmet_rdma || return 1
	mkdir -p "$NULLB" && echo 128 >"$NULLB/size" && echo 4096 >"$NULLB/blocksize" &&
		echo 1 >"$NULLB/memory_backed" && echo 1 >"$NULLB/power" &&
		mkdir -p "$sub/namespaces/1" && echo 1 >"$sub/attr_allow_any_host" &&
		echo /dev/interop >"$sub/namespaces/1/device_path" &&
		echo 1 >"$sub/namespaces/1/enable" && mkdir -p "$NVMET/ports/1" &&
		echo rdma >"$NVMET/ports/1/addr_trtype" && echo ipv4 >"$NVMET/ports/1/addr_adrfam" &&
		echo "$self" >"$NVMET/ports/1/addr_traddr" && echo 4420 >"$NVMET/ports/1/addr_trsvcid" &&
		ln -s "$sub" "$NVMET/ports/1/subsystems/$NQN" || rc=1
	if [ "$rc" -eq 0 ]; then
		timeout 300 python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", int(sys.argv[1])))
s.listen(1)
c, _ = s.accept()
said = c.recv(64).decode().strip()
print("host:", said)
sys.exit(said != "done 0")' "$1" >/tmp/interop.log 2>&1 || rc=1
	fi
	rm -f "$NVMET/ports/1/subsystems/$NQN"
	rmdir "$NVMET/ports/1" 2>/dev/null
	[ -d "$sub" ] && echo 0 >"$sub/namespaces/1/enable"
	rmdir "$sub/namespaces/1" "$sub" 2>/dev/null
	[ -d "$NULLB" ] && echo 0 >"$NULLB/power" && rmdir "$NULLB"
	modprobe -r nvmet_rdma nvmet null_blk || rc=1
	return "$rc"
}

# nvmeof_host PORT: nvme connect -t rdma to the peer's target (retried while it comes up), fio
# 4 KiB random and 1 MiB sequential writes for up to 10 s each, after every 16 (4 KiB) or 4 (1 MiB)
# blocks a check of those (crc32c, offset, length; no block written twice): at 1 MiB a slow TCG
# host writes ~16 blocks in the 10 s, and a check every 16th came too late. Disconnect, unload,
# and report "done RC" to the target on TCP PORT, whatever happened.
nvmeof_host() {
	local port=$1 rc=1 d dev="" bs depth rw backlog job
	: >/tmp/interop.log
	if modprobe nvme_rdma; then
		for _ in $(seq 90); do
			nvme connect -t rdma -a "$peer" -s 4420 -n "$NQN" -l 5 -c 1 \
				-q "nqn.2014-08.org.nvmexpress:uuid:$HOSTID" -I "$HOSTID" \
				>>/tmp/interop.log 2>&1 && { rc=0; break; }
			sleep 1
		done
	fi
	for _ in $(seq 100); do
		for d in /sys/block/nvme*; do
			[ "$(cat "$d/device/subsysnqn" 2>/dev/null)" = "$NQN" ] && dev=/dev/${d##*/}
		done
		[ -b "$dev" ] && break
		sleep 0.1
	done
	[ "$rc" -eq 0 ] && [ -b "$dev" ] || rc=1
	if [ "$rc" -eq 0 ]; then
		for job in "4k 16 randwrite 16" "1M 4 write 4"; do
			read -r bs depth rw backlog <<<"$job"
			timeout 150 fio --name="nvmeof-$bs" --filename="$dev" --ioengine=libaio --direct=1 \
				--rw="$rw" --bs="$bs" --iodepth="$depth" --runtime=10 --verify=crc32c \
				--verify_backlog="$backlog" --verify_fatal=1 --verify_state_save=0 \
				--output-format=json >/tmp/interop.json 2>>/tmp/interop.log || rc=1
			python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
w, r = j["write"], j["read"]
print("#   %s: wrote %d MiB (%.0f IOPS), read back %d MiB, error %d" % (j["jobname"],
      w["io_bytes"] >> 20, w["iops"], r["io_bytes"] >> 20, j["error"]))
sys.exit(j["error"] != 0 or w["io_bytes"] == 0 or r["io_bytes"] == 0)' /tmp/interop.json || rc=1
		done
	fi
	nvme disconnect -n "$NQN" >/dev/null 2>&1
	modprobe -r nvme_rdma || rc=1
	for _ in $(seq 30); do
		{ echo "done $rc" >"/dev/tcp/$peer/$port"; } 2>/dev/null && break
		sleep 1
	done
	return "$rc"
}

# xfer_packets ARGS...: the packets ferroce_xfer's client sends for its -s SIZES (cycled over
# -n MESSAGES) at -m MTU: one per MTU of payload, at least one.
xfer_packets() {
	local sizes=1 n=1 mtu=1024
	while [ $# -gt 0 ]; do
		case $1 in -s) sizes=$2 ;; -n) n=$2 ;; -m) mtu=$2 ;; esac
		shift
	done
	awk -v s="$sizes" -v n="$n" -v m="$mtu" 'BEGIN {k = split(s, z, ",")
		for (i = 0; i < n; i++) {x = z[i % k + 1]; p += x > m ? int((x + m - 1) / m) : 1}; print p}'
}

# run N TOOL ARGS...: this side's half of test N.
run() {
	local n=$1 tool=$2 port=$((18600 + $1)) gopt=-x rc g=$gid me=$self them=$peer ce=0 cnps=0
	shift 2
	if [ "$tool" = v6 ]; then
		g=$gid6 me=$self6 them=$peer6 tool=$1
		shift
	fi
	if [ "$tool" = ce ]; then
		ce=1 tool=$1
		shift
		[ "$driver" = ferroce ] && cnps=$(cnps_sent)
	fi
	[[ $tool == ibv_* ]] && gopt=-g
	if [ "$tool" = xfer ]; then
		tool=$XFER gopt=-g
	fi
	local mine=0 server lossy=0 sent0 rcvd0
	if [[ " $* " == *" --allow-loss "* ]]; then
		lossy=1 sent0=$(counter r0 sent_pkts) rcvd0=$(counter r0 rcvd_pkts)
	fi
	[ "$first" = "$driver" ] && mine=1
	# Odd tests are served by FIRST_SERVER's side, even ones by the other.
	if ((n % 2 == 1)); then server=$mine; else server=$((1 - mine)); fi
	# rping speaks rdma_cm (QP1 MADs), addressed by IP; the others exchange QP numbers by TCP.
	local srv_args=("$tool" -d r0 "$gopt" "$g" -p "$port" "$@")
	local cli_args=("$tool" -d r0 "$gopt" "$g" -p "$port" "$@" "$peer")
	if [ "$tool" = rping ]; then
		srv_args=(rping -s -a "$me" -p "$port" "$@")
		cli_args=(rping -c -a "$them" -p "$port" "$@")
	fi
	# mckey: rdma_cm multicast; the server receives what the client sends to the group. Only
	# ferroce sends: the C rxe (7.3) puts few of its multicast datagrams on the wire (1 to 9
	# of 50, C rxe to C rxe).
	if [ "$tool" = mckey ]; then
		srv_args=(mckey -m 239.4.4.4 -b "$me" "$@")
		cli_args=(mckey -m 239.4.4.4 -b "$me" -s "$@")
		server=0
		[ "$driver" = c-rxe ] && server=1
	fi
	if [ "$tool" = nvmeof ]; then
		if [ "$server" = 1 ]; then nvmeof_target "$port"; else nvmeof_host "$port"; fi
		rc=$?
	elif [ "$server" = 1 ]; then
		timeout 150 "${srv_args[@]}" >/tmp/interop.log 2>&1
		rc=$?
	elif [ "$tool" = mckey ]; then
		# Nothing says when the receiver joined: send twice, 10 s apart (it stops at its
		# count; a burst it missed, whole or in part, the second makes up).
		sleep 3
		timeout 60 "${cli_args[@]}" >/tmp/interop.log 2>&1
		rc=$?
		sleep 10
		timeout 60 "${cli_args[@]}" >>/tmp/interop.log 2>&1 || rc=$?
	else
		# Retry until the peer's server listens.
		for _ in $(seq 60); do
			timeout 120 "${cli_args[@]}" >/tmp/interop.log 2>&1
			rc=$?
			grep -qiE "couldn't connect|unable to connect|connection refused|rdma_connect|REJECTED|connect error" \
				/tmp/interop.log || break
			sleep 1
		done
	fi
	echo "# $([ "$server" = 1 ] && echo server || echo client): $(basename "$tool") $* -> $rc"
	if [ "$ce" = 1 ] && [ "$driver" = ferroce ]; then
		cnps=$(($(cnps_sent) - cnps))
		echo "#   $cnps CNPs sent to the C rxe"
		# The C rxe's WRITEs come marked where it is the requester (ferroce serves).
		[ "$server" = 1 ] && [ "$cnps" -eq 0 ] && rc=1
	fi
	awk '$1 ~ /^[0-9]+$/ && NF >= 4 {print "#   " $0}' /tmp/interop.log | tail -1
	grep -E "byte-exact|data mismatch" /tmp/interop.log | sed 's/^/#   /'
	# The wire between the guests loses packets now and then (RC resends them: the C rxe counts
	# out-of-sequence requests), and UC and UD do not resend. So the sender must have sent
	# every packet, and the receiver may miss a message only where packets never reached it,
	# one in nine at most; what arrives is still checked to the byte.
	if [ "$lossy" = 1 ]; then
		local want total lost sent rcvd
		want=$(xfer_packets "$@")
		sent=$(($(counter r0 sent_pkts) - sent0)) rcvd=$(($(counter r0 rcvd_pkts) - rcvd0))
		read -r total lost < <(awk '/byte-exact/ {for (i = 2; i <= NF; i++) {
			if ($i == "messages:") t = $(i - 1); if ($i == "lost,") l = $(i - 1)}; print t, l}' /tmp/interop.log)
		if [ "$server" = 0 ]; then
			echo "#   sent $sent packets of $want"
			[ "$sent" -eq "$want" ] || rc=1
		elif ! [[ $lost =~ ^[0-9]+$ && $total =~ ^[0-9]+$ ]]; then
			echo "#   no summary from the receiver"
			rc=1
		elif ((lost > 0)); then
			echo "#   $lost of $total messages lost; $rcvd of the $want packets sent arrived"
			((lost * 9 > total || rcvd >= want)) && rc=1
		fi
	fi
	# rdma-core's pingpongs print this on a mismatch, and exit 0 all the same.
	if grep -q "invalid data" /tmp/interop.log; then
		grep "invalid data" /tmp/interop.log | head -3 | sed 's/^/#   /'
		rc=1
	fi
	if [ "$rc" -ne 0 ]; then
		grep -vE '^ *(GID|local address|remote address|-+$)' /tmp/interop.log | tail -8 | sed 's/^/#   /'
		rdma statistic show link r0/1 | tr ' ' '\n' | paste - - | grep -v '	0$' | tr '\n' ' ' |
			sed 's/^/#   counters: /'
		echo
	fi
	return "$rc"
}

for i in "${!TESTS[@]}"; do
	n=$((i + 1))
	# INTEROP_ONLY="3 4": run only those (for debugging; the host needs every test).
	if [ -n "${INTEROP_ONLY:-}" ] && [[ " $INTEROP_ONLY " != *" $n "* ]]; then
		ktap_test_skip "$n: not in INTEROP_ONLY"
		continue
	fi
	name=${TESTS[$i]%% -*}
	[[ $name == "v6 "* ]] && name="${name#v6 }-ipv6"
	[[ $name == "ce "* ]] && name="${name#ce }-ce-marked"
	[ "$name" = xfer ] && name=$(echo "${TESTS[$i]}" | awk '{print "xfer-" $3 "-" $5}')
	t0=$SECONDS
	ktap_test_result "$n: $name ($driver side)" run "$n" ${TESTS[$i]}
	# What each test costs make check (both sides wait for each other: the same figure).
	echo "#   $n took $((SECONDS - t0)) s"
done
rdma link del r0
# The host reads the "result:" lines: the module unloads, and this guest's kernel log and
# kmemleak are clean, as in the main guest.
if rmmod rdma_rxe; then
	echo "result: pass kernel-log interop-$driver/unload"
else
	echo "result: fail kernel-log interop-$driver/unload (rdma_rxe stayed loaded)"
fi
if [ -f "${FERROCE_LOG_CHECK:-}" ]; then
	bash "$FERROCE_LOG_CHECK" "interop-$driver" | sed 's/^/result: /'
else
	echo "result: fail kernel-log interop-$driver/log (no kernel-log-check.sh)"
fi
ktap_finished
