#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The figure of one perftest run, from its output on stdin (make bench; tested by
# scripts/harness_test.py). Prints nothing when the run measured nothing.
#   usage: perftest-figure.sh TOOL SIZE SECONDS [TSC_MHZ]
# Bandwidth tools (duration mode, -D SECONDS+2 -f 1): Gb/s from the iterations completed in the
# sample window, which SIGALRM closes after exactly SECONDS of real time. perftest's own figure
# divides by TSC cycles converted with a frequency it fits against gettimeofday in each run;
# under TCG that fit fails now and then ("Correlation coefficient r^2: 0.88 < 0.9"), and with -F
# perftest then prints 0.000000 and exits 0, whichever driver it measures.
# Latency tools: t_typical, in microseconds; with TSC_MHZ the row is in cycles (-C), converted
# with the rate the kernel calibrated at boot, for the same reason. Atomic bandwidth
# (ib_atomic_bw): operations per second, in millions (Mop/s), from the same iterations.
set -euo pipefail
tool=$1 size=$2 secs=$3 mhz=${4:-}
# The result row starts with the message size.
if [[ $tool == ib_atomic_bw ]]; then
	awk -v s="$size" -v t="$secs" '$1 == s && NF >= 4 && $2 ~ /^[0-9]+$/ && $2 > 0 {
		printf "%.4f\n", $2 / t / 1e6; exit }'
elif [[ $tool == *_lat ]]; then
	awk -v s="$size" -v mhz="$mhz" '$1 == s && NF >= 5 && $5 ~ /^[0-9.]+$/ {
		if (mhz != "") printf "%.2f\n", $5 / mhz; else print $5; exit }'
else
	awk -v s="$size" -v t="$secs" '$1 == s && NF >= 4 && $2 ~ /^[0-9]+$/ && $2 > 0 {
		printf "%.3f\n", $2 * s * 8 / t / 1e9; exit }'
fi
