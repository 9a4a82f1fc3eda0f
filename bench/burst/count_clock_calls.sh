#!/usr/bin/env bash
# Issue 16's call-intensive example under plugin bursting: examples/calls.c built natively and with
# the GCC plugin's stage=late, once with the gate (the default probe) and once with clock=count
# (docs/BURSTING.md, "The count clock"); the median CPU time (user + sys) of ROUNDS interleaved runs
# of `calls 36 100000000` under each configuration, as a ratio to native.
# Usage: count_clock_calls.sh [BUILD_DIR] [ROUNDS]   (defaults: build, 7)
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
rounds=${2:-7}
here=$(cd "$(dirname "$0")/../.." && pwd)
plugin=$build/gcc-plugin/hcct_plugin.so
lib=$build/libhcct/libhcct.so
for f in "$plugin" "$lib"; do
  [ -e "$f" ] || { echo "count_clock_calls: $f is missing (build hcct_plugin and hcct_runtime_shared first)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc=${CC:-gcc}
"$cc" -O2 -g "$here/examples/calls.c" -o "$work/native"
"$cc" -O2 -g -fplugin="$plugin" -fplugin-arg-hcct_plugin-stage=late "$here/examples/calls.c" -o "$work/gate"
"$cc" -O2 -g -fplugin="$plugin" -fplugin-arg-hcct_plugin-stage=late -fplugin-arg-hcct_plugin-clock=count \
  "$here/examples/calls.c" -o "$work/count"
# label | binary | HCCT_OPTIONS (empty: run without the runtime)
configs=(
  "native|native|"
  "gate off|gate|mode=off"
  "gate burst auto (time clock)|gate|mode=hcct:burst=1:burst_sync=auto"
  "count off|count|mode=off"
  "count burst (default, f = 5 %)|count|mode=hcct:burst=1"
  "count burst f = 3.3 %|count|mode=hcct:burst=1:burst_interval=0.3:burst_length=0.01"
)
declare -A times
for ((r = 0; r < rounds; ++r)); do
  for c in "${configs[@]}"; do
    IFS='|' read -r label exe options <<<"$c"
    mkdir -p "$work/out"
    if [ -n "$options" ]; then
      env LD_PRELOAD="$lib" HCCT_OPTIONS="$options:out=$work/out" \
        /usr/bin/time -o "$work/time" -f "%U %S" "$work/$exe" 36 100000000 >/dev/null 2>&1
    else
      /usr/bin/time -o "$work/time" -f "%U %S" "$work/$exe" 36 100000000 >/dev/null 2>&1
    fi
    rm -rf "$work/out"
    times[$label]+="$(awk '{print $1 + $2}' "$work/time") "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
base=$(echo "${times[native]}" | median)
printf "%-36s %9s %9s\n" config "CPU s" "x native"
for c in "${configs[@]}"; do
  IFS='|' read -r label _ _ <<<"$c"
  m=$(echo "${times[$label]}" | median)
  printf "%-36s %9.3f %9.3f\n" "$label" "$m" "$(echo "$m / $base" | bc -l)"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
