#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Fetch and unpack the pinned Linux source (Debian linux-source-7.3) into the cache.
# Prints the path of the pristine tree. KSRC=<dir> names a tree of the user's own instead.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

if [ -n "${KSRC:-}" ]; then
	step "use kernel tree $KSRC"
	[ -f "$KSRC/Makefile" ] && [ -d "$KSRC/drivers/infiniband" ] || die "$KSRC is not a kernel tree"
	echo "$KSRC"
	exit 0
fi

src="$FERROCE_CACHE/src"
tree="$src/linux-$KVER"
if [ -f "$tree/.ferroce-pristine" ]; then
	echo "$tree"
	exit 0
fi

step "fetch $KPKG $KPKG_VERSION"
mkdir -p "$src"
deb="$src/${KPKG}_${KPKG_VERSION}_all.deb"
if [ ! -f "$deb" ]; then
	# A private sources list and lists dir: the system's apt configuration is left alone.
	apt_dir=$(mktemp -d)
	trap 'rm -rf "$apt_dir"' EXIT
	mirror=$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
		| grep -v security | awk '{print $2}' | head -n1 || true)
	mirror=${mirror:-http://deb.debian.org/debian}
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
	cat >"$apt_dir/sources.list" <<-SRC
	deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${mirror%/} $KPKG_SUITE main
	SRC
	opts=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
	      -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache::Archives="$apt_dir/archives"
	      -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root)
	apt-get -q "${opts[@]}" update >&2 || die "apt-get update for $KPKG_SUITE failed (package archive unreachable?)"
	# The SHA-256 that the signed index gives; a pinned value must agree with it.
	sum=$(apt-cache "${opts[@]}" show "$KPKG=$KPKG_VERSION" 2>/dev/null | awk '/^SHA256:/{print $2; exit}')
	[ -n "$sum" ] || die "$KPKG=$KPKG_VERSION is not in $KPKG_SUITE"
	if [ -n "$KPKG_SHA256" ] && [ "$sum" != "$KPKG_SHA256" ]; then
		die "archive lists SHA-256 $sum, pinned $KPKG_SHA256"
	fi
	(cd "$apt_dir/archives" && apt-get -q "${opts[@]}" download "$KPKG=$KPKG_VERSION" >&2) \
		|| die "download of $KPKG failed"
	got=$(sha256sum "$apt_dir/archives/"*.deb | awk '{print $1}')
	[ "$got" = "$sum" ] || die "checksum mismatch: got $got, want $sum"
	mv "$apt_dir/archives/"*.deb "$deb.tmp"
	mv "$deb.tmp" "$deb"
fi
if [ -n "$KPKG_SHA256" ]; then
	echo "$KPKG_SHA256  $deb" | sha256sum -c --quiet - >&2 || die "cached $deb fails its checksum"
fi

step "unpack $KPKG"
rm -rf "$tree" "$src/unpack"
mkdir -p "$src/unpack"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$src/unpack" --wildcards './usr/src/linux-source-*.tar.xz' \
	|| die "cannot read $deb"
tar -xJf "$src"/unpack/usr/src/linux-source-*.tar.xz -C "$src/unpack" || die "cannot unpack the source tarball"
mv "$src"/unpack/linux-source-7.3 "$tree"
rm -rf "$src/unpack"
grep -q "^SUBLEVEL = ${KVER##*.}\$" "$tree/Makefile" || die "unpacked tree is not $KVER"
touch "$tree/.ferroce-pristine"
echo "$tree"
