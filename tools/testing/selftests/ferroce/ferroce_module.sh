#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma_rxe is ferroce: it loads, logs its version, unloads cleanly, and the kernel refuses to
# load the C rxe beside it (one module name). FERROCE_C_RXE names the C rxe's rdma_rxe.ko.

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"

cleanup() {
	modprobe -r rdma_rxe 2>/dev/null
}
trap cleanup EXIT

ktap_print_header
require modprobe modinfo insmod
ktap_set_plan 5

log_since() { dmesg | tail -n +"$(($1 + 1))"; }

modinfo_is_ferroce() {
	modinfo -F description rdma_rxe | grep -q '^ferroce:' &&
		modinfo -n rdma_rxe | grep -q '/ferroce/rdma_rxe.ko'
}
ktap_test_result "modinfo rdma_rxe names ferroce" modinfo_is_ferroce

load_logs_version() {
	local mark
	mark=$(dmesg | wc -l)
	modprobe rdma_rxe && [ -d /sys/module/rdma_rxe ] &&
		log_since "$mark" | grep -qE 'rdma_rxe: ferroce [0-9]+\.[0-9]+\.[0-9]+ loaded'
}
ktap_test_result "modprobe rdma_rxe loads ferroce and logs its version" load_logs_version

c_rxe_refused() {
	[ -f "$FERROCE_C_RXE" ] || return 1
	[ -d /sys/module/rdma_rxe ] || modprobe rdma_rxe || return 1
	local err
	err=$(insmod "$FERROCE_C_RXE" 2>&1) && return 1
	echo "$err" | grep -q 'File exists' && modinfo -F description rdma_rxe | grep -q '^ferroce:'
}
if [ -f "${FERROCE_C_RXE:-}" ]; then
	ktap_test_result "the C rxe cannot load beside ferroce" c_rxe_refused
else
	ktap_test_skip "the C rxe cannot load beside ferroce (FERROCE_C_RXE not set)"
fi

unload_logs() {
	local mark
	mark=$(dmesg | wc -l)
	modprobe -r rdma_rxe && [ ! -d /sys/module/rdma_rxe ] &&
		log_since "$mark" | grep -q 'rdma_rxe: ferroce .* unloaded'
}
ktap_test_result "modprobe -r rdma_rxe unloads cleanly" unload_logs

load_unload_cycles() {
	local i
	for i in $(seq 20); do
		modprobe rdma_rxe && modprobe -r rdma_rxe || return 1
	done
	[ ! -d /sys/module/rdma_rxe ]
}
ktap_test_result "20 load/unload cycles" load_unload_cycles

ktap_finished
