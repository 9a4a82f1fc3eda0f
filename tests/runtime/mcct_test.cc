// The MCCT (thesis §3.1.3, Algorithm 1) after every step of random call/return sequences: it must
// be exactly the minimal subtree spanning the monitored contexts and the current calling path, and
// its counters must keep Space-Saving's guarantees against the exact CCT of the same stream.
#include <catch2/catch.hpp>

#include "oracle.h"

using namespace hcct;
using test::ContextKey;
using test::key_of;

namespace {

constexpr uintptr_t kStackTop = uintptr_t(1) << 40;
constexpr uintptr_t kFrameSize = 64;

struct Step {
  bool enter;
  uintptr_t fn, site;
};

// A random call/return sequence whose contexts are skewed (a few hot functions and sites).
std::vector<Step> random_walk(std::mt19937_64 &rng, size_t steps, size_t max_depth) {
  std::vector<Step> out;
  std::vector<uintptr_t> stack;
  test::Zipf pick_fn(12, 1.1), pick_site(4, 1.5);
  for (size_t i = 0; i < steps; ++i) {
    bool can_exit = !stack.empty();
    bool can_enter = stack.size() < max_depth;
    bool enter = can_enter && (!can_exit || rng() % 100 < 52);
    if (enter) {
      uintptr_t fn = 0x1000 * (1 + pick_fn(rng));
      uintptr_t site = 0x10 * (1 + pick_site(rng));
      stack.push_back(fn);
      out.push_back({true, fn, site});
    } else {
      out.push_back({false, stack.back(), 0});
      stack.pop_back();
    }
  }
  return out;
}

// Calls from a few call sites to many callees (interpreter dispatch): nodes with hundreds of
// children, which the profile indexes (issue 13). Uniform or round-robin callees.
std::vector<Step> wide_walk(std::mt19937_64 &rng, size_t steps, size_t max_depth, uintptr_t fan_out,
                            bool round_robin) {
  std::vector<Step> out;
  std::vector<uintptr_t> stack;
  uintptr_t next = 0;
  for (size_t i = 0; i < steps; ++i) {
    bool can_exit = !stack.empty();
    bool enter = stack.size() < max_depth && (!can_exit || rng() % 100 < 50);
    if (enter) {
      uintptr_t callee = round_robin ? next++ % fan_out : rng() % fan_out;
      uintptr_t fn = 0x100000 + 0x10 * callee;
      uintptr_t site = 0x10 * (1 + rng() % 2);
      stack.push_back(fn);
      out.push_back({true, fn, site});
    } else {
      out.push_back({false, stack.back(), 0});
      stack.pop_back();
    }
  }
  return out;
}

class Checker {
 public:
  Checker(rt::Mode mode, double epsilon) {
    rt::ProfileConfig config;
    config.mode = mode;
    config.epsilon = epsilon;
    REQUIRE(profile_.init(config));
  }
  ~Checker() { profile_.destroy(); }

  void apply(const Step &s) {
    if (s.enter) {
      path_.emplace_back(s.fn, s.site);
      ++truth_[path_];
      ++n_;
      // Two events of three in the probes' order (inline fast path, then a wide node's index, then
      // the general path), one of three through the general path alone: both must agree.
      uintptr_t sp = kStackTop - kFrameSize * path_.size();
      if (n_ % 3 == 0 || !(profile_.enter_fast(s.fn, s.site, sp) || profile_.enter_wide(s.fn, s.site, sp)))
        profile_.enter(s.fn, s.site, sp);
    } else {
      uintptr_t sp = kStackTop - kFrameSize * path_.size();
      if (n_ % 3 == 0 || !profile_.exit_fast(s.fn, sp, false)) profile_.exit(s.fn, sp);
      path_.pop_back();
    }
  }

