#!/usr/bin/env python3
"""Instructions and cache misses of one workload under several HCCT_OPTIONS, by callgrind.

  bench/real/instructions.py [--size full|short] [--flavour kpath-burst-late-seeded] [--build BUILD]
                             [--binary BUILT] [--keep DIR] WORKLOAD OPTIONS [OPTIONS ...]

  e.g. bench/real/instructions.py lua native k=8:burst=1 k=8:burst=1:path_burst_interval=30000

Timing on this machine (a shared 2-vCPU VM) varies by ±30 % between runs of one binary
(docs/BENCHMARKS.md, session 15); callgrind's counts do not. For each option set, the workload's
build of FLAVOUR (bench/real/workloads.py, run.py --paths' flavours; built if missing) runs under
`valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes` with HCCT_OPTIONS set; the option set
`native` runs the clang-native build instead. Prints instructions (Ir), I1 misses, D1 and
last-level read misses, D1 write misses and mispredicted branches (valgrind's simple predictor
model), summed over the program's threads (valgrind serialises them), and each set's ratio of
instructions to the first set's. The binaries are copied with their debug info stripped (valgrind
14's reader gives up on clang 14's DWARF 5 of some of them); their symbols stay.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import workloads


def callgrind(argv, stdin, options, scratch):
    """{event: count} of one run, summed over the callgrind output files of its threads."""
    env = dict(os.environ, HCCT_OPTIONS=f"{options}:out={scratch}/profile")
    out = os.path.join(scratch, "callgrind.out")
    with open(stdin) if stdin else open(os.devnull) as fin:
        proc = subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=yes", "--branch-sim=yes",
                               f"--callgrind-out-file={out}", *argv], stdin=fin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                              cwd=scratch)
    if proc.returncode != 0:
        sys.exit(f"instructions.py: {' '.join(argv)} with HCCT_OPTIONS={options} failed: "
                 f"{proc.stderr.decode(errors='replace')[-600:]}")
    events = {}
    for path in glob.glob(out + "*"):
        lines = [l for l in open(path) if l.startswith(("events:", "summary:"))]
        names = next(l for l in lines if l.startswith("events:")).split()[1:]
        counts = next(l for l in lines if l.startswith("summary:")).split()[1:]
        for name, count in zip(names, counts):
            events[name] = events.get(name, 0) + int(count)
    return events


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=sorted(workloads.WORKLOADS))
    ap.add_argument("options", nargs="+", help="HCCT_OPTIONS of each set, or `native`")
    ap.add_argument("--size", choices=("full", "short"), default="full")
    ap.add_argument("--flavour", default="kpath-burst-late-seeded", help="run.py --paths flavour")
    ap.add_argument("--build", default=os.path.join(workloads.ROOT, "build"), help="hcct build dir")
    ap.add_argument("--keep", metavar="DIR", help="copy each set's callgrind output files to DIR (for "
                                                  "callgrind_annotate; named by set)")
    ap.add_argument("--binary", help="run this build of the workload instead of FLAVOUR's (e.g. one the cache "
                                     "keeps from an earlier plugin, to compare two plugins on one input)")
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        print("instructions.py: skipped: valgrind is not installed")
        return 0
    flavours = workloads.path_flavours(os.path.join(args.build, "kpath", "kpath.so"),
                                       os.path.join(args.build, "libhcct"))
    workload = workloads.WORKLOADS[args.workload]
    try:
        built = {}
        if "native" in args.options:
            built["native"] = workload.build(flavours["clang-native"])
        if args.binary:
            if not os.path.isfile(args.binary):
                sys.exit(f"instructions.py: --binary {args.binary}: no such file")
            built["profiled"] = args.binary
        elif any(o != "native" for o in args.options):
            built["profiled"] = workload.build(flavours[args.flavour])
    except workloads.Unavailable as e:
        print(f"instructions.py: {args.workload} skipped: {e}")
        return 0
    with tempfile.TemporaryDirectory(prefix="hcct-instructions-") as tmp:
        stripped = {}
        for key, binary in built.items():
            stripped[key] = os.path.join(tmp, f"{key}-{os.path.basename(binary)}")
            subprocess.run(["objcopy", "--strip-debug", binary, stripped[key]], check=True)
        print(f"{args.workload} ({args.size} input, {args.binary or args.flavour}), callgrind --cache-sim=yes")
        print("| HCCT_OPTIONS | instructions | × first | I1 misses | D1 read misses | LL read misses | D1 write misses "
              "| mispredicted branches (conditional + indirect) |")
        print("|---|---|---|---|---|---|---|---|")
        first = None
        for index, options in enumerate(args.options):
            argv, stdin = workload.argv(stripped["native" if options == "native" else "profiled"], args.size)
            scratch = tempfile.mkdtemp(dir=tmp)
            e = callgrind(argv, stdin, "" if options == "native" else options, scratch)
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                label = re.sub(r"[^A-Za-z0-9_.=-]+", "_", options)[:80]
                for path in glob.glob(os.path.join(scratch, "callgrind.out*")):
                    shutil.copy(path, os.path.join(args.keep, f"{args.workload}.{index}.{label}.{os.path.basename(path)}"))
            first = first or e["Ir"]
            print(f"| `{options}` | {e['Ir'] / 1e6:,.1f} M | {e['Ir'] / first:.3f} | {e['I1mr'] / 1e6:.2f} M | "
                  f"{e['D1mr'] / 1e6:.2f} M | {e['DLmr'] / 1e6:.2f} M | {e['D1mw'] / 1e6:.2f} M | "
                  f"{(e['Bcm'] + e['Bim']) / 1e6:.2f} M |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
