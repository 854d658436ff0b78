#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Inside a guest, after its tests: kmemleak finds nothing, and the kernel log from boot on has no
# warning, bug, lockdep report or sanitizer report. Prints two result lines for check_summary.py:
# "pass|fail kernel-log NAME/kmemleak" and "... NAME/log".
#   usage: kernel-log-check.sh NAME
set -uo pipefail
name=$1
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

# kmemleak only reports what a scan found; a scan that cannot run (kmemleak disabled itself,
# say, after an internal error) must not read as "no leaks".
if [ ! -w /sys/kernel/debug/kmemleak ]; then
	echo "# kmemleak: not available" >&2
	echo "fail kernel-log $name/kmemleak (not available)"
elif dmesg | grep -q 'kmemleak: .*disabled'; then
	dmesg | grep 'kmemleak' | tail -n 3 | sed 's/^/# /' >&2
	echo "fail kernel-log $name/kmemleak (kmemleak disabled itself)"
elif ! echo scan >/sys/kernel/debug/kmemleak 2>/dev/null; then
	echo "fail kernel-log $name/kmemleak (scan failed)"
else
	# The first scan only records each object's checksum; the second reports what stayed
	# unreferenced and unchanged (objects younger than 5 s are never reported).
	sleep 2
	if ! echo scan >/sys/kernel/debug/kmemleak 2>/dev/null; then
		echo "fail kernel-log $name/kmemleak (the second scan failed)"
	elif leaks=$(cat /sys/kernel/debug/kmemleak) && [ -z "$leaks" ]; then
		echo "pass kernel-log $name/kmemleak"
	else
		echo "$leaks" | head -n 40 | sed 's/^/# /' >&2
		echo "fail kernel-log $name/kmemleak ($(echo "$leaks" | grep -c '^unreferenced object') objects)"
	fi
fi

# Lockdep's reports start "WARNING: possible circular locking ..." (or inconsistent lock state,
# suspicious RCU usage); the bare word "lockdep" is in a boot banner ("RCU lockdep checking is
# enabled") and must not match.
# A hung task reads "INFO: task ... blocked (in I/O wait) for more than"; an RCU stall "rcu: INFO:
# ... detected (expedited) stalls" or "self-detected stall".
# One report is allowed, upstream's and not a driver's: see kernel_log_filter.py (ferroce_storage.sh
# runs last, since lockdep stops checking after its first report).
log=$(dmesg | python3 "$(dirname "$0")/kernel_log_filter.py")
bad=$(echo "$log" | grep -E 'WARNING:|BUG:|Oops|Call Trace|DEBUG_LOCKS_WARN_ON|UBSAN|KASAN|soft lockup|blocked (in I/O wait )?for more than|detected (expedited )?stalls|self-detected stall' || true)
if [ -n "$bad" ]; then
	echo "$bad" | head -n 40 | sed 's/^/# /' >&2
	echo "fail kernel-log $name/log (WARN/BUG/lockdep in the kernel log, from boot on)"
# The log must still begin at boot: a ring buffer that wrapped (or a dmesg -C) lost its start,
# and with it what a check of the whole log is for.
elif ! dmesg | sed -n '1,5p' | grep 'Linux version' >/dev/null; then
	echo "fail kernel-log $name/log (the kernel log no longer starts at boot: its start is lost)"
else
	echo "pass kernel-log $name/log"
fi