  void check_structure() {
    auto nodes = test::all_nodes(profile_.root());
    REQUIRE(nodes.size() == profile_.live_nodes() + 1);
    std::set<const rt::Node *> on_path;
    for (size_t i = 0; i <= profile_.depth(); ++i) on_path.insert(profile_.frames()[i].node);
    REQUIRE(profile_.depth() == path_.size());
    REQUIRE(key_of(profile_.cursor()) == path_);
    size_t monitored = 0;
    std::set<ContextKey> keys;
    for (const rt::Node *n : nodes) {
      for (const rt::Node *c = n->first_child(); c; c = c->next_sibling()) REQUIRE(c->parent() == n);
      REQUIRE(keys.insert(key_of(n)).second);  // no context twice
      if (profile_.mode() == rt::Mode::kHcct && n->monitored()) ++monitored;
      // Minimality: a leaf is monitored or on the current path (the root counts as on it).
      if (profile_.mode() == rt::Mode::kHcct && !n->first_child())
        REQUIRE((n->monitored() || on_path.count(n)));
    }
    REQUIRE(monitored == profile_.monitored_count());  // 0 in cct mode
    REQUIRE(profile_.index_consistent());
  }

  void check_counts() {
    uint64_t least = profile_.min_count();
    uint64_t sum = 0;
    for (const rt::Node *n : test::all_nodes(profile_.root())) {
      if (profile_.mode() == rt::Mode::kCct) {
        if (n->parent()) REQUIRE(profile_.count_of(n) == truth_.at(key_of(n)));
        continue;
      }
      if (!n->monitored()) continue;
      uint64_t f = truth_.at(key_of(n));
      REQUIRE(profile_.count_of(n) >= f);
      REQUIRE(profile_.count_of(n) <= f + least);
      sum += profile_.count_of(n);
    }
    if (profile_.mode() == rt::Mode::kHcct) {
      REQUIRE(sum == n_);
      REQUIRE(double(least) <= profile_.epsilon() * double(n_) + 1e-9);
      for (auto &[key, f] : truth_)
        if (f > least) REQUIRE(find(key) != nullptr);
    }
  }

  // The (phi, epsilon)-HCCT query: monitored contexts with count >= floor(phi N).
  void check_query(double phi) {
    uint64_t hot = uint64_t(std::floor(phi * double(n_)));
    uint64_t cold = uint64_t(std::floor((phi - profile_.epsilon()) * double(n_)));
    for (auto &[key, f] : truth_) {
      const rt::Node *node = find(key);
      bool reported = node && node->monitored() && profile_.count_of(node) >= hot;
      if (f >= hot) REQUIRE(reported);
      if (f <= cold) REQUIRE(!reported);
    }
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

  uint64_t n() const { return n_; }
  const rt::ThreadProfile &profile() const { return profile_; }

 private:
  rt::ThreadProfile profile_;
  ContextKey path_;
  std::map<ContextKey, uint64_t> truth_;
  uint64_t n_ = 0;
};

}  // namespace

TEST_CASE("mcct: minimal subtree and counter bounds after every step", "[mcct]") {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    double epsilon = seed % 2 ? 0.05 : 0.02;
    Checker check(rt::Mode::kHcct, epsilon);
    for (const Step &s : random_walk(rng, 6000, 2 + seed % 7)) {
      check.apply(s);
      check.check_structure();
      check.check_counts();
    }
    for (double phi : {0.3, 0.1, 0.06}) check.check_query(phi);
  }
}

TEST_CASE("mcct: (phi, epsilon) query on long skewed runs", "[mcct]") {
  for (uint64_t seed = 11; seed <= 14; ++seed) {
    std::mt19937_64 rng(seed);
    Checker check(rt::Mode::kHcct, 0.002);
    for (const Step &s : random_walk(rng, 200000, 6)) check.apply(s);
    check.check_structure();
    check.check_counts();
    for (double phi : {0.05, 0.02, 0.01, 0.005}) check.check_query(phi);
  }
}

TEST_CASE("cct: exact counts after every step", "[cct]") {
  std::mt19937_64 rng(3);
  Checker check(rt::Mode::kCct, 0);
  for (const Step &s : random_walk(rng, 5000, 9)) {
    check.apply(s);
    check.check_structure();
    check.check_counts();
  }
}

