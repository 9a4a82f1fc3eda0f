// The k-Iteration Path Forest (thesis Definition 3.6): every sequence of up to k consecutive
// Ball-Larus paths of one activation, with its frequency, as a prefix forest. Built from a k-SF
// by Algorithms 5–6, or (as the oracle of the tests) by counting n-grams directly.
#pragma once

#include <cstdint>
#include <map>
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
  // (parent, label) → node: open addressing with linear probing, at most half full. Building a
  // k-IPF is one lookup per joined k-SF node (a hundred million for collatz's k = 16 k-SF), so the
  // index is flat rather than a node-based map, and nodes with few children are scanned instead.
  struct Slot {
    PathLabel label;
    uint32_t parent = 0;
    uint32_t node = kEmpty;
  };
  static constexpr uint32_t kEmpty = ~uint32_t(0);
  static constexpr size_t kScanChildren = 8;
  static size_t hash(uint32_t parent, PathLabel label) {
    uint64_t h = parent * 0x9e3779b97f4a7c15ull ^ label.function ^ (label.path * 0xff51afd7ed558ccdull);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return size_t(h ^ (h >> 32));
  }
  void grow_index();

  std::vector<IpfNode> nodes_;
  std::vector<uint32_t> roots_;
  std::vector<Slot> index_;  // size a power of two, or empty
};

// Algorithms 5–6: joins every subtree of depth < k hanging from each k-SF node. For a BLPP forest
// (k = 1) the forest is its roots. k >= 1; `forest.nodes` must be in preorder, as the reader
// guarantees (std::invalid_argument otherwise).
Ipf make_k_ipf(const KsfForest &forest, uint32_t k);

// Direct n-gram counting over activation streams, every n ≤ k: the oracle.
Ipf count_ngrams(const std::vector<std::vector<PathLabel>> &streams, uint32_t k);

}  // namespace hcct::analysis
