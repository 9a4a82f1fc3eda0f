// One pass over a tree in preorder — from a file (ProfileStream) or from memory — with the filters
// that `hcct report` and the exports share, handing out the kept nodes of the filtered tree.
//
// Memory is proportional to the depth of the tree, not to its size: a node is handed out when its
// subtree ends (postorder), when everything about it is known (its subtree total, whether anything
// below it was kept). Ids are nevertheless a preorder numbering of the filtered tree: a node gets
// its id when it is first known to be kept, and its ancestors get theirs before it, top-down.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <span>
#include <vector>

#include "hcct/analysis/profile.h"

namespace hcct::analysis {

class ProfileStream;

// What the walk selects and adds up (issue 17): entries into each context, or its self time
// samples (profiles with a time metric, format version 2).
enum class Metric : uint8_t { calls, time };
std::string_view to_string(Metric m);
std::optional<Metric> metric_named(std::string_view name);  // "calls" | "time"
// Inclusive time of every node of a timed profile: its self samples plus its subtree's, in one
// backward pass over the preorder array (empty when the profile has no time metric).
std::vector<uint64_t> total_samples(const ThreadProfile &profile);

// Where the walk reads nodes from.
class NodeSource {
 public:
  virtual ~NodeSource() = default;
  virtual const ThreadMeta &meta() const = 0;
  virtual const std::vector<Module> &modules() const = 0;
  virtual uint64_t node_count() const = 0;
  // Next node in preorder with its parent index set; false at the end.
  virtual bool next(Node &node) = 0;
  // Self time samples of the node next() returned last (0 without a time metric).
  virtual uint64_t samples() const { return 0; }
};

class StreamSource : public NodeSource {
 public:
  explicit StreamSource(ProfileStream &stream) : s_(stream) {}
  const ThreadMeta &meta() const override;
  const std::vector<Module> &modules() const override;
  uint64_t node_count() const override;
  bool next(Node &node) override;
  uint64_t samples() const override { return samples_; }

 private:
  ProfileStream &s_;
  uint64_t index_ = 0;     // of the next node
  size_t time_at_ = 0;     // next entry of the stream's TIME list
  uint64_t samples_ = 0;
};

class MemorySource : public NodeSource {
 public:
  explicit MemorySource(const ThreadProfile &p) : p_(p) {}
  const ThreadMeta &meta() const override { return p_.meta; }
  const std::vector<Module> &modules() const override { return p_.modules; }
  uint64_t node_count() const override { return p_.nodes.size(); }
  bool next(Node &node) override {
    if (i_ == p_.nodes.size()) return false;
    node = p_.nodes[i_++];
    return true;
  }
  uint64_t samples() const override { return i_ ? p_.self_samples(uint32_t(i_ - 1)) : 0; }

 private:
  const ThreadProfile &p_;
  size_t i_ = 0;
};

// The filters (docs/EXPORTS.md, "Filters"). A node is *selected* when it is countable
// (ThreadProfile::countable), its count is at least ⌊min_share·N⌋, it lies in focus (it or an
// ancestor matches `focus`, when given) and neither it nor an ancestor matches `ignore`. The
// filtered tree keeps the selected nodes and their ancestors; with min_share = φ that is the
// (φ,ε)-HCCT of `hcct report`. With max_depth = D > 0, selected nodes deeper than D are charged to
// their ancestor at depth D (which is kept and marked truncated), so the exported counts still add
// up to the counts of the selected nodes.
// With metric = time, "count" means self samples throughout: a node is countable if it has self
// samples estimated (hcct mode: it holds a time counter; cct mode: any node), the threshold is
// ⌊min_share·(S + samples lost)⌋ and WalkNode::count/total add samples.
struct TreeFilter {
  Metric metric = Metric::calls;
  double min_share = 0;
  // Also keep (unselected) every node whose subtree sum (WalkNode::subtree) is at least
  // ⌊keep_total_share·N⌋, with its ancestors; negative: off. At most depth/share such nodes exist.
  double keep_total_share = -1;
  // Formats that carry both metrics (pprof, callgrind, JSON) of a timed profile: also keep
  // (unselected, if calls do not select it) every node in focus, not ignored, with self samples of
  // at least ⌊min_share·(S + samples lost)⌋ (WalkNode::sample_count), so that a context hot by time
  // and cold by calls is exported with its time. Ignored without a time metric.
  bool keep_sampled = false;
  uint32_t max_depth = 0;  // 0: unlimited
  std::function<bool(uint64_t routine)> focus;   // empty: everything is in focus
  std::function<bool(uint64_t routine)> ignore;  // empty: nothing is ignored
};

struct WalkNode {
  uint32_t id = 0;       // preorder number in the filtered tree; the root is 0
  uint32_t parent = 0;   // id of the parent (0 for the root and its children)
  uint32_t depth = 0;    // root 0
  uint64_t index = 0;    // index of the node in the source
  Node node;             // as read (node.parent is the source's parent index)
  uint64_t samples = 0;  // self time samples as read (0 without a time metric), whatever the metric
  uint64_t total_samples = 0;  // samples plus those of every node below it, kept or not (inclusive time)
  bool selected = false;  // passes the filters itself (hot, in focus, not ignored)
  bool truncated = false; // deeper selected nodes were charged to it
  uint64_t count = 0;    // the metric's value (node.count or samples) if selected, else 0; plus what was charged to it
  uint64_t total = 0;    // count plus the totals of its kept children
  // Self samples if the node passes the filters by time (with metric = time, count), plus the
  // samples of deeper nodes charged to it; sample_total adds those of its kept children.
  uint64_t sample_count = 0;
  uint64_t sample_total = 0;
  // The counts of every countable node of its subtree that no --ignore left out, kept or not
  // (what `hcct report` ranks by).
  uint64_t subtree = 0;
};

struct WalkStats {
  uint64_t threshold = 0;  // ⌊min_share·N⌋
  uint64_t nodes = 0;      // nodes read, root included
  uint64_t kept = 0;       // kept nodes, root excluded
  uint64_t selected = 0;   // kept and selected, root excluded
  uint64_t total = 0;      // sum of the kept nodes' counts (the root's total)
  // Contexts in focus and not ignored that min_share alone left out, and the sum of their counts
  // (what a default pruning must state).
  uint64_t below_threshold = 0, below_threshold_count = 0;
};

// Calls `emit(node, path)` for every kept node in postorder (the root last); `path` holds its kept
// ancestors, root first. `progress(nodes_read)` is called every 2^16 nodes if given.
// Throws std::invalid_argument for min_share outside [0, 1] and for metric = time on a profile
// without a time metric; the source's exceptions pass through.
using EmitFn = std::function<void(const WalkNode &node, std::span<const WalkNode> path)>;
WalkStats walk_tree(NodeSource &source, const TreeFilter &filter, const EmitFn &emit,
                    const std::function<void(uint64_t)> &progress = nullptr);

}  // namespace hcct::analysis
