// The k-Iteration Path Forest (thesis Definition 3.6): every sequence of up to k consecutive
// Ball-Larus paths of one activation, with its frequency, as a prefix forest. Built from a k-SF
// by Algorithms 5–6, or (as the oracle of the tests) by counting n-grams directly.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <span>
#include <vector>

#include "hcct/analysis/kpath_profile.h"

namespace hcct::analysis {

struct IpfNode {
  PathLabel label;
  uint64_t count = 0;
  uint32_t parent = kNoParent;
  uint32_t depth = 1;  // roots have depth 1
  std::vector<uint32_t> children;
};

class Ipf {
 public:
  // The child of `parent` (kNoParent: a root) labelled `label`, created with count 0 if absent.
  uint32_t child(uint32_t parent, PathLabel label);
  void add(uint32_t node, uint64_t count) { nodes_[node].count += count; }

  const std::vector<IpfNode> &nodes() const { return nodes_; }
  const std::vector<uint32_t> &roots() const { return roots_; }
  // Every labelled path with its count: the canonical form two forests are compared by.
  std::map<std::vector<PathLabel>, uint64_t> sequences() const;
  // Adds every node of `other` (merging threads).
  void merge(const Ipf &other);
  // Drops nodes with count 0 (left by memory exhaustion at run time), children with them.
  Ipf without_zero_counts() const;

 private:
  struct KeyHash {
    size_t operator()(const std::pair<uint32_t, PathLabel> &k) const {
      uint64_t h = k.first * 0x9e3779b97f4a7c15ull ^ k.second.function ^ (k.second.path * 0xff51afd7ed558ccdull);
      return size_t(h ^ (h >> 29));
    }
  };
  std::vector<IpfNode> nodes_;
  std::vector<uint32_t> roots_;
  std::unordered_map<std::pair<uint32_t, PathLabel>, uint32_t, KeyHash> index_;
};

// Algorithms 5–6: joins every subtree of depth < k hanging from each k-SF node. For a BLPP forest
// (k = 1) the forest is its roots.
Ipf make_k_ipf(const KsfForest &forest, uint32_t k);

// Direct n-gram counting over activation streams, every n ≤ k: the oracle.
Ipf count_ngrams(const std::vector<std::vector<PathLabel>> &streams, uint32_t k);

}  // namespace hcct::analysis
