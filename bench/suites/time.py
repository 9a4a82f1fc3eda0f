"""Time per calling context (issue 17): what CPU-time sampling costs.

    python3 bench/bench.py --rounds 5 time
    python3 bench/bench.py --instructions time

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


SUITES = {"time": suite_time}
