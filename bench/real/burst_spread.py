#!/usr/bin/env python3
"""Bias or spread? Sampled profiles of several runs against one exact CCT, context by context
(issue 16: docs/BURSTING.md, "The estimator"; docs/BENCHMARKS.md, "Bursting that is right on real
programs").

  bench/real/burst_spread.py EXACT SAMPLED... [--phi 1e-4] [--hcct build/tools/hcct/hcct] [--show N]

EXACT is a profile directory of an exhaustive run (mode=cct, or a run's exact/ side), each SAMPLED
one of a bursting run of the same command. Each run's figures against EXACT are `hcct compare
SAMPLED EXACT --phi PHI --json`'s (the thread pair with most calls): its scale 1/sampled_fraction,
the exact hot set's threshold ⌊φN⌋ and size, false negatives and average counter error (over the
run's own hot set). Context by context (setarch -R, so that contexts have the same addresses: they
are matched by their chain of (routine, call site) addresses, `hcct dump --no-symbols`; the thread
with most calls of each), for every context of EXACT with w ≥ ⌊φN⌋ (the exact hot set) each run's
estimate is its sampled count × compare's count_scale (0 where the run has no such context), and:

- per run: the average |estimate − w| / w over the exact hot set (a context missing counts 100 %),
  the mean signed error, and how many of those contexts the sampled tree lacks altogether;
- over the runs: the average error, the average |mean estimate − w| / w (the bias left after
  averaging the runs) against what sampling noise alone leaves after averaging (sd / √runs): a bias
  shows as the first well above the second;
- the same by w / ⌊φN⌋ (powers of two), by depth, and the contexts whose mean is furthest off.
"""
import argparse
import collections
import json
import math
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_json(*argv):
    return json.loads(subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout)


def load(hcct, directory):
    """({context: count}, {context: function name}) of the thread with most calls."""
    thread = max(run_json(hcct, "dump", directory, "--json")["threads"], key=lambda t: t["calls"])
    key, counts, names = {}, collections.Counter(), {}
    for n in thread["nodes"]:
        if n["parent"] is None:
            key[n["id"]] = ()
            continue
        k = key[n["parent"]] + ((n["routine"], n["call_site"]),)
        key[n["id"]] = k
        counts[k] += n["count"]
        function = n.get("function")
        names[k] = function.get("name") if isinstance(function, dict) else None
    return counts, names


def bursts(hcct, directory):
    """The bursts of the thread with most calls (hcct info)."""
    info = run_json(hcct, "info", directory, "--json")
    thread = max((t for p in info["processes"] for t in p["threads"]), key=lambda t: t["calls"])
    return thread.get("extra", {}).get("bursts", "?")


def compare(hcct, sampled, exact, phi):
    """hcct compare's metrics of the sampled run against the exact one (the pair with most calls)."""
    pairs = run_json(hcct, "compare", sampled, exact, "--phi", repr(phi), "--json")["comparisons"]
    return max(pairs, key=lambda m: m["reference"]["calls"])


def summary(label, rows):
    n = len(rows)
    err = sum(r["err"] for r in rows) / n
    bias = sum(r["bias"] for r in rows) / n
    sd = sum(r["sd"] for r in rows) / n
    return f"{label:22} n={n:5}  error {100 * err:6.2f}%  signed bias {100 * bias:+6.2f}%  sd {100 * sd:6.2f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exact")
    ap.add_argument("sampled", nargs="+")
    ap.add_argument("--phi", type=float, default=1e-4)
    ap.add_argument("--hcct", default=os.path.join(ROOT, "build", "tools", "hcct", "hcct"))
    ap.add_argument("--show", type=int, default=8, help="contexts furthest off on each side")
    args = ap.parse_args()

    exact, names = load(args.hcct, args.exact)
    hot, threshold = None, None
    estimates = collections.defaultdict(list)
    for directory in args.sampled:
        m = compare(args.hcct, directory, args.exact, args.phi)
        if hot is None:
            threshold = m["reference_threshold"]
            hot = {k: w for k, w in exact.items() if w >= threshold}
            print(f"exact: N = {m['reference']['calls']:,}, floor(phi N) = {threshold:,}, "
                  f"{m['exact_hot']} hot contexts")
        counts, _ = load(args.hcct, directory)
        scale = m["test"]["count_scale"]
        errors, signed, absent = 0.0, 0.0, 0
        for k, w in hot.items():
            e = counts.get(k, 0) * scale
            estimates[k].append(e)
            errors += abs(e - w) / w
            signed += (e - w) / w
            absent += k not in counts
        print(f"{directory}: fraction {1 / scale:.4f}, {bursts(args.hcct, directory)} bursts, "
              f"min_count (scaled) {m['error_bound']}: error {100 * errors / len(hot):.2f}%, "
              f"signed {100 * signed / len(hot):+.2f}%, {absent} not in the sampled tree; hcct compare: "
              f"false negatives {m['false_negatives']}, error {m['avg_error_percent']:.2f}% over its hot set")
    runs = len(args.sampled)
    if runs < 2:
        return
    rows = []
    for k, w in hot.items():
        e = estimates[k]
        mean = sum(e) / runs
        sd = math.sqrt(sum((x - mean) ** 2 for x in e) / (runs - 1))
        rows.append({"key": k, "w": w, "bias": (mean - w) / w, "sd": sd / w,
                     "err": sum(abs(x - w) for x in e) / runs / w})
    print(f"over {runs} runs: error {100 * sum(r['err'] for r in rows) / len(rows):.2f}%, "
          f"|bias of the mean| {100 * sum(abs(r['bias']) for r in rows) / len(rows):.2f}% against "
          f"{100 * sum(r['sd'] for r in rows) / len(rows) / math.sqrt(runs):.2f}% from noise alone (sd / sqrt(runs))")
    by_weight = collections.defaultdict(list)
    by_depth = collections.defaultdict(list)
    for r in rows:
        by_weight[min(int(math.log2(r["w"] / threshold)), 8)].append(r)
        by_depth[len(r["key"]) // 4 * 4].append(r)
    for b in sorted(by_weight):
        print(summary(f"  w/threshold 2^{b}..", by_weight[b]))
    for d in sorted(by_depth):
        print(summary(f"  depth {d}..{d + 3}", by_depth[d]))
    rows.sort(key=lambda r: r["bias"])
    for r in rows[:args.show] + rows[-args.show:]:
        k = r["key"]
        print(f"  {100 * r['bias']:+7.2f}% (sd {100 * r['sd']:5.2f}%) w {r['w']:>10,} depth {len(k):3} "
              f"{names.get(k)} < {names.get(k[:-1])} < {names.get(k[:-2])}")


if __name__ == "__main__":
    main()
