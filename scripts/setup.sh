#!/usr/bin/env bash
# Installs everything hcct needs from Debian 12's archive and builds it.
# Usage: scripts/setup.sh [BUILD_DIR]   (default: build)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$here/build"}

packages=(
  build-essential cmake g++ gcc-12-plugin-dev pkg-config  # toolchain, GCC plugin headers
  clang-14 llvm-14-dev libclang-rt-14-dev             # the LLVM 14 pass plugin (kpath)
  catch2                                              # unit tests (v2 API)
  libdw-dev libelf-dev                                # symbolization
  libcli11-dev nlohmann-json3-dev                     # CLI and JSON
  protobuf-compiler libprotobuf-dev golang-github-google-pprof-dev  # pprof export and its check
  graphviz valgrind python3                           # export checks and benchmarks
  uftrace                                             # the independent oracle of tests/real (Lua exact CCT)
  linux-perf                                          # the independent oracle of the time samples (e2e/time against perf)
  python3-jsonschema                                  # validates hcct export -f json against docs/*.schema.json
  help2man dpkg-dev                                   # man pages from --help; cpack -G DEB (dpkg-shlibdeps)
  npm chromium                                        # hcct view: d3-flame-graph vendored at configure time; its browser test
)
missing=()
for p in "${packages[@]}"; do
  # npm may come with a nodejs from elsewhere (NodeSource's bundles it, and conflicts with Debian's
  # npm package): the command is what the build needs.
  [ "$p" = npm ] && command -v npm >/dev/null && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages: ${missing[*]} (run as root, or install them)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"
