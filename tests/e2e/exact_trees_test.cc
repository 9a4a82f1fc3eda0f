// Exact trees on the code gcc and clang really emit (issue 13): split functions, tail-called exits.
#include <catch2/catch.hpp>

#include <sstream>

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

// The README's recipe on an interpreter (issue 13): wide dispatch through a handler table, C
// recursion through interpreted calls, errors unwound by longjmp, split helpers. The tree is as deep
// as the program's real recursion (two C frames per interpreted call), no exit goes unmatched, and
// every C function's calls are counted exactly.
TEST_CASE("an interpreter: tree depth of its real recursion, no unmatched exit, exact counts", "[e2e][exact]") {
  for (const char *exe : {"/e2e_interp", "/e2e_interp_o3", "/e2e_interp_clang"}) {
    INFO(exe);
    Result native = run({kE2e + exe, "30"});
    REQUIRE(native.status == 0);
    // "check C max_depth D", then "function count" lines.
    std::istringstream lines(native.out);
    std::string word;
    long check = 0, interpreted_depth = 0;
    lines >> word >> check >> word >> interpreted_depth;
    REQUIRE(interpreted_depth > 40);
    std::map<std::string, uint64_t> expected;
    for (std::string name; lines >> name;) lines >> expected[name];
    REQUIRE(expected.size() > 40);
    uint64_t cct_calls = 0;
    for (const char *mode : {"mode=cct", "mode=hcct"}) {
      INFO(mode);
      auto p = run_profiled({kE2e + exe, "30"}, mode);
      REQUIRE(p.result.status == 0);
      CHECK(p.result.out == native.out);
      auto set = ha::read_profiles(p.dir);
      REQUIRE(set.processes.size() == 1);
      const auto &t = set.processes[0].threads[0];
      CHECK(t.meta.unmatched_exits == 0);
      CHECK(t.meta.lost == 0);
      // main, pcall, then execute and op_call per interpreted level, vm_error at the bottom.
      CHECK(t.meta.max_depth >= uint64_t(2 * interpreted_depth));
      CHECK(t.meta.max_depth <= uint64_t(2 * interpreted_depth + 4));
      if (std::string(mode) == "mode=cct") {
        cct_calls = t.meta.calls;
        std::map<std::string, uint64_t> totals;
        for (const auto &[path, count] : named_counts(t)) totals[path.back()] += count;
        for (const auto &[name, count] : expected) {
          INFO(name);
          CHECK(totals[name] == count);
        }
      } else {
        CHECK(t.meta.calls == cct_calls);  // N: every call counted once, in hcct mode too
      }
    }
  }
}
