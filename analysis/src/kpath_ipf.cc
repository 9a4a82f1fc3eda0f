#include "hcct/analysis/kpath_ipf.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace hcct::analysis {

uint32_t Ipf::child(uint32_t parent, PathLabel label) {
  // Most nodes have a few children, and the parent was just reached: scanning them is cheaper
  // than a probe into the index, which serves roots and wide nodes.
  if (parent != kNoParent && nodes_[parent].children.size() <= kScanChildren)
    for (uint32_t c : nodes_[parent].children)
      if (nodes_[c].label == label) return c;
  if ((nodes_.size() + 1) * 2 > index_.size()) grow_index();
  size_t mask = index_.size() - 1;
  size_t i = hash(parent, label) & mask;
  for (; index_[i].node != kEmpty; i = (i + 1) & mask)
    if (index_[i].parent == parent && index_[i].label == label) return index_[i].node;
  if (nodes_.size() >= kNoParent) throw std::length_error("k-IPF: more than 2^32 - 1 nodes");
  IpfNode n;
  n.label = label;
  n.parent = parent;
  n.depth = parent == kNoParent ? 1 : nodes_[parent].depth + 1;
  nodes_.push_back(n);
  uint32_t id = uint32_t(nodes_.size() - 1);
  index_[i] = {label, parent, id};
  if (parent == kNoParent) roots_.push_back(id);
  else nodes_[parent].children.push_back(id);
  return id;
}

void Ipf::grow_index() {
  std::vector<Slot> bigger(index_.empty() ? 64 : index_.size() * 2);
  size_t mask = bigger.size() - 1;
  for (const Slot &s : index_) {
    if (s.node == kEmpty) continue;
    size_t i = hash(s.parent, s.label) & mask;
    while (bigger[i].node != kEmpty) i = (i + 1) & mask;
    bigger[i] = s;
  }
  index_.swap(bigger);
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
// order. The file is in preorder (the reader checks it), so the subtree of ρ is the index range
// [ρ, end(ρ)) and the join is a forward scan of it: a node at relative depth d joins below the
// IPF node of the last node seen at depth d − 1, its parent; subtrees at depth k are skipped whole.
Ipf make_k_ipf(const KsfForest &forest, uint32_t k) {
  const auto &nodes = forest.nodes;
  if (nodes.size() >= kNoParent) throw std::length_error("k-SF: more than 2^32 - 1 nodes");
  const uint32_t n = uint32_t(nodes.size());
  std::vector<uint32_t> depth(n), end(n), path;  // path: the root-to-node path of node i
  for (uint32_t i = 0; i < n; ++i) {
    if (nodes[i].parent == kNoParent) {
      path.clear();
    } else {
      while (!path.empty() && path.back() != nodes[i].parent) path.pop_back();
      if (path.empty()) throw std::invalid_argument("k-SF nodes not in preorder (node " + std::to_string(i) + ")");
    }
    depth[i] = uint32_t(path.size());
    path.push_back(i);
    end[i] = i + 1;
  }
  for (uint32_t i = n; i-- > 0;)
    if (nodes[i].parent != kNoParent) end[nodes[i].parent] = std::max(end[nodes[i].parent], end[i]);
  Ipf ipf;
  std::vector<uint32_t> joined(k);  // the IPF node of the last k-SF node seen at each relative depth
  for (uint32_t rho = 0; rho < n; ++rho) {
    for (uint32_t sigma = rho; sigma < end[rho];) {
      uint32_t d = depth[sigma] - depth[rho];
      if (d >= k) {
        sigma = end[sigma];
        continue;
      }
      joined[d] = ipf.child(d == 0 ? kNoParent : joined[d - 1], nodes[sigma].label);
      ipf.add(joined[d], nodes[sigma].count);
      ++sigma;
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
