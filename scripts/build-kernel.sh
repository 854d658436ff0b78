#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Configure and build the guest kernel with ferroce as rdma_rxe, plus the C rxe as an external
# module, into a cache dir keyed by source version and config. Prints the build dir.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

tree=$("$FERROCE_ROOT/scripts/overlay.sh")
fragment="$FERROCE_ROOT/scripts/kconfig/ferroce.config"
# FERROCE_KCONFIG_EXTRA: another fragment merged last (make bench uses bench.config).
extra=${FERROCE_KCONFIG_EXTRA:-}
[ -z "$extra" ] || [ -f "$extra" ] || die "no config fragment $extra"
need clang-19
need bindgen
need rustc

# The key covers everything that decides the .config: source, fragments, toolchain.
key=$({ echo "$tree"; cat "$fragment" $extra "$tree/arch/x86/configs/x86_64_defconfig" \
	"$tree/kernel/configs/kvm_guest.config"; clang-19 --version | head -n1; rustc --version;
	bindgen --version; } | sha256sum | cut -c1-12)
build="$FERROCE_CACHE/build/linux-$KVER-$key"
kmake=(make -C "$tree" O="$build" LLVM="$LLVM_SUFFIX" -j"$(($(nproc) + 1))")
# The check kernel's Rust goes through clippy, every warning an error: a Rust object in the build
# is then one that linted clean (kbuild rebuilds an object whose command changed), so make
# check needs no second, linting build. KRUSTFLAGS does not reach the proc macros (our patch
# edits rust/macros), the driver command does. make bench's kernel is built plain.
if [ -z "$extra" ]; then
	need clippy-driver
	kmake+=(CLIPPY=1 "CLIPPY_DRIVER=clippy-driver -Dwarnings" KRUSTFLAGS=-Dwarnings)
fi
mkdir -p "$build"

# config_mismatches FRAGMENT CONFIG: the fragment's lines that CONFIG does not honour.
config_mismatches() {
	local line opt out=""
	while read -r line; do
		case "$line" in
		CONFIG_*=*) grep -qxF "$line" "$2" || out+=" $line" ;;
		"# CONFIG_"*" is not set")
			opt=${line#\# }; opt=${opt%% *}
			! grep -qE "^$opt=[ym]" "$2" || out+=" $opt=n" ;;
		esac
	done <"$1"
	echo "${out# }"
}

if [ ! -f "$build/.ferroce-configured" ]; then
	step "configure the kernel"
	{
		"${kmake[@]}" x86_64_defconfig
		"$tree/scripts/kconfig/merge_config.sh" -m -O "$build" "$build/.config" \
			"$tree/kernel/configs/kvm_guest.config" "$fragment" $extra
		"${kmake[@]}" olddefconfig
	} >"$build/config.log" 2>&1 || { tail -n 20 "$build/config.log" >&2; die "kernel configuration failed"; }
	# Every option the fragment asks for must have survived olddefconfig.
	# The extra fragment wins over the main one for the options it names.
	expected="$build/expected.config"
	if [ -n "$extra" ]; then
		grep -vwF -f <(grep -oE 'CONFIG_[A-Z0-9_]+' "$extra") "$fragment" >"$expected" || true
		cat "$extra" >>"$expected"
	else
		cp "$fragment" "$expected"
	fi
	bad=$(config_mismatches "$expected" "$build/.config")
	[ -z "$bad" ] || die "config fragment not honoured: $bad"
	"${kmake[@]}" rustavailable >"$build/rust.log" 2>&1 || { cat "$build/rust.log" >&2; die "Rust is not available to kbuild"; }
	touch "$build/.ferroce-configured"
fi

step "build the kernel and modules"
start=$SECONDS
"${kmake[@]}" bzImage modules >"$build/build.log" 2>&1 \
	|| { grep -E -A8 '^error|Error [0-9]' "$build/build.log" | head -n 40 >&2; tail -n 5 "$build/build.log" >&2; die "kernel build failed (log: $build/build.log)"; }
echo "kernel build: $((SECONDS - start)) s" >&2
# The log is quiet otherwise: show warnings from what was just (re)built.
grep -E -A8 '^warning' "$build/build.log" | head -n 60 >&2 || true
[ -f "$build/drivers/infiniband/sw/ferroce/rdma_rxe.ko" ] || die "ferroce's rdma_rxe.ko was not built"

# objtool checked the driver when kbuild linked it (our configurations have IBT, so it runs on the
# linked module), but a warning only shows once, when the object is rebuilt. Check a copy again on
# every build, with kbuild's flags: a warning (code the unwinder cannot follow, such as a function
# that falls into the next) or an error fails it, as a lint does.
fdir="$build/drivers/infiniband/sw/ferroce"
oflags=$(sed -n 's|.*objtool/objtool \(.*\) drivers/infiniband/sw/ferroce/rdma_rxe\.o$|\1|p' \
	"$fdir/.rdma_rxe.o.cmd" | head -n 1)
[ -n "$oflags" ] || die "objtool does not check the linked driver ($fdir/.rdma_rxe.o.cmd): no CONFIG_X86_KERNEL_IBT?"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp "$fdir/ferroce.o" "$scratch/"
orc=0
oout=$("$build/tools/objtool/objtool" $oflags "$scratch/ferroce.o" 2>&1) || orc=$?
if [ "$orc" -ne 0 ] || grep -qE '(warning|error): objtool' <<<"$oout"; then
	echo "$oout" >&2
	die "objtool found fault with the driver (above; exit status $orc)"
fi

step "build the C rxe as an external module"
crxe="$build/rxe-c"
mkdir -p "$crxe"
rsync -rlc "$tree/drivers/infiniband/sw/rxe/" "$crxe/"
make -C "$tree" O="$build" LLVM="$LLVM_SUFFIX" M="$crxe" CONFIG_RDMA_RXE=m modules >"$build/rxe-c.log" 2>&1 \
	|| { tail -n 20 "$build/rxe-c.log" >&2; die "C rxe build failed"; }
[ -f "$crxe/rdma_rxe.ko" ] || die "C rxe's rdma_rxe.ko was not built"

# test_module DIR OUT MODULE: builds the selftests' module in DIR (under the ferroce selftests)
# into $build/OUT.
test_module() {
	local out="$build/$2"
	mkdir -p "$out"
	rsync -rlc "$tree/tools/testing/selftests/ferroce/$1/" "$out/"
	make -C "$tree" O="$build" LLVM="$LLVM_SUFFIX" M="$out" modules >"$out.log" 2>&1 \
		|| { tail -n 20 "$out.log" >&2; die "$3 build failed"; }
	[ -f "$out/$3.ko" ] || die "$3.ko was not built"
}

step "build the selftests' modules: a stand-in hardware RoCE device, a kernel verbs client"
test_module roce_standin roce-standin roce_standin
test_module kverbs kverbs ferroce_kverbs

echo "$build" >"$FERROCE_CACHE/current-build"
echo "$tree" >"$FERROCE_CACHE/current-tree"
# Keep one older build beside this one, for a quick switch back; drop the rest.
{ ls -dt "$FERROCE_CACHE"/build/linux-* | grep -vxF "$build" || true; } | tail -n +2 | xargs -r rm -rf
echo "$build"
