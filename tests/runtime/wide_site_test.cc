// Wide call sites (issue 13): one call site reaching thousands of callees (interpreter dispatch,
// virtual calls, callback tables). Child lookup must not cost a scan of the siblings: the work per
// call, counted by the profile itself (sibling_steps), stays flat as the fan-out grows, in cct mode
// and in hcct mode with Space-Saving evicting and pruning children of the wide node.
#include <catch2/catch.hpp>

#include "oracle.h"

using namespace hcct;

namespace {

constexpr uintptr_t kDispatcher = 0xd000, kHandlers = 0x100000, kSite = 0x42;

// `calls` calls from one site to handlers drawn at random among `fan_out`; returns the lookup work
// per call.
double steps_per_call(rt::Mode mode, double epsilon, uintptr_t fan_out, int calls) {
  rt::ThreadProfile p;
  rt::ProfileConfig config;
  config.mode = mode;
  config.epsilon = epsilon;
  REQUIRE(p.init(config));
  std::mt19937_64 rng(fan_out);
  p.enter(kDispatcher, 1, 1000);
  for (int i = 0; i < calls; ++i) {
    uintptr_t fn = kHandlers + 16 * (rng() % fan_out);
    p.enter(fn, kSite, 900);
    p.exit(fn, 900);
  }
  p.exit(kDispatcher, 1000);
  REQUIRE(p.unmatched_exits() == 0);
  REQUIRE(p.calls() == uint64_t(calls) + 1);
  double steps = double(p.sibling_steps()) / calls;
  p.destroy();
  return steps;
}

}  // namespace

TEST_CASE("wide call sites: lookup work per call does not grow with the fan-out", "[wide-site]") {
  for (uintptr_t fan_out : {64, 1024, 4096}) {
    INFO("fan-out " << fan_out);
    // cct: every handler stays a child of the dispatcher.
    CHECK(steps_per_call(rt::Mode::kCct, 0, fan_out, 100000) <= 4);
    // hcct with fewer counters than handlers: most calls evict a child of the wide node and prune
    // it, so unlinking must not scan either.
    CHECK(steps_per_call(rt::Mode::kHcct, 1e-3, fan_out, 100000) <= 8);
  }
}
