#!/usr/bin/env python3
"""One instrumented binary under several libhcct builds, A/B, in interleaved rounds.

  bench/real/ab_runtime.py ROUNDS HCCT_OPTIONS LIBDIR [LIBDIR...] -- PROGRAM [ARGS...]

For runtime-only changes (docs/BENCHMARKS.md, "Fourth pass"): the program is the same file in every
run, only the libhcct.so it loads differs (LD_LIBRARY_PATH=LIBDIR; binaries built by run.py --paths
have a RUNPATH, which LD_LIBRARY_PATH overrides). One warm-up round, then ROUNDS rounds, each running
every LIBDIR once in turn, so that the machine's load hits them alike. Prints, per LIBDIR, the median
CPU time (user + system of the program and its threads) with every round's figure, and the runtime's
kpath verbose lines of the last run. HCCT_OPTIONS gets out=<a temporary directory> appended; stdout
is discarded; STDIN=FILE in the environment feeds FILE to the program. A run that fails stops it.
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    if "--" not in sys.argv or sys.argv.index("--") < 4:
        sys.exit(__doc__)
    sep = sys.argv.index("--")
    rounds, options, libs, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:sep], sys.argv[sep + 1:]
    cpu = {lib: [] for lib in libs}
    verbose = {}
    stdin_path = os.environ.get("STDIN")
    for r in range(rounds + 1):
        for lib in libs:
            out = tempfile.mkdtemp(prefix="hcct-ab-")
            env = dict(os.environ, LD_LIBRARY_PATH=lib, HCCT_OPTIONS=f"{options}:out={out}")
            with open(stdin_path, "rb") if stdin_path else open(os.devnull, "rb") as stdin:
                before = children_cpu()
                run = subprocess.run(argv, env=env, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                seconds = children_cpu() - before
            shutil.rmtree(out, ignore_errors=True)
            if run.returncode != 0:
                sys.exit(f"ab_runtime.py: {lib}: exit status {run.returncode}: {run.stderr.decode()[-500:]}")
            if r > 0:
                cpu[lib].append(seconds)
            verbose[lib] = [line for line in run.stderr.decode().splitlines() if "hcct kpath:" in line]
    print(f"load average {os.getloadavg()}")
    for lib in libs:
        print(f"{lib}: median {statistics.median(cpu[lib]):.3f} s CPU ({' '.join(f'{x:.3f}' for x in cpu[lib])})")
        for line in verbose[lib]:
            print("   ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
