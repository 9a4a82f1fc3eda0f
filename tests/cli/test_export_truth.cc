// Exports that tell the truth (issue 13), each read back by a consumer nobody here wrote:
//   - callgrind of an HCCT (and of a CCT, recursion included): callgrind_annotate's totals, self
//     costs and inclusive costs against the profile's N;
//   - pprof stacks, decoded with code generated from pprof's published profile.proto, equal the
//     folded stacks line for line (counts included) on programs whose instrumented functions were
//     inlined (gcc -finstrument-functions, the hcct plugin before and after inlining).
// A test whose consumer or compiler is missing exits with 77, which ctest reports as skipped
// (SKIP_RETURN_CODE): it never passes without its check.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli_util.h"

#ifdef HCCT_TEST_PPROF_PROTO
#include "profile.pb.h"
#endif

using namespace clitest;
using nlohmann::json;

namespace {

const std::string kCallgrindAnnotate = "/usr/bin/callgrind_annotate";
const std::string kGcc = "/usr/bin/gcc";

bool have(const std::string &path) { return access(path.c_str(), X_OK) == 0; }

[[noreturn]] void skip(const std::string &why) {
  std::fprintf(stderr, "SKIPPED: %s\n", why.c_str());
  std::fflush(nullptr);
  std::_Exit(77);
}

// ---- callgrind_annotate's view of a callgrind file.

struct Annotated {
  uint64_t program_total = 0;
  std::map<std::string, uint64_t> cost;  // function name (without file and object) -> cost
};

uint64_t number(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  return std::stoull(s);
}

// Runs callgrind_annotate (every function listed: --threshold=100, no source annotation) and reads
// PROGRAM TOTALS and the per-function table. Its function column is "file:function [object]".
Annotated annotate(const fs::path &file, bool inclusive) {
  Result a = run({kCallgrindAnnotate, "--threshold=100", "--auto=no", inclusive ? "--inclusive=yes" : "--inclusive=no",
                  file.string()});
  INFO(a.out << a.err);
  REQUIRE(a.status == 0);
  Annotated out;
  std::smatch m;
  REQUIRE(std::regex_search(a.out, m, std::regex("([\\d,]+) \\([ \\d.]+%\\)  PROGRAM TOTALS")));
  out.program_total = number(m[1]);
  const size_t table = a.out.find("file:function");
  REQUIRE(table != std::string::npos);
  std::istringstream in(a.out.substr(table));
  const std::regex row("^\\s*([\\d,]+) \\([ \\d.]+%\\)  ([^:]*):(.*?)( \\[.*\\])?$");
  for (std::string line; std::getline(in, line);) {
    if (std::regex_match(line, m, row)) out.cost[m[3]] += number(m[1]);
  }
  REQUIRE(!out.cost.empty());
  return out;
}

// What every export of a tree must give callgrind_annotate: PROGRAM TOTALS = N, self costs adding
// up to N, and no inclusive cost above N.
void check_callgrind(const fs::path &file, uint64_t n) {
  Annotated self = annotate(file, false), incl = annotate(file, true);
  CHECK(self.program_total == n);
  CHECK(incl.program_total == n);
  uint64_t self_sum = 0;
  for (const auto &[fn, c] : self.cost) self_sum += c;
  CHECK(self_sum == n);
  for (const auto &[fn, c] : incl.cost) {
    INFO(fn << ": inclusive " << c << " of N = " << n);
    CHECK(c <= n);
  }
}

// The symtest fixture's functions in a tree with an unmonitored context between two monitored
// ones and a recursion:
//   main                               1
//     Widget::compute @ lib            unmonitored (hcct) / 2 (cct)
//       Widget::compute @ lib          40
//         fixture_leaf @ direct        300
//     fixture_leaf @ direct            100
ThreadProfile recursive_profile(Mode mode) {
  const auto &f = fixture();
  const uint64_t main_fn = f.routines.at("main"), leaf = f.routines.at("leaf"), widget = f.routines.at("widget");
  const uint8_t mon = mode == Mode::hcct ? hcct::format::kNodeMonitored : 0;
  std::vector<Node> nodes(6);
  nodes[1] = {main_fn, 0, 1, 0, mon};
  nodes[2] = {widget, f.sites.at("lib"), uint64_t(mode == Mode::hcct ? 0 : 2), 1, 0};
  nodes[3] = {widget, f.sites.at("lib"), 40, 2, mon};
  nodes[4] = {leaf, f.sites.at("direct"), 300, 3, mon};
  nodes[5] = {leaf, f.sites.at("direct"), 100, 1, mon};
  std::mt19937_64 rng(1);
  ThreadProfile p = hcct::test::make_profile(nodes, Mode::cct, rng, 4242, 0);
  p.nodes = nodes;
  p.meta.mode = mode;
  p.meta.calls = mode == Mode::hcct ? 441 : 443;
  if (mode == Mode::hcct) {
    p.meta.counters = 4;  // all in use: the estimates add up to N
    p.meta.epsilon = 0.25;
    p.meta.min_count = 1;
  }
  p.modules = f.modules;
  p.meta.exe = f.modules.at(0).path;
  p.meta.cmdline = {f.modules.at(0).path};
  return p;
}

}  // namespace

TEST_CASE("export truth: callgrind of an HCCT and of a recursive CCT, read by callgrind_annotate",
          "[cli][export][callgrind]") {
  if (!have(kCallgrindAnnotate)) skip("callgrind_annotate (valgrind) is not installed");
  for (Mode mode : {Mode::hcct, Mode::cct}) {
    const bool hcct = mode == Mode::hcct;
    INFO((hcct ? "hcct" : "cct"));
    TempDir dir;
    write_profile(dir / profile_file_name(4242, 0), recursive_profile(mode));
    const fs::path file = dir / "callgrind.out";
    Result r = hcct_cmd({"export", dir.path().string(), "-f", "callgrind", "-o", file.string()});
    INFO(r.err);
    REQUIRE(r.status == 0);
    const uint64_t n = hcct ? 441 : 443;
    check_callgrind(file, n);
    // The figures themselves: self = entries; inclusive = calls made while the function was active,
    // counted once however deep the recursion.
    Annotated self = annotate(file, false), incl = annotate(file, true);
    CHECK(self.cost["main"] == 1);
    CHECK(self.cost["symtest::Widget::compute(int)"] == (hcct ? 40 : 42));
    CHECK(self.cost["fixture_leaf"] == 400);
    CHECK(incl.cost["main"] == n);
    CHECK(incl.cost["symtest::Widget::compute(int)"] == (hcct ? 340 : 342));
    CHECK(incl.cost["fixture_leaf"] == 400);
    // An unmonitored context is not a call-less arc (callgrind_annotate would make its cost the
    // caller's self cost); the file says how unmonitored contexts are shown.
    const std::string text = hcct::test::read_text(file);
    CHECK_THAT(text, !Catch::Contains("calls=0 "));
    if (hcct) CHECK_THAT(text, Catch::Contains("desc: Unmonitored contexts: 1 "));
  }
}
