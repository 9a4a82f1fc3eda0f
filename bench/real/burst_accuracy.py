#!/usr/bin/env python3
"""Accuracy of static bursting on the real workloads (issue 16, docs/BURSTING.md "The estimator").

  bench/real/burst_accuracy.py [--build DIR] [--only lua,sqlite] [--flavours finstr,plugin-early]
                               [--phi 1e-3,1e-4] [--options EXTRA] [--size short|full]
                               [--exact-run same|separate] [--runs N] [--schedules I:L,...]

For each workload (bench/real/workloads.py), build flavour and φ, one run under libhcct with
HCCT_OPTIONS=mode=hcct:exact=1:epsilon=φ/5:burst=1[:EXTRA]: the sampled (φ,ε)-HCCT and the exact
CCT of the same run. exact=1 keeps the gate open between bursts (the exact CCT needs every event),
so with --exact-run separate the sampled run has no exact=1 — with plugin probes and
burst_sync=unwind|auto the gate is then closed between bursts, as users run it, and the sampled
fraction is estimated from time — and the exact CCT comes from a second run of the same command
under mode=cct (both under setarch -R, so that the workloads make the same calls).
`hcct compare --json` (which scales the sampled side by 1/sampled_fraction) gives, per thread:
hot-edge coverage for every τ = 2τ̃·2^k ≤ 1, with τ̃ = ⌊φN⌋ / w_max of the exact CCT (thesis
§5.1.2), and the average counter error |w − w̃/f| / w over the sampled HCCT's hot contexts.
Rows: the thread with most calls (for zstd: every thread with at least 1 % of the calls, worst shown).
The spread between runs is large where hot contexts are seen in few bursts (docs/BURSTING.md, "The
estimator"): --runs N repeats each measurement and adds a line with the mean and range of the
average error and of the false negatives over the runs.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402


def compare(tools, sampled, exact, phi, taus=None):
    cmd = [tools["hcct"], "compare", sampled, exact, "--phi", repr(phi), "--json", "--no-symbols"]
    if taus:
        cmd += ["--tau", ",".join(repr(t) for t in taus)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("hcct compare failed: " + proc.stderr[-800:])
    return json.loads(proc.stdout)["comparisons"]


def run_profiled(argv, stdin_path, options, out, tools):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HCCT_OPTIONS")}
    env.update(LD_PRELOAD=tools["runtime"], HCCT_OPTIONS=options + ":out=" + out)
    with open(stdin_path or os.devnull, "rb") as stdin:
        proc = subprocess.run(["setarch", "-R", *argv], env=env, stdin=stdin, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise RuntimeError(f"run failed ({proc.returncode}): {proc.stderr[-500:]!r}")


EXACT_RUNS = {}  # (workload, flavour) -> directory of its exact run (--exact-run separate), kept till exit


def measure(workload, flavour, phi, args, tools, extra=""):
    binary = workload.build(flavour)
    argv, stdin_path = workload.argv(binary, args.size)
    work = tempfile.mkdtemp(prefix=f"hcct-burstacc-{workload.name}-")
    try:
        out = os.path.join(work, "d")
        separate = args.exact_run == "separate"
        options = f"mode=hcct:{'' if separate else 'exact=1:'}epsilon={phi / 5!r}:burst=1" + \
            "".join(":" + o for o in (args.options, extra) if o)
        run_profiled(argv, stdin_path, options, out, tools)
        exact = os.path.join(out, "exact")
        if separate:
            key = (workload.name, flavour.name)
            if key not in EXACT_RUNS:
                EXACT_RUNS[key] = tempfile.mkdtemp(prefix=f"hcct-burstacc-exact-{workload.name}-")
                run_profiled(argv, stdin_path, "mode=cct", os.path.join(EXACT_RUNS[key], "d"), tools)
            exact = os.path.join(EXACT_RUNS[key], "d")
        first = compare(tools, out, exact, phi)
        total = sum(c["reference"]["calls"] for c in first)
        rows = []
        for c in first:
            if c["reference"]["calls"] < 0.01 * total or c["wmax"] == 0:
                continue
            tau_tilde = c["reference_threshold"] / c["wmax"]
            taus = []
            t = 2 * tau_tilde
            while t <= 1 and len(taus) < 30:
                taus.append(t)
                t *= 2
            thread = c["test"]["thread"]
            again = compare(tools, out, exact, phi, taus or [1.0])
            c2 = next(x for x in again if x["test"]["thread"] == thread)
            coverage = min((x["ratio"] for x in c2["coverage"]), default=1.0)
            rows.append({"thread": thread, "calls": c["reference"]["calls"], "scale": c["test"]["count_scale"],
                         "coverage": coverage, "avg_error": c["avg_error_percent"],
                         "max_error": c["max_error_percent"], "hot": c["hot"], "exact_hot": c["exact_hot"],
                         "false_negatives": c["false_negatives"]})
        return rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(workloads.ROOT, "build"))
    ap.add_argument("--only", default=",".join(workloads.WORKLOADS))
    ap.add_argument("--flavours", default="finstr,plugin-early")
    ap.add_argument("--phi", default="1e-3,1e-4")
    ap.add_argument("--options", default="", help="more HCCT_OPTIONS, e.g. burst_sync=auto")
    ap.add_argument("--size", choices=("short", "full"), default="short")
    ap.add_argument("--exact-run", choices=("same", "separate"), default="same",
                    help="exact CCT from the same run (exact=1: the gate stays open between bursts) or from a "
                         "second run (the sampled run as users run it: closed gate with plugin probes and "
                         "burst_sync=unwind|auto)")
    ap.add_argument("--runs", type=int, default=1, help="measurements per workload, build and phi (the spread)")
    ap.add_argument("--schedules", default="default",
                    help="burst schedules I:L (burst_interval:burst_length, ms), comma-separated; default: none given")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    tools = {"runtime": os.path.join(build, "libhcct", "libhcct.so"),
             "hcct": os.path.join(build, "tools", "hcct", "hcct"),
             "plugin": os.path.join(build, "gcc-plugin", "hcct_plugin.so")}
    all_flavours = workloads.flavours(tools["plugin"])
    print(f"{'workload':8} {'build':13} {'phi':>6} {'thread':>6} {'calls':>13} {'1/f':>7} {'coverage':>9} "
          f"{'avg err':>8} {'max err':>8} {'hot':>5} {'exact hot':>9} {'FN':>4}")
    for name in [n for n in args.only.split(",") if n]:
        for fl in [f for f in args.flavours.split(",") if f]:
            for schedule in [x for x in args.schedules.split(",") if x]:
                extra = ""
                if schedule != "default":
                    interval, length = schedule.split(":")
                    extra = f"burst_interval={interval}:burst_length={length}"
                    print(f"# {name} {fl}: {extra}", flush=True)
                for phi in [float(p) for p in args.phi.split(",") if p]:
                    errors, negatives, coverages = [], [], []
                    for _ in range(args.runs):
                        try:
                            rows = measure(workloads.WORKLOADS[name], all_flavours[fl], phi, args, tools, extra)
                        except (workloads.Unavailable, RuntimeError) as e:
                            print(f"{name:8} {fl:13} {phi:6g} skipped: {e}")
                            break
                        for r in rows:
                            print(f"{name:8} {fl:13} {phi:6g} {r['thread']:>6} {r['calls']:>13,} {r['scale']:7.2f} "
                                  f"{100 * r['coverage']:8.1f}% {r['avg_error']:7.2f}% {r['max_error']:7.1f}% "
                                  f"{r['hot']:>5} {r['exact_hot']:>9} {r['false_negatives']:>4}", flush=True)
                        if rows:  # the worst thread of the run
                            errors.append(max(r["avg_error"] for r in rows))
                            negatives.append(max(r["false_negatives"] for r in rows))
                            coverages.append(min(r["coverage"] for r in rows))
                    if len(errors) > 1:
                        print(f"{name:8} {fl:13} {phi:6g} {len(errors)} runs: avg error mean "
                              f"{sum(errors) / len(errors):.2f}% (range {min(errors):.2f}–{max(errors):.2f}%), "
                              f"false negatives {min(negatives)}–{max(negatives)}, coverage ≥ "
                              f"{100 * min(coverages):.1f}%", flush=True)
    for directory in EXACT_RUNS.values():
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
