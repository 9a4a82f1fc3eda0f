// The keys of a dump's META section (docs/FORMAT.md, "META" and "Static bursting keys"), with how
// `hcct merge` combines them (docs/ANALYSIS.md, "META of a merged profile"): one table for every
// side that writes, reads, merges or documents them — the runtime (libhcct/dump.cc), the analysis
// library's reader, writer and merge (analysis/src), `hcct dump`, and tests/analysis/
// test_contracts.cc, which fails when the docs and this table disagree.
// Like format.h it depends on nothing and never allocates (the runtime includes it).
#ifndef HCCT_META_KEYS_H
#define HCCT_META_KEYS_H

namespace hcct::format::meta {

enum class Type : unsigned char {
  kText,   // any bytes but NUL
  kCount,  // decimal unsigned 64-bit
  kReal,   // decimal floating point (shortest round-trip form)
};

// Which files hold the key.
enum class Presence : unsigned char {
  kAlways,       // every file
  kHcctMode,     // files of mode=hcct
  kOptional,     // every file of current runtimes; absent in older ones, read as 0
  kTimed,        // profiles with a time metric (option time=cpu; format version 2)
  kTimedHcct,    // timed profiles of mode=hcct
  kBursting,     // sampled profiles of burst=1 / burst=manual
  kBurstEvents,  // sampled profiles whose every event reached the runtime
  kMerged,       // written by hcct merge
};

// How hcct merge combines the inputs' values.
enum class Merge : unsigned char {
  kFirst,      // the first input's
  kSum,        // sum (counts, after scaling for `calls`, `lost`, `min_count`)
  kMax,        // the largest
  kMin,        // the smallest
  kSame,       // kept when every input has the same value, else dropped and named
  kOwnRule,    // a rule of its own, written out in analysis/src/merge.cc and docs/ANALYSIS.md
};

struct Key {
  const char *name;
  Type type;
  Presence presence;
  Merge merge;
};

// Written by the runtime, in this order.
inline constexpr Key kRuntime{"runtime", Type::kText, Presence::kAlways, Merge::kFirst};
inline constexpr Key kPid{"pid", Type::kCount, Presence::kAlways, Merge::kFirst};
inline constexpr Key kPpid{"ppid", Type::kCount, Presence::kAlways, Merge::kFirst};
inline constexpr Key kThreadSeq{"thread_seq", Type::kCount, Presence::kAlways, Merge::kOwnRule};
inline constexpr Key kTid{"tid", Type::kCount, Presence::kAlways, Merge::kFirst};
inline constexpr Key kStatus{"status", Type::kText, Presence::kAlways, Merge::kOwnRule};
inline constexpr Key kMode{"mode", Type::kText, Presence::kAlways, Merge::kFirst};
inline constexpr Key kKey{"key", Type::kText, Presence::kAlways, Merge::kFirst};
inline constexpr Key kEpsilon{"epsilon", Type::kReal, Presence::kHcctMode, Merge::kMax};
inline constexpr Key kCounters{"counters", Type::kCount, Presence::kHcctMode, Merge::kSum};
inline constexpr Key kMinCount{"min_count", Type::kCount, Presence::kHcctMode, Merge::kSum};
inline constexpr Key kCalls{"calls", Type::kCount, Presence::kAlways, Merge::kSum};
inline constexpr Key kDropped{"dropped", Type::kCount, Presence::kAlways, Merge::kSum};
inline constexpr Key kLost{"lost", Type::kCount, Presence::kOptional, Merge::kSum};
inline constexpr Key kUnmatchedExits{"unmatched_exits", Type::kCount, Presence::kOptional, Merge::kSum};
inline constexpr Key kMaxDepth{"max_depth", Type::kCount, Presence::kAlways, Merge::kMax};
inline constexpr Key kTreeBytes{"tree_bytes", Type::kCount, Presence::kAlways, Merge::kSum};
inline constexpr Key kNodesPeak{"nodes_peak", Type::kCount, Presence::kAlways, Merge::kSum};
inline constexpr Key kExe{"exe", Type::kText, Presence::kAlways, Merge::kFirst};
inline constexpr Key kCmdline{"cmdline", Type::kText, Presence::kAlways, Merge::kFirst};
inline constexpr Key kStartNs{"start_ns", Type::kCount, Presence::kAlways, Merge::kMin};
inline constexpr Key kEndNs{"end_ns", Type::kCount, Presence::kAlways, Merge::kMax};
// Time (docs/RUNTIME.md, "Time"): the metric, the sampling period, the samples charged into the
// tree (S, the sum of the TIME section) and those no context could be given.
inline constexpr Key kTime{"time", Type::kText, Presence::kTimed, Merge::kSame};
inline constexpr Key kSamplePeriodNs{"sample_period_ns", Type::kCount, Presence::kTimed, Merge::kSame};
inline constexpr Key kSamples{"samples", Type::kCount, Presence::kTimed, Merge::kSum};
inline constexpr Key kSamplesLost{"samples_lost", Type::kCount, Presence::kTimed, Merge::kSum};
inline constexpr Key kTimeMinCount{"time_min_count", Type::kCount, Presence::kTimedHcct, Merge::kSum};
// Static bursting (docs/BURSTING.md).
inline constexpr Key kBurst{"burst", Type::kText, Presence::kBursting, Merge::kSame};
inline constexpr Key kBurstSync{"burst_sync", Type::kText, Presence::kBursting, Merge::kSame};
// `events` (the thread's own bursts, scheduled in its enter events: every window samples the same
// fraction of its calls) or `time` (the process-wide wall-clock schedule); absent before issue 16,
// read as `time`.
inline constexpr Key kBurstClock{"burst_clock", Type::kText, Presence::kBursting, Merge::kSame};
inline constexpr Key kBurstIntervalNs{"burst_interval_ns", Type::kCount, Presence::kBursting, Merge::kSame};
inline constexpr Key kBurstLengthNs{"burst_length_ns", Type::kCount, Presence::kBursting, Merge::kSame};
inline constexpr Key kBursts{"bursts", Type::kCount, Presence::kBursting, Merge::kSum};
inline constexpr Key kBurstTimeFraction{"burst_time_fraction", Type::kReal, Presence::kBursting, Merge::kMax};
// Machine frames stepped through by the unwinder at burst starts, and those taken from the thread's
// previous walk instead (docs/BURSTING.md, "The cost of a burst start"); absent before session 10.
inline constexpr Key kUnwindFrames{"unwind_frames", Type::kCount, Presence::kBursting, Merge::kSum};
inline constexpr Key kUnwindFramesReused{"unwind_frames_reused", Type::kCount, Presence::kBursting, Merge::kSum};
inline constexpr Key kUnwindFramesByRules{"unwind_frames_by_rules", Type::kCount, Presence::kBursting, Merge::kSum};
inline constexpr Key kEvents{"events", Type::kCount, Presence::kBurstEvents, Merge::kSum};
inline constexpr Key kSampledFraction{"sampled_fraction", Type::kReal, Presence::kBursting, Merge::kOwnRule};
inline constexpr Key kSampledFractionBasis{"sampled_fraction_basis", Type::kText, Presence::kBursting,
                                           Merge::kOwnRule};
// Written by hcct merge.
inline constexpr Key kMergedThreads{"merged_threads", Type::kText, Presence::kMerged, Merge::kOwnRule};
inline constexpr Key kMergedFrom{"merged_from", Type::kText, Presence::kMerged, Merge::kOwnRule};
inline constexpr Key kThreadTimeNs{"thread_time_ns", Type::kCount, Presence::kMerged, Merge::kOwnRule};
inline constexpr Key kMergedCommands{"merged_commands", Type::kText, Presence::kMerged, Merge::kOwnRule};
inline constexpr Key kBurstScaled{"burst_scaled", Type::kCount, Presence::kMerged, Merge::kOwnRule};
inline constexpr Key kMergedDroppedKeys{"merged_dropped_keys", Type::kText, Presence::kMerged, Merge::kOwnRule};

inline constexpr const Key *kAll[] = {
    &kRuntime, &kPid, &kPpid, &kThreadSeq, &kTid, &kStatus, &kMode, &kKey, &kEpsilon, &kCounters,
    &kMinCount, &kCalls, &kDropped, &kLost, &kUnmatchedExits, &kMaxDepth, &kTreeBytes, &kNodesPeak,
    &kExe, &kCmdline, &kStartNs, &kEndNs, &kTime, &kSamplePeriodNs, &kSamples, &kSamplesLost,
    &kTimeMinCount, &kBurst, &kBurstSync, &kBurstClock, &kBurstIntervalNs, &kBurstLengthNs,
    &kBursts, &kBurstTimeFraction, &kUnwindFrames, &kUnwindFramesReused, &kUnwindFramesByRules, &kEvents, &kSampledFraction, &kSampledFractionBasis,
    &kMergedThreads, &kMergedFrom, &kThreadTimeNs, &kMergedCommands, &kBurstScaled,
    &kMergedDroppedKeys};

constexpr bool same_name(const char *a, const char *b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

// The key named `name`, or null (a key of a newer runtime or of another tool: readers keep it).
constexpr const Key *find(const char *name) {
  for (const Key *k : kAll)
    if (same_name(k->name, name)) return k;
  return nullptr;
}

}  // namespace hcct::format::meta

#endif
