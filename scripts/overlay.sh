#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Lay ferroce's files and patches over a copy of the pristine kernel tree; print the tree's path.
# Incremental: a file whose content did not change keeps its mtime, so make rebuilds only what did.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

pristine=$("$FERROCE_ROOT/scripts/fetch-kernel.sh")
tree="$FERROCE_CACHE/tree/$(basename "$pristine")-$(echo "$pristine" | sha256sum | cut -c1-8)"
stage="$FERROCE_CACHE/stage"

step "copy the pristine tree"
if [ ! -f "$tree/.ferroce-tree" ]; then
	rm -rf "$tree"
	mkdir -p "$(dirname "$tree")"
	cp -a "$pristine" "$tree.tmp" || die "cannot copy $pristine"
	rm -f "$tree.tmp/.ferroce-pristine"
	touch "$tree.tmp/.ferroce-tree"
	mv "$tree.tmp" "$tree"
fi

step "stage ferroce files and patches"
rm -rf "$stage"
mkdir -p "$stage"
cd "$FERROCE_ROOT"
# Our new files: everything tracked (or new and not ignored) under the kernel-tree folders.
git ls-files -co --exclude-standard -- drivers rust tools/testing Documentation \
	| while read -r f; do [ -f "$f" ] && echo "$f"; done >"$stage.files"
rsync -a --files-from="$stage.files" "$FERROCE_ROOT/" "$stage/" || die "cannot stage our files"
# Edits to existing kernel files: patches applied to pristine copies, in order.
for p in "$FERROCE_ROOT"/scripts/patches/*.patch; do
	[ -e "$p" ] || continue
	for f in $(sed -n 's#^+++ b/\([^[:space:]]*\).*#\1#p' "$p"); do
		if [ ! -e "$stage/$f" ] && [ -e "$pristine/$f" ]; then
			mkdir -p "$stage/$(dirname "$f")"
			cp -p "$pristine/$f" "$stage/$f"
		fi
		echo "$f" >>"$stage.files"
	done
	patch -s -p1 -d "$stage" --no-backup-if-mismatch -r - <"$p" >&2 || die "patch $(basename "$p") does not apply"
done
sort -u "$stage.files" -o "$stage.files"

step "sync into $tree"
# -c: compare content, not times; no -t: a rewritten file gets a new mtime and is rebuilt.
rsync -rlc --files-from="$stage.files" "$stage/" "$tree/" || die "rsync into the tree failed"
# Files we overlaid before but no longer ship go back to pristine (or away, if they are ours).
manifest="$tree/.ferroce-manifest"
if [ -f "$manifest" ]; then
	comm -23 "$manifest" "$stage.files" | while read -r f; do
		if [ -e "$pristine/$f" ]; then cp "$pristine/$f" "$tree/$f"; else rm -f "$tree/$f"; fi
	done
fi
cp "$stage.files" "$manifest"
rm -f "$stage.files"
echo "$tree"
