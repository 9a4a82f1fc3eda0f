// Time per calling context in the MCCT (docs/RUNTIME.md, "Time"): the second Space-Saving summary,
// over samples, checked after every step of random call/return/sample streams against the exact
// per-context sample counts (a brute-force oracle), as mcct_test.cc checks the call counts.
#include <catch2/catch.hpp>

#include "oracle.h"

using namespace hcct;
using test::ContextKey;
using test::key_of;

namespace {

constexpr uintptr_t kStackTop = uintptr_t(1) << 40;
constexpr uintptr_t kFrameSize = 64;

class TimeChecker {
 public:
  TimeChecker(rt::Mode mode, double epsilon) {
    rt::ProfileConfig config;
    config.mode = mode;
    config.epsilon = epsilon;
    config.timed = true;
    REQUIRE(profile_.init(config));
  }
  ~TimeChecker() { profile_.destroy(); }

  void enter(uintptr_t fn, uintptr_t site) {
    path_.emplace_back(fn, site);
    ++calls_[path_];
    profile_.enter(fn, site, kStackTop - kFrameSize * path_.size());
  }
  void exit() {
    profile_.exit(path_.back().first, kStackTop - kFrameSize * path_.size());
    path_.pop_back();
  }
  // `inside_event`: as if the signal interrupted an inline fast path (no pruning there).
  void sample(uint64_t weight, bool inside_event) {
    REQUIRE(profile_.charge_samples(weight, !inside_event));
    samples_[path_] += weight;
    s_ += weight;
  }

  const rt::Node *find(const ContextKey &key) const {
    const rt::Node *node = profile_.root();
    for (auto &[fn, site] : key) {
      const rt::Node *c = node->first_child();
      while (c && (c->routine != fn || c->call_site != site)) c = c->next_sibling();
      if (!c) return nullptr;
      node = c;
    }
    return node;
  }

  // The MCCT spans exactly the call-monitored contexts, the time-monitored ones and the current
  // path (once the contexts queued inside events are pruned).
  void check_structure() {
    profile_.prune_deferred();
    auto nodes = test::all_nodes(profile_.root());
    REQUIRE(nodes.size() == profile_.live_nodes() + 1);
    std::set<const rt::Node *> on_path;
    for (size_t i = 0; i <= profile_.depth(); ++i) on_path.insert(profile_.frames()[i].node);
    size_t timed = 0;
    for (const rt::Node *n : nodes) {
      uint64_t s = profile_.node_samples(n);
      if (s) ++timed;
      if (profile_.mode() == rt::Mode::kHcct && !n->first_child())
        REQUIRE((n->monitored() || s || on_path.count(n)));
    }
    if (profile_.mode() == rt::Mode::kHcct) REQUIRE(timed == profile_.time_monitored_count());
  }

  // Space-Saving over samples: the estimates sum to S; each overcounts by at most the minimum
  // counter, which is at most εS; every context with more true samples than that is in the tree.
  void check_samples() {
    uint64_t least = profile_.min_samples();
    uint64_t sum = 0;
    for (const rt::Node *n : test::all_nodes(profile_.root())) {
      uint64_t est = profile_.node_samples(n);
      sum += est;
      auto it = samples_.find(key_of(n));
      uint64_t truth = it == samples_.end() ? 0 : it->second;
      if (profile_.mode() == rt::Mode::kCct) {
        REQUIRE(est == truth);
        continue;
      }
      if (!est) continue;
      REQUIRE(est >= truth);
      REQUIRE(est <= truth + least);
    }
    REQUIRE(sum == s_);
    REQUIRE(profile_.samples() == s_);
    if (profile_.mode() == rt::Mode::kHcct) {
      REQUIRE(double(least) <= profile_.epsilon() * double(s_) + 1e-9);
      for (auto &[key, truth] : samples_) {
        if (truth <= least) continue;
        const rt::Node *node = find(key);
        REQUIRE(node != nullptr);
        REQUIRE(profile_.node_samples(node) >= truth);
      }
    }
  }

