#!/usr/bin/env bash
# Checks an installed hcct the way its users meet it (docs/INSTALL.md): builds a CMake project with
# find_package(hcct) + hcct_instrument() (plain, GCC plugin, kpath) and a Makefile project with
# pkg-config, records each with PREFIX/bin/hcct and checks the report's counts.
# Usage: check_prefix.sh PREFIX WORKDIR
#   PREFIX /usr: the default search paths must find the package (no CMAKE_PREFIX_PATH/PKG_CONFIG_PATH).
# Environment: HCCT_EXPECT_GCC_PLUGIN=0|1, HCCT_EXPECT_KPATH=0|1 (what the build made),
#   HCCT_KPATH_CLANG, HCCT_KPATH_CLANGXX (the clang and clang++ kpath.so loads into).
set -euo pipefail
prefix=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
hcct="$prefix/bin/hcct"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# Runs a command with its output in $work/logs/NAME.log, shown when it fails.
step() {
  local name=$1
  shift
  if ! "$@" >"$work/logs/$name.log" 2>&1; then
    cat "$work/logs/$name.log" >&2
    fail "$name: $*"
  fi
}

# Nothing of the build tree may leak in: no runtime given by environment, no library path.
unset HCCT_RUNTIME LD_PRELOAD LD_LIBRARY_PATH HCCT_OPTIONS CMAKE_PREFIX_PATH PKG_CONFIG_PATH hcct_DIR
if [ "$prefix" != /usr ]; then
  export CMAKE_PREFIX_PATH="$prefix"
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
fi
mkdir -p "$work/logs"
cp -r "$here/app.c" "$here/cmake_project" "$here/make_project" "$work/"
runtime=$(realpath "$prefix/lib/libhcct.so")

# The installed hcct preloads the installed runtime, wherever the build tree is.
step env-record "$hcct" record --mode off -o "$work/env.data" -- /usr/bin/env
preloaded=$(sed -n 's/^LD_PRELOAD=//p' "$work/logs/env-record.log")
[ "$preloaded" = "$runtime" ] || fail "installed hcct record preloads '$preloaded', not $runtime"

# Records EXE with the installed hcct; the exact CCT must have main -> middle (7) -> leaf (7 * 1000).
check_recorded() {
  local name=$1 exe=$2
  # The program links the installed runtime (RPATH or runpath from find_package / hcct.pc).
  local linked
  linked=$(ldd "$exe" | sed -n 's/^[[:space:]]*libhcct\.so => \([^ ]*\) .*/\1/p')
  [ "$(realpath "$linked")" = "$runtime" ] || fail "$name: links '$linked', not $runtime"
  step "$name-record" "$hcct" record --mode cct --key routine -o "$work/$name.data" -- "$exe" 1000
  grep -q "^total 10496500$" "$work/logs/$name-record.log" || fail "$name: wrong program output"
  step "$name-report" "$hcct" report "$work/$name.data" --phi 0 --color never --width 0
  local report="$work/logs/$name-report.log"
  # Columns: total, its share, self (the context's own calls), its share.
  grep -Eq "^ *7,000 +[0-9.]+% +7,000 +[0-9.]+%  +hcct_install_leaf " "$report" ||
    { cat "$report" >&2; fail "$name: no hcct_install_leaf with 7000 calls"; }
  grep -Eq "^ *7,007 +[0-9.]+% +7 +[0-9.]+%  +hcct_install_middle " "$report" ||
    { cat "$report" >&2; fail "$name: no hcct_install_middle with 7 calls"; }
  echo "ok: $name"
}

# find_package(hcct) + hcct_instrument(app): -finstrument-functions.
step cmake-plain-configure cmake -S "$work/cmake_project" -B "$work/cmake-plain" -DAPP_PLUGIN=none
step cmake-plain-build cmake --build "$work/cmake-plain"
check_recorded cmake-plain "$work/cmake-plain/app"
# hcct::analysis reads what was recorded: main + 7 middle + 7000 leaf calls.
step cmake-plain-reader "$work/cmake-plain/reader" "$work/cmake-plain.data"
grep -q "^calls 7008$" "$work/logs/cmake-plain-reader.log" || fail "hcct::analysis reader: $(cat "$work/logs/cmake-plain-reader.log")"
echo "ok: cmake-plain-reader"

