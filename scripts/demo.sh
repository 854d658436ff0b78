#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The main job, inside the guest: load ferroce as rdma_rxe and show what it does so far.
set -uo pipefail
export PATH=/usr/sbin:/sbin:$PATH

echo "== kernel $(uname -r)"
echo "== modinfo rdma_rxe"
modinfo rdma_rxe | grep -E '^(filename|description|license|name|alias):'
echo "== modprobe rdma_rxe"
modprobe rdma_rxe || { echo "modprobe rdma_rxe failed"; exit 1; }
dmesg | grep -E 'rdma_rxe|ferroce' | tail -n 5
lsmod | grep -E '^rdma_rxe'

echo "== rdma link add fer0 type rxe netdev veth0 (and fer1 on its peer, in namespace demo)"
ip netns add demo
ip link add veth0 type veth peer name veth1 netns demo
ip addr add 192.0.2.1/24 dev veth0
ip -n demo addr add 192.0.2.2/24 dev veth1
ip link set veth0 up
ip -n demo link set veth1 up
rdma link add fer0 type rxe netdev veth0 || { echo "rdma link add failed"; exit 1; }
ip netns exec demo rdma link add fer1 type rxe netdev veth1 || { echo "rdma link add failed"; exit 1; }
rdma link show
rdma dev show fer0
echo "== ibv_devices"
ibv_devices
echo "== ibv_devinfo -v -d fer0"
ibv_devinfo -v -d fer0 | grep -vE '^\s+(max_|page_size|fw_ver|hw_ver)' | head -n 40
echo "== rping -C 10 -v -V between fer0 and fer1"
rping -s -a 192.0.2.1 -C 10 -V >/dev/null 2>&1 &
srv=$!
sleep 2
ip netns exec demo rping -c -a 192.0.2.1 -C 10 -v -V; rc=$?
wait "$srv" || rc=1
[ "$rc" -eq 0 ] || { echo "rping failed"; exit 1; }
rdma statistic show link fer0/1 | tr ' ' '\n' | paste - - | grep -E 'sent_pkts|rcvd_pkts' | tr '\n' ' '
echo
ip netns exec demo rdma link del fer1
rdma link del fer0
ip netns del demo

echo "== modprobe -r rdma_rxe"
modprobe -r rdma_rxe || { echo "unload failed"; exit 1; }
dmesg | grep -E 'ferroce' | tail -n 1
echo "== done"
