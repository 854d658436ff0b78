#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The samples of one profile, from `perf report --stdio --no-children -n --sort dso,sym -q` on
# stdin (make bench; tested by scripts/harness_test.py): one line per symbol, busiest first,
# "count|module|[k] or [.]|symbol". Samples in the idle loop's halt or poll are not CPU time
# spent and are left out. Quotes, backslashes, ';' and '|' are dropped from names (the report's
# JSON and separators).
#   usage: perf-symbols.sh
set -euo pipefail
awk '$1 ~ /%$/ && $2 ~ /^[0-9]+$/ {
	# The module may hold spaces ("perftest (deleted)"): it ends before [k] or [.].
	for (w = 4; w < NF && $w != "[k]" && $w != "[.]"; w++)
		;
	if (w >= NF)
		next
	mod = $3
	for (i = 4; i < w; i++)
		mod = mod " " $i
	sym = $(w + 1)
	for (i = w + 2; i <= NF; i++)
		sym = sym " " $i
	if ($w == "[k]" && sym ~ /^(pv_)?native_safe_halt$|^acpi_safe_halt$|^default_idle(_call)?$|^acpi_idle_do_entry$|^intel_idle|^mwait_idle|^poll_idle$|^cpu_idle_poll$|^arch_cpu_idle$/)
		next
	gsub(/["\\;|]/, "", sym)
	gsub(/["\\;|]/, "", mod)
	print $2 "|" mod "|" $w "|" sym
}'
