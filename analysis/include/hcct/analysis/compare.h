// Comparing two calling-context trees (`hcct compare`): lining up their nodes across runs, load
// addresses and rebuilds, and the accuracy metrics of thesis §5.1.2 (Figs. 5.5–5.9).
//
// `test` is the tree under evaluation — an HCCT, or one run — and `ref` the reference: the exact
// CCT of the same run (HCCT_OPTIONS=mode=hcct:exact=1 writes both) or another run.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "hcct/analysis/profile.h"

namespace hcct::analysis {

// What identifies a node's context step across runs. `exact` is the strongest identity (module
// build-id/name and offset of routine and call site: equal for the same binary at any load
// address); `symbolic` a weaker one that survives a rebuild (function name and call-site source
// line). Tools compute symbolic keys with the symbolizer; without symbols they equal the exact ones.
struct NodeKey {
  uint64_t exact = 0;
  uint64_t symbolic = 0;
};

// Exact keys from the module map (symbolic = exact). An address in no module is keyed by its value.
std::vector<NodeKey> module_offset_keys(const ThreadProfile &p);

class Names;
// Exact keys from module offsets; symbolic keys from `names`: the function for a routine; the
// containing function, source file name and line (with the inline chain) for a call site. An
// address without a resolved, current symbol keeps its exact key; no names: module_offset_keys.
std::vector<NodeKey> node_keys(const ThreadProfile &p, Names *names);

// Address -> hash of (module identity, link-time offset): the identity is the build-id, or the
// file's base name when there is none. An address in no module hashes its value; 0 stays 0.
class ModuleKeys {
 public:
  explicit ModuleKeys(std::span<const Module> modules);
  uint64_t operator()(uint64_t address) const;

 private:
  std::vector<const Module *> sorted_;
  std::vector<uint64_t> ids_;
};
// Combines key parts (routine, call site) into one.
uint64_t combine_keys(uint64_t a, uint64_t b);

inline constexpr uint32_t kNoMatch = std::numeric_limits<uint32_t>::max();

struct Alignment {
  std::vector<uint32_t> ref_of;   // per test node: the matched ref node, or kNoMatch
  std::vector<uint32_t> test_of;  // per ref node: the matched test node, or kNoMatch
  uint64_t by_exact = 0;       // matched by exact key (one candidate on each side)
  uint64_t by_symbol = 0;      // by symbolic key
  uint64_t by_similarity = 0;  // several siblings shared a key: matched by subtree similarity
  uint64_t unmatched_test = 0, unmatched_ref = 0;  // non-root nodes without partner
};

// Top-down: the roots match; among the children of two matched nodes, a key shared by exactly one
// child on each side matches them (exact keys first, then symbolic); children that stay ambiguous
// (one key, several siblings) are paired greedily by the similarity of their subtrees (overlap of
// the sets of relative paths of symbolic keys below them, then closeness of counts).
Alignment align_trees(const ThreadProfile &test, std::span<const NodeKey> test_keys, const ThreadProfile &ref,
                      std::span<const NodeKey> ref_keys);

struct CompareOptions {
  double phi = 1e-4;
  std::vector<double> taus = {0.001, 0.01, 0.05, 0.1, 0.2};
};

struct Coverage {
  double tau = 0;
  uint64_t covered = 0;  // |{e ∈ HCCT: w(e) ≥ τ·wmax}|
  uint64_t hot = 0;      // |{e ∈ CCT: w(e) ≥ τ·wmax}|
  double ratio = 1;      // covered / hot (1 when hot is 0)
};

struct Metrics {
  // Inputs.
  double phi = 0;
  uint64_t test_calls = 0, ref_calls = 0;
  uint64_t test_threshold = 0, ref_threshold = 0;  // ⌊φN⌋ of each tree
  uint64_t wmax = 0;                               // weight of the hottest reference context
  // The (φ,ε)-HCCT of the test tree: hot contexts and cold ancestors (root excluded).
  uint64_t hcct_nodes = 0, hot = 0, cold_ancestors = 0;
  uint64_t true_hot = 0;         // hot in test and in the exact HCCT of ref
  uint64_t false_positives = 0;  // |A \ H|: hot in test, not hot (or absent) in ref
  uint64_t false_negatives = 0;  // |H \ A|: hot in ref, not hot (or absent) in test
  uint64_t exact_hot = 0;        // |H|
  uint64_t unmatched_hcct = 0;   // HCCT nodes with no reference counterpart
  // 1. Degree of overlap: Σ w(e) over HCCT nodes / N_ref.
  double overlap = 0;
  // 2. Hot edge coverage per τ, and τ̃: the smallest τ with 100% coverage, (max uncovered w + 1)/wmax
  // (0 when nothing is uncovered; above 1 when the hottest context itself is uncovered).
  std::vector<Coverage> coverage;
  double tau_tilde = 0;
  // 3. Hotness of uncovered reference contexts, in percent of wmax.
  uint64_t uncovered = 0;
  double max_uncovered = 0, avg_uncovered = 0;
  // 5. Counter error over the hot test contexts with a reference count w > 0: |w − w̃| / w in
  // percent; and the largest absolute error |w − w̃| with the test's error bound (min_count in hcct
  // mode, where Space-Saving guarantees 0 ≤ w̃ − w ≤ min_count ≤ εN).
  uint64_t error_samples = 0;
  double max_error = 0, avg_error = 0;
  uint64_t max_abs_error = 0;
  uint64_t max_abs_error_all = 0;  // over every countable matched test node, hot or not
  int64_t min_signed_error_all = 0, max_signed_error_all = 0;  // w̃ − w over the same nodes
  std::optional<uint64_t> error_bound;                         // test min_count (hcct mode)
  double epsilon_n = 0;                                        // ε·N_test (hcct mode)
};

// The metrics on time (`hcct compare --metric time`): `p` with every node's count replaced by its
// self time samples, N by S, lost calls by lost samples and the error bound (min_count) by the
// time summary's (time_min_count). In hcct mode a node holds a time estimate when its samples are
// nonzero, so that is what "monitored" means in the result. Throws std::invalid_argument for a
// profile without a time metric.
ThreadProfile time_as_counts(const ThreadProfile &p);

// Throws std::invalid_argument for φ or τ outside [0, 1] or alignments of other trees.
Metrics compare_trees(const ThreadProfile &test, const ThreadProfile &ref, const Alignment &a,
                      const CompareOptions &o);

// ---- What changed between two runs (`hcct diff A B`): per aligned context its share of each run's
// calls, own (self) and with everything below it (total). A context on one side only has share 0
// on the other.
struct ContextChange {
  uint32_t a = kNoMatch, b = kNoMatch;  // the node in each tree (kNoMatch: absent there)
  double self_a = 0, self_b = 0;        // count / all calls
  double total_a = 0, total_b = 0;      // subtree sum / all calls
  double self_change() const { return self_b - self_a; }
  double total_change() const { return total_b - total_a; }
};

// Every context whose self or total share moved by more than `min_change` (a fraction: 0.001 is
// 0.1 percentage points), ranked by |self change|, then |total change|, largest first. A tree
// against itself gives nothing. In hcct mode unmonitored counts are 0 (they estimate nothing).
std::vector<ContextChange> diff_trees(const ThreadProfile &a, const ThreadProfile &b, const Alignment &al,
                                      double min_change);

}  // namespace hcct::analysis
