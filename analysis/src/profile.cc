#include "hcct/analysis/profile.h"

#include <algorithm>

namespace hcct::analysis {

std::string_view to_string(Mode m) {
  switch (m) {
    case Mode::empty: return "empty";
    case Mode::cct: return "cct";
    case Mode::hcct: return "hcct";
  }
  return "?";
}

std::string_view to_string(KeyKind k) { return k == KeyKind::site ? "site" : "routine"; }

std::string_view to_string(ThreadStatus s) {
  return s == ThreadStatus::exited ? "exited" : "live-at-exit";
}

const std::string *ThreadMeta::find_extra(std::string_view key) const {
  for (const auto &[k, v] : extra)
    if (k == key) return &v;
  return nullptr;
}

size_t ThreadProfile::monitored_nodes() const {
  return size_t(std::count_if(nodes.begin(), nodes.end(), [](const Node &n) { return n.monitored(); }));
}

std::vector<uint32_t> node_depths(std::span<const Node> nodes) {
  std::vector<uint32_t> depth(nodes.size(), 0);
  for (size_t i = 1; i < nodes.size(); ++i) depth[i] = depth[nodes[i].parent] + 1;
  return depth;
}

std::vector<uint32_t> subtree_ends(std::span<const Node> nodes) {
  std::vector<uint32_t> end(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) end[i] = uint32_t(i + 1);
  // Reverse preorder visits every child before its parent, so a child's final end is known when it
  // is propagated upwards.
  for (size_t i = nodes.size(); i-- > 1;) {
    uint32_t p = nodes[i].parent;
    end[p] = std::max(end[p], end[i]);
  }
  return end;
}

ChildIndex child_index(std::span<const Node> nodes) {
  ChildIndex ix;
  ix.offset.assign(nodes.size() + 1, 0);
  for (size_t i = 1; i < nodes.size(); ++i) ++ix.offset[nodes[i].parent + 1];
  for (size_t i = 0; i < nodes.size(); ++i) ix.offset[i + 1] += ix.offset[i];
  ix.child.resize(nodes.size() ? nodes.size() - 1 : 0);
  std::vector<uint32_t> fill(ix.offset.begin(), ix.offset.end() - 1);
  for (size_t i = 1; i < nodes.size(); ++i) ix.child[fill[nodes[i].parent]++] = uint32_t(i);
  return ix;
}

}  // namespace hcct::analysis
