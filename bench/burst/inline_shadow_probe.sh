#!/usr/bin/env bash
# bench/burst/inline_shadow_probe.c's four probe shapes: instructions per call (callgrind, calls 24
# 1000000: 3,150,049 calls) and the median CPU time of ROUNDS interleaved runs of calls 30 20000000
# (61,692,537 calls). Usage: inline_shadow_probe.sh [ROUNDS]   (default 7)
set -euo pipefail
rounds=${1:-7}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc=${CC:-gcc}
"$cc" -O2 -fPIC -shared "$here/shadow_lane.c" -o "$work/libshadow_lane.so"
names=(native gate-closed lean-call inline-lane)
for shape in 0 1 2 3; do
  "$cc" -O2 -fPIE -pie -DSHAPE=$shape "$here/inline_shadow_probe.c" -o "$work/${names[$shape]}" \
    -L"$work" -lshadow_lane -Wl,-rpath,"$work"
done
declare -A ir
for name in "${names[@]}"; do
  ir[$name]=$(valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$work/$name" 24 1000000 2>&1 >/dev/null |
              sed -n 's/.*Collected : //p')
done
declare -A times
for ((r = 0; r < rounds; ++r)); do
  for name in "${names[@]}"; do
    /usr/bin/time -o "$work/time" -f "%U %S" "$work/$name" 30 20000000 >/dev/null 2>&1
    times[$name]+="$(awk '{print $1 + $2}' "$work/time") "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
base=$(echo "${times[native]}" | median)
printf "%-12s %14s %10s %9s %9s\n" shape "instructions" "per call" "CPU s" "x native"
for name in "${names[@]}"; do
  m=$(echo "${times[$name]}" | median)
  printf "%-12s %14s %10.1f %9.3f %9.3f\n" "$name" "${ir[$name]}" "$(echo "${ir[$name]} / 3150049" | bc -l)" "$m" \
    "$(echo "$m / $base" | bc -l)"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
