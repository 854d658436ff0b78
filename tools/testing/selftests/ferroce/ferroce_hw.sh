#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Hardware RoCE on the same netdev (issue 20). The test machine has no RoCE NIC, so
# roce_standin.ko (built with the kernel, path in FERROCE_ROCE_STANDIN) registers an ib_device
# with a hardware driver id (mlx5's) and a RoCE v2 port bound to a veth, as mlx5 or irdma bind
# theirs. Under the default policy (defer) `rdma link add` on that netdev fails with EBUSY and
# one log line naming the stand-in; a plain netdev beside it still gets a device; under force
# (/sys/kernel/ferroce/hw_policy, or the module parameter hw_force) the device is added, with a
# warning; a device of a software driver (siw's id) is no reason to step aside. A stand-in
# that appears after ferroce's device removes it under defer (a process holding its rings
# survives), and leaves it, with a warning, under force. A bond with the stand-in's netdev as a
# port counts as served by the stand-in, both for rdma link add and when the stand-in appears.

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"

STANDIN=${FERROCE_ROCE_STANDIN:-}
DIR="$(cd "$(dirname "$0")" && pwd)"
HOLDER_OUT=/tmp/ferroce_hw_holder.out
PY=/usr/bin/python3

cleanup() {
	rdma link del fer0 2>/dev/null
	rdma link del fer1 2>/dev/null
	rmmod roce_standin 2>/dev/null
	ip link del fb0 2>/dev/null
	ip link del hwa 2>/dev/null
	modprobe -r rdma_rxe 2>/dev/null
}
trap cleanup EXIT

ktap_print_header
require rdma ip insmod rmmod dmesg "$PY"
[ -n "$STANDIN" ] && [ -f "$STANDIN" ] || missing "no roce_standin.ko (FERROCE_ROCE_STANDIN)"
ktap_set_plan 15

POLICY=/sys/kernel/ferroce/hw_policy
LISTING=/sys/kernel/ferroce/hw_netdevs
ip link add hwa type veth peer name hwb || ktap_exit_fail_msg "cannot create veth"
ip link set hwa up && ip link set hwb up
modprobe rdma_rxe || ktap_exit_fail_msg "modprobe rdma_rxe failed"

# log_since N: the kernel log after its first N lines.
log_since() {
	dmesg | tail -n +$(($1 + 1))
}

# standin [ARGS]: loads the stand-in on hwa; true once its device is registered.
standin() {
	rmmod roce_standin 2>/dev/null
	insmod "$STANDIN" netdev=hwa "$@" && rdma dev show | grep -q 'roce_standin0'
}

# refused: rdma link add on hwa fails with EBUSY, naming the stand-in once in the log, and
# leaves no device.
refused() {
	local n out
	n=$(dmesg | wc -l)
	if out=$(rdma link add fer0 type rxe netdev hwa 2>&1); then
		echo "# added: $out"
		return 1
	fi
	echo "# rdma: $out"
	[[ "$out" == *"busy"* ]] || return 1
	log_since "$n" | grep 'fer0' | sed 's/^/# /'
	[ "$(log_since "$n" | grep -c 'fer0: not added: RoCE on hwa is served by hardware device roce_standin0')" -eq 1 ] &&
		! [ -e /sys/class/infiniband/fer0 ]
}

# added_beside: rdma link add on hwa succeeds, with a warning naming the stand-in.
added_beside() {
	local n
	n=$(dmesg | wc -l)
	rdma link add fer0 type rxe netdev hwa || return 1
	log_since "$n" | grep 'fer0' | sed 's/^/# /'
	[ -e /sys/class/infiniband/fer0 ] &&
		log_since "$n" | grep -q 'fer0: adding on hwa beside hardware device roce_standin0' &&
		rdma link del fer0 || { rdma link del fer0; return 1; }
}

# policy_text: the policy file reads defer, refuses anything but defer or force, and still
# reads defer.
policy_text() {
	[ "$(cat "$POLICY")" = defer ] || return 1
	! echo sometimes >"$POLICY" 2>/dev/null && ! echo 1 >"$POLICY" 2>/dev/null &&
		[ "$(cat "$POLICY")" = defer ]
}

# added DEV NETDEV: rdma link add makes DEV on NETDEV, which rdma link del removes again.
added() {
	rdma link add "$1" type rxe netdev "$2" || return 1
	[ -e "/sys/class/infiniband/$1" ] && rdma link del "$1" || { rdma link del "$1"; return 1; }
}

# software_standin: a stand-in with siw's driver id is software: defer adds the device.
software_standin() {
	local n
	n=$(dmesg | wc -l)
	standin driver_id=18 && log_since "$n" | grep -q 'roce_standin0 serves RoCE on hwa (driver id 18)' &&
		added fer0 hwa
}

# forced_at_load: modprobe rdma_rxe hw_force=1 starts in force, and adds a device beside the
# stand-in.
forced_at_load() {
	modprobe -r rdma_rxe && modprobe rdma_rxe hw_force=1 && [ "$(cat "$POLICY")" = force ] &&
		standin && added_beside
}

