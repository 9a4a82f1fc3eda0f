#!/usr/bin/env bash
# Measures the cost of the plugin's probes with the gate closed against other gate schemes and
# against -finstrument-functions with empty hooks. Usage:
#   gate_bench.sh PATH/TO/hcct_plugin.so [fib argument for timing, default 38]
# Prints, per variant, instructions per call of the benchmark function (callgrind on fib(25): exact
# and noise-free) and the best of 5 wall-clock times of fib(N), in nanoseconds per call.
set -euo pipefail
plugin=$(realpath "$1")
n=${2:-38}
n_ir=25
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc=${CC:-gcc}
flags="-O2 -fPIE -pie"

"$cc" -O2 -fPIC -shared "$here/hooks.c" -o "$work/libhooks.so"
build() {  # name, extra flags
  "$cc" $flags "$here/gate_bench.c" -o "$work/$1" "${@:2}"
}
build native -DPROBE=0
build plugin -DPROBE=0 -fplugin="$plugin" -fplugin-arg-hcct_plugin-stage=early
build hand_addr_test -DPROBE=1
build hand_pointer -DPROBE=2
build hand_select -DPROBE=4
build hand_strong -DPROBE=3 -L"$work" -lhooks -Wl,-rpath,"$work"
build finstrument -DPROBE=0 -finstrument-functions -L"$work" -lhooks -Wl,-rpath,"$work"

# fib(n) makes 2*F(n+1)-1 calls.
fib_calls() {
  awk -v n="$1" 'BEGIN { a = 0; b = 1; for (i = 0; i < n + 1; i++) { t = a + b; a = b; b = t } print 2 * a - 1 }'
}
calls=$(fib_calls "$n")
calls_ir=$(fib_calls "$n_ir")

run_variant() {  # label, binary, env...
  local label=$1 bin=$2
  shift 2
  local ir ir0 best=999999999999
  # Instructions of the whole process minus those of a run with n=0, over the calls of fib(n_ir).
  ir=$(env "$@" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$work/$bin" "$n_ir" 2>&1 |
       awk '/Collected/ { print $4 }')
  ir0=$(env "$@" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$work/$bin" 0 2>&1 |
        awk '/Collected/ { print $4 }')
  for _ in 1 2 3 4 5; do
    local t0 t1
    t0=$(date +%s%N)
    env "$@" "$work/$bin" "$n" >/dev/null
    t1=$(date +%s%N)
    best=$(( t1 - t0 < best ? t1 - t0 : best ))
  done
  printf '%-44s %7.2f instr/call %7.2f ns/call\n' "$label" \
    "$(awk -v i="$ir" -v z="$ir0" -v c="$calls_ir" 'BEGIN { print (i - z) / c }')" \
    "$(awk -v t="$best" -v c="$calls" 'BEGIN { print t / c }')"
}

echo "fib($n): $calls calls timed; fib($n_ir): $calls_ir calls counted"
run_variant "native (no probes)" native
run_variant "plugin, no runtime (gate address 0)" plugin
run_variant "plugin, runtime loaded, gate closed" plugin LD_PRELOAD="$work/libhooks.so"
run_variant "by hand: address test, then byte, no rt" hand_addr_test
run_variant "by hand: address test, then byte (2 branches)" hand_addr_test LD_PRELOAD="$work/libhooks.so"
run_variant "by hand: hidden pointer + byte" hand_pointer LD_PRELOAD="$work/libhooks.so"
run_variant "by hand: cmov gate-or-zero (= plugin), no rt" hand_select
run_variant "by hand: cmov gate-or-zero (= plugin)" hand_select LD_PRELOAD="$work/libhooks.so"
run_variant "by hand: strong gate (needs libhcct)" hand_strong
run_variant "-finstrument-functions, empty hooks" finstrument