if [ "${HCCT_EXPECT_GCC_PLUGIN:-0}" = 1 ]; then
  step cmake-gcc-configure cmake -S "$work/cmake_project" -B "$work/cmake-gcc" -DAPP_PLUGIN=gcc -DAPP_STAGE=late -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++
  step cmake-gcc-build cmake --build "$work/cmake-gcc"
  check_recorded cmake-gcc "$work/cmake-gcc/app"
fi

# hcct_instrument refuses what cannot work, at configure time, with one message naming the target,
# the argument and what to do instead.
expect_refused() {  # NAME MESSAGE CMAKE-ARGS...
  local name=$1 message=$2
  shift 2
  if cmake -S "$work/cmake_project" -B "$work/refused-$name" "$@" >"$work/logs/refused-$name.log" 2>&1; then
    fail "hcct_instrument accepted $name: $*"
  fi
  grep -qF -- "$message" "$work/logs/refused-$name.log" ||
    { cat "$work/logs/refused-$name.log" >&2; fail "hcct_instrument refused $name without saying '$message'"; }
  echo "ok: refused $name"
}
expect_refused stage "hcct_instrument(app): STAGE 'middle' is not 'early' or 'late'" -DAPP_STAGE=middle
expect_refused plugin "hcct_instrument(app): PLUGIN 'llvm' is not 'gcc' or 'kpath'" -DAPP_PLUGIN=llvm
expect_refused late-with-gcc "hcct_instrument(app): STAGE late without a plugin needs clang" \
  -DAPP_STAGE=late -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++
if command -v clang >/dev/null && command -v clang++ >/dev/null; then
  if [ "${HCCT_EXPECT_GCC_PLUGIN:-0}" = 1 ]; then
    expect_refused gcc-plugin-with-clang "hcct_instrument(app): PLUGIN gcc needs gcc" \
      -DAPP_PLUGIN=gcc -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
  fi
fi
if [ "${HCCT_EXPECT_KPATH:-0}" = 1 ]; then
  expect_refused kpath-with-gcc "hcct_instrument(app): PLUGIN kpath needs clang" \
    -DAPP_PLUGIN=kpath -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++
fi

# pkg-config: cflags, libs and the plugin variable.
step make-plain make -C "$work/make_project" app CC=gcc
check_recorded make-plain "$work/make_project/app"
if [ "${HCCT_EXPECT_GCC_PLUGIN:-0}" = 1 ]; then
  step make-gcc make -C "$work/make_project" app_plugin CC=gcc
  check_recorded make-gcc "$work/make_project/app_plugin"
fi

# hcct_instrument(app PLUGIN kpath STAGE late) with the clang kpath.so was built for: path profiles.
if [ "${HCCT_EXPECT_KPATH:-0}" = 1 ]; then
  # hcct_instrument checks every enabled language's compiler: clang and clang++ of one version.
  kpath_clang=${HCCT_KPATH_CLANG:-clang}
  kpath_clangxx=${HCCT_KPATH_CLANGXX:-clang++}
  step cmake-kpath-configure cmake -S "$work/cmake_project" -B "$work/cmake-kpath" -DAPP_PLUGIN=kpath -DAPP_STAGE=late \
    "-DCMAKE_C_COMPILER=$kpath_clang" "-DCMAKE_CXX_COMPILER=$kpath_clangxx"
  step cmake-kpath-build cmake --build "$work/cmake-kpath"
  step kpath-run env HCCT_OPTIONS="k=1:out=$work/kpath.data" "$work/cmake-kpath/app" 1000
  step kpath-paths "$hcct" paths "$work/kpath.data" --function hcct_install_middle --min-share 0
  # 7 calls of 1000 iterations each: 7000 paths through its loop and exits.
  grep -Eq "^hcct_install_middle .*: 7,000 paths" "$work/logs/kpath-paths.log" ||
    { cat "$work/logs/kpath-paths.log" >&2; fail "kpath: not 7,000 paths of hcct_install_middle"; }
  echo "ok: cmake-kpath"
fi
