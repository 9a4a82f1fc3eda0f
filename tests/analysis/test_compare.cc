// Accuracy metrics (thesis §5.1.2) on hand-built trees with known answers, and tree alignment
// across load addresses, rebuilds and ambiguous siblings.
#include <catch2/catch.hpp>

#include "hcct/analysis/compare.h"
#include "testutil.h"

using namespace hcct::analysis;
using Catch::Detail::Approx;

namespace {

constexpr uint64_t kMain = 0x1000, kA = 0x1100, kB = 0x1200, kC = 0x1300;

ThreadProfile base(Mode mode, uint64_t bias) {
  ThreadProfile p;
  p.meta.mode = mode;
  p.meta.pid = 1;
  p.modules.push_back({bias, bias + 0x1000, bias + 0x3000, "/bin/prog", {1, 2, 3}});
  return p;
}

// The reference CCT (N = 200), addresses at load bias `bias`:
//   main 1 -> a@s1 100 -> c@s3 40
//          -> b@s2 50  -> c@s4 9
ThreadProfile reference(uint64_t bias = 0x550000000000) {
  ThreadProfile p = base(Mode::cct, bias);
  auto B = [&](uint64_t a) { return a + bias; };
  p.nodes = {Node{},
             {B(kMain), 0, 1, 0, 0},
             {B(kA), B(0x1010), 100, 1, 0},
             {B(kC), B(0x1110), 40, 2, 0},
             {B(kB), B(0x1020), 50, 1, 0},
             {B(kC), B(0x1210), 9, 4, 0}};
  p.meta.calls = 200;
  return p;
}

// An HCCT of the same run: main unmonitored, a 104, c (under a) 45, b 51; 3 counters, all in use.
ThreadProfile hcct_of_run(uint64_t bias = 0x550000000000) {
  ThreadProfile p = base(Mode::hcct, bias);
  auto B = [&](uint64_t a) { return a + bias; };
  const uint8_t M = hcct::format::kNodeMonitored;
  p.nodes = {Node{},
             {B(kMain), 0, 0, 0, 0},
             {B(kA), B(0x1010), 104, 1, M},
             {B(kC), B(0x1110), 45, 2, M},
             {B(kB), B(0x1020), 51, 1, M}};
  p.meta.calls = 200;
  p.meta.counters = 3;
  p.meta.epsilon = 0.34;
  p.meta.min_count = 5;
  return p;
}

Metrics run(const ThreadProfile &t, const ThreadProfile &r, double phi, std::vector<double> taus = {0.5, 0.3, 0.01}) {
  Alignment a = align_trees(t, module_offset_keys(t), r, module_offset_keys(r));
  CompareOptions o;
  o.phi = phi;
  o.taus = taus;
  return compare_trees(t, r, a, o);
}

}  // namespace

TEST_CASE("metrics of an HCCT against the exact CCT, by hand", "[compare]") {
  ThreadProfile t = hcct_of_run(), r = reference();
  Metrics m = run(t, r, 0.25);
  // Thresholds floor(0.25 * 200) = 50: hot in the test a, b; in the reference a (100), b (50).
  CHECK(m.test_threshold == 50);
  CHECK(m.ref_threshold == 50);
  CHECK(m.wmax == 100);
  CHECK(m.hcct_nodes == 3);  // main (cold ancestor), a, b
  CHECK(m.hot == 2);
  CHECK(m.cold_ancestors == 1);
  CHECK(m.exact_hot == 2);
  CHECK(m.true_hot == 2);
  CHECK(m.false_positives == 0);
  CHECK(m.false_negatives == 0);
  // Overlap: (w(main) + w(a) + w(b)) / N = 151 / 200.
  CHECK(m.overlap == Approx(0.755));
  // Coverage: tau 0.5 -> {a, b} all covered; 0.3 -> {a, b, c40}: 2/3; 0.01 -> all 5: 3/5.
  REQUIRE(m.coverage.size() == 3);
  CHECK(m.coverage[0].hot == 2);
  CHECK(m.coverage[0].ratio == 1.0);
  CHECK(m.coverage[1].hot == 3);
  CHECK(m.coverage[1].covered == 2);
  CHECK(m.coverage[2].hot == 5);
  CHECK(m.coverage[2].ratio == Approx(0.6));
  // Uncovered: c40 and c9: max 40% of wmax, average 24.5%; tau~ = (40 + 1) / 100.
  CHECK(m.uncovered == 2);
  CHECK(m.max_uncovered == Approx(40));
  CHECK(m.avg_uncovered == Approx(24.5));
  CHECK(m.tau_tilde == Approx(0.41));
  // Counter errors of the hot contexts: a 4/100 = 4%, b 1/50 = 2%.
  CHECK(m.error_samples == 2);
  CHECK(m.max_error == Approx(4));
  CHECK(m.avg_error == Approx(3));
  CHECK(m.max_abs_error == 4);
  // All counted test nodes: a +4, c +5, b +1; within the bound min_count = 5.
  CHECK(m.min_signed_error_all == 1);
  CHECK(m.max_signed_error_all == 5);
  CHECK(m.max_abs_error_all == 5);
  REQUIRE(m.error_bound);
  CHECK(*m.error_bound == 5);
  CHECK(m.epsilon_n == Approx(68));
}

