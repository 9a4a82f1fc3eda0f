#include "hcct/analysis/hot.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace hcct::analysis {

uint64_t hot_threshold(double phi, uint64_t calls) {
  if (!(phi >= 0 && phi <= 1)) throw std::invalid_argument("phi must be in [0, 1]");
  // long double has a 64-bit mantissa on x86-64, so N is exact; the product of φ's 53-bit value and
  // N then rounds at most at the last bit, which floor() cannot turn into an off-by-one for any
  // φ·N that is not within 2^-63 relative of an integer.
  long double t = std::floor(static_cast<long double>(phi) * static_cast<long double>(calls));
  if (t >= static_cast<long double>(std::numeric_limits<uint64_t>::max())) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(t);
}

HotSet query_hot(const ThreadProfile &p, double phi) {
  HotSet h;
  h.phi = phi;
  h.threshold = hot_threshold(phi, p.meta.all_calls());
  const size_t n = p.nodes.size();
  h.cls.assign(n, NodeClass::pruned);
  for (uint32_t i = 1; i < n; ++i) {
    if (p.countable(i) && p.nodes[i].count >= h.threshold) {
      h.cls[i] = NodeClass::hot;
      ++h.hot;
    }
  }
  // Reverse preorder sees every node after all of its descendants, so one pass marks every
  // ancestor of a kept node.
  for (size_t i = n; i-- > 1;) {
    if (h.cls[i] == NodeClass::pruned) continue;
    NodeClass &parent = h.cls[p.nodes[i].parent];
    if (parent == NodeClass::pruned) parent = NodeClass::cold_ancestor;
  }
  if (n) h.cls[kRoot] = NodeClass::cold_ancestor;
  for (size_t i = 1; i < n; ++i) h.cold_ancestors += h.cls[i] == NodeClass::cold_ancestor;
  return h;
}

PrunedTree prune(std::span<const Node> nodes, std::span<const NodeClass> cls) {
  if (cls.size() != nodes.size()) throw std::invalid_argument("prune: one class per node expected");
  PrunedTree t;
  std::vector<uint32_t> new_index(nodes.size(), UINT32_MAX);
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (cls[i] == NodeClass::pruned) continue;
    Node n = nodes[i];
    if (i != kRoot) {
      uint32_t parent = new_index[n.parent];
      // Only reachable with a class array that is not ancestor-closed (not made by query_hot).
      if (parent == UINT32_MAX) throw std::invalid_argument("prune: kept node under a pruned parent");
      n.parent = parent;
    }
    new_index[i] = uint32_t(t.nodes.size());
    t.nodes.push_back(n);
    t.origin.push_back(i);
    t.cls.push_back(cls[i]);
  }
  return t;
}

}  // namespace hcct::analysis