# taken_over: fer0 on hwa, held by a process (rings, MR, QP), when the stand-in appears:
# under defer fer0 goes, with a log line naming the stand-in, and the process survives.
taken_over() {
	local n i rc
	rmmod roce_standin 2>/dev/null
	rm -f "$HOLDER_OUT"
	rdma link add fer0 type rxe netdev hwa || return 1
	coproc HOLDER { "$PY" "$DIR/ferroce_holder.py" fer0 >"$HOLDER_OUT" 2>&1; }
	for i in $(seq 100); do grep -q ready "$HOLDER_OUT" && break; sleep 0.1; done
	grep -q ready "$HOLDER_OUT" || { sed 's/^/# /' "$HOLDER_OUT"; rdma link del fer0; return 1; }
	n=$(dmesg | wc -l)
	standin || { rdma link del fer0; return 1; }
	for i in $(seq 50); do [ -e /sys/class/infiniband/fer0 ] || break; sleep 0.2; done
	echo >&"${HOLDER[1]}"
	wait "$HOLDER_PID"
	rc=$?
	sed 's/^/# /' "$HOLDER_OUT"
	log_since "$n" | grep 'fer0' | sed 's/^/# /'
	[ "$rc" -eq 0 ] && grep -q done "$HOLDER_OUT" && ! [ -e /sys/class/infiniband/fer0 ] &&
		[ "$(log_since "$n" | grep -c 'fer0: removed: RoCE on hwa is now served by hardware device roce_standin0')" -eq 1 ] ||
		{ rdma link del fer0 2>/dev/null; return 1; }
}

# let_go: with the stand-in bound to hwa, deleting hwa returns (the stand-in lets go of it).
let_go() {
	lsmod | grep -q '^roce_standin ' && timeout 30 ip link del hwa
}

# kept_beside: under force, fer0 stays when the stand-in appears, with a warning.
kept_beside() {
	local n ok=1
	rmmod roce_standin 2>/dev/null
	rdma link add fer0 type rxe netdev hwa || return 1
	n=$(dmesg | wc -l)
	echo force >"$POLICY" && standin && sleep 1 && [ -e /sys/class/infiniband/fer0 ] &&
		log_since "$n" | grep -q 'fer0: stays on hwa beside hardware device roce_standin0' &&
		listed hwa roce_standin0 fer0 && ok=0
	log_since "$n" | grep 'fer0' | sed 's/^/# /'
	echo defer >"$POLICY"
	rdma link del fer0 && return $ok
}

# listed LINE: hw_netdevs has LINE ("netdev hardware ferroce-device-or-dash").
listed() {
	sed 's/^/# /' "$LISTING"
	grep -qx "$*" "$LISTING"
}

# bond_hwa: bond fb0, up, with hwa as its port.
bond_hwa() {
	ip link add fb0 type bond mode active-backup && ip link set hwa down &&
		ip link set hwa master fb0 && ip link set fb0 up
}

# unbond_hwa: fb0 gone, hwa up again.
unbond_hwa() {
	ip link del fb0
	ip link set hwa up
}

# bond_refused: under defer, rdma link add on a bond with hwa as its port fails with EBUSY,
# naming the stand-in once in the log.
bond_refused() {
	local n out ok=1
	bond_hwa || { unbond_hwa; return 1; }
	n=$(dmesg | wc -l)
	if out=$(rdma link add fer0 type rxe netdev fb0 2>&1); then
		echo "# added: $out"
		rdma link del fer0
	else
		echo "# rdma: $out"
		log_since "$n" | grep 'fer0' | sed 's/^/# /'
		[[ "$out" == *"busy"* ]] && ! [ -e /sys/class/infiniband/fer0 ] &&
			[ "$(log_since "$n" | grep -c 'fer0: not added: RoCE on fb0 is served by hardware device roce_standin0')" -eq 1 ] &&
			listed fb0 roce_standin0 - && ok=0
	fi
	unbond_hwa
	return $ok
}

# bond_taken_over: fer0 on bond fb0 (port hwa) goes when the stand-in appears on hwa (defer).
bond_taken_over() {
	local n i ok=1
	rmmod roce_standin 2>/dev/null
	bond_hwa && rdma link add fer0 type rxe netdev fb0 || { unbond_hwa; return 1; }
	n=$(dmesg | wc -l)
	if standin; then
		for i in $(seq 50); do [ -e /sys/class/infiniband/fer0 ] || break; sleep 0.2; done
		log_since "$n" | grep 'fer0' | sed 's/^/# /'
		! [ -e /sys/class/infiniband/fer0 ] &&
			[ "$(log_since "$n" | grep -c 'fer0: removed: RoCE on fb0 is now served by hardware device roce_standin0')" -eq 1 ] &&
			ok=0
	fi
	rdma link del fer0 2>/dev/null
	rmmod roce_standin
	unbond_hwa
	return $ok
}

# ktap_test_result runs its command unquoted: each check is one word.
ktap_test_result "the stand-in registers a hardware RoCE device on hwa" standin
ktap_test_result "defer (default): rdma link add on hwa fails with EBUSY, naming roce_standin0" refused
ktap_test_result "defer: a plain netdev beside it (hwb) still gets a device" added fer1 hwb
ktap_test_result "hw_policy reads defer and refuses anything but defer or force" policy_text
echo force >"$POLICY"
ktap_test_result "force: rdma link add on hwa succeeds, with a warning naming roce_standin0" added_beside
echo defer >"$POLICY"
ktap_test_result "defer again: refused again" refused
ktap_test_result "hw_netdevs lists hwa as served by roce_standin0, with no device of ours" \
	listed hwa roce_standin0 -
ktap_test_result "defer: rdma link add on a bond with hwa as its port fails with EBUSY" bond_refused
ktap_test_result "a stand-in with siw's driver id is software: defer adds the device" software_standin
rmmod roce_standin
ktap_test_result "without the stand-in, hwa gets a device" added fer0 hwa
ktap_test_result "defer: a stand-in that appears under a bond's port removes the bond's device" \
	bond_taken_over
ktap_test_result "defer: a stand-in that appears later removes fer0; a process holding it survives" \
	taken_over
ktap_test_result "force: a stand-in that appears later leaves fer0, with a warning" kept_beside
rmmod roce_standin
ktap_test_result "the module parameter hw_force=1 starts in force" forced_at_load
ktap_test_result "hwa deleted under the stand-in: it lets go" let_go

ktap_finished
