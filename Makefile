# SPDX-License-Identifier: GPL-2.0
# ferroce developer harness. The kernel build itself happens in a cached, overlaid Linux tree
# (scripts/overlay.sh); see README.md.

SHELL := /bin/bash
S := scripts

.PHONY: all run check check-quick soak bench setup kernel module guest host-test clean-cache help

all: kernel

help:
	@echo "make run        build everything, boot a guest, load ferroce and show it working"
	@echo "make check      run every test; ends with 'N passed, N failed, N skipped'"
	@echo "make check-quick  host tests, the build and the fast guest suites (a few minutes)"
	@echo "make soak       loss, data and interop tests in loops, with pass counts (hours)"
	@echo "make bench      ferroce vs C rxe vs kernel TCP in one boot: table, JSON and PNG"
	@echo "make guest CMD='<shell command>'  run a command in the guest; exits with its status"
	@echo "make kernel     install the toolchain, fetch, overlay and build the kernel"
	@echo "make module     rebuild only the driver (M= against the built kernel)"
	@echo "make host-test  cargo test of the core-only protocol files"

setup:
	@$(S)/setup-toolchain.sh

kernel: setup
	@$(S)/build-kernel.sh >/dev/null

module: kernel
	@$(S)/build-module.sh

run: kernel
	@$(S)/guest.sh "$(CURDIR)/$(S)/demo.sh"

check: setup
	@FERROCE_QUICK= $(S)/check.sh

check-quick: setup
	@FERROCE_QUICK=1 $(S)/check.sh

soak: setup
	@$(S)/soak.sh

bench: setup
	@$(S)/bench.sh

guest: kernel
	@test -n "$(CMD)" || { echo "usage: make guest CMD='<shell command>'" >&2; exit 2; }
	@$(S)/guest.sh "$(CMD)"

host-test:
	cd tools/ferroce-proto && cargo test --locked

clean-cache:
	@. $(S)/lib.sh && rm -rf "$$FERROCE_CACHE/build" "$$FERROCE_CACHE/tree" "$$FERROCE_CACHE/runs" "$$FERROCE_CACHE/clippy"