TEST_CASE("mcct: memory is bounded by epsilon however long the run", "[mcct]") {
  std::mt19937_64 rng(5);
  rt::ThreadProfile profile;
  rt::ProfileConfig config;
  config.mode = rt::Mode::kHcct;
  config.epsilon = 0.01;
  REQUIRE(profile.init(config));
  size_t depth = 0;
  size_t peak_after_warmup = 0;
  for (int i = 0; i < 2000000; ++i) {
    // Contexts drawn from an ever-growing universe: an exact CCT would grow without bound.
    if (depth < 3 && (depth == 0 || rng() % 2)) {
      profile.enter(0x1000 + rng() % (1000 + uint64_t(i)), 0, kStackTop - 64 * ++depth);
    } else {
      profile.exit(profile.cursor()->routine, kStackTop - 64 * depth--);
    }
    if (i == 200000) peak_after_warmup = profile.peak_nodes();
  }
  // Monitored nodes plus their cold ancestors (depth 3) plus the path.
  CHECK(profile.peak_nodes() <= 3 * profile.counters() + 4);
  CHECK(profile.peak_nodes() <= peak_after_warmup + 2 * profile.counters());
  profile.destroy();
}

TEST_CASE("mcct: wide nodes (indexed children) after every step", "[mcct][wide-site]") {
  // Few counters against hundreds of callees: children of indexed nodes are evicted and pruned all
  // the time, and indexed nodes themselves are pruned once their last child goes.
  for (uint64_t seed = 21; seed <= 24; ++seed) {
    std::mt19937_64 rng(seed);
    bool round_robin = seed % 2 == 0;  // adversarial for Space-Saving: every new call evicts
    Checker check(rt::Mode::kHcct, seed <= 22 ? 0.02 : 0.005);
    for (const Step &s : wide_walk(rng, 5000, 3, 300, round_robin)) {
      check.apply(s);
      check.check_structure();
      check.check_counts();
    }
    CHECK(check.profile().indexed_children() > 0);
    for (double phi : {0.1, 0.05, 0.03}) check.check_query(phi);
  }
}

TEST_CASE("cct: wide nodes (indexed children) exact after every step", "[cct][wide-site]") {
  std::mt19937_64 rng(7);
  Checker check(rt::Mode::kCct, 0);
  for (const Step &s : wide_walk(rng, 2000, 3, 400, false)) {
    check.apply(s);
    check.check_structure();
    check.check_counts();
  }
  CHECK(check.profile().indexed_children() > 0);
}

// Runs `body(profile, mode)` on a fresh profile in cct mode, then in hcct mode with `epsilon`
// (the default's where 0).
template <class Body>
void in_cct_and_hcct(double epsilon, Body body) {
  for (rt::Mode mode : {rt::Mode::kCct, rt::Mode::kHcct}) {
    INFO((mode == rt::Mode::kCct ? "cct" : "hcct"));
    rt::ThreadProfile p;
    rt::ProfileConfig config;
    config.mode = mode;
    if (epsilon > 0) config.epsilon = epsilon;
    REQUIRE(p.init(config));
    body(p, mode);
    p.destroy();
  }
}
template <class Body>
void in_cct_and_hcct(Body body) { in_cct_and_hcct(0, body); }

