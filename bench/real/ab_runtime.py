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
import statistics
import sys

from ab_modes import run_rounds


def main():
    if "--" not in sys.argv or sys.argv.index("--") < 4:
        sys.exit(__doc__)
    sep = sys.argv.index("--")
    rounds, options, libs, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:sep], sys.argv[sep + 1:]
    configs = [(lib, {"LD_LIBRARY_PATH": lib}, options) for lib in libs]
    cpu, stderr = run_rounds(rounds, configs, argv, "ab_runtime.py")
    print(f"load average {os.getloadavg()}")
    for lib in libs:
        print(f"{lib}: median {statistics.median(cpu[lib]):.3f} s CPU ({' '.join(f'{x:.3f}' for x in cpu[lib])})")
        for line in stderr[lib].splitlines():
            if "hcct kpath:" in line:
                print("   ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
