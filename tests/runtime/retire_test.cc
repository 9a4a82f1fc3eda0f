// Reused addresses (issue 13): when a library is unloaded its contexts move to retired addresses
// (ThreadProfile::retire_range), so that code loaded later at the same addresses gets contexts of
// its own. Checked against a brute-force oracle of the tree's contexts, with wide (indexed) nodes.
#include <catch2/catch.hpp>

#include "oracle.h"

using namespace hcct;
using test::ContextKey;

namespace {

constexpr uintptr_t kLo = 0x10000, kHi = 0x20000;  // the unloaded library
constexpr uintptr_t kTag = uintptr_t(1) << 47;

uintptr_t retired(uintptr_t a) { return a >= kLo && a < kHi ? a | kTag : a; }

std::map<ContextKey, uint64_t> contexts(const rt::ThreadProfile &p) {
  std::map<ContextKey, uint64_t> out;
  for (const rt::Node *n : test::all_nodes(p.root()))
    if (n != p.root()) out[test::key_of(n)] = p.count_of(n);
  return out;
}

// Random calls below a dispatcher that reaches `fan_out` handlers from one site (a wide node once
// fan_out > kIndexAfter); returns the enter events. Handlers and their callees alternate between the unloaded library and
// another module.
uint64_t drive(rt::ThreadProfile &p, std::mt19937_64 &rng, uintptr_t fan_out, int calls, bool tagged) {
  uint64_t enters = 1;
  auto handler = [&](uintptr_t i) {
    uintptr_t fn = (i % 2 ? kLo : 0x30000) + 16 * i;
    return tagged ? retired(fn) : fn;
  };
  p.enter(0x50000, 1, 1000);
  for (int i = 0; i < calls; ++i) {
    uintptr_t fn = handler(rng() % fan_out);
    p.enter(fn, 0x50010, 900);
    ++enters;
    if (rng() % 3 == 0) {
      // A callee, its call site inside the handler (so in the library when the handler is).
      uintptr_t callee = handler(rng() % fan_out);
      p.enter(callee, fn + 8, 800);
      ++enters;
      p.exit(callee, 800);
    }
    p.exit(fn, 900);
  }
  p.exit(0x50000, 1000);
  return enters;
}

ContextKey retired_key(const ContextKey &key) {
  ContextKey out;
  for (auto [fn, site] : key) out.emplace_back(retired(fn), retired(site));
  return out;
}

}  // namespace

TEST_CASE("retire_range moves a library's contexts to retired addresses, wide nodes included", "[retire]") {
  for (uintptr_t fan_out : {4, 64, 1000}) {
    INFO("fan-out " << fan_out);
    rt::ThreadProfile p;
    rt::ProfileConfig config;
    config.mode = rt::Mode::kCct;
    REQUIRE(p.init(config));
    std::mt19937_64 rng(fan_out);
    drive(p, rng, fan_out, 20000, false);
    auto before = contexts(p);
    p.retire_range(kLo, kHi, kTag);
    // Every context is still there, under its retired key, with its count.
    std::map<ContextKey, uint64_t> expected;
    for (const auto &[key, count] : before) expected[retired_key(key)] = count;
    CHECK(contexts(p) == expected);
    CHECK(p.index_consistent());
    // Code loaded later at the same addresses: new contexts, the retired ones untouched.
    std::mt19937_64 again(fan_out + 1);
    drive(p, again, fan_out, 5000, false);
    auto after = contexts(p);
    for (const auto &[key, count] : expected) CHECK(after.at(key) >= count);
    uint64_t retired_calls = 0;
    for (const auto &[key, count] : after)
      for (auto [fn, site] : key)
        if (fn & kTag) {
          (void)site;
          retired_calls += count - expected.at(key);
          break;
        }
    CHECK(retired_calls == 0);
    // Calls made at the retired addresses themselves would find the old contexts again.
    std::mt19937_64 same(fan_out);
    drive(p, same, fan_out, 20000, true);
    auto doubled = contexts(p);
    for (const auto &[key, count] : before)
      if (retired_key(key) != key) CHECK(doubled.at(retired_key(key)) == 2 * count);
    CHECK(p.index_consistent());
    CHECK(p.unmatched_exits() == 0);
    p.destroy();
  }
}

TEST_CASE("retire_range in hcct mode keeps Space-Saving and the index consistent", "[retire]") {
  rt::ThreadProfile p;
  rt::ProfileConfig config;
  config.mode = rt::Mode::kHcct;
  config.epsilon = 1e-2;  // 100 counters for up to 2000 contexts: constant eviction and pruning
  REQUIRE(p.init(config));
  std::mt19937_64 rng(7);
  drive(p, rng, 1000, 20000, false);
  uint64_t calls = p.calls();
  p.retire_range(kLo, kHi, kTag);
  CHECK(p.index_consistent());
  CHECK(p.calls() == calls);
  for (const rt::Node *n : test::all_nodes(p.root())) {
    CHECK(!(n->routine >= kLo && n->routine < kHi));
    CHECK(!(n->call_site >= kLo && n->call_site < kHi));
  }
  uint64_t more = drive(p, rng, 1000, 20000, false);
  CHECK(p.index_consistent());
  CHECK(p.calls() == calls + more);  // N is the sum of the counters: nothing lost by the move
  CHECK(p.unmatched_exits() == 0);
  p.destroy();
}
