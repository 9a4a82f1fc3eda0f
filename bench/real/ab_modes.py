#!/usr/bin/env python3
"""One instrumented binary under several (libhcct build, options) pairs, A/B, in interleaved rounds.

  bench/real/ab_modes.py ROUNDS LABEL=LIBDIR[:HCCT_OPTIONS] [...] -- PROGRAM [ARGS...]

Like ab_runtime.py, but each configuration names its own library and options, and the library is
preloaded (LD_PRELOAD=LIBDIR/libhcct.so), so that -finstrument-functions binaries, which do not
link libhcct, run under it: e.g. `empty=/tmp/main_lib:mode=empty base=/tmp/main_lib:mode=hcct
new=build/libhcct:mode=hcct` compares two libraries' hcct mode with one empty mode as the
denominator (docs/BENCHMARKS.md, "Where libhcct's time goes on lua", session 11). LIBDIR `-` runs
the program without any runtime. One warm-up round, then ROUNDS rounds, each running every
configuration once in turn. Prints per configuration the median CPU time (user + system of the
program and its threads) and its ratio to the first configuration's, with every round's figure.
out=<a temporary directory> is appended to the options; stdout is discarded; STDIN=FILE in the
environment feeds FILE to the program. A run that fails stops it.
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


def run_rounds(rounds, configs, argv, tool):
    """configs: (label, environment additions, HCCT_OPTIONS or None). One warm-up round, then
    `rounds` rounds running every configuration once in turn. Returns {label: [CPU seconds]} and
    {label: the stderr of its last run}. out=<a temporary directory> is appended to the options."""
    cpu = {label: [] for label, _, _ in configs}
    stderr = {}
    stdin_path = os.environ.get("STDIN")
    for r in range(rounds + 1):
        for label, extra_env, options in configs:
            out = tempfile.mkdtemp(prefix="hcct-ab-")
            env = dict(os.environ, **extra_env)
            if options is not None:
                env["HCCT_OPTIONS"] = (options + ":" if options else "") + f"out={out}"
            with open(stdin_path, "rb") if stdin_path else open(os.devnull, "rb") as stdin:
                before = children_cpu()
                run = subprocess.run(argv, env=env, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                seconds = children_cpu() - before
            shutil.rmtree(out, ignore_errors=True)
            if run.returncode != 0:
                sys.exit(f"{tool}: {label}: exit status {run.returncode}: {run.stderr.decode()[-500:]}")
            if r > 0:
                cpu[label].append(seconds)
            stderr[label] = run.stderr.decode()
    return cpu, stderr


def main():
    if "--" not in sys.argv or sys.argv.index("--") < 3:
        sys.exit(__doc__)
    sep = sys.argv.index("--")
    rounds, argv = int(sys.argv[1]), sys.argv[sep + 1:]
    configs = []
    for spec in sys.argv[2:sep]:
        label, _, rest = spec.partition("=")
        lib, _, options = rest.partition(":")
        if not label or not lib:
            sys.exit(f"ab_modes.py: bad configuration {spec!r} (LABEL=LIBDIR[:OPTIONS])")
        if lib == "-":
            configs.append((label, {}, None))
        else:
            configs.append((label, {"LD_PRELOAD": os.path.join(lib, "libhcct.so")}, options))
    cpu, _ = run_rounds(rounds, configs, argv, "ab_modes.py")
    print(f"load average {os.getloadavg()}")
    first = statistics.median(cpu[configs[0][0]])
    for label, _, _ in configs:
        m = statistics.median(cpu[label])
        print(f"{label}: median {m:.3f} s CPU, x{m / first:.3f} ({' '.join(f'{x:.3f}' for x in cpu[label])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
