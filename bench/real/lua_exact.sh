#!/usr/bin/env bash
# Exact trees on a real interpreter: Lua 5.4 from Debian's source package, built with the README's
# recipe (gcc -O2 -g -finstrument-functions), runs a script under libhcct (mode=cct) and under
# uftrace (the independent oracle: it sees the same hook events) with address randomisation off.
# Prints the profile's unmatched exits and depth, and compares the calls per function.
#
#   bench/real/lua_exact.sh [BUILD_DIR]        (default: build)
#
# Exit 77 with one line when the source package or uftrace cannot be had.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
hcct=$build/tools/hcct/hcct
runtime=$build/libhcct/libhcct.so
command -v uftrace >/dev/null || { echo "lua_exact: uftrace not installed (apt-get install uftrace); skipped" >&2; exit 77; }
src=$("$here/scripts/debian-source.sh" lua5.4) || exit 77
work=$(mktemp -d /tmp/hcct-lua-exact.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r "$src/src" "$work/src"
make -s -C "$work/src" -j"$(nproc)" linux MYCFLAGS="-g -finstrument-functions" >/dev/null 2>&1
lua=$work/src/lua
echo "split pieces gcc made: $(nm "$lua" | grep -c -E '\.(part|cold|isra|constprop)')"

cat >"$work/script.lua" <<'LUA'
local t = {}
for i = 1, 2000 do t[#t + 1] = "a" .. i .. "b" .. i end           -- luaV_concat (split by gcc)
local s = 0
for i = 1, 200 do local x = "x" .. i .. "y" .. i .. "z"; s = s + #x end
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
table.sort(t)
local co = coroutine.wrap(function() for i = 1, 100 do coroutine.yield(i) end end)
for _ = 1, 100 do s = s + co() end
print(#t, s, fib(20))
LUA

setarch -R env LD_PRELOAD="$runtime" HCCT_OPTIONS="mode=cct:out=$work/hcct.data" "$lua" "$work/script.lua" >/dev/null
setarch -R uftrace record -d "$work/uftrace.data" --no-libcall "$lua" "$work/script.lua" >/dev/null 2>&1
"$hcct" info "$work/hcct.data" | grep -E 'calls \(N\)|tree depth'
"$hcct" export -f folded --min-share 0 -o "$work/hcct.folded" "$work/hcct.data" >/dev/null 2>&1
uftrace report -d "$work/uftrace.data" -f call 2>/dev/null | awk 'NR > 2 { print $2, $1 }' >"$work/uftrace.calls"
python3 - "$work/hcct.folded" "$work/uftrace.calls" <<'PY'
import collections, sys
hcct = collections.Counter()
for line in open(sys.argv[1]):
    stack, count = line.rsplit(' ', 1)
    hcct[stack.split(';')[-1]] += int(count)
oracle = {}
for line in open(sys.argv[2]):
    name, count = line.split()
    if not name.startswith('linux:'):
        oracle[name] = int(count)
names = set(oracle) | set(hcct)
differ = [n for n in names if oracle.get(n, 0) != hcct.get(n, 0)]
total_h, total_u = sum(hcct.values()), sum(oracle.values())
off = sum(abs(oracle.get(n, 0) - hcct.get(n, 0)) for n in names)
print(f"calls per function: hcct {total_h:,}, uftrace {total_u:,}; {len(names)} functions, "
      f"{len(differ)} differ, by {off} calls in all ({100.0 * off / max(total_u, 1):.4f} %)")
PY
