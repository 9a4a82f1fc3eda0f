#!/usr/bin/env python3
"""Where a bursting path profile's estimate errs: per function, under several burst schedules.

  bench/real/path_burst_schedules.py [--build BUILD] [--workload lua] [--flavour kpath-burst-goto-seeded]
                                     [--schedules 2:0.2,0.2:0.02,20:2] [--starts 1000:100000] [--runs 1]
                                     [--size full|short]

One exhaustive run (burst=0) and one bursting run per schedule (burst_interval:burst_length, ms)
(`--starts`: and path_burst_starts:path_burst_interval, the burst length and period in path starts
of a build on the event clock, the default since session 13; a build on the time gate, e.g. the
kpath-burst-goto-time-seeded flavour, ignores them; `--runs`: bursting runs per schedule) of the workload's bench binary (bench/real/workloads.py, built on first use with BUILD's kpath.so
and libhcct), all at k = 8, path_epsilon=0, options of one length, under setarch -R, so that every
run sees the same path stream (the seeded flavours fix Lua's string-hash seed). Against the
exhaustive run, at φ = 10⁻³ (docs/KPATH.md, "Bursting"): the hot sequences' average relative error,
and for the four functions with most hot sequences their average and the signed error of their
hot 1-grams (every path's estimate is T/S of its start times its sampled count, so the 1-grams show
how unevenly the bursts sampled the paths of one start point). An error that does not shrink with
more, shorter bursts is a bias of the schedule, not the variance of few bursts.
"""
import argparse
import collections
import os
import shutil
import statistics
import subprocess
import tempfile

import run
import workloads


def record(argv, options, out, stdin=None):
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, HCCT_OPTIONS=f"{options}:out={out}")
    with open(stdin or os.devnull, "rb") as given:
        subprocess.run(["setarch", "-R", *argv], env=env, stdin=given, stdout=subprocess.DEVNULL, check=True)


def sequences(hcct, profile, phi):
    """{(function, path, ...): count} of `hcct paths --json --phi phi`, N, {function: name}."""
    names = {}
    seqs, n = run.hot_sequences(hcct, profile, phi, names)
    return {s: count for s, (count, _) in seqs.items()}, n, names


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(workloads.ROOT, "build"))
    ap.add_argument("--workload", default="lua", choices=sorted(workloads.WORKLOADS))
    ap.add_argument("--flavour", default="kpath-burst-goto-seeded")
    ap.add_argument("--schedules", default="2:0.2,0.2:0.02,20:2")
    ap.add_argument("--starts", default="1000:100000",
                    help="path_burst_starts:path_burst_interval pairs, comma-separated")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--size", default="full", choices=("full", "short"))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    hcct = os.path.join(build, "tools", "hcct", "hcct")
    flavours = workloads.path_flavours(os.path.join(build, "kpath", "kpath.so"), os.path.join(build, "libhcct"))
    workload = workloads.WORKLOADS[args.workload]
    argv, stdin = workload.argv(workload.build(flavours[args.flavour]), args.size)
    phi = 1e-3
    with tempfile.TemporaryDirectory(prefix="hcct-schedules-") as tmp:
        exact = os.path.join(tmp, "exact")
        # (every run's options have the same length: 8.000 / 0.200 ms, 12 digits of starts)
        record(argv, "k=8:burst=0:path_epsilon=0:burst_interval=2.000:burst_length=0.200"
                     ":path_burst_starts=000000001000:path_burst_interval=000000100000", exact, stdin)
        want, n, names = sequences(hcct, exact, phi)
        hot = {s: c for s, c in want.items() if c >= phi * n}
        runs = [(schedule, starts, r) for schedule in args.schedules.split(",") for starts in args.starts.split(",")
                for r in range(args.runs)]
        for schedule, starts, r in runs:
            interval, length = (float(x) for x in schedule.split(":"))
            burst_starts, burst_every = (int(x) for x in starts.split(":"))
            sampled = os.path.join(tmp, "sampled")
            record(argv, f"k=8:burst=1:path_epsilon=0:burst_interval={interval:.3f}:burst_length={length:.3f}"
                         f":path_burst_starts={burst_starts:012d}:path_burst_interval={burst_every:012d}", sampled, stdin)
            got, _, _ = sequences(hcct, sampled, phi / 10)
            errors, signed_1grams = collections.defaultdict(list), collections.defaultdict(list)
            for s, c in hot.items():
                e = (got.get(s, 0) - c) / c
                errors[names[s[0]]].append(abs(e))
                if len(s) == 2:
                    signed_1grams[names[s[0]]].append(e)
            every = [e for v in errors.values() for e in v]
            missing = sum(1 for s in hot if s not in got)
            print(f"{interval} ms / {length} ms, path_burst_starts:interval={starts}, run {r + 1}: {len(hot)} hot sequences, "
                  f"{missing} missing (not shown at φ/10), average error {100 * statistics.mean(every):.1f} %, "
                  f"max {100 * max(every):.1f} %", flush=True)
            for s in sorted(hot, key=lambda s: (got.get(s, 0) - hot[s]) / hot[s])[:2]:
                print(f"  worst: {names[s[0]]}, {len(s) - 1} paths, exact {hot[s]:.0f}, estimate {got.get(s, 0):.0f}")
            for name, v in sorted(errors.items(), key=lambda x: -len(x[1]))[:4]:
                ones = signed_1grams.get(name) or [0.0]
                print(f"  {name}: {len(v)} hot, average {100 * statistics.mean(v):.1f} %; hot 1-grams signed "
                      f"{100 * min(ones):+.0f} % .. {100 * max(ones):+.0f} % ({len(signed_1grams.get(name, []))})")


if __name__ == "__main__":
    main()
