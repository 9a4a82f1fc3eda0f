// The (φ,ε)-HCCT query (thesis §3.1.3): hot contexts and the minimal subtree that connects them to
// the root.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hcct/analysis/profile.h"

namespace hcct::analysis {

enum class NodeClass : uint8_t {
  pruned = 0,         // not in the (φ,ε)-HCCT
  cold_ancestor = 1,  // kept only because a hot node lies below it (the root is always this)
  hot = 2,            // countable and count ≥ threshold
};

// ⌊φ·N⌋, computed in long double so that N up to 2^64 keeps its precision. φ must be in [0, 1].
uint64_t hot_threshold(double phi, uint64_t calls);

struct HotSet {
  double phi = 0;
  uint64_t threshold = 0;       // ⌊φN⌋
  std::vector<NodeClass> cls;   // one per input node; the root is cold_ancestor
  size_t hot = 0;               // number of hot nodes
  size_t cold_ancestors = 0;    // number of kept non-hot nodes, root excluded
};

// A = {countable nodes with count ≥ ⌊φN⌋} (ThreadProfile::countable: the monitored nodes in hcct
// mode, every non-root node otherwise); keeps A and all their ancestors, nothing else. Runs in
// O(n) with one bottom-up pass, which is the thesis's pruning of MCCT nodes without descendants
// in A. Throws std::invalid_argument if φ is not in [0, 1].
HotSet query_hot(const ThreadProfile &profile, double phi);

// A compacted copy of the kept nodes: still preorder, root first, parents renumbered.
struct PrunedTree {
  std::vector<Node> nodes;
  std::vector<uint32_t> origin;  // origin[i]: index of nodes[i] in the input tree
  std::vector<NodeClass> cls;    // hot or cold_ancestor
};
PrunedTree prune(std::span<const Node> nodes, std::span<const NodeClass> cls);

}  // namespace hcct::analysis
