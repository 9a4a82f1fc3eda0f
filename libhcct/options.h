// Run-time configuration from HCCT_OPTIONS (sanitizer style: `key=value:key=value`).
#ifndef HCCT_RT_OPTIONS_H
#define HCCT_RT_OPTIONS_H

#include "hcct/format.h"
#include "common.h"

namespace hcct::rt {

enum class Mode : uint8_t { kOff, kEmpty, kCct, kHcct };
enum class KeyBy : uint8_t { kSite, kRoutine };
// Static bursting (docs/BURSTING.md): off; timer-driven bursts; or bursts switched by the program
// through the test hook hcct_burst() (deterministic tests).
enum class Burst : uint8_t { kOff, kTimer, kManual };
// How a thread's calling context is recovered at the start of a burst: kShadow (the default) = keep
// the gate open between bursts so every probe keeps the shadow stack (with burst=1 each thread then
// schedules its own bursts in its enter events: the event clock); kAuto = from the shadow stack the
// -finstrument-functions hooks keep between bursts, else (GCC-plugin probes, silent while the gate
// is closed) from the machine stack, on the process-wide time clock; kUnwind = always from the
// machine stack (hooks return at once between bursts). The machine stack has no frame for inlined
// instrumented functions (docs/BURSTING.md).
enum class BurstSync : uint8_t { kAuto, kShadow, kUnwind };
// kpath's run-time structure for k >= 2 (docs/KPATH.md, "Runtime"): the thesis's k-slab forest
// (Algorithm 4) or the k-window forest.
using format::PathForest;
// The time metric (docs/RUNTIME.md, "Time"): none, samples of each thread's CPU time (per-thread
// CPU-time timers), or of its wall-clock time (a sampler thread, blocked time included).
enum class TimeMetric : uint8_t { kOff, kCpu, kWall };

inline constexpr size_t kMaxPath = 4096;
inline constexpr uint32_t kMaxPathK = 256;

struct Options {
  Mode mode = Mode::kHcct;
  KeyBy key = KeyBy::kSite;
  double epsilon = 2e-5;           // thesis defaults: phi = 1e-4, epsilon = phi / 5
  uint64_t max_mb = 4096;          // cap on tree memory for the whole process
  bool verbose = false;
  uint32_t path_k = 8;             // kpath: k of the k-SF; 1 = Ball-Larus counters (BLPP)
  bool path_trace = false;         // kpath: also record the raw path-ID stream (debugging, tests)
  PathForest path_forest = PathForest::kWindow;  // kpath: forest=ksf|kwf
  // kpath: the bounded kWF's ε (docs/KPATH.md, "Bounded forests"); 0 = the exact forest.
  double path_epsilon = 1e-4;
  uint32_t path_grow = 4;  // bounded forests: all threads' budgets within path_grow · k/(2ε) nodes
  // kpath, the event clock of path bursts (docs/KPATH.md, "The event clock"): a burst is this many
  // path starts of the thread, and one starts every path_burst_interval starts on average. One in
  // 100 starts (measured, docs/KPATH.md "The default schedule"): on Lua the bursts' cost follows the
  // sampled items, 5.2 % of native's instructions at one in 30 against 2.2 %; bursts of 1 000 starts,
  // not 500 every 50 000, which cut zstd's outer-loop sequences (one hot sequence missing).
  uint64_t path_burst_starts = 1000;
  uint64_t path_burst_interval = 100000;
  static constexpr uint64_t kPathBurstRatio = 100;  // one given alone sets the other at this ratio
  bool path_burst_starts_given = false, path_burst_interval_given = false;
  bool follow = false;             // put the runtime back into children given their own environment
  bool exact = false;              // hcct mode: also keep the exact CCT, written to <out>/exact
  Burst burst = Burst::kOff;        // static bursting
  // 2 ms / 0.2 ms (issue 16): the thesis's 20 ms / 2 ms left too few windows in the phases of a
  // real program for φ = 1e-4 (Lua: 25.8 % average error, 6.4 % with these; docs/BENCHMARKS.md).
  uint64_t burst_interval_ns = 2000000;  // sampling interval (a burst starts every interval)
  uint64_t burst_length_ns = 200000;     // burst length
  // The event clock's schedule of calls when neither option is given (burst=1, burst_sync=shadow;
  // burst_runtime.cc): its windows are counted in each thread's calls, and more, shorter ones cut
  // the sampling error at next to no cost (Lua, φ = 1e-4: 11.8 % average error at 2 / 0.2 ms,
  // 3.0 % at 0.1 / 0.01 ms; docs/BURSTING.md, "The estimator"). Timers (the time clock, the path
  // gate of kpath bursting) keep burst_interval_ns / burst_length_ns.
  static constexpr uint64_t kEventClockIntervalNs = 100000;
  static constexpr uint64_t kEventClockLengthNs = 10000;
  // The count clock's (plugin builds with clock=count; docs/BURSTING.md, "The count clock's
  // schedule"): as many windows as the event clock's, with shorter bursts. Its bursts cost
  // f·(s − 1) of native, s the in-burst slowdown, and the error of a window grows slowly as its
  // burst gets shorter (session 14, bench/real: f = 5 % is the least that keeps zstd's threads
  // within issue 16's bounds at φ = 1e-4; 3.3 % and 2 % do not; docs/BENCHMARKS.md).
  static constexpr uint64_t kCountClockIntervalNs = 100000;
  static constexpr uint64_t kCountClockLengthNs = 5000;
  // Which of burst_interval and burst_length were given. One given alone sets the other at the
  // defaults' ratio (kBurstRatio: a burst every ten burst lengths, the same sampled fraction), so
  // `burst_interval=0.1` alone is a valid schedule on either clock.
  static constexpr uint64_t kBurstRatio = 10;
  bool burst_interval_given = false, burst_length_given = false;
  bool burst_schedule_given() const { return burst_interval_given || burst_length_given; }
  BurstSync burst_sync = BurstSync::kShadow;  // the one right with inlined probes (issue 16)
  // The default applies in hcct mode; cct mode samples time only when `time=cpu|wall` is given
  // (time_given): its 64-byte nodes cost 12 % more CPU on a 2.7-million-context tree.
  TimeMetric time = TimeMetric::kCpu;
  bool time_given = false;
  uint32_t sample_hz = 1000;
  int sample_signal = 61;          // SIGRTMAX-3 with glibc on Linux
  char out[kMaxPath] = "hcct.data";  // made absolute at start-up
  char log[kMaxPath] = "";           // messages go to this file instead of stderr (messages.h)
};

// Parses `text` (may be null: defaults). On error writes one message into `error` (NUL-terminated,
// at most `error_size` bytes) and returns false; `out` is then unspecified.
bool parse_options(const char *text, Options *out, char *error, size_t error_size);

// The options this process runs with, parsed once from HCCT_OPTIONS by the runtime's constructor
// (runtime.cc). Read only after it ran, i.e. from events: with invalid options none arrive.
const Options &runtime_options();

const char *mode_name(Mode m);
const char *burst_sync_name(BurstSync s);
const char *time_metric_name(TimeMetric t);
// Whether this run samples time: time=cpu|wall given, or left at its default in hcct mode.
bool samples_time(const Options &o);

}  // namespace hcct::rt

#endif
