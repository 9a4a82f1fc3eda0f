// The runtime's options (HCCT_OPTIONS=key=value:key=value), one table for every side that parses,
// prints or documents them: the runtime's parser (libhcct/options.cc: names, accepted values in its
// messages), `hcct record --help` (tools/hcct/cmd_record.cc), the README's option table and
// tests/runtime/options_test.cc, which fails when the README, the parser's defaults and this table
// disagree. Depends on nothing (the runtime includes it).
#ifndef HCCT_RUNTIME_OPTIONS_H
#define HCCT_RUNTIME_OPTIONS_H

namespace hcct::runtime_options {

struct Option {
  const char *name;
  bool choice;          // `values` lists every accepted value ("a, b, c"); else it describes them
  const char *values;   // what the parser accepts, as its messages and the docs say it
  const char *fallback;  // the default, as written in HCCT_OPTIONS ("" when there is none)
  const char *meaning;  // one line for --help and the README (markdown backticks allowed)
};

inline constexpr Option kMode{"mode", true, "off, empty, cct, hcct", "hcct",
                              "`empty`: probes only (the instrumentation floor); `cct`: exact CCT; `hcct`: bounded MCCT"};
inline constexpr Option kEpsilon{"epsilon", false, "a number in [1e-7, 1)", "2e-5",
                                 "hcct: ⌈1/ε⌉ Space-Saving counters; estimates overcount by at most εN"};
inline constexpr Option kKey{"key", true, "site, routine", "site",
                             "a context is a chain of (function, call site), or of functions only"};
inline constexpr Option kOut{"out", false, "a directory path", "hcct.data",
                             "where each thread writes `<pid>.<thread>.hcct`, beside what is there (`hcct record` moves a "
                             "previous profile to `DIR.old` first)"};
inline constexpr Option kMaxMb{"max_mb", false, "a whole number of MiB, at least 1", "4096",
                               "cap on tree memory for the process; beyond it calls into new contexts are counted as lost"};
inline constexpr Option kExact{"exact", true, "0, 1", "0",
                               "hcct: also keep the exact CCT of the same run, written to `<out>/exact/` (for accuracy "
                               "checks)"};
inline constexpr Option kVerbose{"verbose", true, "0, 1", "0",
                                 "say at exit where the profile went (hcct mode: and each thread's Space-Saving upkeep)"};
inline constexpr Option kLog{"log", false, "a file path", "",
                             "write the runtime's messages to this file instead of stderr (docs/RUNTIME.md, \"Messages\")"};
inline constexpr Option kFollow{"follow", true, "0, 1", "0",
                                "put the runtime back into children that `exec*`/`posix_spawn*` start with their own "
                                "environment (`hcct record` sets it)"};
inline constexpr Option kBurst{"burst", true, "0, 1, manual", "0",
                               "static bursting: exhaustive profiling only in short bursts (docs/BURSTING.md)"};
inline constexpr Option kBurstInterval{"burst_interval", false, "milliseconds in [0.001, 86400000]", "2",
                                       "a burst starts every `burst_interval`; on the event clock (`burst=1` with the shadow stack) "
                                       "or the count clock (plugin `clock=count` builds) with neither this nor `burst_length` given: 0.1; "
                                       "one given alone sets the other at 10:1 on every clock"};
inline constexpr Option kBurstLength{"burst_length", false, "milliseconds in [0.001, 86400000]", "0.2",
                                     "each burst lasts `burst_length` (at most the interval); with neither given: 0.01 on the event "
                                     "clock, 0.005 on the count clock"};
inline constexpr Option kBurstSync{"burst_sync", true, "auto, shadow, unwind", "shadow",
                                   "how a burst recovers the current context (shadow stack or machine stack); plugin builds "
                                   "with `clock=count` burst on the count clock with `shadow` or `auto` (docs/BURSTING.md, "
                                   "\"The count clock\")"};
inline constexpr Option kTime{"time", true, "off, cpu, wall", "cpu",
                              "sample each thread's CPU time, or its wall-clock time (`wall`: blocked time too), and "
                              "charge it to the current context (docs/RUNTIME.md, \"Time\"); the default applies in "
                              "hcct mode, cct mode needs `time=cpu` or `time=wall`"};
inline constexpr Option kSampleHz{"sample_hz", false, "a whole number in [1, 10000]", "1000",
                                  "time samples per second of each thread's CPU (or wall-clock) time"};
inline constexpr Option kSampleSignal{"sample_signal", false,
                                      "a signal number: 26 (SIGVTALRM), 27 (SIGPROF) or 34 to 64 (real-time)", "61",
                                      "the signal of the time sampler's timers (61 is SIGRTMAX-3: a program's "
                                      "SIGPROF/setitimer stay its own); `time=wall` sends no signal"};
inline constexpr Option kK{"k", false, "a whole number in [1, 256]", "8",
                           "kpath builds: the k of the k-iteration path profile (1: Ball-Larus counters)"};
inline constexpr Option kForest{"forest", true, "ksf, kwf", "kwf",
                                "kpath builds: the run-time forest (k-window forest, or the thesis's k-slab forest)"};
inline constexpr Option kPathEpsilon{"path_epsilon", false, "0, or a number in [1e-6, 0.5]", "1e-4",
                                     "kpath builds, k ≥ 2, `forest=kwf`: bound the forest to k/(2ε) live nodes per thread (64 bytes each; "
                                     "`path_grow` more while memory allows), every count at most εN low (docs/KPATH.md, "
                                     "\"Bounded forests\"); 0: the exact forest"};
inline constexpr Option kPathGrow{"path_grow", false, "a whole number in [1, 64]", "4",
                                  "kpath builds, bounded forests: a thread's forest may grow past k/(2ε) nodes, k/(2ε) at a "
                                  "time, while all threads' budgets together stay within this many times k/(2ε) "
                                  "(docs/KPATH.md, \"Growing budgets\"); 1: a fixed budget"};
inline constexpr Option kPathBurstStarts{"path_burst_starts", false, "a whole number in [1, 2^40]", "1000",
                                         "kpath builds on the event clock (an executable's, `-kpath-burst=1`): with `burst=1` a "
                                         "path burst is this many path starts of the thread (docs/KPATH.md, \"The event clock\"); given alone, the "
                                         "interval is 100 times as many"};
inline constexpr Option kPathBurstInterval{"path_burst_interval", false, "a whole number in [1, 2^40], at least path_burst_starts",
                                           "100000",
                                           "kpath builds on the event clock: a path burst starts every this many path starts of the "
                                           "thread on average (jittered ±50 %), so one in 100 starts is sampled by default; given alone, "
                                           "`path_burst_starts` is a 100th of it"};
inline constexpr Option kPathTrace{"path_trace", true, "0, 1", "0",
                                   "kpath builds: also record the raw path-ID stream (tests, debugging)"};

// In the order the docs list them.
inline constexpr const Option *kAll[] = {&kMode,  &kEpsilon, &kKey,   &kOut,           &kMaxMb,
                                         &kExact, &kVerbose, &kLog,   &kFollow,        &kBurst,
                                         &kBurstInterval, &kBurstLength, &kBurstSync, &kTime,
                                         &kSampleHz, &kSampleSignal, &kK, &kForest,
                                         &kPathEpsilon, &kPathGrow, &kPathBurstStarts, &kPathBurstInterval, &kPathTrace};

}  // namespace hcct::runtime_options

#endif
