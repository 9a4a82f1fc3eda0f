#!/usr/bin/env bash
# Regenerates the seed corpora of tests/fuzz/corpus/ from real profiles (docs/FUZZING.md):
#   tests/fuzz/make_seeds.sh [BUILD_DIR]     (default: build; needs hcct, libhcct.so, the kpath
#                                            plugin and the `calls` and `shapes` examples built)
# Seeds are small (a few KB): short runs of the bundled examples. Files named seed-* are replaced;
# regress-* files (inputs that once found a bug) are kept.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
corpus=$here/corpus
clang=${HCCT_FUZZ_CLANG:-clang-14}
runtime=$build/libhcct/libhcct.so
plugin=$build/kpath/kpath.so
hcct=$build/tools/hcct/hcct
for f in "$runtime" "$plugin" "$hcct" "$build/examples/calls" "$build/examples/shapes"; do
  [ -e "$f" ] || { echo "make_seeds: $f is missing: build hcct, hcct_runtime_shared, hcct_kpath_plugin, calls, shapes" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in dump kpath_profile kpath_metadata options oracle_thresholds oracle_spec osr_guidance; do
  mkdir -p "$corpus/$d"
  rm -f "$corpus/$d"/seed-*
done

# ---- dump: the -finstrument-functions examples in each mode and key
run() {  # NAME OPTIONS PROGRAM ARGS...
  local name=$1 options=$2
  shift 2
  rm -rf "$tmp/out"
  LD_PRELOAD=$runtime HCCT_OPTIONS="$options:out=$tmp/out" "$@" >/dev/null
  local i=0
  for f in "$tmp/out"/*.hcct; do
    cp "$f" "$corpus/dump/seed-$name-$i.hcct"
    i=$((i + 1))
  done
}
run calls-cct mode=cct "$build/examples/calls" 6 40
run calls-hcct mode=hcct:epsilon=0.05 "$build/examples/calls" 6 40
run calls-routine mode=cct:key=routine "$build/examples/calls" 5 20
run shapes-hcct mode=hcct:epsilon=0.02:key=routine "$build/examples/shapes" 3

# ---- kpath: the kpath examples, built with the plugin, short runs
# Section bodies of a dump, for the harness's wrapped form: byte 0 odd (bit 1: a KTRC follows),
# bytes 1-2 the KPTH body's length, the KPTH body, then the KTRC body.
wrap() {  # DUMP OUT
  python3 - "$1" "$2" <<'PY'
import struct, sys
data = open(sys.argv[1], 'rb').read()
bodies, at = {}, 32
while at + 16 <= len(data):
    tag, _, length = struct.unpack_from('<4sIQ', data, at)
    bodies[tag] = data[at + 16:at + 16 + length]
    at += 16 + length
kpth, ktrc = bodies.get(b'KPTH'), bodies.get(b'KTRC')
if kpth is None or len(kpth) > 0xffff:
    sys.exit(0)
head = bytes([3 if ktrc is not None else 1]) + struct.pack('<H', len(kpth))
open(sys.argv[2], 'wb').write(head + kpth + (ktrc or b''))
PY
}
kpath_run() {  # NAME OPTIONS PROGRAM ARGS...
  local name=$1 options=$2
  shift 2
  rm -rf "$tmp/out"
  HCCT_OPTIONS="$options:out=$tmp/out" "$@" >/dev/null
  local i=0
  for f in "$tmp/out"/*.hcct; do
    # Whole-file form: byte 0 even, then the file.
    { printf '\0'; cat "$f"; } >"$corpus/kpath_profile/seed-$name-$i.bin"
    wrap "$f" "$corpus/kpath_profile/seed-$name-$i-bodies.bin"
    i=$((i + 1))
  done
}
for prog in collatz diamonds lexer masked_conv; do
  # From the source root with a relative path: the metadata and guidance name no local directory.
  (cd "$root" && "$clang" -g -O2 -fpass-plugin="$plugin" "examples/kpath/$prog.c" -o "$tmp/$prog" \
    -L"$(dirname "$runtime")" -lhcct -Wl,-rpath,"$(dirname "$runtime")")
  objcopy -O binary --only-section=hcct_kpath "$tmp/$prog" "$corpus/kpath_metadata/seed-$prog.bin"
done
kpath_run collatz-k4 k=4:path_trace=1 "$tmp/collatz" 6
kpath_run collatz-blpp k=1 "$tmp/collatz" 30
kpath_run diamonds-ksf k=3:forest=ksf:path_trace=1 "$tmp/diamonds" 5 x
kpath_run lexer-k2 k=2 "$tmp/lexer" 40 1
kpath_run masked-k5 k=5 "$tmp/masked_conv" 6 8 1

# ---- guidance files: `hcct guide` on a kpath profile: its JSON for the kpath plugin's reader, its
# thresholds file for the oracle's
guide() {  # NAME OPTIONS PROGRAM ARGS...
  local name=$1 options=$2
  shift 2
  rm -rf "$tmp/out"
  HCCT_OPTIONS="$options:out=$tmp/out" "$@" >/dev/null
  (cd "$tmp" && "$hcct" guide out --min-share 0.05 --top 1 -o "$tmp/guide.json" \
     --thresholds "$corpus/oracle_thresholds/seed-$name.txt" >/dev/null)
  # A few KB: the first loops and paths only, and no local directory in the file names.
  python3 - "$tmp/guide.json" "$corpus/osr_guidance/seed-$name.json" "$root/" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
g['loops'] = g['loops'][:3]
for loop in g['loops']:
    loop['paths'] = loop['paths'][:3]
    loop['file'] = loop['file'].replace(sys.argv[3], '')
open(sys.argv[2], 'w').write(json.dumps(g, indent=1) + '\n')
PY
}
guide masked_conv k=6 "$tmp/masked_conv" 30 40 1
guide collatz k=4 "$tmp/collatz" 200
printf '{"format": "hcct-guide", "version": 1, "loops": [{"key": "a\\u00e9\\ud83d\\ude00.c:5", "threshold": 18446744073709551615}, {"key": "b.c:7", "threshold": null}, {"key": "c.c:9", "threshold": 0, "x": [1, -2.5e3, true, {"y": "\\n"}]}]}' \
  >"$corpus/osr_guidance/seed-escapes.json"
cp "$corpus/osr_guidance/seed-escapes.json" "$corpus/oracle_thresholds/seed-json-guidance.json"  # the wrong file given
printf '# hcct-thresholds 1\n# a comment\n\nx,y=z.c:5=12\na\xc3\xa9.c:5=18446744073709551615\nb.c:7=0\n# end\n' \
  >"$corpus/oracle_thresholds/seed-keys.txt"

# ---- HCCT_OPTIONS and HCCT_ORACLE: the documented syntax
opt=$corpus/options
printf 'mode=hcct:epsilon=2e-5:key=site:out=hcct.data:max_mb=4096' >"$opt/seed-defaults"
printf 'mode=cct:key=routine:exact=0:verbose=1' >"$opt/seed-cct"
printf 'mode=hcct:exact=1:epsilon=0.001' >"$opt/seed-exact"
printf 'burst=1:burst_interval=20:burst_length=0.5:burst_sync=unwind' >"$opt/seed-burst"
printf 'k=16:forest=ksf:path_trace=1::' >"$opt/seed-kpath"
printf 'mode=empty:burst=manual' >"$opt/seed-bad-burst"
printf 'a.c:12=1000,b.c:3=0,a.c:12=1000' >"$corpus/oracle_spec/seed-list"
printf 'masked_conv_osr.c:60=18446744073709551615' >"$corpus/oracle_spec/seed-max"
printf 'k=,=5' >"$corpus/oracle_spec/seed-bad"

du -sh "$corpus"/* | sed 's|'"$corpus"'/||'
