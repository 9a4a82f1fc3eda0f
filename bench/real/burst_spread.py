#!/usr/bin/env python3
"""Bias or spread? Sampled profiles of several runs against one exact CCT, context by context
(issue 16: docs/BURSTING.md, "The estimator"; docs/BENCHMARKS.md, "Bursting that is right on real
programs").

  bench/real/burst_spread.py EXACT SAMPLED... [--phi 1e-4] [--hcct build/tools/hcct/hcct] [--show N]

EXACT is a profile directory of an exhaustive run (mode=cct, or a run's exact/ side), each SAMPLED
one of a bursting run of the same command (setarch -R, so that contexts have the same addresses:
they are matched by their chain of (routine, call site) addresses, `hcct dump --no-symbols`). The
thread with most calls of each is used. For every context of EXACT with w ≥ ⌊φN⌋ (the exact hot
set) each run's estimate is its sampled count / sampled_fraction (0 where the run has no such
context), and:

- per run: the average |estimate − w| / w over the exact hot set (a context missing counts 100 %),
  the mean signed error, the false negatives (estimate below the run's ⌊φN⌋) and how many of them
  the sampled tree lacks altogether;
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


def load(hcct, directory):
    """(thread meta, {context: count}, {context: function name}) of the thread with most calls."""
    out = subprocess.run([hcct, "dump", directory, "--json"], capture_output=True, text=True, check=True).stdout
    thread = max(json.loads(out)["threads"], key=lambda t: t["calls"])
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
    info = json.loads(subprocess.run([hcct, "info", directory, "--json"], capture_output=True, text=True,
                                     check=True).stdout)
    meta = max((t for p in info["processes"] for t in p["threads"]), key=lambda t: t["calls"])
    return meta, counts, names


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

    exact_meta, exact, names = load(args.hcct, args.exact)
    threshold = math.floor(args.phi * (exact_meta["calls"] + exact_meta["lost"]))
    hot = {k: w for k, w in exact.items() if w >= threshold}
    print(f"exact: N = {exact_meta['calls']:,}, floor(phi N) = {threshold:,}, {len(hot)} hot contexts")
    estimates = collections.defaultdict(list)
    for directory in args.sampled:
        meta, counts, _ = load(args.hcct, directory)
        extra = meta.get("extra", {})
        f = float(extra.get("sampled_fraction", 1))
        run_threshold = math.floor(args.phi * meta["calls"] / f)
        errors, signed, negatives, absent = 0.0, 0.0, 0, 0
        for k, w in hot.items():
            e = counts.get(k, 0) / f
            estimates[k].append(e)
            errors += abs(e - w) / w
            signed += (e - w) / w
            if e < run_threshold:
                negatives += 1
                absent += k not in counts
        print(f"{directory}: fraction {f:.4f}, {extra.get('bursts', '?')} bursts, min_count {meta.get('min_count')}: "
              f"error {100 * errors / len(hot):.2f}%, signed {100 * signed / len(hot):+.2f}%, "
              f"false negatives {negatives} ({absent} not in the sampled tree)")
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