// Nodes keep the low 32 bits of their counter (docs/RUNTIME.md, "Node layout"): a counter that
// passes 2^32 must carry into the profile's high bits on the probes' fast path, the general path and
// Space-Saving's replacement alike, and read back whole (calls(), min_count, the dump).
TEST_CASE("node layout: counters carry past 2^32", "[mcct][cct][layout]") {
  // Two counters in hcct mode: the third context evicts.
  in_cct_and_hcct(0.5, [&](rt::ThreadProfile &p, rt::Mode mode) {
    constexpr uintptr_t A = 0x1000, B = 0x2000, C = 0x3000, sp = kStackTop - kFrameSize;
    p.enter(A, 1, sp);
    p.exit(A, sp);
    auto *a = const_cast<rt::Node *>(p.root()->first_child());
    REQUIRE(p.count_of(a) == 1);
    a->count_low = ~uint32_t(0) - 1;  // 2^32 - 2 calls so far
    // Fast path: the first call reaches 2^32 - 1; the second would wrap, so it goes to the
    // general path, which carries.
    REQUIRE(p.enter_fast(A, 1, sp));
    REQUIRE(p.exit_fast(A, sp, false));
    REQUIRE(p.count_of(a) == (uint64_t(1) << 32) - 1);
    REQUIRE(!p.enter_fast(A, 1, sp));
    REQUIRE(p.count_of(a) == (uint64_t(1) << 32) - 1);  // the fast path left it as it was
    p.enter(A, 1, sp);
    p.exit(A, sp);
    CHECK(p.count_of(a) == uint64_t(1) << 32);
    REQUIRE(p.enter_fast(A, 1, sp));
    p.exit(A, sp);
    CHECK(p.count_of(a) == (uint64_t(1) << 32) + 1);
    CHECK(p.calls() == (uint64_t(1) << 32) + 1);
    if (mode == rt::Mode::kHcct) {
      // B takes the second counter; C evicts the minimum (B, 1) and gets 2. Then A's big counter
      // is never the victim, and a replacement of B by a big minimum carries too.
      p.enter(B, 1, sp);
      p.exit(B, sp);
      p.enter(C, 1, sp);
      p.exit(C, sp);
      CHECK(p.count_of(a) == (uint64_t(1) << 32) + 1);
      CHECK(p.min_count() == 2);
      CHECK(p.calls() == (uint64_t(1) << 32) + 1 + 2);
    }
  });
}

// The probes' inline scan finds a child after as many steps as siblings precede it: when a narrow
// node gets a new child, its children are put in order of calls, the newest last.
// Space-Saving when the minimum itself is past 2^32: the floors kept in M (a few bits above a base
// that follows the minimum) must still lead find_min to a true minimum, its first position, with
// counts read through their carries.
TEST_CASE("space-saving: evictions at a minimum past 2^32", "[mcct][space-saving][layout]") {
  rt::ThreadProfile p;
  rt::ProfileConfig config;
  config.mode = rt::Mode::kHcct;
  config.epsilon = 0.5;  // two counters
  REQUIRE(p.init(config));
  constexpr uintptr_t sp = kStackTop - kFrameSize;
  constexpr uint64_t k2to32 = uint64_t(1) << 32;
  auto call = [&](uintptr_t fn) {
    if (!p.enter_fast(fn, 1, sp)) p.enter(fn, 1, sp);
    if (!p.exit_fast(fn, sp, false)) p.exit(fn, sp);
  };
  auto child = [&](uintptr_t fn) -> rt::Node * {
    for (const rt::Node *c = p.root()->first_child(); c; c = c->next_sibling())
      if (c->routine == fn) return const_cast<rt::Node *>(c);
    return nullptr;
  };
  // A and B to 2^32 calls each: 2^32 - 2 set, then two calls, the second of which carries.
  for (uintptr_t fn : {uintptr_t(0x1000), uintptr_t(0x2000)}) {
    call(fn);
    child(fn)->count_low = ~uint32_t(0) - 1;
    call(fn);
    call(fn);
    REQUIRE(p.count_of(child(fn)) == k2to32);
  }
  call(0x1000);  // A: 2^32 + 1; B stays the minimum
  REQUIRE(p.min_count() == k2to32);
  call(0x3000);  // evicts B, the only counter at 2^32; C gets 2^32 + 1
  CHECK(child(0x2000) == nullptr);
  REQUIRE(child(0x3000) != nullptr);
  CHECK(p.count_of(child(0x3000)) == k2to32 + 1);
  CHECK(p.count_of(child(0x1000)) == k2to32 + 1);
  call(0x4000);  // A and C tie at 2^32 + 1: the first position (A's counter) goes; D gets 2^32 + 2
  CHECK(child(0x1000) == nullptr);
  REQUIRE(child(0x3000) != nullptr);
  REQUIRE(child(0x4000) != nullptr);
  CHECK(p.count_of(child(0x4000)) == k2to32 + 2);
  call(0x3000);  // C: 2^32 + 2, a tie again
  call(0x5000);  // evicts D (first position: it took A's counter), E gets 2^32 + 3
  CHECK(child(0x4000) == nullptr);
  CHECK(p.count_of(child(0x5000)) == k2to32 + 3);
  CHECK(p.min_count() == k2to32 + 2);
  CHECK(p.calls() == 2 * k2to32 + 5);
  p.destroy();
}

