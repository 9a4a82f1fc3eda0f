// Lazy Space-Saving (thesis §3.1.3, Algorithm 2, Theorem 3.1) against an exact counter. Items are
// the children of the root: every item is entered and exited at once, so the MCCT is M itself.
#include <catch2/catch.hpp>

#include "oracle.h"

using namespace hcct;
using hcct::test::Zipf;

namespace {

constexpr uintptr_t kSp = 1 << 20;

struct Run {
  rt::ThreadProfile profile;
  std::map<uintptr_t, uint64_t> truth;
  uint64_t n = 0;
  uint64_t rescans_checked = 0;

  // Events in the probes' order (the inline fast path first, then the general path), so that
  // monitored items are counted in their nodes alone, behind the summary's floors.
  bool probes = false;

  explicit Run(double epsilon, bool through_probes = false) : probes(through_probes) {
    rt::ProfileConfig config;
    config.mode = rt::Mode::kHcct;
    config.epsilon = epsilon;
    REQUIRE(profile.init(config));
  }
  ~Run() { profile.destroy(); }

  std::map<uintptr_t, uint64_t> monitored() const {
    std::map<uintptr_t, uint64_t> out;
    for (const rt::Node *c = profile.root()->first_child(); c; c = c->next_sibling()) {
      REQUIRE(c->monitored());  // unmonitored leaves off the path are pruned at once
      out[c->routine] = profile.count_of(c);
    }
    return out;
  }

  uint64_t true_min(const std::map<uintptr_t, uint64_t> &m) const {
    uint64_t least = UINT64_MAX;
    for (auto &[item, count] : m) least = std::min(least, count);
    return least;
  }

  // One item of the stream, checking that an eviction removes a true minimum.
  void feed(uintptr_t item) {
    auto before = monitored();
    bool full = before.size() == profile.counters();
    if (!probes || !profile.enter_fast(item, 0, kSp - 64)) profile.enter(item, 0, kSp - 64);
    if (!probes || !profile.exit_fast(item, kSp - 64, false)) profile.exit(item, kSp - 64);
    ++truth[item];
    ++n;
    auto after = monitored();
    if (full && !before.count(item)) {
      uint64_t least = true_min(before);
      int evicted = 0;
      for (auto &[other, count] : before) {
        if (!after.count(other)) {
          ++evicted;
          CHECK(count == least);  // the lazy find-min returned a true minimum
        }
      }
      CHECK(evicted == 1);
      CHECK(after.at(item) == least + 1);
    }
  }

  // The Space-Saving guarantees at this point of the stream.
  void check_guarantees(double epsilon) {
    auto m = monitored();
    REQUIRE(m.size() <= profile.counters());
    uint64_t least = m.size() < profile.counters() ? 0 : true_min(m);
    CHECK(profile.min_count() == least);
    CHECK(double(least) <= epsilon * double(n) + 1e-9);
    uint64_t sum = 0;
    for (auto &[item, count] : m) {
      sum += count;
      CHECK(count >= truth.at(item));
      CHECK(count <= truth.at(item) + least);
    }
    CHECK(sum == n);
    CHECK(profile.calls() == n);
    for (auto &[item, f] : truth) {
      if (f > least) CHECK(m.count(item));
      if (double(f) > epsilon * double(n)) CHECK(m.count(item));
    }
  }
};

void run_stream(double epsilon, const std::vector<uintptr_t> &stream, bool through_probes = false) {
  Run run(epsilon, through_probes);
  for (size_t i = 0; i < stream.size(); ++i) {
    run.feed(stream[i]);
    if (i % 97 == 0 || i + 1 == stream.size()) run.check_guarantees(epsilon);
  }
}

}  // namespace

TEST_CASE("space-saving: uniform stream", "[space-saving]") {
  std::mt19937_64 rng(1);
  std::vector<uintptr_t> stream;
  for (int i = 0; i < 20000; ++i) stream.push_back(1 + rng() % 300);
  run_stream(0.02, stream);
}

TEST_CASE("space-saving: Zipf-skewed streams", "[space-saving]") {
  for (double s : {0.8, 1.2, 2.0}) {
    std::mt19937_64 rng(uint64_t(s * 100));
    Zipf zipf(2000, s);
    std::vector<uintptr_t> stream;
    for (int i = 0; i < 20000; ++i) stream.push_back(1 + zipf(rng));
    run_stream(0.01, stream);
  }
}

