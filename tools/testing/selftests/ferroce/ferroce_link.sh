#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma link add/del of ferroce (rdma_rxe) devices, and their life with the netdev: the device
# rdma-core sees, port state and MTU following the netdev, cleanup on netdev delete, netns
# move/delete and rmmod, refusals, and create/delete cycles (10; 100 under make soak).

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"

NS=ferroce_link_ns
cleanup() {
	rdma link del fer0 2>/dev/null
	rdma link del fer1 2>/dev/null
	ip link del fv0 2>/dev/null
	ip link del fv2 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	modprobe -r rdma_rxe 2>/dev/null
}
trap cleanup EXIT

ktap_print_header
require rdma ibv_devinfo ibv_devices ip
ktap_set_plan 15

modprobe rdma_rxe || ktap_exit_fail_msg "modprobe rdma_rxe failed"
ip link add fv0 type veth peer name fv1 || ktap_exit_fail_msg "cannot create veth"
ip addr add 192.0.2.1/24 dev fv0
ip link set fv0 up
ip link set fv1 up

# wait_for CMD...: retries for up to 10 s (device removal is asynchronous).
wait_for() {
	local i
	for i in $(seq 50); do
		"$@" && return 0
		sleep 0.2
	done
	return 1
}
dev_exists() { rdma dev show "$1" >/dev/null 2>&1; }
dev_gone() { ! dev_exists "$1"; }
port_field() { ibv_devinfo -d "$1" -v 2>/dev/null | awk -v f="$2" '$1 == f":" {print $2; exit}'; }

create_shows_in_rdma_core() {
	rdma link add fer0 type rxe netdev fv0 || return 1
	rdma link show fer0/1 | grep -q 'netdev fv0' || return 1
	rdma dev show fer0 | grep -q 'node_type ca' || return 1
	ibv_devices | grep -q 'fer0' || return 1
	# librxe binds by driver id (the name is not "rxe*"), so this proves RDMA_DRIVER_RXE and ABI 2.
	ibv_devinfo -d fer0 | grep -q 'transport:.*InfiniBand' || return 1
	[ "$(port_field fer0 link_layer)" = Ethernet ]
}
ktap_test_result "rdma link add creates a device rdma-core drives" create_shows_in_rdma_core

port_active_with_roce_v2_gids() {
	wait_for sh -c "ibv_devinfo -d fer0 | grep -q 'state:.*PORT_ACTIVE'" || return 1
	[ "$(port_field fer0 active_mtu)" = "1024" ] || return 1
	# The IPv4 address appears as a RoCE v2 GID.
	wait_for sh -c "ibv_devinfo -d fer0 -v | grep -q 'GID\[.*\]:.*192.0.2.1, RoCE v2'"
}
ktap_test_result "port ACTIVE, MTU 1024, RoCE v2 GIDs from the netdev" port_active_with_roce_v2_gids

gid_present() { ibv_devinfo -d fer0 -v | grep -q "GID\[.*\]:.*$1, RoCE v2"; }
gids_follow_addresses() {
	ip addr add 2001:db8::1/64 dev fv0 nodad || return 1
	wait_for gid_present 2001:db8::1 || return 1
	ip addr del 192.0.2.1/24 dev fv0
	wait_for sh -c "! ibv_devinfo -d fer0 -v | grep -q '192.0.2.1, RoCE v2'" || return 1
	ip addr add 192.0.2.1/24 dev fv0
	ip addr del 2001:db8::1/64 dev fv0
	wait_for gid_present 192.0.2.1
}
ktap_test_result "RoCE v2 GIDs follow the netdev's IPv4 and IPv6 addresses" gids_follow_addresses

link_and_dev_agree() {
	rdma link show fer0/1 | grep -q 'state ACTIVE' &&
		rdma dev show fer0 | grep -q 'fer0:' &&
		rdma link show | grep -c 'fer0/1' | grep -qx 1
}
ktap_test_result "rdma link show and rdma dev show agree" link_and_dev_agree

