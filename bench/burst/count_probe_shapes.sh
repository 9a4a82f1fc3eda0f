#!/usr/bin/env bash
# The count probe's shapes on examples/calls' loop (bench/burst/count_probe_shapes.c): median CPU
# seconds (user + sys) of ROUNDS interleaved runs of each shape, and its ratio to shape 0 (native).
# Usage: count_probe_shapes.sh [ROUNDS] [N]   (defaults: 9, 100000000)
set -euo pipefail
rounds=${1:-9}
n=${2:-100000000}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shapes=(0 1 2 3)
for s in "${shapes[@]}"; do gcc -O2 -DSHAPE="$s" "$here/count_probe_shapes.c" -o "$work/shape$s"; done
for ((r = 0; r < rounds; ++r)); do
  for s in "${shapes[@]}"; do
    /usr/bin/time -o "$work/t" -f "%U %S" "$work/shape$s" "$n" >/dev/null
    echo "$s $(cat "$work/t")" >>"$work/times"
  done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/times" <<'PY'
import collections, statistics, sys
cpu = collections.defaultdict(list)
for line in open(sys.argv[1]):
    s, user, system = line.split()
    cpu[s].append(float(user) + float(system))
base = statistics.median(cpu["0"])
names = {"0": "no probe", "1": "entry subq, exit gate byte (the plugin's)", "2": "entry subq only",
         "3": "entry subq, exit tests the countdown"}
for s in sorted(cpu):
    m = statistics.median(cpu[s])
    print(f"shape {s} {names[s]:44s} CPU {m:.3f} s  x{m / base:.2f}  (range {min(cpu[s]):.2f}-{max(cpu[s]):.2f})")
PY
