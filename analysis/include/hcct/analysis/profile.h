// In-memory model of hcct dump files (docs/FORMAT.md): one ThreadProfile per file, grouped into
// processes. Plain data with value semantics; the reader (reader.h) guarantees every invariant
// documented here for what it returns, the writer (writer.h) checks the structural ones.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hcct/format.h"
#include "hcct/meta_keys.h"

namespace hcct::analysis {

enum class Mode : uint8_t { empty, cct, hcct };
enum class KeyKind : uint8_t { site, routine };
enum class ThreadStatus : uint8_t { exited, live_at_exit };

std::string_view to_string(Mode m);
std::string_view to_string(KeyKind k);
std::string_view to_string(ThreadStatus s);

// One loaded ELF object of the profiled process (MODS section).
struct Module {
  uint64_t bias = 0;  // runtime address - link-time address
  uint64_t lo = 0;    // [lo, hi): runtime addresses of its PT_LOAD segments
  uint64_t hi = 0;
  std::string path;
  std::vector<uint8_t> build_id;  // empty if the object has none

  bool contains(uint64_t addr) const { return lo <= addr && addr < hi; }
  friend bool operator==(const Module &, const Module &) = default;
};

// Address -> module for a module map: the first module in recorded order whose range holds the
// address (recorded order decides between overlapping ranges, e.g. a dlclose'd module and a later
// one at the same addresses). Built in O(M log M), each lookup O(log M): maps of 10^5 modules
// must not make every lookup a scan.
class ModuleMap {
 public:
  ModuleMap() = default;
  explicit ModuleMap(std::span<const Module> modules);
  // Index into the map it was built from, or -1 if no module holds `address`.
  int64_t find(uint64_t address) const;

 private:
  // Elementary segments [start, next start): the answer for every address in it (-1: none).
  std::vector<uint64_t> starts_;
  std::vector<int64_t> owner_;
};

// One CCT node. Kept at 32 bytes: a 10-million-node tree costs 320 MB.
struct Node {
  uint64_t routine = 0;    // runtime address of the function
  uint64_t call_site = 0;  // return address into the caller; 0 with key=routine
  uint64_t count = 0;      // cct: exact entries; hcct: Space-Saving estimate if monitored, else 0
  uint32_t parent = 0;     // index of the parent node (< own index); 0 for the root
  uint8_t flags = 0;       // format::kNodeMonitored | format::kNodeOnPath

  bool monitored() const { return flags & format::kNodeMonitored; }
  bool on_path() const { return flags & format::kNodeOnPath; }
  friend bool operator==(const Node &, const Node &) = default;
};
static_assert(sizeof(Node) == 32);

inline constexpr uint32_t kRoot = 0;

// META, with the keys of docs/FORMAT.md parsed into fields. Keys the format does not define are
// kept verbatim, in file order, in `extra`.
struct ThreadMeta {
  std::string runtime;
  uint64_t pid = 0, ppid = 0, thread_seq = 0, tid = 0;
  ThreadStatus status = ThreadStatus::exited;
  Mode mode = Mode::cct;
  KeyKind key = KeyKind::site;
  double epsilon = 0;      // hcct mode only
  uint64_t counters = 0;   // hcct mode only
  uint64_t min_count = 0;  // hcct mode only: error bound of every estimate
  uint64_t calls = 0;      // N
  uint64_t dropped = 0, max_depth = 0, tree_bytes = 0, nodes_peak = 0;
  // Optional keys (0 when absent, as in files of older runtimes): calls not counted because tree
  // memory (max_mb) ran out — not part of `calls`, so N + lost is every call made —, and exits
  // that matched no live frame.
  uint64_t lost = 0, unmatched_exits = 0;
  // Time (format version 2, docs/FORMAT.md "Time keys"): `time` is the metric ("cpu"), empty when
  // the profile has none (and the other time fields are 0). `samples` is S, the samples charged to
  // contexts (the sum of the per-node samples); `samples_lost` those no context was charged with;
  // hcct mode: `time_min_count`, the smallest time counter, bounds every estimate's error.
  std::string time;
  uint64_t sample_period_ns = 0, samples = 0, samples_lost = 0, time_min_count = 0;
  bool timed() const { return !time.empty(); }
  std::string exe;
  std::vector<std::string> cmdline;
  uint64_t start_ns = 0, end_ns = 0;
  std::vector<std::pair<std::string, std::string>> extra;

  // Value of an unknown key, or nullptr.
  const std::string *find_extra(std::string_view key) const;
  const std::string *find_extra(const format::meta::Key &key) const { return find_extra(key.name); }
  // Every call the thread made into the tree: calls + lost (saturating).
  uint64_t all_calls() const { return calls + lost < calls ? UINT64_MAX : calls + lost; }
  // Static bursting (docs/BURSTING.md): the fraction of the calls that were sampled, from META
  // `sampled_fraction`; nullopt when the profile was not sampled (or the value is unusable).
  std::optional<double> sampled_fraction() const;
};

// The contents of one dump file. Invariants (checked by the reader): nodes is non-empty, in preorder,
// nodes[0] is the root (routine = call_site = count = 0), every other node's parent is smaller than
// its own index.
struct ThreadProfile {
  std::string source;  // the file it was read from, for messages; empty if built in memory
  ThreadMeta meta;
  std::vector<Module> modules;
  std::vector<Node> nodes;
  // Self time samples per node, parallel to `nodes` (the TIME section); empty when the profile has
  // no time metric. In hcct mode a nonzero value is a Space-Saving estimate (it overcounts by at
  // most meta.time_min_count); zero means the context holds no time counter.
  std::vector<uint64_t> samples;

  uint64_t self_samples(uint32_t i) const { return samples.empty() ? 0 : samples[i]; }
  size_t monitored_nodes() const;
  // Whether node `i` can be a hot context: hcct mode counts only monitored nodes (an unmonitored
  // node's count is not an estimate); otherwise every node but the root.
  bool countable(uint32_t i) const {
    return i != kRoot && (meta.mode != Mode::hcct || nodes[i].monitored());
  }
};

// All threads of one process, sorted by thread_seq.
struct Process {
  uint64_t pid = 0;
  std::vector<ThreadProfile> threads;
};

// A profile directory, processes sorted by pid.
struct ProfileSet {
  std::string location;
  std::vector<Process> processes;
};

// ---- Tree helpers over a preorder node array. All run in O(n) without recursion, so arbitrarily
// deep trees (deep recursion in the profiled program) are fine.

// Depth of every node; the root has depth 0.
std::vector<uint32_t> node_depths(std::span<const Node> nodes);

// One past the last index of each node's subtree: in preorder a subtree is the contiguous range
// [i, end[i]).
std::vector<uint32_t> subtree_ends(std::span<const Node> nodes);

// Children lists in compressed form: the children of node i are
// child[offset[i]] .. child[offset[i + 1] - 1], in increasing index order.
struct ChildIndex {
  std::vector<uint32_t> offset;
  std::vector<uint32_t> child;
  std::span<const uint32_t> of(uint32_t i) const {
    return {child.data() + offset[i], child.data() + offset[i + 1]};
  }
};
ChildIndex child_index(std::span<const Node> nodes);

}  // namespace hcct::analysis
