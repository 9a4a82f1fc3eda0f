#!/usr/bin/env python3
"""Compile time, measured in interleaved rounds (issue 24's "compile time with the pass ≤ 1.4× native").

  bench/real/compile_rounds.py [--build BUILD] [--only lua,sqlite] [--rounds 3]
                               [--flavours clang-native,kpath-early] [--compare-build OLD]

run.py --paths divides the CPU seconds of two cached builds, each made once, possibly minutes or
sessions apart. On this machine (a shared 2-vCPU VM) the same process takes about 1 or about 1.5
times its CPU time depending on when it runs (docs/BENCHMARKS.md, session 15), so one build per
flavour can be off by half. Here every flavour of a workload is rebuilt from its source ROUNDS
times round-robin in a scratch directory (the cache is not touched), and the table gives each
build's CPU seconds (user + sys of the compilers and linker, wait4), the median, and the median's
ratio to the first flavour's. --compare-build OLD adds, for every flavour that loads a plugin,
the same flavour with OLD's plugins (named "<flavour>@old"), in the same rounds: an A/B of two
versions of a pass.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

import workloads


def build_seconds(workload, src, flavour):
    """CPU seconds of one build of `flavour` from `src`, made in a scratch directory."""
    scratch = tempfile.mkdtemp(prefix=f"hcct-compile-{workload.name}-")
    try:
        before = workloads.children_cpu_seconds()
        workload.compile(src, scratch, flavour, os.path.join(scratch, "build.log"))
        return workloads.children_cpu_seconds() - before
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(workloads.ROOT, "build"),
                    help="hcct build dir with kpath/kpath.so and gcc-plugin/hcct_plugin.so (default: build)")
    ap.add_argument("--only", default="lua,sqlite", help="comma-separated workloads (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=3, help="builds of each flavour (default 3)")
    ap.add_argument("--flavours", default="clang-native,kpath-early",
                    help="comma-separated flavours of run.py's suites; the first is the baseline "
                    "(default: %(default)s)")
    ap.add_argument("--compare-build", help="another hcct build dir: each plugin flavour also built with its plugins")
    args = ap.parse_args()

    def known_in(build):
        build = os.path.abspath(build)
        return {**workloads.flavours(os.path.join(build, "gcc-plugin", "hcct_plugin.so")),
                **workloads.path_flavours(os.path.join(build, "kpath", "kpath.so"), os.path.join(build, "libhcct"))}

    known = known_in(args.build)
    names = [f for f in args.flavours.split(",") if f]
    unknown = [f for f in names if f not in known]
    if unknown or not names:
        sys.exit(f"compile_rounds.py: unknown flavour(s) {', '.join(unknown) or '(none)'} "
                 f"(known: {', '.join(sorted(known))})")
    if args.compare_build:
        old = known_in(args.compare_build)
        for f in list(names):
            if known[f].plugin:
                known[f + "@old"] = old[f]
                names.append(f + "@old")
    for plugin in {known[f].plugin for f in names if known[f].plugin}:
        if not os.path.exists(plugin):
            sys.exit(f"compile_rounds.py: {plugin} not found: build it first")
    if args.rounds < 1:
        sys.exit("compile_rounds.py: --rounds must be at least 1")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()} at start")
    for name in [n for n in args.only.split(",") if n]:
        if name not in workloads.WORKLOADS:
            sys.exit(f"compile_rounds.py: unknown workload '{name}' (known: {', '.join(workloads.WORKLOADS)})")
        workload = workloads.WORKLOADS[name]
        try:
            src = workload.prepare_source()
        except workloads.Unavailable as e:
            print(f"{name}: skipped: {e}", file=sys.stderr)
            continue
        seconds = {f: [] for f in names}
        for r in range(args.rounds):
            for f in names:
                seconds[f].append(build_seconds(workload, src, known[f]))
            print(f"  {name}: round {r + 1}/{args.rounds} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
        base = statistics.median(seconds[names[0]])
        print(f"\n### {name}: compile CPU seconds, {args.rounds} interleaved rounds")
        print("| flavour | each build | median | × " + names[0] + " |")
        print("|---|---|---|---|")
        for f in names:
            med = statistics.median(seconds[f])
            each = ", ".join(f"{s:.1f}" for s in seconds[f])
            print(f"| {f} | {each} | {med:.2f} | {med / base:.3f} |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
