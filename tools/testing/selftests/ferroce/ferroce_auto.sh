#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Auto-provisioning (issue 20): `modprobe rdma_rxe auto_netdevs=GLOBS` gives every matching
# Ethernet netdev, in every namespace, a device rxe_<netdev>, unless hardware RoCE serves it
# (roce_standin.ko stands in for a RoCE NIC on hwa, as in ferroce_hw.sh). Netdevs that come
# later or are renamed to a matching name get one; a device goes with its netdev; a hardware
# device that goes away hands its netdev back. Loopback and VLANs never get one.

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"

STANDIN=${FERROCE_ROCE_STANDIN:-}
NS1=fauto_ns1
NS2=fauto_ns2

cleanup() {
	modprobe -r rdma_rxe 2>/dev/null
	rmmod roce_standin 2>/dev/null
	ip link del hwa 2>/dev/null
	ip link del fa3 2>/dev/null
	ip link del fa1 2>/dev/null
	ip link del fa5 2>/dev/null
	ip link del fz6 2>/dev/null
	ip link del fa9 2>/dev/null
	ip link del zbond 2>/dev/null
	ip netns del "$NS1" 2>/dev/null
	ip netns del "$NS2" 2>/dev/null
}
trap cleanup EXIT

ktap_print_header
require rdma ip insmod rmmod dmesg
[ -n "$STANDIN" ] && [ -f "$STANDIN" ] || missing "no roce_standin.ko (FERROCE_ROCE_STANDIN)"
ktap_set_plan 11

modprobe -r rdma_rxe 2>/dev/null
ip netns add "$NS1" && ip netns add "$NS2" || ktap_exit_fail_msg "cannot create namespaces"
# Two plain veths in two namespaces; hwa (the stand-in's) and hwb with a VLAN on it here.
ip -n "$NS1" link add fa1 type veth peer name fa2 netns "$NS2" &&
	ip link add hwa type veth peer name hwb &&
	ip link add link hwb name hwb.7 type vlan id 7 ||
	ktap_exit_fail_msg "cannot create netdevs"
insmod "$STANDIN" netdev=hwa || ktap_exit_fail_msg "cannot load the stand-in"

# too_long: a value over 256 bytes fails the load (the parameter holds a copy of that size);
# modinfo calls the parameter a charp, as C string parameters are.
too_long() {
	modinfo -F parm rdma_rxe | grep -q '^auto_netdevs:.*(charp)$' &&
		! modprobe rdma_rxe "auto_netdevs=$(printf 'fa%.0s' $(seq 129))" 2>/dev/null &&
		! lsmod | grep -q '^rdma_rxe '
}
ktap_test_result "auto_netdevs over 256 bytes fails the load; modinfo says charp" too_long

LOG0=$(dmesg | wc -l)
modprobe rdma_rxe "auto_netdevs=fa*, hw*,lo" || ktap_exit_fail_msg "modprobe rdma_rxe failed"

# has DEV: device DEV exists within 20 s (provisioning is asynchronous, and slow under TCG).
has() {
	local i
	for i in $(seq 100); do [ -e "/sys/class/infiniband/$1" ] && return 0; sleep 0.2; done
	return 1
}

# gone DEV: device DEV does not exist within 60 s (a namespace's teardown is slow under TCG).
gone() {
	local i
	for i in $(seq 300); do [ -e "/sys/class/infiniband/$1" ] || return 0; sleep 0.2; done
	return 1
}

# link_is NS DEV NETDEV: seen from namespace NS (. for this one), DEV's port is on NETDEV.
link_is() {
	if [ "$1" = . ]; then
		rdma link show "$2/1" 2>/dev/null | grep -qw "netdev $3"
	else
		ip netns exec "$1" rdma link show "$2/1" 2>/dev/null | grep -qw "netdev $3"
	fi
}

# on_netdev NS DEV NETDEV: link_is within 20 s (sysfs shows a new device a moment before the
# RDMA netlink does).
on_netdev() {
	local i
	for i in $(seq 100); do link_is "$@" && return 0; sleep 0.2; done
	return 1
}

# namespaces: fa1 (in one namespace) and fa2 (in another) got rxe_fa1 and rxe_fa2.
namespaces() {
	has rxe_fa1 && has rxe_fa2 && on_netdev "$NS1" rxe_fa1 fa1 && on_netdev "$NS2" rxe_fa2 fa2
}

# skipped: hwb got a device; hwa (the stand-in's) did not, with one log line naming the
# stand-in; lo and the VLAN hwb.7 did not either.
skipped() {
	has rxe_hwb || return 1
	dmesg | tail -n +$((LOG0 + 1)) | grep -E 'hwa|rxe_' | sed 's/^/# /'
	[ "$(dmesg | tail -n +$((LOG0 + 1)) |
		grep -c 'hwa: no device (auto_netdevs): its RoCE is served by hardware device roce_standin0')" -eq 1 ] &&
		! [ -e /sys/class/infiniband/rxe_hwa ] && ! [ -e /sys/class/infiniband/rxe_lo ] &&
		! [ -e /sys/class/infiniband/rxe_hwb.7 ] && on_netdev . rxe_hwb hwb &&
		[ "$(rdma link show | grep -c 'netdev hwb\b')" -eq 1 ]
}

