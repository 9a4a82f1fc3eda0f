#!/usr/bin/env python3
"""Paired runs: one build of a workload under two or more HCCT_OPTIONS, A then B, B then A, ...

  bench/real/pair.py --only tcc [--rounds 8] [--size full|short] [--flavour kpath-early]
                     [--build BUILD] [--native] OPTIONS_A OPTIONS_B [OPTIONS_C ...]

  e.g. bench/real/pair.py --only lua --rounds 8 k=16:path_grow=1 k=16:path_grow=4
       bench/real/pair.py --only zstd --native --flavour kpath-burst-late-seeded k=8:burst=1

--native puts the clang-native build of the same sources first in every round, as the baseline
(shown as `(native)`), so that each option set's figure is its CPU × native.

run.py's rounds run every configuration once per round, so two configurations of one round can
be a minute apart; on this machine (a shared 2-vCPU VM) the same run takes about 1 or 1.5 times
its CPU time depending on when it runs (docs/BENCHMARKS.md, session 15). Here the option sets run
back to back, in alternating order, and each later set is divided by the first set's run of the
same round: the median of those ratios (and their range) is the figure, beside each set's median
CPU seconds (user + sys of the program, wait4) and its largest peak RSS (ru_maxrss). The build is run.py's (cached; built if missing).
The program's output is checked identical across option sets on the first round.
"""
import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import workloads


def run_once(workload, binary, size, options):
    """(CPU seconds, peak RSS MB, sha256 of stdout) of one run with HCCT_OPTIONS=options (profile
    discarded)."""
    scratch = tempfile.mkdtemp(prefix=f"hcct-pair-{workload.name}-")
    try:
        argv, stdin = workload.argv(binary, size)
        env = dict(os.environ, HCCT_OPTIONS=f"{options}:out={scratch}/profile",
                   LLVM_PROFILE_FILE=os.path.join(scratch, "default.profraw"))
        out = os.path.join(scratch, "stdout")
        with open(stdin) if stdin else open(os.devnull) as fin, open(out, "wb") as fout:
            p = subprocess.Popen(argv, stdin=fin, stdout=fout, stderr=subprocess.DEVNULL, env=env, cwd=scratch)
            _, status, usage = os.wait4(p.pid, 0)
        if status != 0:
            sys.exit(f"pair.py: {workload.name} with HCCT_OPTIONS={options} exited with status {status}")
        with open(out, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, digest
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", required=True, help="one workload (lua, sqlite, zstd, json, tcc)")
    ap.add_argument("--rounds", type=int, default=8, help="rounds (default 8)")
    ap.add_argument("--size", choices=("full", "short"), default="full")
    ap.add_argument("--flavour", default="kpath-early", help="run.py --paths flavour (default kpath-early)")
    ap.add_argument("--build", default=os.path.join(workloads.ROOT, "build"), help="hcct build dir")
    ap.add_argument("--native", action="store_true",
                    help="the clang-native build as the baseline (the first set of every round)")
    ap.add_argument("options", nargs="+", help="HCCT_OPTIONS of each set; the first is the baseline")
    args = ap.parse_args()
    if len(args.options) < (1 if args.native else 2):
        sys.exit("pair.py: give at least two option sets (one with --native)")
    if args.only not in workloads.WORKLOADS:
        sys.exit(f"pair.py: unknown workload {args.only} (one of {', '.join(workloads.WORKLOADS)})")
    flavours = workloads.path_flavours(os.path.join(args.build, "kpath", "kpath.so"),
                                       os.path.join(args.build, "libhcct"))
    if args.flavour not in flavours:
        sys.exit(f"pair.py: unknown flavour {args.flavour} (one of {', '.join(flavours)})")
    workload = workloads.WORKLOADS[args.only]
    try:
        binary = workload.build(flavours[args.flavour])
        native = workload.build(flavours["clang-native"]) if args.native else None
    except workloads.Unavailable as e:
        print(f"pair.py: {args.only} skipped: {e}")
        return 0
    NATIVE = "(native)"
    if args.native:
        args.options.insert(0, NATIVE)
    times = {o: [] for o in args.options}
    rss = {o: 0.0 for o in args.options}
    digests = {}
    for r in range(args.rounds):
        for options in args.options if r % 2 == 0 else args.options[::-1]:
            if options == NATIVE:
                seconds, peak, digest = run_once(workload, native, args.size, "")
            else:
                seconds, peak, digest = run_once(workload, binary, args.size, options)
            times[options].append(seconds)
            rss[options] = max(rss[options], peak)
            digests.setdefault(options, digest)
    if len(set(digests.values())) != 1:
        print("pair.py: OUTPUT DIFFERS between option sets:", digests)
    base = args.options[0]
    print(f"{args.only} ({args.size} input, {args.flavour}), {args.rounds} rounds in alternating order; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"| HCCT_OPTIONS | median CPU s | × `{base}`, median of pairs | range | peak RSS MB | runs |")
    print("|---|---|---|---|---|---|")
    for options in args.options:
        ratios = [x / y for x, y in zip(times[options], times[base])]
        print(f"| `{options}` | {statistics.median(times[options]):.3f} | {statistics.median(ratios):.3f} | "
              f"{min(ratios):.3f}–{max(ratios):.3f} | {rss[options]:.1f} | {' '.join(f'{t:.2f}' for t in times[options])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
