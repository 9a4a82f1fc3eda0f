#include "hcct/analysis/kpath_ipf.h"

#include <algorithm>

namespace hcct::analysis {

uint32_t Ipf::child(uint32_t parent, PathLabel label) {
  auto [it, inserted] = index_.try_emplace({parent, label}, uint32_t(nodes_.size()));
  if (!inserted) return it->second;
  IpfNode n;
  n.label = label;
  n.parent = parent;
  n.depth = parent == kNoParent ? 1 : nodes_[parent].depth + 1;
  nodes_.push_back(n);
  uint32_t id = uint32_t(nodes_.size() - 1);
  if (parent == kNoParent) roots_.push_back(id);
  else nodes_[parent].children.push_back(id);
  return id;
}

std::map<std::vector<PathLabel>, uint64_t> Ipf::sequences() const {
  std::map<std::vector<PathLabel>, uint64_t> out;
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    std::vector<PathLabel> seq;
    for (uint32_t v = i; v != kNoParent; v = nodes_[v].parent) seq.push_back(nodes_[v].label);
    std::reverse(seq.begin(), seq.end());
    out[seq] += nodes_[i].count;
  }
  return out;
}

// Walks `other` from its roots, creating the same labelled paths here.
void Ipf::merge(const Ipf &other) {
  std::vector<std::pair<uint32_t, uint32_t>> work;  // (node of other, parent here)
  for (uint32_t r : other.roots_) work.push_back({r, kNoParent});
  while (!work.empty()) {
    auto [v, parent] = work.back();
    work.pop_back();
    uint32_t here = child(parent, other.nodes_[v].label);
    add(here, other.nodes_[v].count);
    for (uint32_t c : other.nodes_[v].children) work.push_back({c, here});
  }
}

Ipf Ipf::without_zero_counts() const {
  Ipf out;
  std::vector<std::pair<uint32_t, uint32_t>> work;
  for (uint32_t r : roots_) work.push_back({r, kNoParent});
  while (!work.empty()) {
    auto [v, parent] = work.back();
    work.pop_back();
    if (nodes_[v].count == 0) continue;
    uint32_t here = out.child(parent, nodes_[v].label);
    out.add(here, nodes_[v].count);
    for (uint32_t c : nodes_[v].children) work.push_back({c, here});
  }
  return out;
}

// Algorithm 5 groups the k-SF nodes by label and joins the subtree below each (Algorithm 6); the
// grouping only fixes an order, and any order gives the same forest, so nodes are taken in file
// order. Each join is an explicit-stack walk to depth k.
Ipf make_k_ipf(const KsfForest &forest, uint32_t k) {
  const auto &nodes = forest.nodes;
  std::vector<std::vector<uint32_t>> children(nodes.size());
  for (uint32_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].parent != kNoParent) children[nodes[i].parent].push_back(i);
  Ipf ipf;
  struct Item {
    uint32_t ksf;
    uint32_t ipf_parent;
    uint32_t depth_left;
  };
  std::vector<Item> stack;
  for (uint32_t rho = 0; rho < nodes.size(); ++rho) {
    stack.push_back({rho, kNoParent, k});
    while (!stack.empty()) {
      Item it = stack.back();
      stack.pop_back();
      uint32_t delta = ipf.child(it.ipf_parent, nodes[it.ksf].label);
      ipf.add(delta, nodes[it.ksf].count);
      if (it.depth_left > 1)
        for (uint32_t sigma : children[it.ksf]) stack.push_back({sigma, delta, it.depth_left - 1});
    }
  }
  return ipf;
}

Ipf count_ngrams(const std::vector<std::vector<PathLabel>> &streams, uint32_t k) {
  Ipf ipf;
  for (const auto &s : streams)
    for (size_t start = 0; start < s.size(); ++start) {
      uint32_t node = kNoParent;
      for (size_t n = 0; n < k && start + n < s.size(); ++n) {
        node = ipf.child(node, s[start + n]);
        // Each node stands for the n-gram ending here: count this occurrence once.
        ipf.add(node, 1);
      }
    }
  return ipf;
}

}  // namespace hcct::analysis
