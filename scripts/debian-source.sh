#!/usr/bin/env bash
# Fetches a Debian 12 source package once, unpacks its upstream tree (Debian patches not applied)
# into a cache, and prints the unpacked directory. Real-program tests and bench/real use it.
#
#   scripts/debian-source.sh PACKAGE            e.g. lua5.4, sqlite3, zstd, pigz
#
# Cache: $HCCT_SOURCE_CACHE (default ~/.cache/hcct/sources). Exit status 77 (ctest's skip code in
# this project) with one line on stderr when the package cannot be had: no deb-src access, no
# network to Debian's archive, or no dpkg-source.
set -euo pipefail
pkg=${1:?usage: debian-source.sh PACKAGE}
cache=${HCCT_SOURCE_CACHE:-"$HOME/.cache/hcct/sources"}
skip() { echo "debian-source: $pkg: $*; skipped" >&2; exit 77; }

mkdir -p "$cache"
# One fetch at a time per cache (parallel ctest runs share it).
exec 9>"$cache/.lock"
flock 9

if [ -f "$cache/$pkg.dir" ] && [ -d "$(cat "$cache/$pkg.dir")" ]; then
  cat "$cache/$pkg.dir"
  exit 0
fi

command -v apt-get >/dev/null || skip "apt-get not found"
command -v dpkg-source >/dev/null || {
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dpkg-dev >/dev/null 2>&1 ||
      skip "cannot install dpkg-dev"
  else
    skip "dpkg-source not found (install dpkg-dev)"
  fi
}

# A deb-src entry mirroring the binary one (Debian 12's deb822 sources file).
src_list=/etc/apt/sources.list.d/hcct-deb-src.sources
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ /etc/apt/sources.list 2>/dev/null &&
   ! grep -qs '^deb-src' /etc/apt/sources.list 2>/dev/null; then
  [ "$(id -u)" -eq 0 ] || skip "no deb-src entry and not root to add one"
  [ -f /etc/apt/sources.list.d/debian.sources ] || skip "no /etc/apt/sources.list.d/debian.sources to copy"
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$src_list"
  apt-get update -qq >/dev/null 2>&1 || skip "apt-get update failed (no network?)"
fi

work="$cache/$pkg.download"
rm -rf "$work"
mkdir -p "$work"
(cd "$work" && timeout 600 apt-get source -qq --download-only "$pkg" >/dev/null 2>&1) || {
  # The package lists may be stale or missing the source index: update once and retry.
  [ "$(id -u)" -eq 0 ] && apt-get update -qq >/dev/null 2>&1 || true
  (cd "$work" && timeout 600 apt-get source -qq --download-only "$pkg" >/dev/null 2>&1) ||
    skip "apt-get source failed"
}
dsc=$(ls "$work"/*.dsc 2>/dev/null | head -1)
[ -n "$dsc" ] || skip "no .dsc downloaded"
out="$cache/$(basename "$dsc" .dsc)"
rm -rf "$out"
# Upstream tree only (-x with --skip-patches): builds see the source as its authors ship it.
(cd "$work" && dpkg-source -x --skip-patches "$(basename "$dsc")" "$out" >/dev/null 2>&1) ||
  skip "dpkg-source -x failed"
rm -rf "$work" "$cache"/*.orig*.tar.* 2>/dev/null || true
echo "$out" >"$cache/$pkg.dir"
echo "$out"
