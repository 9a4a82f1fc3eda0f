#!/usr/bin/env python3
"""Runs configurations of a program in one session and prints time and memory ratios.

Every configuration runs ROUNDS times, interleaved (round 1 of all, then round 2, ...), so that
machine noise hits all of them alike; the table shows the median wall time, its ratio to each
baseline measured in the same session, the peak RSS, and the profile's node counts.

  bench/bench.py [--build DIR] [--rounds N] [--instructions] [--json] SUITE...

--instructions runs every configuration once under valgrind's callgrind with a smaller input and
reports instruction counts instead: repeatable whatever else the machine is doing.

Suites: calls, shapes (issue 2: native, glibc's empty hooks, libhcct empty/cct/hcct),
        memory (hcct's memory bound as the run grows, against cct).
Other suites register themselves in SUITES (see bench/suites_*.py).
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Config:
    """One way of running a program: argv, extra environment, and whether it writes a profile."""

    def __init__(self, label, argv, env=None, hcct_options=None):
        self.label = label
        self.argv = argv
        self.env = env or {}
        self.hcct_options = hcct_options  # None: not run under libhcct
        self.times = []
        self.cpu = []  # user + system CPU seconds of each run: a cost the machine's load does not inflate
        self.rss_kb = []
        self.profile = None


def count_instructions(cfg, build):
    """Total instructions of one run under callgrind (the runtime included)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HCCT_OPTIONS")}
    env.update(cfg.env)
    out_dir = tempfile.mkdtemp(prefix="hcct-bench-")
    cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes",
           "--callgrind-out-file=" + os.path.join(out_dir, "cg.%p")]
    if cfg.hcct_options is not None:
        cmd += ["env", "LD_PRELOAD=" + os.path.join(build, "libhcct", "libhcct.so"),
                "HCCT_OPTIONS=" + cfg.hcct_options + ":out=" + os.path.join(out_dir, "profile")]
    proc = subprocess.run(cmd + cfg.argv, env=env, capture_output=True, text=True)
    shutil.rmtree(out_dir, ignore_errors=True)
    refs = [int(m.replace(",", "")) for m in re.findall(r"I\s+refs:\s+([\d,]+)", proc.stderr)]
    if proc.returncode != 0 or not refs:
        sys.exit(f"bench: {cfg.label}: callgrind failed: {proc.stderr[-2000:]}")
    return refs[-1]


def run_instructions(name, configs, baselines, build):
    counts = {c.label: count_instructions(c, build) for c in configs}
    rows = []
    for cfg in configs:
        row = {"config": cfg.label, "instructions": counts[cfg.label]}
        for b in baselines:
            row["x_" + b] = round(counts[cfg.label] / counts[b], 3)
        rows.append(row)
    return {"suite": name + " (instructions)", "command": " ".join(configs[0].argv), "rounds": 1,
            "rows": rows}


