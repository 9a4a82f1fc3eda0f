#!/usr/bin/env python3
"""hcct's exact calling-context tree against uftrace's, on the same -finstrument-functions binary.

  bench/real/exact.py [--only lua,sqlite] [--size short|full] [--build DIR] [--tolerance F] [--show N]

For each workload (bench/real/workloads.py) the -finstrument-functions build (gcc -O2 -g) runs its
short input twice with address randomisation off (setarch -R): under libhcct in mode=cct, and under
`uftrace record --no-libcall`, which implements the same __cyg_profile_func_* hooks itself and so
sees the same events - an independent oracle. Both trees are reduced to calls per calling context,
a context being the chain of function names from the thread's start (hcct's contexts keyed by call
site are added up per name chain; every thread's tree is added into one). Printed per workload:
contexts and calls on each side, the contexts that differ, and the calls by which they differ.

A workload passes when the calls that differ are at most --tolerance (a fraction, default 1e-3) of
uftrace's calls: interpreters seed their hash tables from addresses and the clock, so two runs of
the same program can differ by a few rehashes (docs/BENCHMARKS.md). Exit status: 0 all pass; 1 a
workload differs beyond the tolerance (the findings are printed); 77 nothing could be checked
(uftrace missing, no source: ctest's skip code).
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

SKIP = 77


def run_checked(cmd, what, **kw):
    proc = subprocess.run(cmd, capture_output=True, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace')[-1500:]}")
    return proc


def hcct_contexts(tools, binary_argv, stdin_path, work):
    """Calls per name chain of the exact CCT libhcct records (mode=cct), all threads added up."""
    out = os.path.join(work, "hcct.data")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HCCT_OPTIONS")}
    env.update(LD_PRELOAD=tools["runtime"], HCCT_OPTIONS="mode=cct:out=" + out)
    with open(stdin_path or os.devnull, "rb") as stdin:
        run = run_checked(["setarch", "-R", *binary_argv], "the run under libhcct", env=env, stdin=stdin)
    folded = os.path.join(work, "hcct.folded")
    run_checked([tools["hcct"], "export", "-f", "folded", "--min-share", "0", "--depth", "0",
                 "-o", folded, out], "hcct export")
    info = run_checked([tools["hcct"], "info", out], "hcct info").stdout.decode(errors="replace")
    return read_folded(folded), run.stdout, info


def uftrace_contexts(binary_argv, stdin_path, work):
    """Calls per name chain that uftrace records on the same binary, with the C++ names demangled
    as hcct's symbolizer does (c++filt)."""
    data = os.path.join(work, "uftrace.data")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HCCT_OPTIONS")}
    with open(stdin_path or os.devnull, "rb") as stdin:
        run = run_checked(["setarch", "-R", "uftrace", "record", "--no-libcall", "-d", data, *binary_argv],
                          "uftrace record", env=env, stdin=stdin)
    dump = os.path.join(work, "uftrace.dump")
    with open(dump, "wb") as f:
        proc = subprocess.run(["uftrace", "dump", "-d", data, "--demangle=no"], stdout=f,
                              stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise RuntimeError(f"uftrace dump failed: {proc.stderr.decode(errors='replace')[-1500:]}")
    return demangle(read_uftrace_dump(dump)), run.stdout


ENTRY = re.compile(r"^\s*[\d.]+\s+(\d+): \[entry\] (.*)\([0-9a-f]+\) depth: (\d+)$")


def read_uftrace_dump(path):
    """{tuple of frames: calls} from uftrace's raw event dump: each entry event, with the depth
    uftrace gives it, extends its thread's current chain. (The --flame-graph dump is not used: its
    counts are not calls.)"""
    counts = collections.Counter()
    stacks = collections.defaultdict(list)
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = ENTRY.match(line)
            if not m:
                continue
            stack = stacks[m.group(1)]
            depth = int(m.group(3))
            del stack[depth:]
            stack.append(m.group(2))
            counts[tuple(stack)] += 1
    return counts


def read_folded(path):
    """{tuple of frames: calls} from folded stacks (identical stacks added up)."""
    counts = collections.Counter()
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count = line.rpartition(" ")
            counts[tuple(stack.split(";"))] += int(count)
    return counts


def demangle(counts):
    names = sorted({frame for stack in counts for frame in stack if frame.startswith("_Z")})
    if not names or not shutil.which("c++filt"):
        return counts
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True).stdout
    mapping = dict(zip(names, out.splitlines()))
    result = collections.Counter()
    for stack, n in counts.items():
        # hcct's folded format turns ';' inside a name into ':'.
        result[tuple(mapping.get(f, f).replace(";", ":") for f in stack)] += n
    return result