TEST_CASE("node layout: a narrow node's children ordered by calls when one is added", "[mcct][cct][layout]") {
  in_cct_and_hcct([&](rt::ThreadProfile &p, rt::Mode) {
    constexpr uintptr_t sp = kStackTop - kFrameSize, A = 0x1000;
    const uintptr_t callees[] = {0x2000, 0x3000, 0x4000, 0x5000};
    const int calls[] = {1, 5, 2, 7};  // per callee, in the order they are first called
    p.enter(A, 1, sp + kFrameSize - 16);
    for (int i = 0; i < 4; ++i) {
      for (int c = 0; c < calls[i]; ++c) {
        p.enter(callees[i], 2, sp);
        p.exit(callees[i], sp);
      }
    }
    p.exit(A, sp + kFrameSize - 16);
    const rt::Node *a = p.root()->first_child();
    std::vector<uintptr_t> order;
    for (const rt::Node *c = a->first_child(); c; c = c->next_sibling()) order.push_back(c->routine);
    // 0x5000 came last: the others were ordered by their calls then (5, 2, 1), it went after them.
    CHECK(order == std::vector<uintptr_t>{0x3000, 0x4000, 0x2000, 0x5000});
    CHECK(p.calls() == 1 + 1 + 5 + 2 + 7);
    // Every one is reached by the inline scan.
    for (uintptr_t fn : callees) {
      p.enter(A, 1, sp + kFrameSize - 16);
      CHECK(p.enter_fast(fn, 2, sp));
      p.exit(fn, sp);
      p.exit(A, sp + kFrameSize - 16);
    }
  });
}

// The probes try a per-thread hint table before the sibling scan (docs/RUNTIME.md, "Hints"): an
// entry names a node by its place in the thread's node space. After a fork the profile starts over
// in a fresh node space, where the old places name nothing (past its first chunk, unmapped memory):
// the hints go with the old tree, and every context is found or made anew and counted once.
TEST_CASE("hints: a tree started over after fork keeps no hint into the old one", "[mcct][cct][hints]") {
  in_cct_and_hcct([&](rt::ThreadProfile &p, rt::Mode) {
    constexpr uintptr_t sp = kStackTop - kFrameSize, A = 0x1000;
    constexpr int kCallees = 3000;  // 3,000 nodes of 32 bytes: far past the fresh space's first 16 KiB
    p.enter(A, 1, sp + kFrameSize - 16);
    for (int round = 0; round < 2; ++round) {
      for (int i = 0; i < kCallees; ++i) {
        uintptr_t fn = 0x100000 + 0x40 * uintptr_t(i);
        if (!p.enter_fast(fn, 2, sp)) p.enter(fn, 2, sp);
        p.exit(fn, sp);
      }
    }
    REQUIRE(p.calls() == 1 + 2 * kCallees);
    p.restart_from_current_path();  // the child of a fork, inside A
    for (int i = 0; i < kCallees; ++i) {
      uintptr_t fn = 0x100000 + 0x40 * uintptr_t(i);
      CHECK_FALSE((p.enter_fast(fn, 2, sp) || p.enter_wide(fn, 2, sp)));  // not in the fresh tree yet
      p.enter(fn, 2, sp);
      p.exit(fn, sp);
    }
    for (int i = 0; i < kCallees; ++i) {
      uintptr_t fn = 0x100000 + 0x40 * uintptr_t(i);
      CHECK((p.enter_fast(fn, 2, sp) || p.enter_wide(fn, 2, sp)));  // the hint, the scan or the index
      p.exit(fn, sp);
    }
    CHECK(p.calls() == 2 * kCallees);  // A's path was rebuilt without a call
    CHECK(p.live_nodes() == 1 + kCallees);  // A and its callees (the root is not counted)
  });
}

