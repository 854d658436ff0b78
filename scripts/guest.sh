#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Boot the cached ferroce kernel under QEMU with the host's userspace and run one shell command.
# Streams the guest's output; exits with the command's status. A guest that outlives
# GUEST_TIMEOUT (seconds) is killed, QEMU and all, and the run fails.
#   usage: scripts/guest.sh '<shell command>'
# Environment: GUEST_TIMEOUT (default 900), GUEST_RWDIR (a host folder the guest may write),
# GUEST_CPUS (2), GUEST_MEM (2G), GUEST_QEMU_OPTS (extra QEMU options).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -eq 1 ] && [ -n "$1" ] || { echo "usage: $0 '<shell command>'" >&2; exit 2; }
# QEMU opens each output of the guest (console, the command's stdout and stderr) as a file of its
# own, truncated, each with an offset of its own: into one regular file they write over each
# other. So they go through pipes, drained before this exits (the traps below stay in force).
if [ -f /dev/stdout ] || [ -f /dev/stderr ]; then
	exec 3>&1 4>&2
	exec > >(exec cat >&3 3>&- 4>&-)
	out_cat=$!
	exec 2> >(exec cat >&4 3>&- 4>&-)
	err_cat=$!
	exec 3>&- 4>&-
	trap 'rc=$?; rm -rf "${mark:-}"; exec >&- 2>&-; wait "$out_cat" "$err_cat" || :; exit "$rc"' EXIT
else
	trap 'rm -rf "${mark:-}"' EXIT
fi
step "boot the guest"
need vng
need qemu-system-x86_64
build=$(cat "$FERROCE_CACHE/current-build" 2>/dev/null) || die "no kernel built yet (run make kernel)"
[ -f "$build/arch/x86/boot/bzImage" ] || die "no bzImage in $build (run make kernel)"

# KVM only where it works: /dev/kvm is there on machines whose CPU has no vmx/svm, and a KVM
# guest then spins forever while decompressing.
# A 16 MiB kernel log: the log checks read it from boot on, and must not lose its start.
# The root is the host's, over 9p, read-only. vng mounts it uncached, so every exec looks up
# and reads its binary and libraries through QEMU again: under TCG a cold tshark start spent
# 45 s reading its library, and ip 280 ms per run. The harness changes nothing on the host
# under a guest (results go to GUEST_RWDIR, a mount of its own, uncached; rebuilding while a
# guest runs was never safe), so the guest may cache it (cache=loose: a later rootflags
# overrides vng's). 9p is forced: vng would pick virtiofs where a virtiofsd is installed, and
# these flags are 9p's.
# The console goes to stderr (vng sends it nowhere otherwise) at log level 3: quiet but for
# critical lines such as "kernel BUG at", and an oops or a panic raises the level and prints in
# full, so a guest that dies says why (check.sh shows it). The boot's first lines come before the
# level is parsed.
# tsc=reliable: under TCG a vCPU that the host leaves waiting makes the clocksource watchdog
# call the TSC unstable; the switch to the HPET then patches sched_clock's static key while the
# other vCPU runs it, which oopsed a bench guest ("Oops: int3" in sched_clock_cpu), and reading
# the HPET would slow every clock read for the rest of the boot.
opts=(--run "$build" --cpus "${GUEST_CPUS:-2}" --memory "${GUEST_MEM:-2G}" --disable-microvm
	--force-9p --append log_buf_len=16M --verbose --append loglevel=3 --append tsc=reliable
	--append rootflags=version=9p2000.L,trans=virtio,access=any,msize=524288,cache=loose)
if [ -r /dev/kvm ] && [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then
	echo "guest: KVM" >&2
else
	echo "guest: TCG (no usable KVM: figures are ~50x slower than native)" >&2
	opts+=(--disable-kvm)
fi
[ -n "${GUEST_RWDIR:-}" ] && opts+=(--rwdir "$GUEST_RWDIR")
[ -n "${GUEST_QEMU_OPTS:-}" ] && opts+=("--qemu-opts=$GUEST_QEMU_OPTS")

timeout=${GUEST_TIMEOUT:-900}
# A kernel that dies while booting, before the command starts, is booted again (three boots at
# most). Under TCG, x86's live code patching (static keys: an int3 over the old instruction while
# the other CPU may run it) has killed about one boot in fifty, before any module was loaded:
# "Oops: int3" in the scheduler's or the clock's code. The command runs once: a failure after it
# started is its own, and so is a guest that hung (the watchdog's). The guest marks the start in
# a folder of its own (not under /tmp: a guest whose writable folder is there gets a fresh /tmp).
mkdir -p "$FERROCE_CACHE/runs"
mark=$(mktemp -d -p "$FERROCE_CACHE/runs" boot-XXXXXX)
opts+=(--rwdir "$mark")
pid=""
watchdog=""
trap 'kill -KILL -- "-$pid" 2>/dev/null || :; kill "$watchdog" 2>/dev/null || :; exit 130' INT
trap 'kill -KILL -- "-$pid" 2>/dev/null || :; kill "$watchdog" 2>/dev/null || :; exit 143' TERM

# boot: runs the guest once, killed after GUEST_TIMEOUT; returns the command's status.
boot() {
	local rc=0
	# A session of its own, so the watchdog can kill vng and QEMU together.
	setsid vng "${opts[@]}" --exec "touch $mark/started || exit 125; $1" </dev/null &
	pid=$!
	(
		# Poll, so the watchdog is gone a second after the guest, not when the timeout ends.
		for ((i = 0; i < timeout; i++)); do
			# Not holding the output pipes: killed with this subshell, it would hold them a second.
			sleep 1 >/dev/null 2>&1
			kill -0 "$pid" 2>/dev/null || exit 0
		done
		echo "ferroce: step \"run in the guest\" failed: guest timed out after ${timeout} s" >&2
		touch "$mark/timed-out"
		kill -TERM -- "-$pid" 2>/dev/null
		sleep 5
		kill -KILL -- "-$pid" 2>/dev/null
	) &
	watchdog=$!
	wait "$pid" || rc=$?
	kill "$watchdog" 2>/dev/null || true
	wait "$watchdog" 2>/dev/null || true
	# Nothing of this guest may outlive it.
	kill -KILL -- "-$pid" 2>/dev/null || true
	return "$rc"
}

rc=0
for n in 1 2 3; do
	rc=0
	boot "$1" || rc=$?
	[ "$rc" -ne 0 ] && [ ! -e "$mark/started" ] && [ ! -e "$mark/timed-out" ] || break
	echo "$BOOT_AGAIN (boot $n of 3)" >&2
done
exit "$rc"
