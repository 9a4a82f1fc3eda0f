"""Issue 7: hot-loop guidance for OSR tiers, the worked example (examples/osr/masked_conv_osr.c).

  bench/bench.py [--instructions] osr

One session, interleaved rounds: the masked convolution's baseline loop; the specialised 8-wide
loop from the first pixel (the bound); switching at the guided threshold by the plugin's OSR point
and the example's handler (guided build, mode osr); switching by the oracle (mode oracle, the
threshold from `hcct guide --thresholds` through HCCT_ORACLE_GUIDE); the guided build with its handler
declining (mode base: what the OSR points cost); OSR points with no handler and no libhcct.
Baseline: the native build's baseline loop. Every configuration prints the same checksum
(tests/guide/test_osr.cc checks it).
"""
import os


def suite_osr(build, small=False):
    ex = os.path.join(build, "examples", "osr")
    args = ["600", "800", "2"] if small else ["1500", "2000", "8"]
    thresholds = os.path.join(ex, "masked_conv_osr.thresholds")
    off = {"HCCT_OPTIONS": "mode=off"}
    configs = [
        Config("baseline", [os.path.join(ex, "masked_conv_osr"), "base", *args], env=off),  # noqa: F821
        Config("specialised always", [os.path.join(ex, "masked_conv_osr"), "spec", *args], env=off),  # noqa: F821
        Config("guided OSR switch", [os.path.join(ex, "masked_conv_osr_guided"), "osr", *args], env=off),  # noqa: F821
        Config("oracle switch", [os.path.join(ex, "masked_conv_osr"), "oracle", *args],  # noqa: F821
               env={**off, "HCCT_ORACLE_GUIDE": thresholds}),
        Config("OSR points, handler declines", [os.path.join(ex, "masked_conv_osr_guided"), "base", *args],  # noqa: F821
               env=off),
        Config("OSR points, no handler", [os.path.join(ex, "masked_conv_osr_nohandler"), "base", *args]),  # noqa: F821
    ]
    return "osr (masked convolution " + "x".join(args) + ")", configs, ["baseline"]


def suite_osr_version(build, small=False):
    """Issue 19: loop versions built only from each program's own profile (examples/osr/CMakeLists.txt:
    record at k = 10, `hcct guide`, HCCT_OSR_MODE=version). Per program: the plain -O2 build (the
    baseline), the versioned build at the guidance's thresholds, the versioned build whose
    thresholds are never reached (2^63-1: the trigger's cost), and for the masked convolution the
    hand-written 8-wide loop from pixel 0 and the worked example's handler switch for comparison.
    Every configuration of a program prints the same line (tests/guide/test_versions.cc)."""
    ex = os.path.join(build, "examples", "osr")
    inputs = {"masked_conv": ["600", "800", "2"] if small else ["1500", "2000", "8"],
              "collatz": ["60000"] if small else ["1500000"],
              "lexer": ["400000", "1"] if small else ["8000000", "4"]}
    off = {"HCCT_OPTIONS": "mode=off"}
    configs = []
    for name, args in inputs.items():
        configs += [
            Config(name + " baseline", [os.path.join(ex, name + "_plain"), *args]),  # noqa: F821
            Config(name + " version at threshold", [os.path.join(ex, name + "_version"), *args]),  # noqa: F821
            Config(name + " version never fires", [os.path.join(ex, name + "_version_never"), *args]),  # noqa: F821
        ]
    mc = inputs["masked_conv"]
    configs += [
        # The worked example is another program (it clears the output every pass): its own baseline.
        Config("masked_conv_osr baseline", [os.path.join(ex, "masked_conv_osr"), "base", *mc], env=off),  # noqa: F821
        Config("masked_conv hand-written 8-wide", [os.path.join(ex, "masked_conv_osr"), "spec", *mc], env=off),  # noqa: F821
        Config("masked_conv handler switch", [os.path.join(ex, "masked_conv_osr_guided"), "osr", *mc], env=off),  # noqa: F821
    ]
    return ("osr-version (loop versions from each program's profile)", configs,
            [n + " baseline" for n in inputs] + ["masked_conv_osr baseline"])


SUITES = {"osr": suite_osr, "osr-version": suite_osr_version}
