// The estimator of a path profile sampled in bursts (docs/KPATH.md, "Bursting"): per-root ratio
// estimation. Every Ball-Larus path starts at its function's entry or at a loop header after a
// back edge. A versioned build (kpath -kpath-burst=1) counts, in both copies of each function, how
// many paths started at each such point in the whole run: T(s), exact. The forest holds the
// sampled items, so S(s), the number of sampled paths that started at s, is the sum of the
// 1-gram counts of the paths that start there. A k-IPF tree whose root path starts at s is scaled
// by T(s) / S(s): every sequence is estimated from the sampled fraction of its own first path's
// start point, which is measured in that start point's own executions, not in time — so a phase
// that bursts slow down more is not under-counted, as long as its loops are its own.
// Per-thread counters (an executable's functions, KPSC's thread_functions): T and S are the
// thread's own, so each thread's trees are scaled by its own ratios; process-wide counters (a
// shared library's): T is the process's, S sums its threads.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hcct/analysis/kpath_ipf.h"
#include "hcct/analysis/kpath_metadata.h"
#include "hcct/analysis/kpath_profile.h"

namespace hcct::analysis {

class PathEstimator {
 public:
  // From every thread file of the profile, before any --pid/--thread selection: the counters are
  // a process's, and S(s) sums all its threads.
  explicit PathEstimator(const std::vector<ThreadPaths> &all);
  // Decodes where each sampled path starts (metadata of the binaries) and computes the ratios.
  void resolve(const PathMetadata &meta);

  // Some thread of `pid` (any process if nullopt) recorded with the path gate following bursts.
  bool sampled(uint64_t pid) const;
  bool any_sampled() const;
  // T(s)/S(s) for the start of `root` in the thread `thread` (its own T and S for a function with
  // per-thread counters, the process's otherwise), 1 for a process that was not sampled or a
  // function without counters (not versioned: every item was counted). Paths whose start has no
  // counter (a cut edge's target, or no metadata to decode the path) take the function's T/S over
  // all its starts.
  double ratio(const ThreadMeta &thread, PathLabel root) const;
  // `ipf` (of the thread `thread`) with every tree's counts times its root's ratio, rounded.
  Ipf scale(const Ipf &ipf, const ThreadMeta &thread) const;

  // T(function, block) of the sampled process `pid`: paths started there in the whole run, by all
  // its threads (0 if unknown); and the versioned functions of the sampled processes among `pids`.
  uint64_t started(uint64_t pid, uint64_t function, uint32_t block) const;
  std::vector<uint64_t> counted_functions(const std::vector<uint64_t> &pids) const;

  // A thread whose own start counters say it ran versioned code but that no burst sampled: its
  // paths are in N, its start points' counts exact, its sequences unknown.
  struct UnsampledThread {
    uint64_t pid = 0, tid = 0, paths = 0;
    size_t starts = 0;  // start points it ran
  };
  struct Summary {
    uint64_t interval_ns = 0, length_ns = 0;
    bool event_clock = false;  // interval and length are path starts per thread, not nanoseconds
    // The time clock with per-thread counters: a thread whose whole life fell between bursts never
    // reached the runtime and wrote no file, so nothing counts it.
    bool threads_may_be_missing = false;
    std::vector<UnsampledThread> unsampled_threads;
    uint64_t sampled_paths = 0;   // S over all start points with a counter
    uint64_t started_paths = 0;   // T over the same start points
    // Start points that ran but no burst sampled (a function or loop that ran only between
    // bursts): their paths are counted, their sequences unknown.
    uint64_t unsampled_paths = 0;
    size_t unsampled_starts = 0;
    size_t fallback_paths = 0;    // sampled path IDs scaled by their function's ratio
    size_t low_counters = 0;      // start points whose T came out below S (counters lost increments)
    uint64_t dropped_tables = 0;  // modules whose counters the runtime could not keep
  };
  // Over the sampled processes among `pids` (each once).
  Summary summary(std::vector<uint64_t> pids) const;

 private:
  // What one set of counters estimates: a process's process-wide counters and all its threads'
  // samples of those functions, or one thread's own counters and samples.
  struct Unit {
    std::map<std::pair<uint64_t, uint32_t>, uint64_t> started;  // T(function, start block)
    std::map<PathLabel, uint64_t> sampled;                       // 1-gram counts
    // After resolve():
    std::map<std::pair<uint64_t, uint32_t>, uint64_t> sampled_at;  // S(function, start block)
    std::map<PathLabel, double> ratio;
    size_t fallback_paths = 0, low_counters = 0;
    uint64_t unsampled_paths = 0;
    uint64_t tid = 0;  // a thread's own counters: its tid
    size_t unsampled_starts = 0;
    void resolve(const PathMetadata &meta);
  };
  struct Process {
    bool bursting = false, event_clock = false;
    uint64_t interval_ns = 0, length_ns = 0, dropped_tables = 0;
    Unit shared;                          // process-wide counters
    std::map<uint64_t, Unit> threads;     // thread_seq -> its per-thread counters
    std::set<uint64_t> thread_functions;  // the functions counted per thread
  };
  std::map<uint64_t, Process> processes_;
};

// The lines `hcct paths` and `hcct guide` print about threads a sampled profile has no sequences
// of: each thread no burst sampled (its paths, counted exactly, in N), and on the time clock with
// per-thread counters that a thread which lived wholly between bursts wrote no file. Each line
// starts with `prefix`; empty when there is nothing to say.
std::string unsampled_threads_text(const PathEstimator::Summary &s, const std::string &prefix);

}  // namespace hcct::analysis
