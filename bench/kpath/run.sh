#!/usr/bin/env bash
# kpath overhead, measured in one session (docs/BENCHMARKS.md, "kpath"): the three loop examples and
# the adversarial diamonds.c through
# bench/bench.py's kpath suites (bench/suites/kpath.py lists the configurations: native, BLPP, k-SF
# and kWF for k = 2, 4, 8, 16, clang -fprofile-instr-generate). Every configuration of an example
# runs REPS times, interleaved round-robin; the tables show median wall time and the ratios to
# native, BLPP and instr-gen measured in the same session.
#
# usage: bench/kpath/run.sh [BUILD_DIR] [REPS] [--instructions]
#        HCCT_BENCH_KPATH_EXTRA=1 adds guess policies, the no-fast-path build and the late stage.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build}
reps=${2:-5}
shift $(($# < 2 ? $# : 2))
uptime
exec python3 "$here/bench/bench.py" --build "$build" --rounds "$reps" "$@" kpath-masked_conv kpath-collatz kpath-lexer kpath-diamonds
