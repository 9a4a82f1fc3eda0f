#!/usr/bin/env bash
# Sets everything up, builds, and runs the main job on a bundled example: record the threaded C++
# example under libhcct, then report its hot calling contexts.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="$here/build"
"$here/scripts/setup.sh" "$build"

out=$(mktemp -d /tmp/hcct-demo.XXXXXX)
hcct="$build/tools/hcct/hcct"
echo "== hcct record -o $out -- examples/shapes 4 300000"
"$hcct" record -o "$out" -- "$build/examples/shapes" 4 300000
echo
echo "== hcct info $out"
"$hcct" info "$out"
echo
echo "== hcct report --phi 0.01 --merge-threads $out"
"$hcct" report --phi 0.01 --merge-threads "$out"
