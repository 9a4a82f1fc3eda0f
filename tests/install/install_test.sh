#!/usr/bin/env bash
# ctest "install" (label install): `cmake --install BUILD --prefix <fresh temp dir>`, then the
# installed tree checked as its users meet it (check_prefix.sh). Exit 77 (SKIPPED) with one line
# when a tool outside hcct is missing.
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
for tool in pkg-config make ldd; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hcct-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

if ! cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2
  echo "FAIL: cmake --install $build --prefix $prefix" >&2
  exit 1
fi

# What the install must hold.
expected=(bin/hcct lib/libhcct.so lib/libhcct.a lib/libhcct_analysis.a include/hcct/hcct.h
  include/hcct/oracle.h include/hcct/format.h include/hcct/guide_format.h include/hcct/analysis/reader.h include/hcct/kpath/metadata.h
  lib/cmake/hcct/hcctConfig.cmake lib/cmake/hcct/hcctConfigVersion.cmake lib/cmake/hcct/hcctTargets.cmake
  lib/cmake/hcct/hcctInstrument.cmake lib/pkgconfig/hcct.pc share/doc/hcct/help/hcct-record.txt
  share/doc/hcct/INSTALL.md)
[ "${HCCT_EXPECT_GCC_PLUGIN:-0}" = 1 ] && expected+=(lib/hcct/hcct_plugin.so)
[ "${HCCT_EXPECT_KPATH:-0}" = 1 ] && expected+=(lib/hcct/kpath.so)
[ "${HCCT_EXPECT_MAN:-0}" = 1 ] && expected+=(share/man/man1/hcct.1 share/man/man1/hcct-record.1)
for f in "${expected[@]}"; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $prefix/$f was not installed" >&2; exit 1; }
done
# The installed hcct must preload the installed runtime, not the build tree's: check_prefix.sh.
"$here/check_prefix.sh" "$prefix" "$tmp/work"