port_follows_carrier() {
	ip link set fv1 down
	wait_for sh -c "ibv_devinfo -d fer0 | grep -q 'state:.*PORT_DOWN'" || return 1
	ip link set fv1 up
	wait_for sh -c "ibv_devinfo -d fer0 | grep -q 'state:.*PORT_ACTIVE'"
}
ktap_test_result "port state follows netdev carrier (down/up)" port_follows_carrier

mtu_follows_netdev() {
	ip link set fv0 mtu 9000 && ip link set fv1 mtu 9000 || return 1
	[ "$(port_field fer0 active_mtu)" = "4096" ] || return 1
	ip link set fv0 mtu 1500 && ip link set fv1 mtu 1500
	[ "$(port_field fer0 active_mtu)" = "1024" ]
}
ktap_test_result "active MTU follows the netdev MTU" mtu_follows_netdev

second_link_refused() {
	rdma link add fer1 type rxe netdev fv0 2>/dev/null && return 1
	dmesg | tail -n 5 | grep -q 'fv0 already has device fer0' && dev_gone fer1
}
ktap_test_result "a second link on the same netdev is refused" second_link_refused

vlan_refused() {
	ip link add link fv0 name fv0.10 type vlan id 10 || return 1
	local rc=0
	rdma link add fer1 type rxe netdev fv0.10 2>/dev/null && rc=1
	dmesg | tail -n 5 | grep -q 'refusing VLAN device fv0.10' || rc=1
	ip link del fv0.10
	return $rc
}
ktap_test_result "a VLAN netdev is refused" vlan_refused

non_ethernet_refused() {
	rdma link add fer1 type rxe netdev lo 2>/dev/null && return 1
	dmesg | tail -n 5 | grep -q 'refusing lo: not an Ethernet or IP device'
}
ktap_test_result "a non-Ethernet netdev (loopback) is refused" non_ethernet_refused

link_del_removes() {
	rdma link del fer0 && dev_gone fer0 && ! ibv_devices | grep -q fer0
}
ktap_test_result "rdma link del removes the device" link_del_removes

netdev_delete_removes() {
	ip link add fv2 type veth peer name fv3 && ip link set fv2 up || return 1
	rdma link add fer1 type rxe netdev fv2 || return 1
	ip link del fv2
	wait_for dev_gone fer1
}
ktap_test_result "deleting the netdev removes the device" netdev_delete_removes

netns_move_removes() {
	ip netns add "$NS" || return 1
	ip link add fv2 type veth peer name fv3 && ip link set fv2 up || return 1
	rdma link add fer1 type rxe netdev fv2 || return 1
	ip link set fv2 netns "$NS"
	wait_for dev_gone fer1 || return 1
	ip -n "$NS" link del fv2
}
ktap_test_result "moving the netdev to another netns removes the device" netns_move_removes

netns_delete_removes() {
	ip -n "$NS" link add fv4 type veth peer name fv5 && ip -n "$NS" link set fv4 up || return 1
	ip netns exec "$NS" rdma link add fer1 type rxe netdev fv4 || return 1
	wait_for dev_exists fer1 || return 1
	ip netns del "$NS"
	wait_for dev_gone fer1
}
ktap_test_result "deleting the netns removes its devices" netns_delete_removes

create_delete_cycles() {
	local i
	# A cycle costs ~1.6 s under TCG; a leaked reference shows after one (the module must unload).
	for i in $(seq "$CYCLES"); do
		rdma link add fer0 type rxe netdev fv0 || return 1
		rdma link del fer0 || return 1
	done
	dev_gone fer0
}
CYCLES=$(long 10 100)
ktap_test_result "$CYCLES create/delete cycles" create_delete_cycles

rmmod_with_devices() {
	rdma link add fer0 type rxe netdev fv0 || return 1
	ip link add fv2 type veth peer name fv3 && rdma link add fer1 type rxe netdev fv2 || return 1
	modprobe -r rdma_rxe || return 1
	dev_gone fer0 && dev_gone fer1 && [ ! -d /sys/module/rdma_rxe ]
}
ktap_test_result "rmmod with devices removes them all" rmmod_with_devices

ktap_finished
