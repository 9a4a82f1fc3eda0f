"""Analysis and exports (issue 6): hcct report and every export on a synthetic 10-million-node CCT.

The tree is written once by tests/analysis/hcct_synth (bench/analysis/synth.cc) into
$TMPDIR/hcct-bench-synth-<nodes>/ and reused. Output goes to /dev/null (the harness discards
stdout), so the figures are reading, filtering, symbolizing and formatting, not disk writes.
Baseline: 'info', which reads and validates the whole file into memory.
"""
import os
import subprocess
import sys
import tempfile


def synthetic(build, nodes):
    out = os.path.join(tempfile.gettempdir(), f"hcct-bench-synth-{nodes}")
    if not os.path.exists(os.path.join(out, "4242.0.hcct")):
        synth = os.path.join(build, "tests", "analysis", "hcct_synth")
        if not os.path.exists(synth):
            sys.exit(f"bench: {synth} missing (build the tests: it is the generator)")
        subprocess.run([synth, out, str(nodes)], check=True, stdout=subprocess.DEVNULL)
    return out


def suite_exports(build, small=False):
    nodes = 200_000 if small else 10_000_000
    data = synthetic(build, nodes)
    hcct = os.path.join(build, "tools", "hcct", "hcct")
    configs = [
        Config("info", [hcct, "info", data]),
        Config("report", [hcct, "report", data, "--phi", "1e-6"]),
        Config("report --focus", [hcct, "report", data, "--phi", "1e-6", "--focus", r"\+0x1[0-9a-f]{3}$"]),
    ]
    for fmt in ("folded", "callgrind", "pprof", "json", "dot"):
        configs.append(Config(fmt, [hcct, "export", data, "-f", fmt]))
    configs.append(Config("folded --min-share", [hcct, "export", data, "-f", "folded", "--min-share", "1e-6"]))
    return f"analysis ({nodes:,}-node synthetic CCT)", configs, ["info"]


def suite_merge(build, small=False):
    """hcct merge of two processes of a program with 10^5 modules (issue 14: it was O(modules^2)).

    Baseline: 'info' on the same directory (reads and validates both files)."""
    modules = 10_000 if small else 100_000
    data = os.path.join(tempfile.gettempdir(), f"hcct-bench-modules-{modules}")
    if not os.path.exists(os.path.join(data, "4243.0.hcct")):
        synth = os.path.join(build, "tests", "analysis", "hcct_synth")
        if not os.path.exists(synth):
            sys.exit(f"bench: {synth} missing (build the tests: it is the generator)")
        subprocess.run([synth, data, str(modules), "modules"], check=True, stdout=subprocess.DEVNULL)
    hcct = os.path.join(build, "tools", "hcct", "hcct")
    out = os.path.join(tempfile.gettempdir(), f"hcct-bench-merged-{modules}")
    configs = [
        Config("info", [hcct, "info", data]),
        # merge refuses a directory that holds profiles: start from an empty one every round.
        Config("merge", ["/bin/sh", "-c", f'rm -rf "{out}" && exec "{hcct}" merge "{data}" -o "{out}"']),
        Config("merge --per-process", ["/bin/sh", "-c", f'rm -rf "{out}" && exec "{hcct}" merge "{data}" --per-process -o "{out}"']),
        Config("report --no-symbols", [hcct, "report", data, "--no-symbols"]),
    ]
    return f"merge ({modules:,} modules in each of 2 processes)", configs, ["info"]


SUITES = {"analysis": suite_exports, "merge": suite_merge}
