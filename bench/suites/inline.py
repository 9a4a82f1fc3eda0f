"""Issue 8: instrumentation before vs after inlining, on the template-heavy example.

  bench/bench.py [--instructions] inline

Builds (examples/templates/CMakeLists.txt): native; gcc -finstrument-functions; the hcct plugin
before inlining (stage=early) and after inlining (stage=late); clang
-finstrument-functions-after-inlining. Each instrumented build runs under libhcct in `empty` mode
(the probes' floor) and `hcct` mode. Baselines: native, and the plugin after inlining in hcct mode.
"""
import os


def suite_inline(build, small=False):
    ex = os.path.join(build, "examples", "templates")
    # B batches of S steps; each step is two real calls (step, check) around ~0.3 us of inlined
    # template code. Before inlining every template function is a call too (~140x slower), so the
    # input is kept small enough for those builds to finish in seconds.
    args = ("20", "500") if small else ("150", "2000")
    native = [os.path.join(ex, "templates_native"), *args]
    builds = [
        ("gcc finstr", "templates_finstr"),
        ("plugin early", "templates_plugin_early"),
        ("plugin late", "templates_plugin_late"),
        ("clang after-inlining", "templates_clang_after_inlining"),
    ]
    configs = [Config("native", native)]  # noqa: F821 (injected by bench.py)
    for label, exe in builds:
        for mode in ("empty", "hcct"):
            configs.append(Config(f"{label} {mode}", [os.path.join(ex, exe), *args],  # noqa: F821
                                  hcct_options="mode=" + mode))
    return "inline (templates)", configs, ["native", "plugin late hcct"]


SUITES = {"inline": suite_inline}
