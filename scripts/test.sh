#!/usr/bin/env bash
# Sets everything up, builds, and runs the whole test suite under ctest.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="$here/build"
"$here/scripts/setup.sh" "$build"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 600
