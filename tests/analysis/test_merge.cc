// Thread merge against a path-keyed oracle.
#include <catch2/catch.hpp>
#include <map>

#include "hcct/analysis/merge.h"
#include "hcct/analysis/reader.h"
#include "hcct/analysis/writer.h"
#include "testutil.h"

using namespace hcct::analysis;

namespace {

using Path = std::vector<std::pair<uint64_t, uint64_t>>;
struct Agg {
  uint64_t count = 0;
  uint8_t flags = 0;
};

void add_paths(const ThreadProfile &p, std::map<Path, Agg> &out) {
  std::vector<Path> paths(p.nodes.size());
  for (uint32_t i = 1; i < p.nodes.size(); ++i) {
    paths[i] = paths[p.nodes[i].parent];
    paths[i].push_back({p.nodes[i].routine, p.nodes[i].call_site});
    Agg &a = out[paths[i]];
    a.count += p.nodes[i].count;
    a.flags |= p.nodes[i].flags;
  }
}

}  // namespace

TEST_CASE("merged tree has the summed count of every path", "[merge]") {
  std::mt19937_64 rng(31);
  for (int round = 0; round < 60; ++round) {
    Mode mode = round % 2 ? Mode::hcct : Mode::cct;
    std::vector<ThreadProfile> threads;
    size_t nthreads = 1 + rng() % 5;
    for (size_t t = 0; t < nthreads; ++t) {
      threads.push_back(hcct::test::make_profile(hcct::test::random_tree(rng, 1 + rng() % 500, 6, 2), mode, rng, 9, t));
      threads.back().meta.min_count = 1 + t;
      threads.back().meta.dropped = t;
      threads.back().meta.max_depth = 10 * t;
    }
    threads.back().meta.status = ThreadStatus::live_at_exit;
    ThreadProfile m = merge_threads(threads);

    std::map<Path, Agg> want, got;
    for (auto &t : threads) add_paths(t, want);
    add_paths(m, got);
    REQUIRE(got.size() == want.size());
    for (auto &[path, agg] : want) {
      REQUIRE(got.count(path));
      CHECK(got[path].count == agg.count);
      CHECK(got[path].flags == agg.flags);
    }
    // Each path once: the merge collapses duplicate siblings.
    CHECK(m.nodes.size() == want.size() + 1);

    uint64_t calls = 0, min_count = 0, counters = 0, dropped = 0;
    for (auto &t : threads) {
      calls += t.meta.calls;
      min_count += t.meta.min_count;
      counters += t.meta.counters;
      dropped += t.meta.dropped;
    }
    CHECK(m.meta.calls == calls);
    CHECK(m.meta.dropped == dropped);
    CHECK(m.meta.max_depth == 10 * (nthreads - 1));
    CHECK(m.meta.status == ThreadStatus::live_at_exit);
    if (mode == Mode::hcct) {
      CHECK(m.meta.min_count == min_count);
      CHECK(m.meta.counters == counters);
    }
    REQUIRE(m.meta.find_extra("merged_threads"));
    CHECK(m.meta.find_extra("merged_threads")->size() == 2 * nthreads - 1);
    CHECK(m.modules.size() == 2);  // identical maps collapse

    // The result is a valid file (preorder, counts consistent with calls) and round-trips.
    ThreadProfile back = parse_profile(encode_profile(m), "merged");
    CHECK(back.nodes == m.nodes);
  }
}

TEST_CASE("merge refuses incompatible threads", "[merge]") {
  auto a = hcct::test::small_profile(Mode::cct);
  auto b = hcct::test::small_profile(Mode::hcct);
  std::vector<ThreadProfile> mixed{a, b};
  CHECK_THROWS_WITH(merge_threads(mixed), Catch::Contains("hcct mode"));
  auto c = a;
  c.meta.key = KeyKind::routine;
  std::vector<ThreadProfile> keys{a, c};
  CHECK_THROWS_AS(merge_threads(keys), std::invalid_argument);
  auto d = a;
  d.meta.pid = 5;
  std::vector<ThreadProfile> pids{a, d};
  CHECK_THROWS_WITH(merge_threads(pids), Catch::Contains("another process"));
  CHECK_THROWS_AS(merge_threads(std::span<const ThreadProfile>()), std::invalid_argument);
}

TEST_CASE("merging one thread reproduces it", "[merge]") {
  auto a = hcct::test::small_profile(Mode::cct);
  std::vector<ThreadProfile> one{a};
  ThreadProfile m = merge_threads(one);
  CHECK(m.nodes == a.nodes);
  CHECK(m.meta.calls == a.meta.calls);
}