# later: a veth created now (fa3 here, fa4 in a namespace) gets devices, and so does one
# called fa1 like the namespace's: its device takes the next name, rxe_fa1_1.
later() {
	ip link add fa3 type veth peer name fa4 netns "$NS1" && ip link add fa1 type veth peer name fz1 &&
		has rxe_fa3 && has rxe_fa4 && has rxe_fa1_1 && on_netdev "$NS1" rxe_fa4 fa4 &&
		on_netdev . rxe_fa1_1 fa1 && ! [ -e /sys/class/infiniband/rxe_fz1 ]
}

# renamed: a netdev renamed to a matching name gets a device.
renamed() {
	ip link add zz5 type dummy && looked_at_all && ! [ -e /sys/class/infiniband/rxe_zz5 ] &&
		ip link set zz5 name fa5 && has rxe_fa5
}

# looked_at_all: every look queued so far has run. Looks run one at a time, in order: a
# matching netdev made now gets its device after them.
looked_at_all() {
	ip link add fa9 type dummy && has rxe_fa9 && ip link del fa9 && gone rxe_fa9
}

# netdev_gone: deleting fa3 removes rxe_fa3 and its peer's rxe_fa4; deleting a namespace
# deletes its veth fa2, and with it the peer fa1: both devices go, rxe_fa1_1 stays.
netdev_gone() {
	ip link del fa3 && gone rxe_fa3 && gone rxe_fa4 && ip netns del "$NS2" && gone rxe_fa2 &&
		gone rxe_fa1 && has rxe_fa1_1
}

# moved: a netdev with a device that moves into another namespace gets a new device there,
# under the same name, on that namespace's UDP port 4791 (opened for it: nothing else there
# has a device).
moved() {
	local n old i ok=1
	n=$(dmesg | wc -l)
	if ! ip link add fa6 type veth peer name fz6 || ! has rxe_fa6; then
		echo "# no rxe_fa6"
	elif ip netns exec "$NS1" grep -qi ':12B7 ' /proc/net/udp; then
		echo "# port 4791 open in $NS1 before"
	else
		old=$(rdma dev show rxe_fa6 | cut -d: -f1)
		ip link set fa6 netns "$NS1"
		for i in $(seq 100); do
			[ "$(rdma dev show rxe_fa6 2>/dev/null | cut -d: -f1)" != "$old" ] &&
				link_is "$NS1" rxe_fa6 fa6 &&
				ip netns exec "$NS1" grep -qi ':12B7 ' /proc/net/udp && ok=0 && break
			sleep 0.2
		done
		[ $ok -eq 0 ] || echo "# no new rxe_fa6 (old index $old) on fa6 with port 4791 in $NS1"
	fi
	[ $ok -eq 0 ] || { ip netns exec "$NS1" rdma link; dmesg | tail -n +$((n + 1)); } |
		sed 's/^/# /'
	return $ok
}

# handed_back: unloading the stand-in gives hwa a device.
handed_back() {
	rmmod roce_standin && has rxe_hwa && on_netdev . rxe_hwa hwa
}

# taken_again: the stand-in loaded again takes hwa's device away (defer).
taken_again() {
	insmod "$STANDIN" netdev=hwa && gone rxe_hwa && has rxe_hwb
}

# lag_port_skipped: a port of a bond is not given a device when the stand-in behind it goes
# (the bond's name matches no glob: it gets no device, and no look of its own).
lag_port_skipped() {
	local ok=1
	ip link add zbond type bond && ip link set hwa down && ip link set hwa master zbond &&
		rmmod roce_standin && looked_at_all && ! [ -e /sys/class/infiniband/rxe_hwa ] && ok=0
	ip link del zbond
	ip link set hwa up
	return $ok
}

# unload: removing the module removes every device it made (the stand-in's stays).
unload() {
	modprobe -r rdma_rxe && ! rdma link show | grep -q 'rxe_' &&
		! ls /sys/class/infiniband | grep -q '^rxe_'
}

ktap_test_result "two veths in two namespaces get rxe_fa1 and rxe_fa2" namespaces
ktap_test_result "hwb gets a device; hwa (stand-in), lo and the VLAN hwb.7 do not" skipped
ktap_test_result "veths created later get devices; a second fa1 gets rxe_fa1_1" later
ktap_test_result "a netdev renamed to a matching name gets a device" renamed
ktap_test_result "a deleted netdev or namespace takes its devices along" netdev_gone
ktap_test_result "a netdev moved into a namespace gets its device there, on its sockets" moved
ktap_test_result "the stand-in unloaded: hwa gets a device" handed_back
ktap_test_result "the stand-in loaded again: hwa's device goes (defer)" taken_again
ktap_test_result "a bond's port handed back by the stand-in gets no device" lag_port_skipped
ktap_test_result "rmmod removes every provisioned device" unload

ktap_finished