def run_once(cfg, build):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HCCT_OPTIONS")}
    env.update(cfg.env)
    out_dir = None
    if cfg.hcct_options is not None:
        out_dir = tempfile.mkdtemp(prefix="hcct-bench-")
        env["LD_PRELOAD"] = os.path.join(build, "libhcct", "libhcct.so")
        env["HCCT_OPTIONS"] = cfg.hcct_options + ":out=" + out_dir
    start = time.perf_counter()
    proc = subprocess.Popen(cfg.argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if status != 0:
        sys.exit(f"bench: {cfg.label}: {' '.join(cfg.argv)} failed (status {status}): {err}")
    cfg.times.append(elapsed)
    cfg.cpu.append(usage.ru_utime + usage.ru_stime)
    cfg.rss_kb.append(usage.ru_maxrss)
    if out_dir:
        if cfg.profile is None:
            cfg.profile = profile_summary(build, out_dir)
        shutil.rmtree(out_dir, ignore_errors=True)


def profile_summary(build, out_dir):
    info = subprocess.run([os.path.join(build, "tools", "hcct", "hcct"), "info", "--json", out_dir],
                          capture_output=True, text=True)
    if info.returncode != 0:
        return None
    data = json.loads(info.stdout)
    threads = [t for p in data["processes"] for t in p["threads"]]
    return {
        "threads": len(threads),
        "calls": sum(t["calls"] for t in threads),
        "nodes": sum(t["nodes"] for t in threads),
        "nodes_peak": sum(t["nodes_peak"] for t in threads),
        "tree_bytes": sum(t["tree_bytes"] for t in threads),
    }


def run_suite(name, configs, baselines, build, rounds):
    for cfg in configs:  # warm-up: page cache, dynamic loader
        run_once(cfg, build)
        cfg.times.clear()
        cfg.cpu.clear()
        cfg.rss_kb.clear()
    for _ in range(rounds):
        for cfg in configs:
            run_once(cfg, build)
    rows = []
    med = {c.label: statistics.median(c.times) for c in configs}
    cpu = {c.label: statistics.median(c.cpu) for c in configs}
    for cfg in configs:
        row = {
            "config": cfg.label,
            "median_s": round(med[cfg.label], 4),
            "min_s": round(min(cfg.times), 4),  # the least disturbed run (not in the printed table)
            "median_cpu_s": round(cpu[cfg.label], 4),
            "peak_rss_mb": round(max(cfg.rss_kb) / 1024, 1),
        }
        for b in baselines:
            row["x_" + b] = round(med[cfg.label] / med[b], 3)
        for b in baselines:
            row["cpu_x_" + b] = round(cpu[cfg.label] / cpu[b], 3) if cpu[b] else None
        if cfg.profile:
            row.update(cfg.profile)
        rows.append(row)
    return {"suite": name, "command": " ".join(configs[0].argv), "rounds": rounds, "rows": rows}


def print_table(result):
    rows = result["rows"]
    if "instructions" in rows[0]:
        cols = ["config", "instructions"] + [k for k in rows[0] if k.startswith("x_")]
        print(f"\n## {result['suite']}  (callgrind, one run each): {result['command']}")
    else:
        cols = ["config", "median_s"] + [k for k in rows[0] if k.startswith("x_")] + ["median_cpu_s"] + \
            [k for k in rows[0] if k.startswith("cpu_x_")] + ["peak_rss_mb", "calls", "nodes", "nodes_peak", "tree_bytes"]
        print(f"\n## {result['suite']}  ({result['rounds']} interleaved rounds, median wall time): "
              f"{result['command']}")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            cells.append(f"{v:,}" if isinstance(v, int) else str(v))
        print("| " + " | ".join(cells) + " |")


def suite_calls(build, example="calls", args=("30", "20000000"), small=False):
    if small:
        args = ("24", "1000000") if example == "calls" else ("2", "100000")
    ex = os.path.join(build, "examples")
    native = [os.path.join(ex, example + "_native"), *args]
    inst = [os.path.join(ex, example), *args]
    configs = [
        Config("native", native),
        Config("instrumented, glibc empty hooks", inst),
        Config("libhcct empty", inst, hcct_options="mode=empty"),
        Config("libhcct cct", inst, hcct_options="mode=cct"),
        Config("libhcct hcct", inst, hcct_options="mode=hcct"),
    ]
    configs[1].label = "glibc-hooks"
    configs[2].label = "empty"
    configs[3].label = "cct"
    configs[4].label = "hcct"
    return example, configs, ["native", "empty"]


def suite_plugin(build, small=False):
    """Issue 3: the GCC plugin's probes against -finstrument-functions, both under libhcct."""
    ex = os.path.join(build, "examples")
    args = ("24", "1000000") if small else ("30", "20000000")
    native = [os.path.join(ex, "calls_native"), *args]
    plugin = [os.path.join(ex, "calls_plugin"), *args]
    inst = [os.path.join(ex, "calls"), *args]
    configs = [Config("native", native), Config("plugin, no runtime", plugin),
               Config("plugin off", plugin, hcct_options="mode=off")]
    for mode in ("empty", "cct", "hcct"):
        configs.append(Config("plugin " + mode, plugin, hcct_options="mode=" + mode))
    for mode in ("empty", "cct", "hcct"):
        configs.append(Config("finstr " + mode, inst, hcct_options="mode=" + mode))
    late = os.path.join(ex, "calls_plugin_late")
    if os.path.exists(late):  # probes after inlining (stage=late): fib's tail recursion becomes a loop
        configs.append(Config("plugin late off", [late, *args], hcct_options="mode=off"))
        for mode in ("empty", "hcct"):
            configs.append(Config("plugin late " + mode, [late, *args], hcct_options="mode=" + mode))
    return "plugin", configs, ["native", "finstr hcct"]


def suite_shapes(build, small=False):
    return suite_calls(build, "shapes", ("2", "3000000"), small)


def suite_memory(build, small=False):
    """hcct's tree stays within a bound set by epsilon as the run grows; cct's does not."""
    ex = os.path.join(build, "examples")
    configs = []
    for n in ("24", "27", "30"):
        argv = [os.path.join(ex, "calls"), n, "1000"]
        configs.append(Config(f"cct fib({n})", argv, hcct_options="mode=cct"))
        configs.append(Config(f"hcct fib({n})", argv, hcct_options="mode=hcct"))
    return "memory", configs, [configs[0].label]


SUITES = {"calls": suite_calls, "shapes": suite_shapes, "memory": suite_memory,
          "plugin": suite_plugin}


def load_suite_modules():
    """Other components keep their suites in bench/suites/*.py: each defines SUITES = {name: fn},
    where fn(build, small=False) returns (title, [Config], [baseline labels]) and optionally a
    fourth item, a function of the timed result that returns summary lines (printed below the
    table, and kept as "summary" in --json)."""
    import importlib.util
    folder = os.path.join(HERE, "suites")
    if not os.path.isdir(folder):
        return
    for entry in sorted(os.listdir(folder)):
        if not entry.endswith(".py"):
            continue
        spec = importlib.util.spec_from_file_location("hcct_bench_" + entry[:-3], os.path.join(folder, entry))
        module = importlib.util.module_from_spec(spec)
        module.Config = Config
        spec.loader.exec_module(module)
        SUITES.update(getattr(module, "SUITES", {}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions under callgrind instead of timing")
    ap.add_argument("suites", nargs="*", default=["calls", "shapes", "memory"])
    args = ap.parse_args()
    load_suite_modules()
    build = os.path.abspath(args.build)
    results = []
    for s in args.suites:
        if s not in SUITES:
            sys.exit(f"bench: unknown suite '{s}' (known: {', '.join(SUITES)})")
        spec = SUITES[s](build, small=args.instructions)
        name, configs, baselines = spec[:3]
        summarize = spec[3] if len(spec) > 3 else None  # optional: result -> lines printed below the table
        if args.instructions:
            results.append(run_instructions(name, configs, baselines, build))
        else:
            results.append(run_suite(name, configs, baselines, build, args.rounds))
            if summarize:
                results[-1]["summary"] = summarize(results[-1])
        if not args.json:
            print_table(results[-1])
            for line in results[-1].get("summary", []):
                print(line)
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
