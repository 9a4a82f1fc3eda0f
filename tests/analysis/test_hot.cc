// The (φ,ε)-HCCT query against a brute-force oracle.
#include <catch2/catch.hpp>
#include <set>

#include "hcct/analysis/hot.h"
#include "testutil.h"

using namespace hcct::analysis;

namespace {

// Independent oracle: hot = countable nodes with count ≥ threshold; kept = hot plus every node on
// a path from a hot node to the root (walked explicitly).
std::set<uint32_t> oracle(const ThreadProfile &p, uint64_t threshold, std::set<uint32_t> &hot) {
  std::set<uint32_t> kept{0};
  for (uint32_t i = 1; i < p.nodes.size(); ++i) {
    bool countable = p.meta.mode != Mode::hcct || (p.nodes[i].flags & hcct::format::kNodeMonitored);
    if (!countable || p.nodes[i].count < threshold) continue;
    hot.insert(i);
    for (uint32_t a = i; a != 0; a = p.nodes[a].parent) kept.insert(a);
  }
  return kept;
}

}  // namespace

TEST_CASE("threshold is floor(phi * N)", "[hot]") {
  CHECK(hot_threshold(0, 1000) == 0);
  CHECK(hot_threshold(1, 1000) == 1000);
  CHECK(hot_threshold(0.1, 581) == 58);  // the thesis's Figure 3.2
  CHECK(hot_threshold(1e-4, 99999) == 9);
  CHECK(hot_threshold(1, UINT64_MAX) == UINT64_MAX);
  CHECK(hot_threshold(0.5, UINT64_MAX) == (uint64_t(1) << 63) - 1);
  CHECK(hot_threshold(0.25, (uint64_t(1) << 62) + 3) == (uint64_t(1) << 60));
  CHECK_THROWS_AS(hot_threshold(-0.1, 10), std::invalid_argument);
  CHECK_THROWS_AS(hot_threshold(1.5, 10), std::invalid_argument);
  CHECK_THROWS_AS(hot_threshold(std::nan(""), 10), std::invalid_argument);
}

TEST_CASE("hot set and ancestors match the oracle on random trees", "[hot]") {
  std::mt19937_64 rng(2024);
  for (int round = 0; round < 300; ++round) {
    Mode mode = round % 2 ? Mode::hcct : Mode::cct;
    ThreadProfile p = hcct::test::make_profile(hcct::test::random_tree(rng, 1 + rng() % 800), mode, rng);
    // φ = k/1024 and N < 2^40 make φN exact, so the oracle's threshold is plain integer arithmetic.
    uint64_t k = rng() % 1025;
    double phi = double(k) / 1024;
    uint64_t threshold = k * p.meta.calls / 1024;
    std::set<uint32_t> hot;
    std::set<uint32_t> kept = oracle(p, threshold, hot);

    HotSet h = query_hot(p, phi);
    INFO("round " << round << " phi " << phi << " N " << p.meta.calls);
    REQUIRE(h.threshold == threshold);
    CHECK(h.hot == hot.size());
    CHECK(h.cold_ancestors == kept.size() - 1 - hot.size());
    for (uint32_t i = 0; i < p.nodes.size(); ++i) {
      NodeClass want = hot.count(i) ? NodeClass::hot : kept.count(i) ? NodeClass::cold_ancestor : NodeClass::pruned;
      REQUIRE(h.cls[i] == want);
    }

    PrunedTree t = prune(p.nodes, h.cls);
    REQUIRE(t.nodes.size() == kept.size());
    for (uint32_t i = 0; i < t.nodes.size(); ++i) {
      uint32_t o = t.origin[i];
      CHECK(kept.count(o));
      CHECK(t.cls[i] == h.cls[o]);
      CHECK(t.nodes[i].routine == p.nodes[o].routine);
      CHECK(t.nodes[i].count == p.nodes[o].count);
      if (i > 0) {
        REQUIRE(t.nodes[i].parent < i);
        CHECK(t.origin[t.nodes[i].parent] == p.nodes[o].parent);
      }
    }
  }
}

TEST_CASE("the thesis's example: only the frequent context survives", "[hot]") {
  // main once, main→p once, main→q N−2 times, all monitored; φ = 1/2.
  ThreadProfile p = hcct::test::small_profile(Mode::hcct);
  p.nodes.resize(4);
  p.nodes[1] = {0x10, 0x1, 1, 0, hcct::format::kNodeMonitored};
  p.nodes[2] = {0x20, 0x11, 1, 1, hcct::format::kNodeMonitored};
  p.nodes[3] = {0x30, 0x12, 98, 1, hcct::format::kNodeMonitored};
  p.meta.calls = 100;
  HotSet h = query_hot(p, 0.5);
  CHECK(h.cls[1] == NodeClass::cold_ancestor);
  CHECK(h.cls[2] == NodeClass::pruned);
  CHECK(h.cls[3] == NodeClass::hot);
}

TEST_CASE("unmonitored hcct nodes are never hot, even at threshold 0", "[hot]") {
  ThreadProfile p = hcct::test::small_profile(Mode::hcct);  // monitored: 1, 3, 5
  HotSet h = query_hot(p, 0);
  CHECK(h.threshold == 0);
  CHECK(h.cls[1] == NodeClass::hot);
  CHECK(h.cls[2] == NodeClass::cold_ancestor);  // parent of hot node 3
  CHECK(h.cls[3] == NodeClass::hot);
  CHECK(h.cls[4] == NodeClass::cold_ancestor);
  CHECK(h.cls[5] == NodeClass::hot);
  CHECK_THROWS_AS(query_hot(p, 2), std::invalid_argument);
}

TEST_CASE("prune rejects a class array that is not ancestor-closed", "[hot]") {
  ThreadProfile p = hcct::test::small_profile(Mode::cct);
  std::vector<NodeClass> cls(p.nodes.size(), NodeClass::pruned);
  cls[0] = NodeClass::cold_ancestor;
  cls[3] = NodeClass::hot;  // parent 2 pruned
  CHECK_THROWS_AS(prune(p.nodes, cls), std::invalid_argument);
}
