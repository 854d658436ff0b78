#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Kernel storage over ferroce, on one device that is both target and host, as blktests runs it
# on the C rxe. NVMe over Fabrics: an nvmet target exports a memory-backed null_blk over rdma
# and the NVMe host of the same kernel connects to it (nvme-rdma: kernel RC QPs, FRWR, remote
# invalidation by SEND_WITH_INV); fio writes blocks with a crc32c header and reads each back and
# checks it. Then the device is deleted in the middle of the I/O: the host must delete its
# controller and fail the I/O, nothing may hang, and a new device must carry NVMe again. RNBD
# (over rtrs) maps a null_blk the same way. Last, the target goes and every module unloads.
#
# Last on purpose, and run last in the check's guest: removing an nvmet port that served a
# connect takes nvmet_config_sem then an rdma_cm handler_mutex, the reverse of the order nvmet
# takes them in when a connect command beats its queue's ESTABLISHED event, and lockdep reports
# that (upstream's, with any RDMA device) and then stops checking for the rest of the boot.
# scripts/kernel-log-check.sh allows exactly that report.

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"
source "$(dirname "$0")/ferroce_lib.sh"

B=ferroce_nvme_peer
NQN=nqn.2026-11.org.ferroce:nvme-test
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:6f6a6c3e-6d1c-4d0a-9f4f-feffe0ce0001
HOSTID=6f6a6c3e-6d1c-4d0a-9f4f-feffe0ce0001
ADDR=10.74.0.1
NVMET=/sys/kernel/config/nvmet
NULLB=/sys/kernel/config/nullb
RNBD_CTL=/sys/class/rnbd-client/ctl
# Seconds of each fio run (the issue asks for at least 20).
RUNTIME=${FERROCE_NVME_RUNTIME:-20}

cleanup() {
	pkill -x fio 2>/dev/null
	nvme disconnect -n "$NQN" >/dev/null 2>&1
	target_down
	rnbd_unmap
	nullb_down ferroce_rnbd
	rdma link del fer0 2>/dev/null
	ip link del va 2>/dev/null
	ip netns del "$B" 2>/dev/null
	modprobe -r nvme_rdma nvmet_rdma nvmet rnbd_client rnbd_server null_blk 2>/dev/null
	modprobe -r rdma_rxe 2>/dev/null
}
trap cleanup EXIT

ktap_print_header
require rdma ip nvme fio timeout modprobe
ktap_set_plan 7