TEST_CASE("space-saving: adversarial streams", "[space-saving]") {
  SECTION("cyclic over one more item than counters: every arrival evicts, all counters tie") {
    std::vector<uintptr_t> stream;
    for (int i = 0; i < 5000; ++i) stream.push_back(1 + uintptr_t(i % 11));
    run_stream(0.1, stream);
  }
  SECTION("heavy hitters hidden behind a long run of distinct items") {
    std::vector<uintptr_t> stream;
    for (int i = 0; i < 3000; ++i) stream.push_back(1000 + uintptr_t(i));
    for (int i = 0; i < 3000; ++i) stream.push_back(1 + uintptr_t(i % 3));
    run_stream(0.05, stream);
  }
  SECTION("increments that land right after a full rescan") {
    // Alternate new items (forcing find-min, hence rescans once the minimum is used up) with
    // repeats of the item that was just inserted at the minimum position.
    std::vector<uintptr_t> stream;
    for (int i = 0; i < 4000; ++i) {
      stream.push_back(5000 + uintptr_t(i));
      stream.push_back(5000 + uintptr_t(i));
      if (i % 7 == 0) stream.push_back(1 + uintptr_t(i % 5));
    }
    run_stream(0.05, stream);
  }
  SECTION("a single counter") {
    std::mt19937_64 rng(7);
    std::vector<uintptr_t> stream;
    for (int i = 0; i < 2000; ++i) stream.push_back(1 + rng() % 4);
    run_stream(0.9, stream);
  }
}

// Counters that the fast path counts are above their floors in the summary (the fast path touches
// the node alone): the lazy minimum must still evict a true minimum, and its first position, with
// floors that lag (issue 15, tcc: the minimum's scan reads a node only where its floor is not
// above the minimum).
TEST_CASE("space-saving: items counted on the probes' fast path, behind stale floors", "[space-saving]") {
  SECTION("Zipf-skewed") {
    for (double s : {0.8, 1.2, 2.0}) {
      std::mt19937_64 rng(uint64_t(s * 1000));
      Zipf zipf(2000, s);
      std::vector<uintptr_t> stream;
      for (int i = 0; i < 20000; ++i) stream.push_back(1 + zipf(rng));
      run_stream(0.01, stream, /*through_probes=*/true);
    }
  }
  SECTION("new items between repeats of the items just inserted at the minimum") {
    std::vector<uintptr_t> stream;
    for (int i = 0; i < 4000; ++i) {
      stream.push_back(5000 + uintptr_t(i));
      stream.push_back(5000 + uintptr_t(i));
      stream.push_back(5000 + uintptr_t(i / 2));
      if (i % 7 == 0) stream.push_back(1 + uintptr_t(i % 5));
    }
    run_stream(0.05, stream, /*through_probes=*/true);
  }
  SECTION("cyclic over one more item than counters") {
    std::vector<uintptr_t> stream;
    for (int i = 0; i < 5000; ++i) stream.push_back(1 + uintptr_t(i % 11));
    run_stream(0.1, stream, /*through_probes=*/true);
  }
}

// The floors are what keeps evictions off the hot items' nodes: once a hot item's floor has been
// brought up to date, later searches for the minimum skip it without reading its node.
TEST_CASE("space-saving: the minimum's search reads no node whose floor is above the minimum", "[space-saving]") {
  Run run(0.1, /*through_probes=*/true);  // 10 counters
  for (uintptr_t item = 1; item <= 10; ++item) run.feed(item);
  for (int round = 0; round < 1000; ++round)
    for (uintptr_t item = 1; item <= 9; ++item) run.feed(item);  // 9 hot items, floors left at 1
  run.feed(100);  // evicts item 10, the only counter at 1; the rescan that follows reads every node
  const rt::UpkeepCounts before = run.profile.upkeep();
  // Cold items in turn: each evicts the previous one, the only counter at the minimum (which
  // rises by one each time, to about 600: the hot items stay above it).
  for (uintptr_t item = 101; item < 601; ++item) run.feed(item);
  const rt::UpkeepCounts &after = run.profile.upkeep();
  CHECK(after.evictions - before.evictions == 500);
  CHECK(after.rescans - before.rescans == 500);
  // Reading every counter's node at every rescan would be ten reads per eviction here. With the
  // floors: the victim's (which the eviction prunes anyway), and the hot nodes' now and then (their
  // floors are capped: the rising minimum passes them every kRebaseAfter rises).
  CHECK(after.rescan_reads - before.rescan_reads <= 2 * (after.evictions - before.evictions));
  run.check_guarantees(0.1);
}
