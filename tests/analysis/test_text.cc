// hcct/analysis/text.h: the one percentage formatter and the one DOT escaper every output uses, and
// walk_tree's keep_sampled (the formats that carry calls and time together).
#include <catch2/catch.hpp>

#include "hcct/analysis/text.h"
#include "hcct/analysis/walk.h"
#include "testutil.h"

using namespace hcct::analysis;

TEST_CASE("format_percent: decimals, significant digits, signed points", "[text]") {
  CHECK(format_percent(12.5) == "12.50%");
  CHECK(format_percent(12.5, {.digits = 1}) == "12.5%");
  CHECK(format_percent(0.0123449, {.digits = 4, .significant = true}) == "0.01234%");
  CHECK(format_percent(1.25, {.sign = true}) == "+1.25%");
  CHECK(format_percent(-0.5, {.sign = true}) == "-0.50%");
  CHECK(percent(1, 3) == "33.33%");
  CHECK(percent(5, 0) == "-");
  // Counts beyond 2^53 keep their digits (long double): (2^63 - 1) of 2^64 - 1 is 50.00%.
  CHECK(percent(UINT64_MAX / 2, UINT64_MAX) == "50.00%");
  CHECK(share_percent(0.125) == "12.50%");
}

TEST_CASE("dot_escape: quotes and backslashes escaped, invalid UTF-8 and controls replaced", "[text]") {
  CHECK(dot_escape("operator\"\"_s") == "operator\\\"\\\"_s");
  CHECK(dot_escape("a\\b") == "a\\\\b");
  CHECK(dot_escape("x\ny\tz") == "x?y z");
  CHECK(dot_escape("caf\xc3\xa9 \xff") == "caf\xc3\xa9 ?");
}

TEST_CASE("walk_tree keep_sampled: a context hot by time and cold by calls is kept, samples charged below --depth", "[walk][time]") {
  ThreadProfile p = hcct::test::small_profile(Mode::cct);  // counts 7, 5, 300, 2, 1: N = 315
  p.meta.time = "cpu";
  p.meta.sample_period_ns = 1000000;
  p.samples = {0, 10, 0, 5, 80, 5};
  p.meta.samples = 100;
  auto kept = [&](const TreeFilter &f) {
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> out;  // node index -> (count, sample_count)
    MemorySource src(p);
    walk_tree(src, f, [&](const WalkNode &w, std::span<const WalkNode>) { out[w.index] = {w.count, w.sample_count}; });
    return out;
  };
  TreeFilter f;
  f.min_share = 0.5;  // calls: ⌊0.5·315⌋ = 157, only node 3; samples: ⌊0.5·100⌋ = 50, only node 4
  CHECK(kept(f).count(4) == 0);
  f.keep_sampled = true;
  auto k = kept(f);
  REQUIRE(k.count(4) == 1);
  CHECK(k[4] == std::pair<uint64_t, uint64_t>{0, 80});  // kept for its time, not selected by calls
  CHECK(k[3] == std::pair<uint64_t, uint64_t>{300, 0});
  CHECK(k[1].second == 0);                                // an ancestor: 10 samples, below 50
  // Everything at depth 1: the samples below are charged to node 1, as the counts are.
  TreeFilter cap;
  cap.keep_sampled = true;
  cap.max_depth = 1;
  auto c = kept(cap);
  CHECK(c.size() == 2);  // node 1 and the root
  CHECK(c[1] == std::pair<uint64_t, uint64_t>{315, 100});
}
