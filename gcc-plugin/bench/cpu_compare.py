#!/usr/bin/env python3
"""Min and median CPU time (user + sys) of interleaved runs of several builds of one program.

CPU time moves less than wall time with the load other processes put on a shared machine, and the
minimum over many interleaved rounds is the steadiest figure for small differences (a few % between
probe shapes). Ratios are to the first configuration, measured in the same session.

  cpu_compare.py [--build DIR] [--rounds N] [--args "30 20000000"] LABEL=EXE[:HCCT_OPTIONS] ...

EXE is relative to DIR/examples unless absolute; with HCCT_OPTIONS (e.g. mode=hcct) the run gets
LD_PRELOAD=DIR/libhcct/libhcct.so and a fresh output directory. Example (docs/BENCHMARKS.md):

  cpu_compare.py --rounds 15 "finstr hcct=calls:mode=hcct" "plugin hcct=calls_plugin:mode=hcct"
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--args", default="30 20000000", help="program arguments")
    ap.add_argument("configs", nargs="+", metavar="LABEL=EXE[:HCCT_OPTIONS]")
    a = ap.parse_args()
    configs = []
    for spec in a.configs:
        if "=" not in spec:
            sys.exit(f"cpu_compare: '{spec}': expected LABEL=EXE[:HCCT_OPTIONS]")
        label, rest = spec.split("=", 1)
        exe, _, options = rest.partition(":")
        path = exe if os.path.isabs(exe) else os.path.join(a.build, "examples", exe)
        if not os.access(path, os.X_OK):
            sys.exit(f"cpu_compare: '{label}': no executable {path}")
        configs.append((label, path, options or None))
    runtime = os.path.join(a.build, "libhcct", "libhcct.so")
    times = {label: [] for label, _, _ in configs}
    for r in range(a.rounds + 1):  # round 0 warms up the page cache and the loader
        for label, path, options in configs:
            env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HCCT_OPTIONS")}
            out = None
            if options:
                out = tempfile.mkdtemp(prefix="hcct-cpu-")
                env["LD_PRELOAD"] = runtime
                env["HCCT_OPTIONS"] = options + ":out=" + out
            proc = subprocess.Popen([path, *a.args.split()], env=env, stdout=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            if out:
                shutil.rmtree(out, ignore_errors=True)
            if status != 0:
                sys.exit(f"cpu_compare: '{label}' failed (status {status})")
            if r:
                times[label].append(usage.ru_utime + usage.ru_stime)
    base_min = min(times[configs[0][0]])
    base_med = statistics.median(times[configs[0][0]])
    print(f"| config | min CPU s | x {configs[0][0]} | median CPU s | x {configs[0][0]} |")
    print("|---|---|---|---|---|")
    for label, _, _ in configs:
        lo, med = min(times[label]), statistics.median(times[label])
        print(f"| {label} | {lo:.3f} | {lo / base_min:.3f} | {med:.3f} | {med / base_med:.3f} |")


if __name__ == "__main__":
    main()