# device_up: fer0 (unless it is there) on va, a veth end in the initial namespace (nvme-rdma and nvmet-rdma resolve
# addresses there) with ADDR; its peer sits in B for the carrier.
device_up() {
	[ -e /sys/class/infiniband/fer0 ] && return 0
	modprobe rdma_rxe || return 1
	ip link show va >/dev/null 2>&1 || {
		ip netns add "$B" 2>/dev/null
		ip link add va type veth peer name vb netns "$B" &&
			ip addr add "$ADDR/24" dev va && ip link set va up &&
			ip -n "$B" link set vb up || return 1
	}
	rdma link add fer0 type rxe netdev va || return 1
	for _ in $(seq 50); do
		gid_index fer0 >/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# nullb_up NAME: /dev/NAME, a 256 MiB null_blk that keeps what is written.
nullb_up() {
	modprobe null_blk nr_devices=0 || return 1
	mkdir -p "$NULLB/$1" && echo 256 >"$NULLB/$1/size" && echo 4096 >"$NULLB/$1/blocksize" &&
		echo 1 >"$NULLB/$1/memory_backed" && echo 1 >"$NULLB/$1/power"
}

# nullb_down NAME: what nullb_up made.
nullb_down() {
	[ -d "$NULLB/$1" ] || return 0
	echo 0 >"$NULLB/$1/power" && rmdir "$NULLB/$1"
}

# target_up: a null_blk exported as namespace 1 of NQN on a wildcard rdma port (the listener
# follows devices as they come and go).
target_up() {
	nullb_up ferroce_nvme && modprobe nvmet && modprobe nvmet_rdma || return 1
	mkdir -p "$NVMET/subsystems/$NQN/namespaces/1" &&
		echo 1 >"$NVMET/subsystems/$NQN/attr_allow_any_host" &&
		echo /dev/ferroce_nvme >"$NVMET/subsystems/$NQN/namespaces/1/device_path" &&
		echo 1 >"$NVMET/subsystems/$NQN/namespaces/1/enable" || return 1
	mkdir -p "$NVMET/ports/1" && echo rdma >"$NVMET/ports/1/addr_trtype" &&
		echo ipv4 >"$NVMET/ports/1/addr_adrfam" && echo 0.0.0.0 >"$NVMET/ports/1/addr_traddr" &&
		echo 4420 >"$NVMET/ports/1/addr_trsvcid" &&
		ln -s "$NVMET/subsystems/$NQN" "$NVMET/ports/1/subsystems/$NQN"
}

# target_down: the configfs objects target_up made, in reverse.
target_down() {
	rm -f "$NVMET/ports/1/subsystems/$NQN" 2>/dev/null
	rmdir "$NVMET/ports/1" 2>/dev/null
	[ -d "$NVMET/subsystems/$NQN" ] && echo 0 >"$NVMET/subsystems/$NQN/namespaces/1/enable"
	rmdir "$NVMET/subsystems/$NQN/namespaces/1" "$NVMET/subsystems/$NQN" 2>/dev/null
	nullb_down ferroce_nvme
}

# host_up: nvme connect over rdma to ADDR; sets DEV to the namespace's block device. A lost
# controller gives up after 5 s (ctrl-loss-tmo) rather than the default ten minutes.
host_up() {
	local d
	modprobe nvme_rdma || return 1
	indented timeout 60 nvme connect -t rdma -a "$ADDR" -s 4420 -n "$NQN" -q "$HOSTNQN" \
		-I "$HOSTID" -l 5 -c 1 || return 1
	for _ in $(seq 100); do
		for d in /sys/block/nvme*; do
			[ "$(cat "$d/device/subsysnqn" 2>/dev/null)" = "$NQN" ] || continue
			DEV=/dev/${d##*/}
			[ -b "$DEV" ] && return 0
		done
		sleep 0.1
	done
	echo "# no block device for $NQN"
	return 1
}

# transport: the transport and address of NQN's controller, from sysfs.
transport() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$NQN" ] || continue
		echo "$(cat "$c/transport") $(cat "$c/address") $(cat "$c/state")"
		return 0
	done
	return 1
}

# fio_verify NAME BS DEPTH RW SECONDS: fio on DEV for SECONDS (or until it wrote the whole
# device once), each block written with a crc32c header (its offset and length too) and read
# back and checked every 16 blocks while the run goes on (verify_backlog), the first mismatch
# fatal. No block is written twice, so an older block in its place cannot pass for a lost
# write. True when fio succeeded and both wrote and read something back.
fio_verify() {
	local log=/tmp/ferroce_nvme_$1 rc=0
	timeout -k 5 $(($5 + 120)) fio --name="$1" --filename="$DEV" --ioengine=libaio \
		--direct=1 --rw="$4" --bs="$2" --iodepth="$3" --runtime="$5" \
		--verify=crc32c --verify_backlog=16 --verify_fatal=1 --verify_state_save=0 \
		--output-format=json >"$log.json" 2>"$log.err" || rc=$?
	sed 's/^/# /' "$log.err" | head -4
	[ "$rc" -eq 0 ] && fio_moved "$log.json"
}

# fio_moved JSON: fio's job wrote and read back data without error (a line of figures shown).
fio_moved() {
	python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
w, r = j["write"], j["read"]
print("# %s: wrote %d MiB (%.0f IOPS), read back %d MiB, %.1f s, error %d" % (j["jobname"],
      w["io_bytes"] >> 20, w["iops"], r["io_bytes"] >> 20, j["job_runtime"] / 1000, j["error"]))
sys.exit(j["error"] != 0 or w["io_bytes"] == 0 or r["io_bytes"] == 0)' "$1"
}

# connect_and_check: fer0, the target and the host; the namespace is there, over rdma.
connect_and_check() {
	device_up && target_up && host_up || return 1
	echo "# $DEV: $(transport) $(($(blockdev --getsize64 "$DEV") >> 20)) MiB"
	[ "$(transport | cut -d' ' -f1)" = rdma ] &&
		[ "$(blockdev --getsize64 "$DEV")" -eq $((256 << 20)) ]
}
ktap_test_result "nvmet exports a null_blk over rdma on fer0; nvme connect -t rdma reaches it" \
	connect_and_check

ktap_test_result "fio 4 KiB random writes, each read back and checked (crc32c), ${RUNTIME} s" \
	fio_verify rand4k 4k 16 randwrite "$RUNTIME"
ktap_test_result "fio 1 MiB sequential writes, each read back and checked (crc32c), ${RUNTIME} s" \
	fio_verify seq1m 1M 4 write "$RUNTIME"

# link_del_under_io: fio runs, fer0 is deleted under it. nvme-rdma deletes the controller of a
# removed device: the I/O must fail (fio exits with an error) and the controller must be gone
# within the ULP's own timeouts; `rdma link del` itself must return.
link_del_under_io() {
	local fio_pid t0 rc=0 left w0 w1 stat
	[ -b "${DEV:-}" ] || { echo "# not connected"; return 1; }
	stat=/sys/block/${DEV#/dev/}/stat
	timeout -k 5 400 fio --name=cut --filename="$DEV" --ioengine=libaio --direct=1 \
		--rw=randrw --bs=4k --iodepth=16 --time_based --runtime=300 \
		>/tmp/ferroce_nvme_cut.log 2>&1 &
	fio_pid=$!
	# The cut must come with I/O in flight: wait until sectors are seen being written.
	w0=$(awk '{print $7}' "$stat")
	for _ in $(seq 300); do
		sleep 0.1
		w1=$(awk '{print $7}' "$stat")
		[ "$w1" -gt $((w0 + 64)) ] && break
	done
	[ "$w1" -gt $((w0 + 64)) ] || { echo "# fio wrote nothing"; kill "$fio_pid"; return 1; }
	sleep 1
	t0=$SECONDS
	timeout 60 rdma link del fer0 || { echo "# rdma link del failed or hung"; return 1; }
	echo "# rdma link del returned in $((SECONDS - t0)) s"
	wait "$fio_pid" || rc=$?
	echo "# fio ended $((SECONDS - t0)) s after it, exit $rc: $(grep -om1 'err=[^,]*' /tmp/ferroce_nvme_cut.log)"
	for _ in $(seq 100); do
		transport >/dev/null || break
		sleep 0.1
	done
	left=$(transport)
	[ -z "$left" ] || { echo "# controller left: $left"; return 1; }
	# The 300 s run was cut short by errors within the host's own timeouts (it gives up a
	# controller whose device went at once; ctrl-loss-tmo is 5 s), not by timeout(1).
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && [ $((SECONDS - t0)) -lt 30 ]
}
ktap_test_result "rdma link del under fio: the host drops its controller, the I/O fails, nothing hangs" \
	link_del_under_io

# again: a new fer0; the target, still listening on its wildcard port, serves it; the host
# connects, fio checks 5 s of writes, and nvme disconnect takes the controller away.
again() {
	device_up && host_up || return 1
	echo "# $DEV: $(transport)"
	fio_verify again 4k 16 randwrite 5 || return 1
	indented timeout 60 nvme disconnect -n "$NQN" || return 1
	! transport >/dev/null || { echo "# the controller outlived nvme disconnect"; return 1; }
}
ktap_test_result "a new device carries NVMe-oF again: connect, fio checks it, nvme disconnect" again

# rnbd_unmap: every RNBD device the client mapped goes.
rnbd_unmap() {
	local d
	for d in /sys/block/rnbd*; do
		[ -e "$d/rnbd/unmap_device" ] && echo normal >"$d/rnbd/unmap_device"
	done
	return 0
}

# rnbd: the RNBD client maps a null_blk the RNBD server exports, both over fer0 (rtrs: kernel
# RC QPs, FRWR, WRITE with immediate); fio checks it; unmap, and the RNBD modules unload.
rnbd() {
	local m d
	device_up && nullb_up ferroce_rnbd && modprobe rnbd_server && modprobe rnbd_client || return 1
	echo "sessname=ferroce path=ip:$ADDR device_path=/dev/ferroce_rnbd access_mode=rw" \
		>"$RNBD_CTL/map_device" || { echo "# map_device refused"; return 1; }
	DEV=
	for d in /sys/block/rnbd*; do
		[ -e "$d" ] && DEV=/dev/${d##*/}
	done
	[ -b "$DEV" ] || { echo "# no rnbd block device"; return 1; }
	echo "# $DEV: session $(cat "/sys/block/${DEV#/dev/}/rnbd/session" 2>/dev/null)," \
		"$(($(blockdev --getsize64 "$DEV") >> 20)) MiB"
	fio_verify rnbd 4k 16 randwrite 10 || return 1
	rnbd_unmap
	[ ! -b "$DEV" ] || { echo "# $DEV outlived its unmap"; return 1; }
	nullb_down ferroce_rnbd
	for m in rnbd_client rnbd_server rtrs_client rtrs_server rtrs_core; do
		timeout 60 modprobe -r "$m" || { echo "# modprobe -r $m failed"; return 1; }
	done
}
ktap_test_result "RNBD over rtrs maps a null_blk through fer0, fio checks it (10 s), unmap and unload" rnbd

# teardown: the target's configfs objects, the device, then every module unloads.
teardown() {
	local m
	target_down
	rdma link del fer0 || return 1
	for m in nvme_rdma nvmet_rdma nvmet null_blk nvme_fabrics nvme_core rdma_rxe; do
		timeout 60 modprobe -r "$m" || { echo "# modprobe -r $m failed"; return 1; }
	done
	! lsmod | grep -qE '^(nvme|nvmet|null_blk|rnbd|rtrs|rdma_rxe)'
}
ktap_test_result "target teardown, rdma link del, and every module unloads" teardown

ktap_finished
