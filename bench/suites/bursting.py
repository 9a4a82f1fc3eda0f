"""Static bursting (issue 4, docs/BURSTING.md): bursting hcct against native, gprof and exhaustive hcct.

    python3 bench/bench.py --rounds 5 bursting
    python3 bench/bench.py --instructions bursting     # callgrind (the timer runs in valgrind's time)
    python3 bench/bench.py --rounds 5 bursting-long    # plugin rows on a 10x longer run (~40 bursts)

Configurations on the call-intensive example (examples/calls.c): native; gprof (the same source
built with -pg); exhaustive hcct with -finstrument-functions and with the GCC plugin; bursting hcct
(20 ms / 2 ms) with the default burst_sync=shadow (every probe keeps a shadow stack between bursts;
each thread's bursts on its own event clock, issue 16) and with the other choices: auto (the time
clock; for the plugin the gate closed between bursts, path rebuilt from the machine stack) and unwind. Config is injected by bench.py.
"""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "..", "examples", "calls.c")


def gprof_binary(build):
    """examples/calls.c built with -pg (cached in the build directory)."""
    out_dir = os.path.join(build, "bench-bursting")
    exe = os.path.join(out_dir, "calls_gprof")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(SOURCE):
        os.makedirs(out_dir, exist_ok=True)
        subprocess.run(["gcc", "-O2", "-g", "-pg", "-o", exe, SOURCE], check=True)
    return exe, out_dir


def suite_bursting(build, small=False):
    ex = os.path.join(build, "examples")
    args = ("24", "1000000") if small else ("30", "20000000")
    native = [os.path.join(ex, "calls_native"), *args]
    inst = [os.path.join(ex, "calls"), *args]
    plugin = [os.path.join(ex, "calls_plugin"), *args]
    gprof, gprof_dir = gprof_binary(build)
    configs = [
        Config("native", native),
        Config("gprof", [gprof, *args], env={"GMON_OUT_PREFIX": os.path.join(gprof_dir, "gmon.out")}),
        Config("finstr hcct", inst, hcct_options="mode=hcct"),
        # Default since issue 16: burst_sync=shadow, each thread's bursts on its own event clock.
        Config("finstr burst (shadow, event clock)", inst, hcct_options="mode=hcct:burst=1"),
        # The time clock with a shadow stack: issue 4's default (the event clock's cost is the difference).
        Config("finstr burst (auto, time clock)", inst, hcct_options="mode=hcct:burst=1:burst_sync=auto"),
        Config("finstr burst (unwind)", inst, hcct_options="mode=hcct:burst=1:burst_sync=unwind"),
    ]
    if os.path.exists(plugin[0]):
        configs += [
            Config("plugin off", plugin, hcct_options="mode=off"),
            Config("plugin hcct", plugin, hcct_options="mode=hcct"),
            Config("plugin burst (auto: unwind)", plugin, hcct_options="mode=hcct:burst=1:burst_sync=auto"),
            Config("plugin burst (shadow, event clock)", plugin, hcct_options="mode=hcct:burst=1:burst_sync=shadow"),
            Config("plugin burst (default)", plugin, hcct_options="mode=hcct:burst=1"),
        ]
    return "bursting", configs, ["native", "gprof"]


def suite_bursting_long(build, small=False):
    """The same program run 10x longer (~40 bursts instead of ~4): the plugin rows only."""
    ex = os.path.join(build, "examples")
    args = ("24", "1000000") if small else ("30", "200000000")
    plugin = [os.path.join(ex, "calls_plugin"), *args]
    gprof, gprof_dir = gprof_binary(build)
    configs = [
        Config("native", [os.path.join(ex, "calls_native"), *args]),
        Config("gprof", [gprof, *args], env={"GMON_OUT_PREFIX": os.path.join(gprof_dir, "gmon.out")}),
        Config("plugin off", plugin, hcct_options="mode=off"),
        Config("plugin burst (auto: unwind)", plugin, hcct_options="mode=hcct:burst=1:burst_sync=auto"),
    ]
    return "bursting-long", configs, ["native", "gprof"]


SUITES = {"bursting": suite_bursting, "bursting-long": suite_bursting_long}