def compare(hcct, oracle, show):
    """(summary line, differing contexts, calls that differ, lines of the largest differences)."""
    keys = set(hcct) | set(oracle)
    differ = sorted((k for k in keys if hcct.get(k, 0) != oracle.get(k, 0)),
                    key=lambda k: -abs(hcct.get(k, 0) - oracle.get(k, 0)))
    off = sum(abs(hcct.get(k, 0) - oracle.get(k, 0)) for k in differ)
    only_h = sum(1 for k in differ if k not in oracle)
    only_u = sum(1 for k in differ if k not in hcct)
    total_h, total_u = sum(hcct.values()), sum(oracle.values())
    summary = (f"contexts: hcct {len(hcct):,}, uftrace {len(oracle):,}; calls: hcct {total_h:,}, "
               f"uftrace {total_u:,}; {len(differ):,} contexts differ ({only_h:,} only in hcct, "
               f"{only_u:,} only in uftrace), by {off:,} calls ({100.0 * off / max(total_u, 1):.4f} %)")
    lines = []
    for k in differ[:show]:
        path = ";".join(k)
        if len(path) > 160:
            path = "..." + path[-157:]
        lines.append(f"    hcct {hcct.get(k, 0):>9,}  uftrace {oracle.get(k, 0):>9,}  {path}")
    return summary, len(differ), off, total_u, lines


def check(workload, args, tools):
    binary = workload.build(workloads.flavours(tools["plugin"])["finstr"])
    argv, stdin_path = workload.exact_argv(binary, args.size)
    work = tempfile.mkdtemp(prefix=f"hcct-exact-{workload.name}-")
    try:
        hcct, out_h, info = hcct_contexts(tools, argv, stdin_path, work)
        oracle, out_u = uftrace_contexts(argv, stdin_path, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"  kept {work}")
    summary, ndiff, off, total, lines = compare(hcct, oracle, args.show)
    print(f"{workload.name}: {summary}")
    for line in info.splitlines():
        if any(k in line for k in ("lost", "unmatched", "tree depth")):
            print("  hcct info: " + line.strip())
    if out_h != out_u:
        print(f"  !!! {workload.name}: the program's output differs between the two runs")
    ok = off <= args.tolerance * total and out_h == out_u
    if ndiff:
        print(f"  largest differences{' (within tolerance)' if ok else ''}:")
        print("\n".join(lines))
    print(f"  {workload.name}: {'PASS' if ok else 'DIFFERS'} (tolerance {args.tolerance:g} of the calls)")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(workloads.ROOT, "build"),
                    help="hcct build dir with libhcct.so, the hcct CLI and hcct_plugin.so (default: build)")
    ap.add_argument("--only", default=",".join(workloads.WORKLOADS),
                    help="comma-separated workloads (default: %(default)s)")
    ap.add_argument("--size", choices=("short", "full"), default="short",
                    help="input size (default short; full inputs make uftrace data of gigabytes)")
    ap.add_argument("--tolerance", type=float, default=1e-3,
                    help="calls that may differ, as a fraction of uftrace's calls (default 1e-3)")
    ap.add_argument("--show", type=int, default=8, help="differing contexts to print (default 8)")
    ap.add_argument("--keep", action="store_true", help="keep the profiles and folded files")
    args = ap.parse_args()
    if not shutil.which("uftrace"):
        print("exact.py: uftrace not installed (apt-get install uftrace): the oracle is missing; skipped")
        return SKIP
    build = os.path.abspath(args.build)
    tools = {"runtime": os.path.join(build, "libhcct", "libhcct.so"),
             "hcct": os.path.join(build, "tools", "hcct", "hcct"),
             "plugin": os.path.join(build, "gcc-plugin", "hcct_plugin.so")}
    for key in ("runtime", "hcct"):
        if not os.path.exists(tools[key]):
            sys.exit(f"exact.py: {tools[key]} not found: build it first")
    checked, failed = 0, []
    for name in [n for n in args.only.split(",") if n]:
        if name not in workloads.WORKLOADS:
            sys.exit(f"exact.py: unknown workload '{name}' (known: {', '.join(workloads.WORKLOADS)})")
        try:
            ok = check(workloads.WORKLOADS[name], args, tools)
        except workloads.Unavailable as e:
            print(f"{name}: skipped: {e}")
            continue
        checked += 1
        if not ok:
            failed.append(name)
    if checked == 0:
        return SKIP
    if failed:
        print(f"exact.py: the trees differ beyond the tolerance on: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