// A hint is only a guess: checked against the node's key, its parent and its flag, it never
// counts a call into another context, and the contexts the scan cannot reach (past the eighth
// child, or evicted) are found by it or by the general path, counted once either way.
TEST_CASE("hints: a hint counts only its own context", "[mcct][cct][hints]") {
  // hcct: 5 counters, so contexts are evicted and pruned all along.
  in_cct_and_hcct(0.2, [&](rt::ThreadProfile &p, rt::Mode mode) {
    constexpr uintptr_t sp = kStackTop - kFrameSize;
    const uintptr_t parents[] = {0x1000, 0x2000};
    // The same callees and call sites under two parents: keys that differ only by the parent.
    std::map<std::pair<uintptr_t, uintptr_t>, uint64_t> exact;
    std::mt19937_64 rng(11);
    for (int i = 0; i < 20000; ++i) {
      uintptr_t parent = parents[rng() % 2], fn = 0x10000 + 0x40 * (rng() % 12), site = 1 + rng() % 2;
      p.enter(parent, 1, sp + kFrameSize);
      if (!p.enter_fast(fn, site, sp)) p.enter(fn, site, sp);
      p.exit(fn, sp);
      p.exit(parent, sp + kFrameSize);
      ++exact[{parent, fn * 4 + site}];
    }
    CHECK(p.calls() == 2 * 20000);
    if (mode == rt::Mode::kCct) {
      for (const rt::Node *a = p.root()->first_child(); a; a = a->next_sibling())
        for (const rt::Node *c = a->first_child(); c; c = c->next_sibling())
          CHECK(p.count_of(c) == exact[{a->routine, c->routine * 4 + c->call_site}]);
    } else {
      CHECK(p.monitored_count() == 5);
    }
  });
}

// The exit probe's fast path asks whether the probe was tail-called only where the top frame's tag
// is not the exit's stack pointer (docs/RUNTIME.md, "The shadow stack and skipped exits"): wherever
// it pops, exit() must pop the same frame, and wherever exit() would not pop, it must leave.
TEST_CASE("exit fast path: decides as exit() does, asking about tail calls only off the frame's tag", "[mcct][cct]") {
  constexpr uintptr_t A = 0x1000, B = 0x2000, outer = kStackTop - kFrameSize, inner = outer - kFrameSize;
  struct Enter {
    uintptr_t fn, sp;
  };
  struct Case {
    const char *what;
    std::vector<Enter> enters;
    uintptr_t fn, sp;
    bool torn_down;
    bool fast;  // the fast path pops (else it leaves the event to exit())
  };
  const Case cases[] = {
      {"an exit at its frame's tag", {{A, outer}}, A, outer, false, true},
      {"a tail-called exit at its frame's tag (a split function)", {{A, outer}}, A, outer, true, true},
      {"a tail-called exit above its frame", {{A, outer}, {B, inner}}, B, outer, true, true},
      {"an exit below its frame's tag", {{A, outer}}, A, inner, false, true},
      {"a tail-called exit below its frame's tag", {{A, outer}, {A, inner}}, A, inner - kFrameSize, true, false},
      {"an exit above a stale frame", {{A, outer}, {B, inner}}, A, outer, false, false},
      {"a tail-called exit above two frames", {{A, outer}, {B, inner}, {B, inner - kFrameSize}}, B, outer, true, false},
  };
  for (const Case &c : cases) {
    INFO(c.what);
    in_cct_and_hcct([&](rt::ThreadProfile &fast, rt::Mode mode) {
      rt::ThreadProfile slow;
      rt::ProfileConfig config;
      config.mode = mode;
      REQUIRE(slow.init(config));
      for (const Enter &e : c.enters) {
        fast.enter(e.fn, 1, e.sp);
        slow.enter(e.fn, 1, e.sp);
      }
      bool popped = fast.exit_fast(c.fn, c.sp, c.torn_down);
      CHECK(popped == c.fast);
      if (!popped) fast.exit(c.fn, c.sp, c.torn_down);
      slow.exit(c.fn, c.sp, c.torn_down);
      CHECK(fast.depth() == slow.depth());
      CHECK(fast.cursor()->routine == slow.cursor()->routine);
      CHECK(fast.unmatched_exits() == slow.unmatched_exits());
      slow.destroy();
    });
  }
}
