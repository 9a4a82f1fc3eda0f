#!/usr/bin/env python3
"""zstd's versioned builds with per-thread and with process-wide start counters, at -T1 and -T4.

  bench/real/zstd_threads.py [ROUNDS] [--build BUILD]

What per-thread start counters buy a multi-threaded program (docs/KPATH.md, "Per-thread start
counters"; docs/BENCHMARKS.md, "Per-thread start counters, session 12"): the bench's cached zstd
builds (native, `kpath-burst-late-seeded` and `kpath-burst-shared-seeded`, built on first use
with BUILD's kpath.so and libhcct), the full input at -T1 and -T4, with no burst opened
(HCCT_OPTIONS=k=8:burst=manual, "closed") and with bursts (k=8:burst=1). One warm-up round, then
ROUNDS (default 5) rounds, each running every configuration once in turn; prints the median CPU
time (user + system of the program and its threads, from wait4) and its ratio to native at the
same -T, with every round's figure.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile

import workloads

CONFIGS = (("native", "clang-native", None),
           ("closed, process-wide counters", "kpath-burst-shared-seeded", "k=8:burst=manual"),
           ("closed, per-thread counters", "kpath-burst-late-seeded", "k=8:burst=manual"),
           ("burst=1, process-wide counters", "kpath-burst-shared-seeded", "k=8:burst=1"),
           ("burst=1, per-thread counters", "kpath-burst-late-seeded", "k=8:burst=1"))


def cpu_seconds(argv, options):
    out = tempfile.mkdtemp(prefix="hcct-zstd-threads-")
    env = dict(os.environ)
    if options:
        env["HCCT_OPTIONS"] = f"{options}:out={out}"
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    shutil.rmtree(out, ignore_errors=True)
    if status != 0:
        raise SystemExit(f"zstd_threads.py: {' '.join(argv)}: wait status {status}")
    return usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rounds", type=int, nargs="?", default=5)
    ap.add_argument("--build", default=os.path.join(workloads.ROOT, "build"))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    flavours = workloads.path_flavours(os.path.join(build, "kpath", "kpath.so"), os.path.join(build, "libhcct"))
    zstd = workloads.WORKLOADS["zstd"]
    binaries = {flavour: zstd.build(flavours[flavour]) for _, flavour, _ in CONFIGS}
    cpu = {}
    for r in range(args.rounds + 1):
        for threads in (1, 4):
            for label, flavour, options in CONFIGS:
                argv, _ = zstd.argv(binaries[flavour], "full")
                argv = [a if a != "-T4" else f"-T{threads}" for a in argv]
                seconds = cpu_seconds(argv, options)
                if r:
                    cpu.setdefault((label, threads), []).append(seconds)
        print(f"round {r}/{args.rounds} done, load {os.getloadavg()[0]:.1f}", flush=True)
    for threads in (1, 4):
        native = statistics.median(cpu[("native", threads)])
        for label, _, _ in CONFIGS:
            runs = cpu[(label, threads)]
            median = statistics.median(runs)
            print(f"-T{threads} {label:32s} {median:.3f} s  {median / native:.3f}x native  "
                  f"({' '.join(f'{x:.2f}' for x in runs)})")


if __name__ == "__main__":
    main()
