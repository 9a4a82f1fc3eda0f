// Brute-force oracles and stream generators for the runtime's algorithm tests.
#ifndef HCCT_TESTS_RUNTIME_ORACLE_H
#define HCCT_TESTS_RUNTIME_ORACLE_H

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "profile.h"

namespace hcct::test {

using rt::Node;

// A context as the sequence of (routine, site) from the root.
using ContextKey = std::vector<std::pair<uintptr_t, uintptr_t>>;

inline ContextKey key_of(const Node *node) {
  ContextKey key;
  for (; node && node->parent(); node = node->parent()) key.emplace_back(node->routine, node->call_site);
  return {key.rbegin(), key.rend()};
}

// Every node of the tree below (and including) `root`.
inline std::vector<const Node *> all_nodes(const Node *root) {
  std::vector<const Node *> out, stack{root};
  while (!stack.empty()) {
    const Node *n = stack.back();
    stack.pop_back();
    out.push_back(n);
    for (const Node *c = n->first_child(); c; c = c->next_sibling()) stack.push_back(c);
  }
  return out;
}

// Items drawn from Zipf(s) over [0, n).
class Zipf {
 public:
  Zipf(size_t n, double s) {
    double total = 0;
    for (size_t i = 1; i <= n; ++i) total += 1.0 / std::pow(double(i), s);
    double acc = 0;
    for (size_t i = 1; i <= n; ++i) {
      acc += 1.0 / std::pow(double(i), s) / total;
      cdf_.push_back(acc);
    }
  }
  size_t operator()(std::mt19937_64 &rng) {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    size_t i = size_t(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    return i < cdf_.size() ? i : cdf_.size() - 1;
  }

 private:
  std::vector<double> cdf_;
};

}  // namespace hcct::test

#endif
