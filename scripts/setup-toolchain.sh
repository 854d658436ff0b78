#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Install everything ferroce needs on a Debian bookworm machine, as root. A fast no-op when done.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# Build: LLVM 19 (bookworm's default clang 14 is too old for 7.3), kernel build deps.
# Guest: QEMU and the userspace the guest borrows from the host (rdma-core, perftest, iproute2,
# fio and nvme-cli for the storage tests).
PACKAGES=(
	clang-19 lld-19 llvm-19 libclang-19-dev
	make flex bison bc cpio kmod rsync xz-utils patch libelf-dev libssl-dev dwarves python3 python3-venv
	qemu-system-x86 busybox-static
	rdma-core ibverbs-utils ibverbs-providers libibverbs-dev rdmacm-utils perftest python3-pyverbs
	iproute2 iputils-ping iperf3 python3-matplotlib tcpdump tshark linux-perf
	fio nvme-cli
)
VIRTME_NG_VERSION=1.42

step "check the machine"
[ "$(id -u)" = 0 ] || die "run as root (apt-get and module builds need it)"
[ -r /etc/debian_version ] || die "not a Debian machine"

step "install Debian packages"
missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}" >&2
	apt-get update -q >&2 || die "apt-get update failed (package archive unreachable?)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
		|| die "apt-get install ${missing[*]} failed"
fi

step "install rust-src, rustfmt and clippy"
need rustup
need cargo
for c in rust-src rustfmt clippy; do
	rustup component list --installed 2>/dev/null | grep -q "^$c" \
		|| rustup component add "$c" >&2 || die "rustup component add $c failed"
done

step "install bindgen-cli $BINDGEN_VERSION"
if ! bindgen --version 2>/dev/null | grep -q "bindgen $BINDGEN_VERSION\$"; then
	cargo install --locked --root "$FERROCE_CACHE/tools" bindgen-cli --version "$BINDGEN_VERSION" >&2 \
		|| die "cargo install bindgen-cli failed"
fi

step "install virtme-ng $VIRTME_NG_VERSION"
venv="$FERROCE_CACHE/venv"
if ! "$venv/bin/vng" --version 2>/dev/null | grep -q "$VIRTME_NG_VERSION"; then
	rm -rf "$venv"
	/usr/bin/python3 -m venv "$venv" >&2 || die "python3 -m venv failed"
	"$venv/bin/pip" install -q "virtme-ng==$VIRTME_NG_VERSION" >&2 || die "pip install virtme-ng failed"
fi

step "check the kernel's Rust requirements"
need clang-19
need ld.lld-19
need bindgen
need qemu-system-x86_64
need vng
echo "toolchain ready" >&2
