#!/usr/bin/env bash
# kpath overhead, measured in one session (docs/BENCHMARKS.md, "kpath"). Per example:
#   native            clang -O2
#   blpp              -fpass-plugin=kpath.so, HCCT_OPTIONS=k=1 (a counter per (function, path ID))
#   k=2,4,8,16        the same binary, k-window forest with that k (inline fast path on)
#   k8/k16-head, -mtf the same binary with the other guess policies (HCCT_KPATH_HINT; default: last)
#   k8-call           built with -kpath-fast-siblings=0: every path ID calls the runtime (no fast path)
#   late blpp / k=8   the plugin at OptimizerLast (HCCT_KPATH_STAGE=late)
#   instr-gen         clang -O2 -fprofile-instr-generate (LLVM's own edge/region counters)
# Each variant runs REPS times (interleaved round-robin, so drift hits all variants alike); the
# table shows the minimum wall time and its ratio to native, plus k=8/blpp and k=16/instr-gen.
#
# usage: bench/kpath/run.sh [BUILD_DIR] [REPS]    (BUILD_DIR holds kpath/kpath.so and libhcct/)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build-kpath}
reps=${2:-5}
clang=${CLANG:-clang-14}
plugin=$build/kpath/kpath.so
rtdir=$build/libhcct
out=$(mktemp -d /tmp/kpath-bench.XXXXXX)
trap 'rm -rf "$out"' EXIT
[[ -f $plugin && -f $rtdir/libhcct.so ]] || { echo "build $build first (targets hcct_kpath_plugin hcct_runtime_shared)" >&2; exit 1; }

# name | source | arguments
examples=(
  "masked_conv|masked_conv.c|1200 1600 6"
  "collatz|collatz.c|1500000"
  "lexer|lexer.c|8000000 4"
)

now() { date +%s%N; }
# Runs "$@" once, prints elapsed seconds.
timed() {
  local t0 t1
  t0=$(now)
  "$@" >/dev/null 2>&1
  t1=$(now)
  echo "scale=4; ($t1 - $t0) / 1000000000" | bc
}

printf "%-12s %-10s %9s %8s\n" example variant "min s" "x native"
for spec in "${examples[@]}"; do
  IFS='|' read -r name src args <<<"$spec"
  s=$here/examples/kpath/$src
  $clang -O2 "$s" -o "$out/$name.native"
  $clang -O2 -fpass-plugin="$plugin" "$s" -o "$out/$name.kpath" -L"$rtdir" -lhcct -Wl,-rpath,"$rtdir"
  HCCT_KPATH_FAST_SIBLINGS=0 $clang -O2 -fpass-plugin="$plugin" "$s" -o "$out/$name.call" -L"$rtdir" -lhcct -Wl,-rpath,"$rtdir"
  HCCT_KPATH_STAGE=late $clang -O2 -fpass-plugin="$plugin" "$s" -o "$out/$name.late" -L"$rtdir" -lhcct -Wl,-rpath,"$rtdir"
  $clang -O2 -fprofile-instr-generate "$s" -o "$out/$name.instr"
  variants=(native blpp k2 k4 k8 k16 k8-head k8-mtf k16-head k16-mtf k8-call late-blpp late-k8 instr-gen)
  declare -A best=()
  for ((r = 0; r < reps; r++)); do
    for v in "${variants[@]}"; do
      d=$out/data.$v
      case $v in
        native) cmd=("$out/$name.native") ;;
        blpp) cmd=(env HCCT_OPTIONS="k=1:out=$d" "$out/$name.kpath") ;;
        k*-head | k*-mtf) kk=${v%-*}; cmd=(env HCCT_KPATH_HINT="${v#*-}" HCCT_OPTIONS="k=${kk#k}:out=$d" "$out/$name.kpath") ;;
        k8-call) cmd=(env HCCT_OPTIONS="k=8:out=$d" "$out/$name.call") ;;
        k*) cmd=(env HCCT_OPTIONS="k=${v#k}:out=$d" "$out/$name.kpath") ;;
        late-blpp) cmd=(env HCCT_OPTIONS="k=1:out=$d" "$out/$name.late") ;;
        late-k8) cmd=(env HCCT_OPTIONS="k=8:out=$d" "$out/$name.late") ;;
        instr-gen) cmd=(env LLVM_PROFILE_FILE="$out/$name.profraw" "$out/$name.instr") ;;
      esac
      # shellcheck disable=SC2086
      t=$(timed "${cmd[@]}" $args)
      rm -rf "$d"
      if [[ -z ${best[$v]:-} ]] || (($(echo "$t < ${best[$v]}" | bc))); then best[$v]=$t; fi
    done
  done
  for v in "${variants[@]}"; do
    printf "%-12s %-10s %9.3f %8.2f\n" "$name" "$v" "${best[$v]}" "$(echo "scale=4; ${best[$v]} / ${best[native]}" | bc)"
  done
  printf "%-12s %-10s %9s %8.2f   (target <= 1)\n" "$name" "k8/blpp" "" "$(echo "scale=4; ${best[k8]} / ${best[blpp]}" | bc)"
  printf "%-12s %-10s %9s %8.2f   (target <= 2)\n" "$name" "k16/instr" "" "$(echo "scale=4; ${best[k16]} / ${best[instr-gen]}" | bc)"
  unset best
done
