#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Line and region coverage of the protocol files by their host tests (cargo test of
# tools/ferroce-proto, the fuzz stand-ins included), with the Rust toolchain's own LLVM tools
# (rustup component llvm-tools, installed if missing). Not part of make check: a report.
#   usage: scripts/coverage.sh [FILE-PATTERN]   (default: every file; e.g. 'window|responder')
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need rustup
rustup component list --installed 2>/dev/null | grep -q '^llvm-tools' ||
	rustup component add llvm-tools >&2 || die "rustup component add llvm-tools failed"
bin="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"
out="$FERROCE_CACHE/coverage"
rm -rf "$out" && mkdir -p "$out"
(cd "$FERROCE_ROOT/tools/ferroce-proto" &&
	RUSTFLAGS="-C instrument-coverage" LLVM_PROFILE_FILE="$out/p-%p-%m.profraw" \
		CARGO_TARGET_DIR="$out/target" cargo test --locked >"$out/test.log" 2>&1) ||
	{ tail -n 20 "$out/test.log" >&2; die "cargo test failed"; }
"$bin/llvm-profdata" merge -sparse "$out"/*.profraw -o "$out/all.profdata"
objects=()
for o in "$out"/target/debug/deps/ferroce_proto-* "$out"/target/debug/deps/fuzz_smoke-*; do
	[[ $o == *.d ]] || objects+=(-object "$o")
done
"$bin/llvm-cov" report "${objects[@]}" -instr-profile="$out/all.profdata" |
	grep -E "^Filename|${1:-proto/}|^TOTAL"
