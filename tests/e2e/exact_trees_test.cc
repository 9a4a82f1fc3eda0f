// Exact trees on the code gcc and clang really emit (issue 13): split functions, tail-called exits.
#include <catch2/catch.hpp>

#include "harness.h"

using namespace e2e;
namespace ha = hcct::analysis;

namespace {

const std::string kE2e = E2E_DIR;

}  // namespace

TEST_CASE("split functions (.part, .cold): the analytic CCT, no unmatched exit", "[e2e][exact]") {
  constexpr int kRounds = 700;  // 100 of each n = r % 7
  for (const char *exe : {"/e2e_split_functions", "/e2e_split_functions_o3", "/e2e_split_functions_nosib",
                          "/e2e_split_functions_clang"}) {
    INFO(exe);
    auto p = run_profiled({kE2e + exe, std::to_string(kRounds)}, "mode=cct");
    REQUIRE(p.result.status == 0);
    CHECK(p.result.out == "concat 700 loops 2000 short 200\n");
    auto set = ha::read_profiles(p.dir);
    REQUIRE(set.processes.size() == 1);
    const auto &t = set.processes[0].threads[0];
    CHECK(t.meta.unmatched_exits == 0);
    CHECK(t.meta.max_depth <= 3);
    // heavy is called from three sites in concat's loop: counts per context, sites merged.
    auto counts = projected_counts(t, {"main", "concat", "heavy", "check_size", "complain"});
    CHECK(counts == std::map<NamePath, uint64_t>{{{"main"}, 1},
                                                 {{"main", "concat"}, kRounds},
                                                 {{"main", "concat", "heavy"}, 3 * 2000},
                                                 {{"main", "check_size"}, kRounds},
                                                 {{"main", "check_size", "heavy"}, kRounds - 1},
                                                 {{"main", "check_size", "complain"}, 1}});
    // Call sites inside the split-off pieces are named after the source function.
    ha::Symbolizer symbols(t.modules);
    for (size_t i = 1; i < t.nodes.size(); ++i) {
      const std::string site = symbols.call_site(t.nodes[i].call_site).function;
      CHECK(site.find(".part") == std::string::npos);
      CHECK(site.find(".cold") == std::string::npos);
    }
  }
}
