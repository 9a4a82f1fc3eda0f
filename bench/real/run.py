#!/usr/bin/env python3
"""Real workloads under every way of profiling them, in one session: time, CPU, memory, ratios.

  bench/real/run.py [--rounds 5] [--only lua,sqlite] [--configs REGEX] [--size full|short]
                    [--build DIR] [--timeout S] [--json FILE] [--paths]

Workloads (Debian source packages, fetched once with scripts/debian-source.sh; a workload whose
source or tools cannot be had is skipped with one line saying why):
  lua     Lua 5.4 interpreter, a mixed script (strings, tables, sort, recursion, coroutines, closures)
  sqlite  SQLite 3.40 shell built from its amalgamation, a speedtest-style SQL script in memory
  zstd    zstd 1.5.4 compressing 48 MB of generated text with 4 worker threads
  json    nlohmann::json 3.11 (template-heavy C++), a driver of ours: build, dump, parse, query, patch
  tcc     Tiny C Compiler 0.9.27 compiling its own sources (preprocess, compile, link -r), 6 rounds,
          through its command line called by a driver of ours (bench/real/tcc_workload.c)

Each program is built once per flavour (native; gprof -pg; gcc -finstrument-functions; the hcct GCC
plugin with stage=early and stage=late; clang -finstrument-functions-after-inlining), -O2 -g, and
cached by compiler, flags and plugin (in ~/.cache/hcct/real). Then every configuration runs once to
warm up and ROUNDS times round-robin (round 1 of every configuration, then round 2, ...), so that
the load of the machine hits them alike. A configuration whose warm-up run costs more than
--slow-ratio (default 10) times native's CPU is timed by that one run (its row says "1 run (slow)"):
a ratio of 10 or more needs no median, and five runs of each would take hours. Configurations:

  native               no instrumentation
  gprof                -pg (gmon.out written in a temporary directory)
  finstr glibc-hooks   -finstrument-functions, no runtime: the probes call glibc's
                       __cyg_profile_func_enter/exit, one empty function (nm -D libc.so.6)
  finstr empty|cct|hcct|hcct+burst    the same binary, LD_PRELOAD=libhcct.so, HCCT_OPTIONS=mode=...
  plugin early|late off|hcct|hcct+burst    plugin builds under libhcct (off: runtime loaded, mode=off)
  plugin early|late hcct+burst auto|shadow  the same with burst_sync= spelt out (docs/BURSTING.md)
  plugin late-count off|hcct+burst[ f=3%]   the plugin's stage=late with clock=count (the count
                       clock), on its default schedule and with a burst of 0.01 ms every 0.3 ms
  clang-ai hcct        clang -finstrument-functions-after-inlining under libhcct mode=hcct
  uftrace              uftrace record --no-libcall on the -finstrument-functions binary (the peer;
                       skipped with a message when uftrace is not installed)
  baseline finstr empty|cct|hcct    with HCCT_BENCH_BASELINE_LIB=/path/to/libhcct.so set: the
                       finstr binary under that (older) library, in the same session

Columns: median wall time; median CPU time of the program and its descendants (user+sys, from
wait4's rusage, taken by the small helper spawn_rusage.c so that ru_maxrss is the program's and not
this script's); CPU ratio to native (and to "finstr empty"); the largest peak RSS (ru_maxrss) seen;
calls and lost events from the profile of the first timed run. The program's output (stdout, which
for zstd is the compressed stream) must be identical in every configuration: a difference is printed
loudly and the row marked OUTPUT DIFFERS. At the end, the targets of issue 15 are checked.

Profiles go to a temporary directory per run (HCCT_OPTIONS out=...), removed after each run.

--paths runs the path-profiling suite instead (issue 24; docs/BENCHMARKS.md, "Path profiling on
real programs"), with clang -O2 -g builds: native; instr-gen (-fprofile-instr-generate, clang's
edge counters, the baseline of the targets); the kpath pass at its early stage (one binary, linked
with libhcct) under k=1 (BLPP), k=8 and k=16 with each forest (forest=kwf, forest=ksf); the late
stage at k=8 (and, `--configs goto-versions`, the late-stage bursting build with computed-goto
functions versioned too). Columns add the profile's size, the build's compile CPU time (kept with
each cached build: measured under the load of the session that built it) and, from the runtime's
verbose=1 lines, the items, the share that called the runtime and the forest's nodes. At the end,
issue 24's targets are checked against instr-gen (CPU) and native (RSS, compile time).

The kWF rows run the defaults, i.e. a bounded forest (path_epsilon=1e-4; issue 25, docs/KPATH.md,
"Bounded forests"), whose budget grows with path_grow (default 4; "kpath k=8|16 kwf fixed" run
path_grow=1); "kpath k=16 kwf exact" runs path_epsilon=0. The first timed run of each keeps
its profile, and issue 25's accuracy is measured from them: `hcct paths --json --phi F` of both,
F = 1e-3 and 1e-4; a sequence at or above F·N in the exact profile is a false negative when the
bounded one lacks it; the error is |bounded − exact| / exact, averaged over those sequences.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

BURST = "burst=1"  # the runtime's defaults: a 2 ms burst every 20 ms (docs/BURSTING.md)
# The cost of a versioned build between bursts: burst=1 with a schedule whose first burst never
# comes (one a day on the time gate's timer; one every 2^40 path starts on the event clock). (Was
# burst=manual with no burst opened: on the event clock burst=manual asks the runtime at every path
# start, to follow hcct_burst() at once.)
CLOSED = ("k=8:burst=1:burst_interval=86400000:burst_length=0.001:path_burst_starts=1"
          ":path_burst_interval=1099511627776:verbose=1")


class Config:
    """One way to run a workload: which build, which runtime options, which wrapper."""

    def __init__(self, label, flavour, hcct=None, wrapper=None, preload=True, profile_env=None):
        self.label = label
        self.flavour = flavour
        self.hcct = hcct        # HCCT_OPTIONS without out=, or None: no runtime options
        self.wrapper = wrapper  # "uftrace", "setarch" (address randomisation off) or None
        self.preload = preload  # LD_PRELOAD libhcct.so with HCCT_OPTIONS (kpath builds link it)
        self.runtime = None     # another libhcct.so to preload (HCCT_BENCH_BASELINE_LIB)
        self.profile_env = profile_env  # an environment variable naming the profile's file, or None
        self.compile_s = None   # CPU seconds of the build (--paths)
        self.profile_bytes = None
        self.path_counts = None  # kpath verbose=1 figures of the first timed run, summed over threads
        self.path_suite = False
        self.binary = None
        self.wall, self.cpu, self.rss_kb = [], [], []
        self.profile = None
        self.problem = None     # "OUTPUT DIFFERS", "failed ...", "timeout", "stopped: ...": marked
        self.warmup_cpu = None
        self.slow = False       # over --slow-ratio x native in the warm-up: timed by that run only
        self.keep_profile = False  # --paths accuracy: keep the first timed run's profile
        self.kept_profile = None   # ... here (a directory the suite removes at the end)


def all_configs():
    c = [Config("native", "native"), Config("gprof", "gprof"),
         Config("finstr glibc-hooks", "finstr")]
    for mode in ("empty", "cct", "hcct"):
        c.append(Config("finstr " + mode, "finstr", "mode=" + mode))
    c.append(Config("finstr hcct+burst", "finstr", "mode=hcct:" + BURST))
    for stage in ("early", "late"):
        fl = "plugin-" + stage
        c.append(Config(f"plugin {stage} off", fl, "mode=off"))
        c.append(Config(f"plugin {stage} hcct", fl, "mode=hcct"))
        c.append(Config(f"plugin {stage} hcct+burst", fl, "mode=hcct:" + BURST))
        # The choices of burst_sync spelt out (issue 16): auto (the gate closed between bursts, the
        # path rebuilt from the machine stack and the units' site tables) and shadow.
        c.append(Config(f"plugin {stage} hcct+burst auto", fl, "mode=hcct:" + BURST + ":burst_sync=auto"))
        c.append(Config(f"plugin {stage} hcct+burst shadow", fl, "mode=hcct:" + BURST + ":burst_sync=shadow"))
    # The count clock (-fplugin-arg-hcct_plugin-clock=count, docs/BURSTING.md "The count clock"):
    # the entry probe counts calls down, bursts open when a countdown runs out, nothing is called
    # between bursts; the event clock's estimator.
    c.append(Config("plugin late-count off", "plugin-late-count", "mode=off"))
    c.append(Config("plugin late-count hcct+burst", "plugin-late-count", "mode=hcct:" + BURST))
    # A third of the default's sampled fraction (a burst of 0.01 ms every 0.3 ms, 3.3 % of the calls):
    # the bursts' cost is f·(s − 1) (docs/BURSTING.md, "What stands between shadow and 1.10×").
    c.append(Config("plugin late-count hcct+burst f=3%", "plugin-late-count",
                    "mode=hcct:" + BURST + ":burst_interval=0.3:burst_length=0.01"))
    c.append(Config("clang-ai hcct", "clang-after-inlining", "mode=hcct"))
    c.append(Config("uftrace", "finstr", wrapper="uftrace"))
    # HCCT_BENCH_BASELINE_LIB=/path/to/older/libhcct.so: the same -finstrument-functions binary
    # under that library too, in the same session (before/after figures of a runtime change).
    baseline = os.environ.get("HCCT_BENCH_BASELINE_LIB")
    if baseline:
        for mode in ("empty", "cct", "hcct"):
            b = Config("baseline finstr " + mode, "finstr", "mode=" + mode)
            b.runtime = baseline
            c.append(b)
    return c


# The path-profiling suite (--paths, issue 24): clang -O2 -g builds; the same kpath binary runs
# every k and forest (HCCT_OPTIONS), verbose=1 for the runtime's counts of items and slow items.
def path_configs(workload):
    c = [Config("native", "clang-native"),
         Config("instr-gen", "clang-instr-gen", profile_env="LLVM_PROFILE_FILE")]
    for k, forests in ((1, (None,)), (8, ("kwf", "ksf")), (16, ("kwf", "ksf"))):
        for forest in forests:
            label = f"kpath k={k}" + (f" {forest}" if forest else " (BLPP)")
            options = f"k={k}" + (f":forest={forest}" if forest else "") + ":verbose=1"
            c.append(Config(label, "kpath-early", options, preload=False))
    # The bounded kWF with its budget fixed at k/(2ε) (path_grow=1), what the default was before
    # budgets grew (docs/KPATH.md, "Growing budgets").
    for k in (8, 16):
        c.append(Config(f"kpath k={k} kwf fixed", "kpath-early", f"k={k}:forest=kwf:path_grow=1:verbose=1",
                        preload=False))
    # Issue 25: the bounded default against the exact forest, on runs that differ in nothing but
    # path_epsilon — the same length of HCCT_OPTIONS (the stack's start moves with the environment),
    # no address randomisation, and for Lua a fixed string-hash seed — so that their profiles can
    # be compared sequence by sequence.
    seeded = "kpath-early-seeded" if workload == "lua" else "kpath-early"
    c.append(Config("kpath k=16 kwf seeded", seeded, "k=16:forest=kwf:path_epsilon=0.0001:verbose=1",
                    wrapper="setarch", preload=False))
    c.append(Config("kpath k=16 kwf exact", seeded, "k=16:forest=kwf:path_epsilon=0.0000:verbose=1",
                    wrapper="setarch", preload=False))
    c.append(Config("kpath late k=8", "kpath-late", "k=8:verbose=1", preload=False))
    # Static bursting of path profiles (docs/KPATH.md, "Bursting"): the versioned binary at k = 8
    # with burst=1 (CPU × native, target ≤ 1.2), and the same binary's bursting and exhaustive runs
    # of one input (no address randomisation, options of one length) for the estimator's accuracy
    # and whether `hcct guide` ranks the same top loops.
    c.append(Config("kpath k=8 burst", "kpath-burst-seeded", "k=8:burst=1:verbose=1", preload=False))
    # The cost between bursts: CLOSED, a schedule whose first burst never comes (only the uninstrumented
    # code runs: f's own body and its start counters and gate tests).
    c.append(Config("kpath k=8 burst closed", "kpath-burst-seeded", CLOSED, preload=False))
    c.append(Config("kpath k=8 burst seeded", "kpath-burst-seeded", "k=8:burst=1:path_epsilon=0:verbose=1",
                    wrapper="setarch", preload=False))
    c.append(Config("kpath k=8 burst-build exact", "kpath-burst-seeded", "k=8:burst=0:path_epsilon=0:verbose=1",
                    wrapper="setarch", preload=False))
    # The same at the late stage (the optimised CFG is versioned: the early stage's duplicate bodies
    # change what the inliner does; docs/KPATH.md, "Bursting", has the figures).
    c.append(Config("kpath late k=8 burst", "kpath-burst-late-seeded", "k=8:burst=1:verbose=1", preload=False))
    c.append(Config("kpath late k=8 burst closed", "kpath-burst-late-seeded", CLOSED,
                    preload=False))
    c.append(Config("kpath late k=8 burst seeded", "kpath-burst-late-seeded", "k=8:burst=1:path_epsilon=0:verbose=1",
                    wrapper="setarch", preload=False))
    c.append(Config("kpath late k=8 burst-build exact", "kpath-burst-late-seeded",
                    "k=8:burst=0:path_epsilon=0:verbose=1", wrapper="setarch", preload=False))
    # Computed-goto functions versioned too (-kpath-burst-indirectbr=1; `--configs goto-versions
    # --only lua`): the cost with bursts and between them.
    c.append(Config("kpath goto-versions k=8 burst", "kpath-burst-goto-seeded", "k=8:burst=1:verbose=1", preload=False))
    c.append(Config("kpath goto-versions k=8 burst closed", "kpath-burst-goto-seeded", CLOSED,
                    preload=False))
    # The time gate (-kpath-burst-event-clock=0, the only clock before session 13; `--configs
    # time-clock`): the same binaries' bursts counted in time, in the same session.
    c.append(Config("kpath time-clock k=8 burst", "kpath-burst-time-seeded", "k=8:burst=1:verbose=1", preload=False))
    c.append(Config("kpath time-clock k=8 burst closed", "kpath-burst-time-seeded", CLOSED, preload=False))
    c.append(Config("kpath goto-time-clock k=8 burst", "kpath-burst-goto-time-seeded", "k=8:burst=1:verbose=1",
                    preload=False))
    c.append(Config("kpath goto-time-clock k=8 burst closed", "kpath-burst-goto-time-seeded", CLOSED, preload=False))
    # Process-wide start counters (-kpath-burst-thread-counters=0, the only kind before session 12;
    # `--configs shared-counters`): what per-thread counters buy, in the same session.
    c.append(Config("kpath shared-counters k=8 burst", "kpath-burst-shared-seeded", "k=8:burst=1:verbose=1",
                    preload=False))
    c.append(Config("kpath shared-counters k=8 burst closed", "kpath-burst-shared-seeded",
                    CLOSED, preload=False))
    for cfg in c:
        cfg.keep_profile = (cfg.label in ACCURACY_PAIR or cfg.label in BURST_ACCURACY_PAIR or
                            cfg.label in LATE_BURST_ACCURACY_PAIR)
    return c


# Issue 25's accuracy: the bounded default against path_epsilon=0 at k = 16, per φ.
ACCURACY_PHIS = (1e-3, 1e-4)
ACCURACY_PAIR = ("kpath k=16 kwf seeded", "kpath k=16 kwf exact")
# Static bursting at k = 8: estimates of the bursting run against the exhaustive run, φ = 10⁻³.
BURST_ACCURACY_PAIR = ("kpath k=8 burst seeded", "kpath k=8 burst-build exact")
BURST_ACCURACY_PHIS = (1e-3,)
LATE_BURST_ACCURACY_PAIR = ("kpath late k=8 burst seeded", "kpath late k=8 burst-build exact")
GUIDE_TOP = 5


def hot_sequences(hcct_tool, profile, phi, names=None):
    """{(function, path, path, ...): (count, error bound)} of `hcct paths --json --phi phi`, and N;
    fills `names` (if given) with {function: its name}."""
    out = subprocess.run([hcct_tool, "paths", "--json", "--phi", repr(phi), profile],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip()[:300])
    data = json.loads(out.stdout)
    seqs = {}

    def walk(fid, prefix, node):
        key = prefix + (node["path"],)
        seqs[(fid,) + key] = (node["count"], node["error_bound"])
        for child in node["children"]:
            walk(fid, key, child)
    for f in data["functions"]:
        if names is not None:
            names[f["function_id"]] = f.get("name") or str(f["function_id"])
        for root in f["forest"]:
            walk(f["function_id"], (), root)
    return seqs, data["paths"]


def guide_top(hcct_tool, profile, top):
    """The keys of `hcct guide`'s first `top` loops, in rank order."""
    out = subprocess.run([hcct_tool, "guide", "--json", "-o", "/dev/stdout", profile],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return [l["key"] for l in json.loads(out.stdout)["loops"][:top]]


def accuracy(configs, tools, pair=ACCURACY_PAIR, phis=ACCURACY_PHIS, guide=False, present_phi_factor=1.0):
    """False negatives and average error of the first profile of `pair` (bounded, or sampled in
    bursts) against the second (exact), per φ; with `guide`, also `hcct guide`'s top loops. A hot
    sequence counts as present when the first profile shows it at φ · present_phi_factor (a
    sampled profile's estimate of a sequence just above φN may fall just below it)."""
    by_label = {c.label: c for c in configs}
    bounded, exact = (by_label.get(label) for label in pair)
    if not bounded or not exact or not bounded.kept_profile or not exact.kept_profile:
        return None
    result = {}
    if guide:
        try:
            got, want = (guide_top(tools["hcct"], c.kept_profile, GUIDE_TOP) for c in (bounded, exact))
            result["guide_top"] = {"sampled": got, "exact": want, "same": got == want,
                                   "same_set": sorted(got) == sorted(want)}
        except RuntimeError as e:
            result["guide_top"] = {"error": str(e)}
    for phi in phis:
        try:
            got, _ = hot_sequences(tools["hcct"], bounded.kept_profile, phi * present_phi_factor)
            want, n = hot_sequences(tools["hcct"], exact.kept_profile, phi)
        except RuntimeError as e:
            result[str(phi)] = {"error": str(e)}
            continue
        hot = {s: c for s, (c, _) in want.items() if c >= phi * n}
        missing = [s for s in hot if s not in got]
        errors = [abs(got[s][0] - c) / c for s, c in hot.items() if s in got]
        result[str(phi)] = {"hot": len(hot), "false_negatives": len(missing),
                            "avg_error": sum(errors) / len(errors) if errors else 0.0,
                            "max_error": max(errors) if errors else 0.0,
                            "shown": len(got)}
    return result


def clean_env():
    return {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HCCT_OPTIONS")}


def run_once(cfg, workload, size, tools, timeout, max_data_gb):
    """One run, through spawn_rusage: status, wall and CPU seconds, peak RSS, stdout's digest."""
    tmp = tempfile.mkdtemp(prefix="hcct-real-")
    argv, stdin_path = workload.argv(cfg.binary, size)
    env = clean_env()
    if cfg.hcct is not None:
        if cfg.preload:
            env["LD_PRELOAD"] = cfg.runtime or tools["runtime"]
        env["HCCT_OPTIONS"] = cfg.hcct + ":out=" + os.path.join(tmp, "profile")
    if cfg.profile_env:
        env[cfg.profile_env] = os.path.join(tmp, "profile", "default.profraw")
    if cfg.wrapper == "uftrace":
        argv = ["uftrace", "record", "--no-libcall", "-d", os.path.join(tmp, "uftrace.data")] + argv
    elif cfg.wrapper == "setarch":
        argv = ["setarch", "-R"] + argv
    out_path = os.path.join(tmp, "stdout")
    env["GMON_OUT_PREFIX"] = os.path.join(tmp, "gmon.out")  # gprof: not in the caller's directory
    figures = os.path.join(tmp, "rusage")
    actions = [(os.POSIX_SPAWN_OPEN, 0, stdin_path or os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
               (os.POSIX_SPAWN_OPEN, 2, os.path.join(tmp, "stderr"), os.O_WRONLY | os.O_CREAT, 0o644)]
    helper = [tools["spawn_rusage"], figures]
    pid = os.posix_spawn(helper[0], helper + argv, env, file_actions=actions, setsid=True)
    # uftrace writes every event to disk (about 100 MB/s here): a cap keeps a long run from filling it.
    watch = os.path.join(tmp, "uftrace.data") if cfg.wrapper == "uftrace" else None
    if wait_with_timeout(pid, timeout, watch, max_data_gb * (1 << 30)) is None:
        over = watch and directory_bytes(watch) > max_data_gb * (1 << 30)
        return {"stopped": f"stopped: uftrace data > {max_data_gb:g} GB" if over else "timeout", "tmp": tmp}
    if not os.path.exists(figures):
        return {"stopped": "killed", "tmp": tmp}
    with open(figures) as f:
        status, user, system, wall, maxrss = f.read().split()
    with open(os.path.join(tmp, "stderr"), "rb") as f:
        stderr = f.read().decode(errors="replace")
    return {"status": int(status), "wall": float(wall), "cpu": float(user) + float(system),
            "rss_kb": int(maxrss), "digest": workloads.file_digest(out_path), "stderr": stderr,
            "profile": os.path.join(tmp, "profile") if cfg.hcct else None,
            "profile_bytes": directory_bytes(os.path.join(tmp, "profile")), "tmp": tmp}


def wait_with_timeout(pid, timeout, watch_dir=None, max_bytes=None):
    """Wait for the helper; kill its session (the helper and the program) on timeout, or when
    watch_dir grows past max_bytes. Returns None when it was killed, else the helper's status."""
    deadline = time.monotonic() + timeout
    next_watch = time.monotonic() + 1
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return status
        now = time.monotonic()
        over = False
        if watch_dir and now > next_watch:
            next_watch = now + 1
            over = directory_bytes(watch_dir) > max_bytes
        if now > deadline or over:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.002)


def directory_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def build_spawn_rusage():
    """bench/real/spawn_rusage.c, compiled once into the cache (see its comment for why)."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spawn_rusage.c")
    binary = os.path.join(workloads.CACHE, "spawn_rusage-" + workloads.file_digest(source)[:12])
    if not os.path.exists(binary):
        os.makedirs(workloads.CACHE, exist_ok=True)
        subprocess.run(["gcc", "-O2", "-o", binary + ".tmp", source], check=True)
        os.rename(binary + ".tmp", binary)
    return binary


def profile_summary(hcct_tool, out_dir):
    """Threads, calls, nodes and lost events of a profile (hcct info --json), or None."""
    if not os.path.isdir(out_dir):
        return None
    info = subprocess.run([hcct_tool, "info", "--json", out_dir], capture_output=True, text=True)
    if info.returncode != 0:
        return {"error": info.stderr.strip()[:200]}
    data = json.loads(info.stdout)
    threads = [t for p in data.get("processes", []) for t in p.get("threads", [])]
    summary = {"threads": len(threads)}
    for key in ("calls", "nodes", "lost", "unmatched_exits"):
        if threads and key in threads[0]:
            summary[key] = sum(t[key] for t in threads)
    return summary


KPATH_VERBOSE = re.compile(r"hcct kpath: thread \d+: .*?paths=(\d+) slow=(\d+) .*?nodes=(\d+)")


def kpath_counts(stderr):
    """Items, items that called the runtime and forest nodes, summed over the threads that the
    runtime's verbose=1 lines report (None without such lines)."""
    found = KPATH_VERBOSE.findall(stderr)
    if not found:
        return None
    return {key: sum(int(f[i]) for f in found) for i, key in enumerate(("paths", "slow", "nodes"))}


def record(cfg, result, reference, tools, keep):
    """Fold one run's result into its configuration; mark the row on any problem."""
    try:
        if result.get("stopped"):
            cfg.problem = result["stopped"]
            print(f"!!! {cfg.label}: {cfg.problem}", file=sys.stderr)
            return
        if result["status"] != 0:
            cfg.problem = f"failed (exit {result['status']})"
            print(f"!!! {cfg.label}: exit status {result['status']}: {result['stderr'][-500:]}",
                  file=sys.stderr)
            return
        if reference is not None and result["digest"] != reference:
            cfg.problem = "OUTPUT DIFFERS"
            print(f"!!! {cfg.label}: OUTPUT DIFFERS from native's (sha256 {result['digest'][:16]} "
                  f"vs {reference[:16]})", file=sys.stderr)
        if keep:
            cfg.wall.append(result["wall"])
            cfg.cpu.append(result["cpu"])
            cfg.rss_kb.append(result["rss_kb"])
            if cfg.profile is None and result["profile"] and not cfg.path_suite:
                cfg.profile = profile_summary(tools["hcct"], result["profile"])
            if cfg.profile_bytes is None:
                cfg.profile_bytes = result["profile_bytes"]
                cfg.path_counts = kpath_counts(result["stderr"])
            if cfg.keep_profile and cfg.kept_profile is None and result["profile"] and \
                    os.path.isdir(result["profile"]):
                cfg.kept_profile = tempfile.mkdtemp(prefix="hcct-real-kept-")
                shutil.move(result["profile"], os.path.join(cfg.kept_profile, "profile"))
                cfg.kept_profile = os.path.join(cfg.kept_profile, "profile")
    finally:
        shutil.rmtree(result["tmp"], ignore_errors=True)


def bench_workload(workload, configs, args, tools):
    flav = workloads.flavours(tools["plugin"])
    flav.update(workloads.path_flavours(tools["kpath"], os.path.dirname(tools["runtime"])))
    usable = []
    for cfg in configs:
        try:
            cfg.binary = workload.build(flav[cfg.flavour])
            cfg.compile_s = workload.compile_seconds(flav[cfg.flavour])
            cfg.path_suite = args.paths
            usable.append(cfg)
        except workloads.Unavailable as e:
            print(f"{workload.name}: {cfg.label}: skipped: {e}", file=sys.stderr)
        except RuntimeError as e:
            print(f"{workload.name}: {cfg.label}: BUILD FAILED: {e}", file=sys.stderr)
    native = next((c for c in usable if c.label == "native"), None)
    if native is None:
        raise workloads.Unavailable("no native build")
    load_before = os.getloadavg()
    reference = None
    for round_no in range(args.rounds + 1):  # round 0 warms up: page cache, dynamic loader
        for cfg in usable:
            if (cfg.problem and cfg.problem != "OUTPUT DIFFERS") or cfg.slow:
                continue
            result = run_once(cfg, workload, args.size, tools, args.timeout, args.max_uftrace_gb)
            if cfg is native and reference is None and not result.get("stopped") and result["status"] == 0:
                reference = result["digest"]
            slow = (round_no == 0 and cfg is not native and native.warmup_cpu and
                    result.get("cpu", 0) > args.slow_ratio * native.warmup_cpu)
            if round_no == 0 and not result.get("stopped"):
                cfg.warmup_cpu = result["cpu"]
            # A configuration many times slower than native is timed once, by its warm-up run: a
            # ratio of 10 or more needs no median to be read, and five such runs of every slow
            # configuration would take the session's hour.
            record(cfg, result, reference, tools, keep=round_no > 0 or slow)
            if slow:
                cfg.slow = True
        print(f"  {workload.name}: round {round_no}/{args.rounds} done, load {os.getloadavg()[0]:.1f}",
              file=sys.stderr)
    acc = accuracy(usable, tools) if args.paths else None
    burst_acc = (accuracy(usable, tools, BURST_ACCURACY_PAIR, BURST_ACCURACY_PHIS, guide=True, present_phi_factor=0.1)
                 if args.paths else None)
    late_burst_acc = (accuracy(usable, tools, LATE_BURST_ACCURACY_PAIR, BURST_ACCURACY_PHIS, guide=True,
                               present_phi_factor=0.1) if args.paths else None)
    for cfg in usable:
        if cfg.kept_profile:
            shutil.rmtree(os.path.dirname(cfg.kept_profile), ignore_errors=True)
    return {"workload": workload.name, "description": workload.description,
            "command": command_line(workload, native.binary, args.size),
            "rounds": args.rounds, "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()], "rows": rows_of(usable),
            "suite": "paths" if args.paths else "calls", "accuracy": acc,
            "burst_accuracy": burst_acc, "late_burst_accuracy": late_burst_acc}


def command_line(workload, binary, size):
    """The workload's command as the tables show it: program and input files by their base names."""
    argv, stdin_path = workload.argv(binary, size)
    shown = [os.path.basename(a) if os.path.isabs(a) else a for a in argv]
    return " ".join(shown) + (" < " + os.path.basename(stdin_path) if stdin_path else "")


def rows_of(configs):
    med = {c.label: (statistics.median(c.cpu) if c.cpu else None) for c in configs}
    rows = []
    for c in configs:
        row = {"config": c.label, "problem": c.problem}
        if c.wall:
            row.update(wall_s=round(statistics.median(c.wall), 3), cpu_s=round(med[c.label], 4),
                       peak_rss_mb=round(max(c.rss_kb) / 1024, 1), runs=len(c.wall), slow=c.slow,
                       cpu_rounds=[round(x, 4) for x in c.cpu])  # (the spread behind the median)
            for base in ("native", "finstr empty"):
                if med.get(base):
                    row["cpu_x_" + base.replace(" ", "_")] = round(med[c.label] / med[base], 3)
        if c.profile:
            row.update(c.profile)
        if c.compile_s is not None:
            row["compile_cpu_s"] = round(c.compile_s, 2)
        if c.profile_bytes is not None:
            row["profile_mb"] = round(c.profile_bytes / 1e6, 2)
        if c.path_counts:
            row.update(c.path_counts)
        rows.append(row)
    # The path suite's second baseline: clang's edge counters on the same source.
    base = {r["config"]: r for r in rows}
    for row in rows:
        if med.get("instr-gen") and med.get(row["config"]):
            row["cpu_x_instr-gen"] = round(med[row["config"]] / med["instr-gen"], 3)
        for name in ("native", "instr-gen"):
            b = base.get(name)
            if b and b.get("compile_cpu_s") and row.get("compile_cpu_s") is not None:
                row["compile_x_" + name] = round(row["compile_cpu_s"] / b["compile_cpu_s"], 3)
    return rows


def note(row):
    parts = []
    if row["problem"]:
        parts.append(f"**{row['problem']}**")
    if row.get("runs") == 1 and row.get("slow"):
        parts.append("1 run (slow)")
    return "; ".join(parts)


def print_table(result):
    print(f"\n### {result['workload']}: {result['description']}")
    print(f"`{result['command']}` — {result['rounds']} interleaved rounds, medians; load average "
          f"{result['load_before'][0]} before, {result['load_after'][0]} after")
    cols = ["config", "wall s", "CPU s", "CPU × native", "CPU × finstr empty", "peak RSS MB",
            "calls", "lost", "unmatched exits", "note"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in result["rows"]:
        cells = [r["config"], r.get("wall_s", ""), r.get("cpu_s", ""), r.get("cpu_x_native", ""),
                 r.get("cpu_x_finstr_empty", ""), r.get("peak_rss_mb", ""),
                 f"{r['calls']:,}" if "calls" in r else "", f"{r['lost']:,}" if "lost" in r else "",
                 f"{r['unmatched_exits']:,}" if "unmatched_exits" in r else "", note(r)]
        print("| " + " | ".join(str(x) for x in cells) + " |")
    sys.stdout.flush()


def print_path_table(result):
    print(f"\n### {result['workload']}: {result['description']}")
    print(f"`{result['command']}` — {result['rounds']} interleaved rounds, medians; load average "
          f"{result['load_before'][0]} before, {result['load_after'][0]} after")
    cols = ["config", "wall s", "CPU s", "CPU × native", "CPU × instr-gen", "peak RSS MB",
            "profile MB", "compile CPU s", "compile × native", "items", "slow %", "nodes", "note"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in result["rows"]:
        slow = f"{100 * r['slow'] / r['paths']:.2f}" if r.get("paths") else ""
        cells = [r["config"], r.get("wall_s", ""), r.get("cpu_s", ""), r.get("cpu_x_native", ""),
                 r.get("cpu_x_instr-gen", ""), r.get("peak_rss_mb", ""), r.get("profile_mb", ""),
                 r.get("compile_cpu_s", ""), r.get("compile_x_native", ""),
                 f"{r['paths']:,}" if "paths" in r else "", slow,
                 f"{r['nodes']:,}" if "nodes" in r else "", note(r)]
        print("| " + " | ".join(str(x) for x in cells) + " |")
    sys.stdout.flush()


def check_burst_targets(rows, native, burst, stage, label):
    """Static bursting's targets for one stage's rows: (target, figure, met) triples."""
    out = []
    if native and label in rows:
        x = rows[label]["cpu_x_native"]
        out.append((f"{label}: burst=1 ≤ 1.2× native CPU", f"{x:.2f}×", x <= 1.2))
    for phi, a in burst.items():
        if phi == "guide_top":
            if "error" in a:
                out.append((f"{stage}hcct guide from the bursting profile", a["error"], False))
            else:
                out.append((f"{stage}hcct guide's top {GUIDE_TOP} loops from the bursting profile = from the exhaustive one",
                            f"{' '.join(a['sampled'])} vs {' '.join(a['exact'])}" +
                            ("" if a["same"] else " (same set)" if a["same_set"] else ""), a["same"]))
            continue
        if "error" in a:
            out.append((f"{stage}burst=1 k=8 accuracy at φ = {phi}", a["error"], False))
            continue
        out.append((f"{stage}burst=1 k=8 vs exhaustive at φ = {phi}: every hot sequence present, average error ≤ 10 %",
                    f"{a['false_negatives']} of {a['hot']} missing, average error {100 * a['avg_error']:.2f} %, "
                    f"max {100 * a['max_error']:.1f} %", a["false_negatives"] == 0 and a["avg_error"] <= 0.10))
    return out


def check_path_targets(result):
    """Issue 24's targets on one workload's rows: (target, figure, met) triples."""
    rows = {r["config"]: r for r in result["rows"] if "cpu_s" in r and not r["problem"]}
    out = []
    gen = rows.get("instr-gen")
    if gen:
        for label, bound in (("kpath k=1 (BLPP)", 1.3), ("kpath k=8 kwf", 1.5), ("kpath k=16 kwf", 2.0),
                             ("kpath k=16 ksf", 2.0)):
            if label in rows:
                x = rows[label]["cpu_x_instr-gen"]
                out.append((f"{label} ≤ {bound}× instr-gen CPU", f"{x:.2f}×", x <= bound))
    native = rows.get("native")
    if native and "kpath k=8 kwf" in rows:
        d = rows["kpath k=8 kwf"]["peak_rss_mb"] - native["peak_rss_mb"]
        out.append(("kpath k=8 peak RSS within 32 MB of native", f"{d:+.1f} MB", d <= 32))
    if native and "kpath k=16 kwf" in rows:
        d = rows["kpath k=16 kwf"]["peak_rss_mb"] - native["peak_rss_mb"]
        out.append(("kpath k=16 kwf (bounded default) peak RSS within 64 MB of native", f"{d:+.1f} MB", d <= 64))
    for phi, a in (result.get("accuracy") or {}).items():
        if "error" in a:
            out.append((f"bounded k=16 accuracy at φ = {phi}", a["error"], False))
            continue
        out.append((f"bounded k=16 vs path_epsilon=0 at φ = {phi}: 0 false negatives, average error ≤ 1 %",
                    f"{a['false_negatives']} of {a['hot']} missing, average error {100 * a['avg_error']:.3f} %, "
                    f"max {100 * a['max_error']:.2f} %", a["false_negatives"] == 0 and a["avg_error"] <= 0.01))
    # Static bursting (docs/KPATH.md, "Bursting"; issue 25), at each stage.
    for stage, label, key in (("", "kpath k=8 burst", "burst_accuracy"),
                              ("late ", "kpath late k=8 burst", "late_burst_accuracy")):
        out.extend(check_burst_targets(rows, native, result.get(key) or {}, stage, label))
    if "kpath k=8 kwf" in rows and rows["kpath k=8 kwf"].get("compile_x_native") is not None:
        x = rows["kpath k=8 kwf"]["compile_x_native"]
        out.append(("kpath compile ≤ 1.4× native compile (CPU)", f"{x:.2f}×", x <= 1.4))
    return out


def print_result(result):
    if result.get("suite") == "paths":
        print_path_table(result)
        for target, figure, met in check_path_targets(result):
            print(f"- {target}: {figure} — {'met' if met else 'MISSED'}")
        sys.stdout.flush()
        return
    print_table(result)
    for target, figure, met in check_targets(result):
        print(f"- {target}: {figure} — {'met' if met else 'MISSED'}")
    sys.stdout.flush()


def check_targets(result):
    """Issue 15's targets on one workload's rows: (target, figure, met) triples."""
    rows = {r["config"]: r for r in result["rows"] if "cpu_s" in r and not r["problem"]}
    out = []

    def ratio(a, b):
        if a not in rows or b not in rows:
            return None
        key = "cpu_x_" + b.replace(" ", "_")  # the table's own ratio, of unrounded medians
        return rows[a][key] if key in rows[a] else rows[a]["cpu_s"] / rows[b]["cpu_s"]

    for stage in ("early", "late"):
        x = ratio(f"plugin {stage} off", "native")
        if x is not None:
            out.append((f"plugin {stage} off ≤ 1.05× native", f"{x:.2f}×", x <= 1.05))
    x = ratio("finstr hcct", "finstr empty")
    if x is not None:
        out.append(("libhcct hcct ≤ 1.3× libhcct empty", f"{x:.2f}×", x <= 1.3))
    for stage in ("early", "late"):
        for sync in ("", " auto", " shadow"):
            label = f"plugin {stage} hcct+burst{sync}"
            x, g = ratio(label, "native"), ratio(label, "gprof")
            if x is not None and g is not None:
                out.append((f"{label} ≤ 1.10× native and below gprof",
                            f"{x:.2f}× native, {g:.2f}× gprof", x <= 1.10 and g < 1))
    if result["workload"] == "json":
        x = ratio("plugin late hcct", "native")
        if x is not None:
            out.append(("plugin late hcct on C++ ≤ 1.3× native", f"{x:.2f}×", x <= 1.3))
    if "finstr hcct" in rows and "finstr empty" in rows:
        d = rows["finstr hcct"]["peak_rss_mb"] - rows["finstr empty"]["peak_rss_mb"]
        out.append(("peak RSS hcct within 2 MB of empty", f"{d:+.1f} MB", abs(d) <= 2))
    return out


def find_tools(build):
    tools = {"runtime": os.path.join(build, "libhcct", "libhcct.so"),
             "hcct": os.path.join(build, "tools", "hcct", "hcct"),
             "plugin": os.path.join(build, "gcc-plugin", "hcct_plugin.so"),
             "kpath": os.path.join(build, "kpath", "kpath.so")}
    for key in ("runtime", "hcct"):
        if not os.path.exists(tools[key]):
            sys.exit(f"run.py: {tools[key]} not found: build it first "
                     f"(cmake --build {build} --target hcct hcct_runtime_shared hcct_plugin)")
    tools["spawn_rusage"] = build_spawn_rusage()
    return tools


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(workloads.ROOT, "build"),
                    help="hcct build dir with libhcct.so, the hcct CLI and hcct_plugin.so (default: build)")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds after one warm-up round (default 5)")
    ap.add_argument("--only", default=",".join(workloads.WORKLOADS),
                    help="comma-separated workloads (default: all: %(default)s)")
    ap.add_argument("--configs", default="", help="run only configurations matching this regex "
                    "(native always runs: it is the reference output and the baseline)")
    ap.add_argument("--size", choices=("full", "short"), default="full",
                    help="input size: full (1-3 s native) or short (a fraction of a second)")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds one run may take; a run past it marks its row 'timeout' (default 600)")
    ap.add_argument("--max-uftrace-gb", type=float, default=4,
                    help="stop a uftrace run whose data passes this size; its row says so (default 4)")
    ap.add_argument("--slow-ratio", type=float, default=10,
                    help="a configuration whose warm-up run takes more than this many times native's "
                    "CPU is timed by that one run, not --rounds runs; its row says so (default 10)")
    ap.add_argument("--paths", action="store_true",
                    help="the path-profiling suite instead (issue 24): clang native, "
                    "-fprofile-instr-generate, kpath k=1, k=8 and k=16 with each forest, late k=8")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    ap.add_argument("--from-json", metavar="FILE", nargs="+",
                    help="run nothing: print the tables and targets of results saved with --json")
    args = ap.parse_args()
    if args.from_json:
        for path in args.from_json:
            with open(path) as f:
                for result in json.load(f):
                    print_result(result)
        return 0
    if args.rounds < 1:
        sys.exit("run.py: --rounds must be at least 1")
    tools = find_tools(os.path.abspath(args.build))
    names = [n for n in args.only.split(",") if n]
    for n in names:
        if n not in workloads.WORKLOADS:
            sys.exit(f"run.py: unknown workload '{n}' (known: {', '.join(workloads.WORKLOADS)})")
    has_uftrace = shutil.which("uftrace") is not None
    if not has_uftrace:
        print("run.py: uftrace not installed (apt-get install uftrace): its column is skipped", file=sys.stderr)
    results = []
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()} at start")
    for name in names:
        configs = [c for c in (path_configs(name) if args.paths else all_configs())
                   if c.label == "native" or (re.search(args.configs, c.label) if args.configs else True)]
        configs = [c for c in configs if c.wrapper != "uftrace" or has_uftrace]
        try:
            results.append(bench_workload(workloads.WORKLOADS[name], configs, args, tools))
        except workloads.Unavailable as e:
            print(f"{name}: skipped: {e}", file=sys.stderr)
            continue
        print_result(results[-1])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    problems = [(r["workload"], row["config"], row["problem"]) for r in results for row in r["rows"]
                if row["problem"] == "OUTPUT DIFFERS"]
    for w, c, p in problems:
        print(f"!!! {w}: {c}: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
