// Views of a calling-context tree for people (`hcct report`, `report --flat`, `hcct view`): per
// context its own count (self) and the count of its whole subtree (total), with recursion folded so
// that what is shown is bounded by the number of distinct contexts, never by the depth of a
// recursion.
//
// Every figure is of one metric, chosen by a Metric: calls (the CCT's counts) or time (self time
// samples per context, in profiles that have them); metric_value() gives a node's, and everything
// built here carries it unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hcct/analysis/profile.h"
#include "hcct/analysis/walk.h"

namespace hcct::analysis {

// The metrics are walk.h's (Metric). A node's value of `metric`, given its self time `samples`,
// and whether it is known: in hcct mode an unmonitored node's count is not an estimate of anything
// (it counts as 0 in sums and is shown as unknown), nor is a zero time counter.
uint64_t metric_value(const ThreadMeta &meta, const Node &node, uint64_t samples, Metric metric);
bool metric_known(const ThreadMeta &meta, const Node &node, uint64_t samples, Metric metric);
// What the shares of `metric` are of: every call (calls + lost), or every sample (S + lost).
uint64_t metric_whole(const ThreadMeta &meta, Metric metric);

inline constexpr uint32_t kViewRoot = 0;

// One node of a view: one context, or several contexts of a recursion folded into one.
struct ViewNode {
  uint64_t routine = 0;
  uint64_t call_site = 0;   // of the first instance folded here
  uint64_t self = 0;        // the metric summed over the instances folded here
  uint64_t left_out = 0;    // value of descendants missing from a pruned source (ViewOptions::left_out)
  uint64_t total = 0;       // self, left_out and the children's totals (with recursion folded: what is drawn
                            // below it; callees of a mutual recursion's inner calls are under its first call)
  uint32_t parent = 0;      // < own index; 0 for the root and its children
  uint32_t min_depth = 0;   // depth of the shallowest and deepest instance in the source tree
  uint32_t max_depth = 0;
  uint64_t calls = 0;       // entries (the calls metric, whichever metric `self` is of)
  uint64_t instances = 0;   // source nodes folded here (1 unless recursion was folded)
  uint64_t hot_instances = 0;  // of those, the ones whose own count reaches the threshold
  bool known = false;       // some instance's value is known (see metric_known)
};

struct ViewOptions {
  Metric metric = Metric::calls;
  // Recursion: a node whose function already appears among its ancestors is folded into the nearest
  // such ancestor (its value adds there, its children become that ancestor's children). A direct
  // or mutual recursion a million calls deep is then a handful of nodes.
  bool fold_recursion = true;
  // A context is hot when its own count is at least ⌊phi·N⌋ (the (φ,ε)-HCCT of `hcct report`);
  // only counted in ViewNode::hot_instances and ContextView::hot.
  double phi = 0;
  // Contexts through a function matching `ignore` are left out (their values are not counted).
  std::function<bool(uint64_t routine)> ignore;
  // Re-rooting: with `focus`, the view's top level holds one node per function matching it (all
  // its outermost contexts merged, by function alone), its callees below merged by (function, call
  // site); contexts outside a match are left out. ContextView::callers holds who called them.
  std::function<bool(uint64_t routine)> focus;
  // When the source is a pruned tree (walk_tree's kept nodes): per source node, the value of its
  // descendants that were left out, so that totals stay those of the whole tree. Empty: none.
  std::span<const uint64_t> left_out;
};

// A chain of callers of a focused function (outermost first, folded like the view), with the
// total of the focused function's instances reached through it.
struct CallerChain {
  std::vector<uint64_t> routines;  // outermost caller first; the last is the direct caller
  bool cut = false;                // longer chains keep their kMaxCallerDepth innermost callers
  uint64_t total = 0;
};

struct ContextView {
  Metric metric = Metric::calls;
  uint64_t whole = 0;      // what shares are of (metric_whole)
  uint64_t threshold = 0;  // ⌊phi·whole⌋
  uint64_t source_nodes = 0;  // nodes read, root included
  uint64_t hot = 0;           // source contexts whose own count reaches the threshold
  uint64_t folded = 0;        // source nodes folded into an ancestor
  uint64_t ignored = 0, ignored_value = 0;  // source nodes left out by ignore (or outside focus)
  std::vector<ViewNode> nodes;  // nodes[0] is the root; parents precede children
  // With ViewOptions::focus: per focused function (a child of the root) its caller chains, largest
  // total first.
  struct FocusCallers {
    uint32_t node = 0;
    std::vector<CallerChain> chains;
  };
  std::vector<FocusCallers> callers;
};

inline constexpr size_t kMaxCallerDepth = 16;

// One pass over `source` in preorder. Memory: the view's nodes (at most the source's) plus the
// current path. Throws std::invalid_argument for phi outside [0, 1]; the source's exceptions pass
// through.
ContextView build_view(NodeSource &source, const ViewOptions &options,
                       const std::function<void(uint64_t)> &progress = nullptr);

// The children of every view node, each list sorted by total, largest first (ties: by self, then
// by first appearance).
ChildIndex view_children(const ContextView &view);

// Per function: the flat profile (gprof's flat view, `uftrace report`).
struct FlatEntry {
  uint64_t routine = 0;
  uint64_t self = 0;      // the metric summed over every context of the function
  uint64_t total = 0;     // the totals of its outermost contexts (a recursion is counted once)
  uint64_t calls = 0;     // entries into the function (the calls metric, whatever `metric` is)
  uint64_t contexts = 0;  // source contexts of the function
};
// One pass over `source` (memory: the path and one entry per function), with the view's focus and
// ignore (phi, fold_recursion unused): exact however recursion nests, where a folded view moves
// the callees of a mutual recursion's inner calls under its first call. Sorted by total, then
// self, largest first. Σ self = N when nothing is left out.
std::vector<FlatEntry> flat_profile(NodeSource &source, const ViewOptions &options,
                                    const std::function<void(uint64_t)> &progress = nullptr);

// `name` with the arguments of every template elided to "<…>" (`std::vector<int>::push_back(int
// const&)` -> `std::vector<…>::push_back(int const&)`): a view's names stay short. operator<,
// operator<<, operator-> and the like are kept; unbalanced brackets leave the name as it is.
std::string elide_template_arguments(std::string_view name);

}  // namespace hcct::analysis
