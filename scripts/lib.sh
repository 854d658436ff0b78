# SPDX-License-Identifier: GPL-2.0
# Shared helpers for ferroce's scripts. Source it; do not run it.

FERROCE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The cache lives outside the checkout so a fresh clone reuses the kernel build. Not under
# /var/cache: virtme-ng hides that folder from the guest behind a tmpfs.
FERROCE_CACHE=${FERROCE_CACHE:-/var/lib/ferroce}
KVER=7.3.4
KPKG=linux-source-7.3
KPKG_VERSION=7.3.4-1~bpo13+1
KPKG_SUITE=trixie-backports
# SHA-256 of linux-source-7.3_7.3.4-1~bpo13+1_all.deb (as the signed archive index lists it).
KPKG_SHA256=${KPKG_SHA256:-703e369ddd4cce971452f5a593ee55df3a5c10c83caf0fa0df039633ed181ee3}
LLVM_SUFFIX=-19
BINDGEN_VERSION=0.72.1

export PATH="$FERROCE_CACHE/bin:$FERROCE_CACHE/tools/bin:${HOME:-/root}/.cargo/bin:/usr/lib/llvm-19/bin:$PATH:$FERROCE_CACHE/venv/bin"
export LIBCLANG_PATH=/usr/lib/llvm-19/lib

# step NAME: names the step that a later `die` reports.
step() {
	FERROCE_STEP=$1
	printf '==> %s\n' "$1" >&2
}

# die MESSAGE: one line naming the failed step, non-zero exit.
die() {
	printf 'ferroce: step "%s" failed: %s\n' "${FERROCE_STEP:-?}" "$*" >&2
	exit 1
}

need() {
	command -v "$1" >/dev/null 2>&1 || die "missing tool '$1' (run scripts/setup-toolchain.sh)"
}

# unlinted BUILD: of the kernel crate, the macros and the driver in BUILD, the objects clippy did not
# compile with every warning an error (see build-kernel.sh); nothing when all were.
unlinted() {
	local obj
	for obj in rust/kernel.o rust/libmacros.so drivers/infiniband/sw/ferroce/ferroce.o; do
		grep -qE '(^|[ /])clippy-driver .*-Dwarnings' \
			"$1/$(dirname "$obj")/.$(basename "$obj").cmd" 2>/dev/null || echo "$obj"
	done
}

# build_selftests TREE: builds the selftests' programs in place, where the guest runs them.
# OUTPUT is explicit: under make (make check), MAKELEVEL is set, and kselftest's lib.mk then
# leaves OUTPUT empty, which built them into / (a warm tree still had older ones).
build_selftests() {
	local dir="$1/tools/testing/selftests/ferroce" f
	make -s -C "$dir" OUTPUT="$dir" >&2 || return 1
	for f in $(sed -n 's/^TEST_GEN_FILES := //p' "$dir/Makefile"); do
		[ -x "$dir/$f" ] || { echo "ferroce: $f was not built in $dir" >&2; return 1; }
	done
}

# A guest console line's stamp, an extended regular expression (interop.sh sets such lines apart).
CONSOLE_STAMP='^\[ *[0-9]+\.[0-9]+\] '
# What guest.sh prints when it boots a guest again: the crash excerpt starts after it.
BOOT_AGAIN='guest: it ended before the command started'

# crash_excerpt LOG: what a guest's console said of its kernel's death (guest.sh shows the console
# on stderr, quiet until an oops or panic), from the first oops, BUG, Rust panic or kernel panic
# line on, at most 30 of the console's lines (stamped "[ seconds]", their CRs dropped); nothing
# when LOG shows none. The console is written a byte at a time into the same pipe as the
# script's output, so a line may come out split.
crash_excerpt() {
	# A boot that guest.sh started again is not the run's: only the last boot counts.
	STAMP=$CONSOLE_STAMP AGAIN=$BOOT_AGAIN awk '{sub(/\r$/, "")}
		index($0, ENVIRON["AGAIN"]) == 1 {n = 0; out = ""; next}
		$0 !~ ENVIRON["STAMP"] {next}
		!n && /(BUG:|Oops|general protection fault|panicked at|Kernel panic|kernel BUG at|Fatal exception)/ {n = 1}
		n && n++ <= 30 {out = out $0 "\n"}
		END {printf "%s", out}' "$1"
}

# crash_reason LOG CRASHES: "; its kernel said: <first line>" when LOG shows a guest kernel's
# death, whose excerpt (headed by LOG's name) is appended to the file CRASHES; nothing otherwise.
crash_reason() {
	local crash
	crash=$(crash_excerpt "$1")
	[ -n "$crash" ] || return 0
	printf '%s:\n%s\n' "$(basename "$1")" "$crash" >>"$2"
	echo "; its kernel said: $(echo "$crash" | head -1 | sed 's/^\[[^]]*\] //')"
}
