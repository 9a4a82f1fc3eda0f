// Hot-loop guidance for OSR tiers (docs/GUIDE.md): per loop of a kpath profile, where to put an
// OSR point, when to fire it, and which specialised loop versions the recorded paths justify.
//
// Everything is derived from the k-IPF (exact for every sequence of up to k paths) and the path
// metadata in the binaries; the hot calling contexts reached from a loop body come from the CCT of
// the same thread files when the program was also built with -finstrument-functions (or the GCC
// plugin) and run with mode=cct/hcct.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hcct/analysis/kpath_ipf.h"
#include "hcct/analysis/kpath_sampling.h"
#include "hcct/analysis/kpath_metadata.h"
#include "hcct/analysis/kpath_profile.h"

namespace hcct::analysis {

// One Ball-Larus path through a loop's header, in the loop's terms.
struct LoopPath {
  uint64_t id = 0;
  uint64_t count = 0;     // times the path ran (each time is one iteration of the loop)
  double share = 0;       // count / iterations
  enum class Kind { kEntry, kCycle, kExit } kind = Kind::kCycle;
  // kEntry: the loop's first iteration (the header reached from outside the loop);
  // kCycle: starts at the header after a back edge and ends on a back edge to it (one whole
  //         iteration; only these repeat back to back);
  // kExit:  starts at the header after a back edge and leaves the loop (or returns).
  std::string lines;      // decoded source lines
  std::vector<uint32_t> blocks;  // its blocks in order (layout indices): what a loop version specialises
  // kCycle only: repeats[j-1] = occurrences of the path followed by at least j-1 more copies of
  // itself, i.e. the count of the n-gram path^j, j = 1..k (repeats[0] = count).
  std::vector<uint64_t> repeats;
  // runs_at_least[j-1] = maximal runs of the path of length >= j, j = 1..k-1 (exact:
  // repeats[j-1] - repeats[j]).
  std::vector<uint64_t> runs_at_least;
};

// A calling context reached from a call in the loop body (CCT of the same run).
struct LoopContext {
  std::vector<std::string> frames;  // callee first, then its callees
  uint32_t call_line = 0;           // the call's line in the loop body
  uint64_t calls = 0;               // the context's count in the CCT
};

struct Recommendation {
  std::string kind;      // "osr-point", "no-osr-point", "unroll", "specialise"
  std::string text;      // one line, readable
  std::string evidence;  // the numbers it rests on
  uint64_t path = 0;     // unroll/specialise: the path
  uint32_t factor = 0;   // unroll: the factor
  double share = 0;      // unroll: the share of the path's occurrences a ×factor version takes
};

struct LoopGuide {
  uint32_t rank = 0;  // 1 = first candidate for an OSR point
  uint64_t function_id = 0;
  std::string function;  // linkage name (what the OSR inserter matches)
  std::string display;   // demangled
  std::string file;
  uint32_t header_block = 0;  // in the function's layout order (kpath metadata)
  // The build the profile came from (kpath metadata): the block numbers are those of this stage
  // and optimisation level (-1: not recorded).
  bool late = false;
  int opt_level = -1;
  uint32_t line = 0;          // the header's first source line
  uint32_t depth = 1;         // loop nesting depth (1 = outermost)
  bool innermost = true;
  std::vector<uint32_t> body;  // blocks of the natural loop
  uint64_t iterations = 0;     // header executions
  // A profile sampled in bursts: no burst saw the loop run. `iterations` is then its exact
  // back-edge count (the start counter; its entries are unknown) and it has no paths.
  bool unsampled = false;
  uint64_t entries = 0;        // arrivals from outside the loop
  double mean_iterations = 0;
  double share_of_program = 0;  // iterations / all loop-header executions in the profile
  // Innermost loops: entries_at_least[j-1] = entries that ran at least j iterations, j = 1..k
  // (exact up to k; iterations of nested loops are not consecutive paths, so outer loops have none).
  std::vector<uint64_t> entries_at_least;
  std::vector<LoopPath> paths;  // most frequent first
  std::vector<LoopContext> contexts;
  std::optional<uint64_t> threshold;  // iterations per entry before the OSR point fires
  std::vector<Recommendation> recommendations;
};

struct GuideOptions {
  uint32_t k = 0;             // 0: the recorded k
  size_t top_contexts = 5;    // per loop
  double min_share = 0.001;   // loops below this share of all header executions are left out
  // A bursting profile's estimator (kpath_sampling.h), resolved; null: counts as recorded.
  const PathEstimator *estimator = nullptr;
};

struct Guide {
  uint32_t k = 0;
  uint64_t loop_iterations = 0;  // all header executions in the profile
  // The counts' guarantee, summed over the threads (ForestBound): exact, or from bounded forests,
  // where a count of a sequence of n paths is at most delta + (n − 1) · cuts below the truth.
  uint64_t paths = 0;  // N: all path IDs counted
  size_t bounded_threads = 0;
  double epsilon = 0;
  uint64_t delta = 0, cuts = 0, forced_sweeps = 0, lost = 0;
  // Sampled in bursts (docs/KPATH.md, "Bursting"): every count is the estimator's, `paths` the
  // estimated N, from `sampled_paths` recorded; activations cut at burst boundaries.
  bool sampled = false;
  uint64_t sampled_paths = 0, joins = 0, leaves = 0;
  // The estimator's summary of the sampled processes: which threads no burst sampled (their paths in
  // `paths`, their loops `not-sampled` with exact counts), whether threads may be missing (the time
  // clock), whether the bursts were counted in path starts.
  PathEstimator::Summary estimate;
  std::vector<LoopGuide> loops;  // by rank
  std::vector<std::string> warnings;
};

// `threads`: thread files with KPTH (all recorded with one k); `meta`: the binaries' metadata.
// Throws std::invalid_argument for mixed k or k larger than recorded.
Guide make_guide(const std::vector<ThreadPaths> &threads, const PathMetadata &meta, const GuideOptions &o);

// The threshold rule of docs/GUIDE.md: iterations per entry after which an OSR point should fire,
// or nullopt when entries are too short to switch inside one.
std::optional<uint64_t> osr_threshold(double mean_iterations);

}  // namespace hcct::analysis
