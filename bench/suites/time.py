"""Time per calling context (issue 17): what CPU-time sampling costs.

    python3 bench/bench.py --rounds 5 time
    python3 bench/bench.py --instructions time
    python3 bench/bench.py --rounds 7 time-cost    # hcct mode: the default rate's cost, geometric mean

Each program runs in cct and hcct mode with time=off and with time=cpu (the default in hcct mode,
1,000 samples per second of each thread's CPU time), interleaved in one session. The sampler's cost is the ratio
of time=cpu to time=off in the same mode; the table also gives each run's CPU time (user + system,
median), which the machine's load does not inflate as it does wall time. Programs: examples/calls.c (call
intensive: ~10^8 calls) and bench/programs/compute.c (compute bound, 81 calls).
Config is injected by bench.py.
"""
import os
import subprocess

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "programs")


def built(build, name, source):
    """Compiles a bench/programs source with -O2 -finstrument-functions (cached in the build dir)."""
    out_dir = os.path.join(build, "bench-time")
    exe = os.path.join(out_dir, name)
    path = os.path.join(PROGRAMS, source)
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(path):
        os.makedirs(out_dir, exist_ok=True)
        subprocess.run(["gcc", "-O2", "-g", "-finstrument-functions", "-o", exe, path], check=True)
    return exe


def suite_time(build, small=False):
    ex = os.path.join(build, "examples")
    calls = [os.path.join(ex, "calls"), *(("24", "1000000") if small else ("30", "20000000"))]
    compute = [built(build, "compute", "compute.c"), *(("4", "5") if small else ("20", "20"))]
    configs = []
    for name, argv in (("calls", calls), ("compute", compute)):
        for mode in ("cct", "hcct"):
            for time in ("off", "cpu"):
                c = Config(f"{name} {mode} time={time}", argv, hcct_options=f"mode={mode}:time={time}")
                c.label = f"{name}-{mode}-{time}"
                configs.append(c)
    return "time", configs, ["calls-hcct-off", "compute-hcct-off"]


def geometric_mean(values):
    product = 1.0
    for v in values:
        product *= v
    return product ** (1.0 / len(values)) if values else float("nan")


def suite_time_cost(build, small=False):
    """hcct mode, the runtime's default: what time sampling at the default rate (time=cpu, 1 kHz)
    adds to the call-intensive examples (examples/calls, examples/shapes) and to a compute-bound
    program with few calls (bench/programs/compute.c), each against time=off of the same program in
    the same session (interleaved rounds); time=wall (the sampler thread) beside it. The summary
    gives each ratio and their geometric mean, in wall time and in CPU time, and the tree's bytes
    with and without the time summary."""
    ex = os.path.join(build, "examples")
    programs = (
        ("calls", [os.path.join(ex, "calls"), *(("24", "1000000") if small else ("30", "20000000"))]),
        ("shapes", [os.path.join(ex, "shapes"), *(("2", "100000") if small else ("2", "1000000"))]),
        ("compute", [built(build, "compute", "compute.c"), *(("4", "5") if small else ("20", "20"))]),
    )
    configs = []
    for name, argv in programs:
        for time in ("off", "cpu", "wall"):
            c = Config(f"{name} hcct time={time}", argv, hcct_options=f"mode=hcct:time={time}")
            c.label = f"{name}-{time}"
            configs.append(c)
    names = [name for name, _ in programs]

    def summarize(result):
        rows = {r["config"]: r for r in result["rows"]}
        lines = []
        for time in ("cpu", "wall"):
            wall = {n: rows[f"{n}-{time}"]["median_s"] / rows[f"{n}-off"]["median_s"] for n in names}
            fastest = {n: rows[f"{n}-{time}"]["min_s"] / rows[f"{n}-off"]["min_s"] for n in names}
            cpu = {n: rows[f"{n}-{time}"]["median_cpu_s"] / rows[f"{n}-off"]["median_cpu_s"] for n in names}
            lines.append(f"time={time} / time=off, wall: " + ", ".join(f"{n} {wall[n]:.4f}" for n in names) +
                         f"; geometric mean {geometric_mean(list(wall.values())):.4f}")
            lines.append(f"time={time} / time=off, fastest run's wall: " +
                         ", ".join(f"{n} {fastest[n]:.4f}" for n in names) +
                         f"; geometric mean {geometric_mean(list(fastest.values())):.4f}")
            lines.append(f"time={time} / time=off, CPU:  " + ", ".join(f"{n} {cpu[n]:.4f}" for n in names) +
                         f"; geometric mean {geometric_mean(list(cpu.values())):.4f}")
        for n in names:
            off, on = rows[f"{n}-off"].get("tree_bytes"), rows[f"{n}-cpu"].get("tree_bytes")
            if off and on:
                lines.append(f"{n}: tree bytes time=off {off:,}, time=cpu {on:,} ({on / off:.3f}x)")
        return lines

    return "time-cost", configs, [f"{n}-off" for n in names], summarize


SUITES = {"time": suite_time, "time-cost": suite_time_cost}
