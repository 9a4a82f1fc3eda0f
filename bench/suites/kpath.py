"""kpath (issue 5, docs/KPATH.md): multi-iteration path profiling overhead, one suite per example.

    python3 bench/bench.py --build build-ksf --rounds 5 kpath-masked_conv kpath-collatz kpath-lexer
    python3 bench/bench.py --build build-ksf --instructions kpath-collatz     # callgrind, smaller input
    bench/kpath/run.sh build-ksf 5                                           # all three

Configurations of one example, interleaved round by round (bench.py):
  native              clang -O2
  blpp                -fpass-plugin=kpath.so, HCCT_OPTIONS=k=1: a counter per (function, path ID),
                      every item a runtime call and a hash lookup (the classic baseline)
  ksf k=2,4,8,16      the same binary, the thesis's k-slab forest (forest=ksf, Algorithm 4)
  kwf k=2,4,8,16      the same binary, the k-window forest (forest=kwf)
  instr-gen           clang -O2 -fprofile-instr-generate (LLVM's own counters)
Baselines: native, blpp, instr-gen; the targets are "k=8 / blpp <= 1" and "k=16 / instr-gen <= 2".
With HCCT_BENCH_KPATH_EXTRA=1 also: a build without the inline fast path (-kpath-fast-path=0: every
item calls the runtime) and the late
pipeline stage. Binaries are built into BUILD/bench-kpath/ (rebuilt when the source, the plugin or
the runtime is newer). Config is injected by bench.py.
"""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "kpath")
CLANG = os.environ.get("CLANG", "clang-14")

# name -> (source, full arguments, small arguments for --instructions)
INPUTS = {
    "masked_conv": ("masked_conv.c", ["1200", "1600", "6"], ["300", "400", "1"]),
    "collatz": ("collatz.c", ["1500000"], ["60000"]),
    "lexer": ("lexer.c", ["8000000", "4"], ["400000", "1"]),
    # not one of the targets' loop-intensive examples: the fast path's adversarial case (its two hot
    # paths share a guess slot; docs/KPATH.md, "Guesses")
    "diamonds": ("diamonds.c", ["50000000"], ["2000000"]),
}


def build_variant(build, name, tag, flags, env=None):
    """The example compiled with `flags` into BUILD/bench-kpath/NAME.TAG (cached by mtime)."""
    source = os.path.join(EXAMPLES, INPUTS[name][0])
    out_dir = os.path.join(build, "bench-kpath")
    exe = os.path.join(out_dir, name + "." + tag)
    deps = [source, os.path.join(build, "kpath", "kpath.so"), os.path.join(build, "libhcct", "libhcct.so")]
    newest = max(os.path.getmtime(d) for d in deps if os.path.exists(d))
    if not os.path.exists(exe) or os.path.getmtime(exe) < newest:
        os.makedirs(out_dir, exist_ok=True)
        full_env = dict(os.environ, **(env or {}))
        subprocess.run([CLANG, "-O2", *flags, source, "-o", exe], check=True, env=full_env)
    return exe, out_dir


def suite_kpath(name, build, small):
    plugin = os.path.join(build, "kpath", "kpath.so")
    rt = os.path.join(build, "libhcct")
    if not os.path.exists(plugin):
        raise SystemExit(f"bench: {plugin} missing: build the targets hcct_kpath_plugin hcct_runtime_shared")
    link = [f"-fpass-plugin={plugin}", f"-L{rt}", "-lhcct", f"-Wl,-rpath,{rt}"]
    args = INPUTS[name][2] if small else INPUTS[name][1]
    native, out_dir = build_variant(build, name, "native", [])
    kpath, _ = build_variant(build, name, "kpath", link)
    instr, _ = build_variant(build, name, "instr", ["-fprofile-instr-generate"])
    configs = [
        Config("native", [native, *args]),  # noqa: F821 (injected by bench.py)
        Config("blpp", [kpath, *args], hcct_options="k=1"),  # noqa: F821
    ]
    for forest in ("ksf", "kwf"):
        for k in (2, 4, 8, 16):
            configs.append(Config(f"{forest} k={k}", [kpath, *args],  # noqa: F821
                                  hcct_options=f"k={k}:forest={forest}"))
    configs.append(Config("instr-gen", [instr, *args],  # noqa: F821
                          env={"LLVM_PROFILE_FILE": os.path.join(out_dir, name + ".profraw")}))
    if os.environ.get("HCCT_BENCH_KPATH_EXTRA") == "1":
        call, _ = build_variant(build, name, "call", link, {"HCCT_KPATH_FAST_PATH": "0"})
        late, _ = build_variant(build, name, "late", link, {"HCCT_KPATH_STAGE": "late"})
        for forest in ("ksf", "kwf"):
            configs.append(Config(f"{forest} k=8 no fast path", [call, *args],  # noqa: F821
                                  hcct_options=f"k=8:forest={forest}"))
        configs.append(Config("late blpp", [late, *args], hcct_options="k=1"))  # noqa: F821
        configs.append(Config("late kwf k=8", [late, *args], hcct_options="k=8:forest=kwf"))  # noqa: F821
    return f"kpath {name} {' '.join(args)}", configs, ["native", "blpp", "instr-gen"]


SUITES = {f"kpath-{n}": (lambda build, small=False, n=n: suite_kpath(n, build, small)) for n in INPUTS}
