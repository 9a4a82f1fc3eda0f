// The online hotness oracle (hcct/oracle.h, docs/GUIDE.md "Online hotness oracle"), in-process:
// registration, thresholds from a spec, the tick that fires exactly once per entry at the
// threshold, the per-loop statistics, and all of it from several threads at once.
#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "hcct/oracle.h"

namespace {

hcct_oracle_stats stats(const hcct_oracle_loop *l) {
  hcct_oracle_stats s;
  hcct_oracle_stats_of(l, &s);
  return s;
}

// Ticks one entry `n` times; returns the tick numbers (1-based) at which the oracle said "switch".
std::vector<uint64_t> entry(hcct_oracle_loop *l, uint64_t n) {
  std::vector<uint64_t> fired;
  hcct_oracle_run r = hcct_oracle_enter(l);
  for (uint64_t i = 1; i <= n; ++i)
    if (hcct_oracle_tick(&r)) fired.push_back(i);
  hcct_oracle_leave(&r);
  return fired;
}

}  // namespace

TEST_CASE("oracle: registration, thresholds from the spec and the program's default") {
  REQUIRE(hcct_oracle_configure("unit.c:10=7,unit.c:11=0") == 2);
  hcct_oracle_loop *a = hcct_oracle_register("unit.c:10", 1000);
  hcct_oracle_loop *b = hcct_oracle_register("unit.c:11", 1000);
  hcct_oracle_loop *c = hcct_oracle_register("unit.c:12", 5);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(a->threshold == 7);   // the spec wins over the default
  CHECK(b->threshold == 0);   // 0: never
  CHECK(c->threshold == 5);   // not in the spec: the default
  CHECK(hcct_oracle_register("unit.c:10", 3) == a);  // one loop per key
  CHECK(hcct_oracle_find("unit.c:12") == c);
  CHECK(hcct_oracle_find("unit.c:13") == nullptr);
  CHECK(hcct_oracle_register("", 1) == nullptr);
  CHECK(hcct_oracle_register(nullptr, 1) == nullptr);

  // A new spec re-applies to registered loops; keys it drops go back to their default.
  REQUIRE(hcct_oracle_configure("unit.c:12=9") == 1);
  CHECK(a->threshold == 1000);
  CHECK(b->threshold == 1000);
  CHECK(c->threshold == 9);
  REQUIRE(hcct_oracle_configure(nullptr) == 0);
  CHECK(c->threshold == 5);

  // Malformed specs change nothing.
  for (const char *bad : {"x", "x=", "=5", "x=5,", "x=5;y=6", "x=-1", "x=5b", "x=99999999999999999999", ",x=1"}) {
    INFO(bad);
    CHECK(hcct_oracle_configure(bad) == -1);
  }
  CHECK(c->threshold == 5);
  std::string huge(9000, 'k');
  CHECK(hcct_oracle_configure((huge + "=1").c_str()) == -1);
  // One key, two thresholds: ambiguous, refused; the same threshold twice is fine.
  CHECK(hcct_oracle_configure("unit.c:12=1,unit.c:10=2,unit.c:12=3") == -1);
  CHECK(c->threshold == 5);
  REQUIRE(hcct_oracle_configure("unit.c:12=4,unit.c:12=4") == 2);
  CHECK(c->threshold == 4);
  // 2^64 - 1 is a threshold, 2^64 is not.
  REQUIRE(hcct_oracle_configure("unit.c:12=18446744073709551615") == 1);
  CHECK(c->threshold == UINT64_MAX);
  CHECK(hcct_oracle_configure("unit.c:12=18446744073709551616") == -1);
  CHECK(c->threshold == UINT64_MAX);
  REQUIRE(hcct_oracle_configure(nullptr) == 0);
  CHECK(c->threshold == 5);
}

TEST_CASE("oracle: the tick fires exactly once per entry, at the threshold-th iteration") {
  hcct_oracle_loop *l = hcct_oracle_register("unit.c:20", 4);
  REQUIRE(l);
  hcct_oracle_stats before = stats(l);
  CHECK(entry(l, 3).empty());
  CHECK(entry(l, 4) == std::vector<uint64_t>{4});
  CHECK(entry(l, 10) == std::vector<uint64_t>{4});
  CHECK(entry(l, 0).empty());
  hcct_oracle_stats s = stats(l);
  CHECK(s.threshold == 4);
  CHECK(s.entries - before.entries == 4);
  CHECK(s.iterations - before.iterations == 17);
  CHECK(s.fired - before.fired == 2);

  // Threshold 1 fires on the first tick; 0 never.
  hcct_oracle_set_threshold(l, 1);
  CHECK(entry(l, 5) == std::vector<uint64_t>{1});
  hcct_oracle_set_threshold(l, 0);
  CHECK(entry(l, 100).empty());
  // A run keeps the threshold it started with.
  hcct_oracle_set_threshold(l, 2);
  hcct_oracle_run r = hcct_oracle_enter(l);
  hcct_oracle_set_threshold(l, 50);
  CHECK(hcct_oracle_tick(&r) == 0);
  CHECK(hcct_oracle_tick(&r) == 1);
  // Iterations run by a specialised version after the switch are added without ticking.
  hcct_oracle_count(&r, 98);
  hcct_oracle_leave(&r);
  CHECK(stats(l).iterations - s.iterations == 5 + 100 + 100);

  // A null loop: a run that never fires and records nothing.
  hcct_oracle_run n = hcct_oracle_enter(nullptr);
  for (int i = 0; i < 10; ++i) CHECK(hcct_oracle_tick(&n) == 0);
  hcct_oracle_leave(&n);
}

TEST_CASE("oracle: threads register and count concurrently") {
  constexpr int kThreads = 8;
  constexpr uint64_t kEntries = 2000;
  constexpr uint64_t kThreshold = 10;
  std::atomic<int> go{0};
  std::vector<hcct_oracle_loop *> shared(kThreads), own(kThreads);
  std::vector<uint64_t> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      while (!go.load()) {
      }
      // The same key from every thread at once, and one key per thread.
      static hcct_oracle_loop *cache;
      shared[t] = hcct_oracle_loop_cached(&cache, "unit.c:30", kThreshold);
      std::string *key = new std::string("unit.c:thread" + std::to_string(t));  // lives as long as the loop
      own[t] = hcct_oracle_register(key->c_str(), 3);
      for (uint64_t e = 0; e < kEntries; ++e) {
        uint64_t n = e % 20;  // 0..19 iterations: 10 of every 20 entries reach 10
        std::vector<uint64_t> f = entry(shared[t], n);
        if (f != (n >= kThreshold ? std::vector<uint64_t>{kThreshold} : std::vector<uint64_t>{})) ++wrong[t];
        entry(own[t], 5);
      }
    });
  go = 1;
  for (auto &th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    CHECK(shared[t] == shared[0]);
    CHECK(wrong[t] == 0);
    for (int u = 0; u < t; ++u) CHECK(own[t] != own[u]);
    hcct_oracle_stats s = stats(own[t]);
    CHECK(s.entries == kEntries);
    CHECK(s.iterations == 5 * kEntries);
    CHECK(s.fired == kEntries);  // threshold 3 < 5 ticks
  }
  hcct_oracle_stats s = stats(shared[0]);
  CHECK(s.entries == kThreads * kEntries);
  CHECK(s.iterations == kThreads * (kEntries / 20) * (19 * 20 / 2));
  CHECK(s.fired == kThreads * kEntries / 2);
}
