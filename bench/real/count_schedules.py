#!/usr/bin/env python3
"""The count clock's cost under several burst schedules (docs/BURSTING.md, "The count clock's schedule").

  bench/real/count_schedules.py [--build BUILD] [--only lua,sqlite] [--rounds 5] [--size full|short]
                                [--schedules default,0.1:0.01,0.1:0.0033]

Per workload (bench/real/workloads.py): native and the plugin's stage=late clock=count build
(plugin-late-count, built with BUILD's plugin) under libhcct mode=hcct:burst=1 with each schedule
(burst_interval:burst_length, ms; `default` for none given, the count clock's COUNT_DEFAULT) and under mode=off, every configuration
once to warm up, then ROUNDS rounds round-robin (as run.py). Prints the median CPU seconds (user +
sys, wait4) and its ratio to native's, the median wall ratio, and per schedule the main thread's
bursts from the first timed run's profile (`hcct report --json`). Accuracy is burst_accuracy.py's
(--flavours plugin-late-count --exact-run separate --size full --schedules ...).

--instructions SCALE: instead of timing, one run of each configuration under callgrind (instruction
counts: repeatable whatever the machine's load), with every schedule's interval and length
multiplied by SCALE, so that under valgrind's slowdown (about SCALE) a burst aims at the same
number of calls as the unscaled schedule does natively (the count clock sizes bursts in time).
"""
import argparse
import json
import re
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

# The count clock's default schedule (libhcct/options.cc; docs/BURSTING.md), in ms: --instructions
# scales it like every other schedule.
COUNT_DEFAULT = "0.1:0.005"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402
import workloads  # noqa: E402


def schedule_options(schedule):
    if schedule == "default":
        return "mode=hcct:burst=1"
    interval, length = schedule.split(":")
    return f"mode=hcct:burst=1:burst_interval={interval}:burst_length={length}"


def bursts_of(hcct_tool, profile):
    """Bursts and sampled fraction of the thread with most bursts (`hcct info`)."""
    proc = subprocess.run([hcct_tool, "info", profile], capture_output=True, text=True)
    best = (None, None)
    bursts = None
    for line in proc.stdout.splitlines():
        key, _, value = line.strip().partition(" = ")
        if key == "bursts":
            bursts = int(value)
        elif key == "sampled_fraction" and bursts is not None:
            if best[0] is None or bursts > best[0]:
                best = (bursts, f"{float(value):.4f}")
            bursts = None
    return best


def count_instructions(w, configs, schedules, args, tools):
    """One callgrind run per configuration, schedules scaled by args.instructions."""
    rows = []
    for c in configs:
        options = c.hcct
        if c.hcct and "burst" in c.hcct:
            s = c.label.split(" ", 1)[1]
            interval, length = (COUNT_DEFAULT if s == "default" else s).split(":")
            options = schedule_options(f"{float(interval) * args.instructions:g}:{float(length) * args.instructions:g}")
        argv, stdin_path = w.argv(c.binary, args.size)
        work = tempfile.mkdtemp(prefix="hcct-count-cg-")
        env = run.clean_env()
        cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes",
               "--callgrind-out-file=" + os.path.join(work, "cg.%p")]
        if options:
            cmd += ["env", "LD_PRELOAD=" + tools["runtime"], "HCCT_OPTIONS=" + options + ":out=" + os.path.join(work, "p")]
        with open(stdin_path or os.devnull, "rb") as stdin:
            proc = subprocess.run(cmd + argv, env=env, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        refs = [int(m.replace(",", "")) for m in re.findall(r"I\s+refs:\s+([\d,]+)", proc.stderr)]
        bursts = bursts_of(tools["hcct"], os.path.join(work, "p")) if options and "burst" in options else (None, None)
        shutil.rmtree(work, ignore_errors=True)
        rows.append((c.label, options, sum(refs), bursts))
    native = rows[0][2]
    print(f"{w.name} ({args.size}, callgrind, schedules x{args.instructions:g}):")
    for label, options, refs, (bursts, fraction) in rows:
        extra = f"  bursts {bursts}, f {fraction}" if bursts is not None else ""
        print(f"  {label:24s} {refs:>15,} Ir  x{refs / native:5.3f}  [{options or ''}]{extra}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--only", default="lua,sqlite,zstd,json,tcc")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", default="full", choices=("full", "short"))
    ap.add_argument("--schedules", default="default,0.1:0.01,0.1:0.0033")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--instructions", type=float, default=0, metavar="SCALE")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    tools = {"runtime": os.path.join(build, "libhcct", "libhcct.so"),
             "hcct": os.path.join(build, "tools", "hcct", "hcct"),
             "plugin": os.path.join(build, "gcc-plugin", "hcct_plugin.so"),
             "spawn_rusage": run.build_spawn_rusage()}
    flavours = workloads.flavours(tools["plugin"])
    schedules = args.schedules.split(",")
    print(f"# load at start: {os.getloadavg()}", flush=True)
    for name in args.only.split(","):
        w = workloads.WORKLOADS[name]
        configs = [run.Config("native", "native"), run.Config("count off", "plugin-late-count", "mode=off")]
        configs += [run.Config("count " + s, "plugin-late-count", schedule_options(s)) for s in schedules]
        for c in configs:
            c.binary = w.build(flavours[c.flavour])
        if args.instructions:
            count_instructions(w, configs, schedules, args, tools)
            continue
        first_profile = {}
        for r in range(args.rounds + 1):
            for c in configs:
                res = run.run_once(c, w, args.size, tools, args.timeout, 1)
                try:
                    if "stopped" in res or res["status"] != 0:
                        sys.exit(f"{name} {c.label}: {res.get('stopped') or res['stderr'][-400:]}")
                    if r == 0:
                        continue  # warm-up
                    c.cpu.append(res["cpu"])
                    c.wall.append(res["wall"])
                    if c.hcct and "burst" in c.hcct and c.label not in first_profile and os.path.exists(tools["hcct"]):
                        first_profile[c.label] = bursts_of(tools["hcct"], res["profile"])
                finally:
                    shutil.rmtree(res["tmp"], ignore_errors=True)
        native_cpu = statistics.median(configs[0].cpu)
        native_wall = statistics.median(configs[0].wall)
        print(f"{name} ({args.rounds} rounds, load now {os.getloadavg()[0]:.1f}): native CPU {native_cpu:.3f} s")
        for c in configs:
            cpu = statistics.median(c.cpu)
            bursts, fraction = first_profile.get(c.label, (None, None))
            extra = f"  bursts {bursts}, f {fraction}" if bursts is not None else ""
            print(f"  {c.label:24s} CPU {cpu:7.3f} s  x{cpu / native_cpu:5.2f}  wall x{statistics.median(c.wall) / native_wall:5.2f}"
                  f"{extra}", flush=True)


if __name__ == "__main__":
    main()