TEST_CASE("false positives and negatives, by hand", "[compare]") {
  SECTION("an overestimate above the threshold is a false positive") {
    // phi 0.22: threshold 44; test hot a, c (45), b; reference hot a, b (c is 40).
    Metrics m = run(hcct_of_run(), reference(), 0.22);
    CHECK(m.hot == 3);
    CHECK(m.false_positives == 1);
    CHECK(m.false_negatives == 0);
    CHECK(m.true_hot == 2);
  }
  SECTION("a context the summary lost is a false negative") {
    ThreadProfile t = hcct_of_run();
    t.nodes.pop_back();  // b not monitored any more: not in the tree
    t.nodes[2].count = 155;
    t.meta.counters = 2;
    Metrics m = run(t, reference(), 0.25);
    CHECK(m.false_negatives == 1);
    CHECK(m.false_positives == 0);
    CHECK(m.overlap == Approx(101.0 / 200));
  }
  SECTION("the tree against itself is perfect") {
    Metrics m = run(reference(), reference(), 0.01);
    CHECK(m.overlap == Approx(1.0));
    CHECK(m.false_positives == 0);
    CHECK(m.false_negatives == 0);
    CHECK(m.max_error == 0);
    CHECK(m.uncovered == 0);
    CHECK(m.tau_tilde == 0);
    for (const Coverage &c : m.coverage) CHECK(c.ratio == 1.0);
  }
}

TEST_CASE("trees at other load addresses line up by module offset", "[compare][align]") {
  ThreadProfile t = reference(0x7f0000000000), r = reference(0x550000000000);
  REQUIRE(t.nodes[2].routine != r.nodes[2].routine);
  Alignment a = align_trees(t, module_offset_keys(t), r, module_offset_keys(r));
  CHECK(a.by_exact == 5);
  CHECK(a.unmatched_test == 0);
  CHECK(a.unmatched_ref == 0);
  for (uint32_t i = 0; i < t.nodes.size(); ++i) CHECK(a.ref_of[i] == i);
  Metrics m = run(t, r, 0.01);
  CHECK(m.overlap == Approx(1.0));
}

TEST_CASE("a rebuilt binary lines up by symbolic keys, ambiguous siblings by their subtrees", "[compare][align]") {
  // Reference: main -> f@L (x1, 10) -> p; main -> f@L (x2, 10) -> q  (two calls of f on one line)
  ThreadProfile r = base(Mode::cct, 0);
  r.nodes = {Node{}, {0x1000, 0, 1, 0, 0}, {0x1100, 0x1010, 10, 1, 0}, {0x1200, 0x1110, 5, 2, 0},
             {0x1100, 0x1018, 10, 1, 0}, {0x1300, 0x1120, 5, 4, 0}};
  // Test: rebuilt (other offsets, other build-id), siblings in the other order.
  ThreadProfile t = base(Mode::cct, 0);
  t.modules[0].build_id = {9, 9, 9};
  t.nodes = {Node{}, {0x2000, 0, 1, 0, 0}, {0x2100, 0x2018, 10, 1, 0}, {0x2300, 0x2120, 5, 2, 0},
             {0x2100, 0x2010, 10, 1, 0}, {0x2200, 0x2110, 5, 4, 0}};
  // Symbolic keys: main, f@L (both calls), p, q — as the symbolizer would give them.
  auto keys = [](std::vector<uint64_t> sym) {
    std::vector<NodeKey> k;
    for (size_t i = 0; i < sym.size(); ++i) k.push_back({1000 + i * 7919 + sym[i] * 104729, sym[i]});  // exact keys differ
    return k;
  };
  std::vector<NodeKey> rk = keys({0, 11, 22, 33, 22, 44});
  std::vector<NodeKey> tk = keys({0, 11, 22, 44, 22, 33});
  for (auto &k : tk) k.exact += 1;  // nothing matches exactly
  Alignment a = align_trees(t, tk, r, rk);
  CHECK(a.by_exact == 0);
  CHECK(a.by_similarity == 2);  // the two f nodes
  CHECK(a.ref_of[2] == 4);      // test f with child q <-> reference f with child q
  CHECK(a.ref_of[4] == 2);
  CHECK(a.ref_of[3] == 5);
  CHECK(a.ref_of[5] == 3);
  CHECK(a.by_symbol == 3);  // main, p, q
  CHECK(a.unmatched_test == 0);
}

TEST_CASE("ambiguous leaves pair by closeness of counts", "[compare][align]") {
  ThreadProfile r = base(Mode::cct, 0), t = base(Mode::cct, 0);
  r.nodes = {Node{}, {0x1000, 0, 1, 0, 0}, {0x1100, 0x1010, 1000, 1, 0}, {0x1100, 0x1018, 3, 1, 0}};
  t.nodes = {Node{}, {0x1000, 0, 1, 0, 0}, {0x1100, 0x1018, 4, 1, 0}, {0x1100, 0x1010, 990, 1, 0}};
  std::vector<NodeKey> rk = {{0, 0}, {1, 1}, {2, 5}, {3, 5}}, tk = {{0, 0}, {1, 1}, {8, 5}, {9, 5}};
  Alignment a = align_trees(t, tk, r, rk);
  CHECK(a.ref_of[2] == 3);
  CHECK(a.ref_of[3] == 2);
}

TEST_CASE("compare rejects bad parameters", "[compare]") {
  ThreadProfile r = reference();
  Alignment a = align_trees(r, module_offset_keys(r), r, module_offset_keys(r));
  CompareOptions o;
  o.phi = 1.5;
  CHECK_THROWS_AS(compare_trees(r, r, a, o), std::invalid_argument);
  o.phi = 0.1;
  o.taus = {2};
  CHECK_THROWS_AS(compare_trees(r, r, a, o), std::invalid_argument);
  ThreadProfile other = hcct_of_run();
  o.taus = {0.1};
  CHECK_THROWS_AS(compare_trees(other, r, a, o), std::invalid_argument);
}
