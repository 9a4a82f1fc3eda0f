// kpath sections of hcct dump files (docs/FORMAT.md, "KPTH", "KTRC"): the k-slab forest, the
// k-window forest or BLPP counters of one thread and, when recorded, its raw path-ID stream.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "hcct/analysis/profile.h"

namespace hcct::analysis {

// A path label: Ball-Larus path `path` of the function with ID `function`.
struct PathLabel {
  uint64_t function = 0;
  uint64_t path = 0;
  friend auto operator<=>(const PathLabel &, const PathLabel &) = default;
};

inline constexpr uint32_t kNoParent = UINT32_MAX;

// One forest node; `function` is the root's (an activation only emits its own function's paths).
struct KsfNode {
  PathLabel label;
  uint64_t count = 0;
  uint32_t parent = kNoParent;
};

// What the runtime built (KPTH's forest kind). Algorithms 5–6 turn either forest into the same
// k-IPF; they differ in depth (k-SF: up to 2k − 2 levels; kWF: k) and size.
using ForestKind = format::PathForest;  // hcct/format.h: kBlpp, kSlab, kWindow, kUnknown (version 1)
// "BLPP", "k-SF", "kWF", or "forest" when a version-1 section did not say.
const char *forest_kind_name(ForestKind kind);

// A bounded kWF's parameters and error accounting (KPTH version 3; docs/KPATH.md, "Bounded
// forests"). All zero for an exact forest and for files before version 3.
struct ForestBound {
  double epsilon = 0;       // the run's path_epsilon; 0: exact
  uint64_t budget = 0;      // non-root node budget
  uint64_t delta = 0;       // the sum of the sweeps' largest evicted totals
  uint64_t cuts = 0;        // windows evicted under a suspended activation (k − 1 n-grams each at most)
  uint64_t sweeps = 0, forced_sweeps = 0, evicted = 0;
  uint64_t lost = 0;        // the forest's `lost` (items counted nowhere), when bounded
  bool bounded() const { return epsilon > 0; }
  // For a sequence of n paths, its k-IPF count c satisfies c <= true count <= c + error_bound(n),
  // and a sequence not in the forest ran at most error_bound(n) times: a cut restarts one window,
  // so the next n − 1 items may miss an n-gram each; a lost item misses its own and restarts too.
  uint64_t error_bound(size_t n) const {
    return delta + (n > 1 ? uint64_t(n - 1) * cuts : 0) + uint64_t(n) * lost;
  }
};

struct KsfForest {
  uint32_t k = 1;  // 1: BLPP counters (every node a root)
  ForestKind kind = ForestKind::kUnknown;
  uint64_t paths = 0, enters = 0, lost = 0;
  ForestBound bound;
  std::vector<KsfNode> nodes;  // preorder; roots have parent kNoParent
};

struct TraceRecord {
  bool enter = false;  // ∗ marker
  uint64_t frame = 0;  // identifies the activation (until the next enter with the same frame)
  PathLabel label;     // label.path is 0 for enter
};

// Static bursting of path profiles (KPSC; docs/KPATH.md, "Bursting"): written when the program has
// versioned functions (kpath -kpath-burst=1).
struct PathSampling {
  bool bursting = false;  // the path gate followed the bursts: the forest holds sampled counts
  // The bursts were counted in path starts per thread (the event clock): interval_ns and length_ns
  // are then numbers of path starts.
  bool event_clock = false;
  uint64_t interval_ns = 0, length_ns = 0;
  // This thread's activations that joined the instrumented copy at a back edge (their window
  // started empty there) and that left it (their window ended there).
  uint64_t joins = 0, leaves = 0;
  uint64_t dropped_tables = 0;  // versioned modules whose counters the runtime could not keep
  // (function, DAG start block) -> paths started there (block 0: entries; a loop header: back
  // edges into it), both copies, at the time the file was written: by this thread for the
  // functions in thread_functions (an executable's per-thread counters), else by the whole process.
  std::map<std::pair<uint64_t, uint32_t>, uint64_t> starts;
  std::set<uint64_t> thread_functions;
};

struct ThreadPaths {
  ThreadProfile profile;  // META, MODS, CCT of the same file
  KsfForest forest;
  std::optional<PathSampling> sampling;
  std::optional<std::vector<TraceRecord>> trace;
  uint64_t trace_lost = 0;
};

// Parses the kpath sections of a complete file image; nullopt if the file has no KPTH section.
// Throws FormatError on malformed contents.
std::optional<ThreadPaths> parse_thread_paths(std::span<const unsigned char> bytes, const std::string &name);
// Every thread file under `dir_or_file` that has a KPTH section, in (pid, seq) order.
std::vector<ThreadPaths> read_thread_paths(const std::filesystem::path &dir_or_file);

// The per-activation sequences of a trace (∗ starts one; records name their activation by frame).
std::vector<std::vector<PathLabel>> activation_streams(const std::vector<TraceRecord> &trace);

}  // namespace hcct::analysis
