#!/usr/bin/env bash
# ctest "package" (label package): `cpack -G DEB`, `dpkg -i` the package, the installed /usr tree
# checked as its users meet it (check_prefix.sh), then `dpkg -r`. Exit 77 (SKIPPED) with one line
# when not root, when dpkg or cpack's tools are missing, or when an hcct package is installed
# already (it is not ours to replace).
# Usage: package_test.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "SKIPPED: dpkg -i needs root"; exit 77; }
for tool in dpkg dpkg-deb dpkg-shlibdeps cpack pkg-config make ldd; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed"; exit 77; }
done
if dpkg-query -W -f='${Status}' hcct 2>/dev/null | grep -q "installed"; then
  echo "SKIPPED: a package hcct is installed already"
  exit 77
fi
for f in /usr/bin/hcct /usr/lib/libhcct.so; do
  [ -e "$f" ] && { echo "SKIPPED: $f exists (not from a package hcct)"; exit 77; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hcct-package-test.XXXXXX")
installed=0
cleanup() {
  if [ "$installed" = 1 ]; then dpkg --purge hcct >"$tmp/remove.log" 2>&1 || cat "$tmp/remove.log" >&2; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

if ! (cd "$build" && cpack -G DEB -B "$tmp/pkg") >"$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log" >&2
  echo "FAIL: cpack -G DEB" >&2
  exit 1
fi
deb=$(ls "$tmp"/pkg/hcct_*.deb)
echo "package: $(basename "$deb")"
dpkg-deb -f "$deb" Depends Recommends
# The CLI's libraries are declared (dpkg-shlibdeps).
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libdw1 libelf1 libc6; do
  [[ "$depends" == *"$lib"* ]] || { echo "FAIL: Depends lacks $lib: $depends" >&2; exit 1; }
done

installed=1
if ! dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1; then
  cat "$tmp/dpkg.log" >&2
  echo "FAIL: dpkg -i $deb" >&2
  exit 1
fi
"$here/check_prefix.sh" /usr "$tmp/work"

dpkg -r hcct >"$tmp/remove.log" 2>&1 || { cat "$tmp/remove.log" >&2; echo "FAIL: dpkg -r hcct" >&2; exit 1; }
installed=0
[ ! -e /usr/bin/hcct ] || { echo "FAIL: /usr/bin/hcct left after dpkg -r" >&2; exit 1; }
dpkg --purge hcct >/dev/null 2>&1 || true  # no trace left in dpkg's database either
echo "ok: package installed, checked and removed"