  // The (φ,ε) query on time: contexts with samples ≥ ⌊φS⌋ are reported, none ≤ ⌊(φ-ε)S⌋ is.
  void check_query(double phi) {
    uint64_t hot = uint64_t(std::floor(phi * double(s_)));
    uint64_t cold = uint64_t(std::floor((phi - profile_.epsilon()) * double(s_)));
    for (auto &[key, truth] : samples_) {
      const rt::Node *node = find(key);
      bool reported = node && profile_.node_samples(node) >= hot && profile_.node_samples(node);
      if (truth >= hot) REQUIRE(reported);
      if (truth <= cold) REQUIRE(!reported);
    }
  }

  size_t depth() const { return path_.size(); }
  const rt::ThreadProfile &profile() const { return profile_; }

 private:
  rt::ThreadProfile profile_;
  ContextKey path_;
  std::map<ContextKey, uint64_t> calls_, samples_;
  uint64_t s_ = 0;
};

// Random calls, returns and samples of weight 1 to 3 (a timer's overruns), some inside events.
void random_run(TimeChecker &check, std::mt19937_64 &rng, size_t steps, size_t max_depth, bool every_step) {
  test::Zipf pick_fn(16, 1.05), pick_site(4, 1.5), pick_weight(3, 2.0);
  for (size_t i = 0; i < steps; ++i) {
    unsigned r = unsigned(rng() % 100);
    if (r < 30) {
      check.sample(1 + pick_weight(rng), rng() % 3 == 0);
    } else if (check.depth() < max_depth && (check.depth() == 0 || r < 66)) {
      check.enter(0x1000 * (1 + pick_fn(rng)), 0x10 * (1 + pick_site(rng)));
    } else if (check.depth() > 0) {
      check.exit();
    }
    if (every_step) {
      check.check_structure();
      check.check_samples();
    }
  }
}

}  // namespace

TEST_CASE("time: hcct sample summary against the exact samples after every step", "[time][mcct]") {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    TimeChecker check(rt::Mode::kHcct, seed % 2 ? 0.05 : 0.02);
    random_run(check, rng, 5000, 2 + seed % 7, true);
    for (double phi : {0.3, 0.1, 0.06}) check.check_query(phi);
  }
}

TEST_CASE("time: hcct sample summary on long runs and the (phi epsilon) query", "[time][mcct]") {
  for (uint64_t seed = 21; seed <= 23; ++seed) {
    std::mt19937_64 rng(seed);
    TimeChecker check(rt::Mode::kHcct, 0.004);
    random_run(check, rng, 200000, 7, false);
    check.check_structure();
    check.check_samples();
    for (double phi : {0.05, 0.02, 0.01}) check.check_query(phi);
  }
}

TEST_CASE("time: cct samples are exact", "[time][cct]") {
  std::mt19937_64 rng(5);
  TimeChecker check(rt::Mode::kCct, 0);
  random_run(check, rng, 4000, 8, true);
}

// One call that runs long (many samples) among many contexts called often: its call counter is
// evicted by the busy contexts, its time counter keeps it in the tree with its samples.
TEST_CASE("time: a context hot by time and cold by calls is kept in hcct mode", "[time][mcct]") {
  TimeChecker check(rt::Mode::kHcct, 0.01);  // 100 counters of each kind
  check.enter(0x9000, 0x10);                  // once
  for (int i = 0; i < 400; ++i) check.sample(1, i % 2 == 0);
  check.exit();
  for (int round = 0; round < 20; ++round) {
    for (uintptr_t f = 1; f <= 500; ++f) {  // 500 contexts, each called 20 times: more than 100
      check.enter(0x100000 + 0x10 * f, 0x20);
      if (f % 50 == 0) check.sample(1, false);
      check.exit();
    }
  }
  const rt::Node *hot = check.find({{0x9000, 0x10}});
  REQUIRE(hot != nullptr);
  CHECK(!hot->monitored());  // its call counter went long ago
  CHECK(check.profile().node_samples(hot) >= 400);
  check.check_structure();
  check.check_samples();
  check.check_query(0.5);
}
