#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Quick compile check of the driver alone (M=, through the top-level Kbuild) against the built
# kernel; the output goes to the cache, not the checkout. The guest uses the in-tree build.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

step "build the driver (M=)"
build=$(cat "$FERROCE_CACHE/current-build" 2>/dev/null) || die "no kernel built yet (run make kernel)"
tree=$(cat "$FERROCE_CACHE/current-tree")
out="$FERROCE_CACHE/module-build"
mkdir -p "$out"
make -C "$tree" O="$build" LLVM="$LLVM_SUFFIX" M="$FERROCE_ROOT" MO="$out" CONFIG_RDMA_RXE=m modules \
	|| die "driver build failed"
ls -l "$out/drivers/infiniband/sw/ferroce/rdma_rxe.ko"
