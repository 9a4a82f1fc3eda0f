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
#include <set>

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
// It runs in "/": callgrind_annotate strips the working directory from the file names of fl= lines
// but not of cfl= lines, which would make one function two (and its cost twice) when the test
// runs in a directory above the sources.
Annotated annotate(const fs::path &file, bool inclusive) {
  Result a = run({kCallgrindAnnotate, "--threshold=100", "--auto=no", inclusive ? "--inclusive=yes" : "--inclusive=no",
                  file.string()},
                 {}, "/");
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
  if (!have(kCallgrindAnnotate)) skip_test("callgrind_annotate (valgrind) is not installed");
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

// ---- Compiled programs with inlined instrumented functions (e2e/inlined.c).

namespace {

using Stacks = std::map<std::string, uint64_t>;  // "root;...;leaf" -> count

Stacks folded_stacks(const std::string &text) {
  Stacks out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.rfind(' ');
    REQUIRE(sp != std::string::npos);
    out[line.substr(0, sp)] += std::stoull(line.substr(sp + 1));
  }
  return out;
}

// "folded: S N / pprof: S M" for every stack whose counts differ, one a line.
std::string stack_differences(const Stacks &folded, const Stacks &pprof) {
  std::string out;
  auto count = [](const Stacks &s, const std::string &k) { auto it = s.find(k); return it == s.end() ? 0 : it->second; };
  std::set<std::string> keys;
  for (const auto &[k, v] : folded) keys.insert(k);
  for (const auto &[k, v] : pprof) keys.insert(k);
  for (const std::string &k : keys) {
    if (count(folded, k) != count(pprof, k))
      out += k + ": folded " + std::to_string(count(folded, k)) + ", pprof " + std::to_string(count(pprof, k)) + "\n";
  }
  return out;
}

#ifdef HCCT_TEST_PPROF_PROTO
// The stacks of a pprof profile as pprof builds them: each sample's locations leaf first, each
// location's lines in order (line[0] the innermost inline frame, the last its caller).
struct PprofStacks {
  Stacks stacks;
  size_t inline_locations = 0;  // locations with more than one line
};

PprofStacks pprof_stacks(const fs::path &file) {
  perftools::profiles::Profile p;
  const std::string bytes = hcct::test::read_text(file);
  REQUIRE(p.ParseFromString(bytes));
  std::map<uint64_t, std::string> function;
  for (const auto &f : p.function()) {
    REQUIRE(f.name() >= 0);
    REQUIRE(size_t(f.name()) < size_t(p.string_table_size()));
    function[f.id()] = p.string_table(int(f.name()));
  }
  PprofStacks out;
  std::map<uint64_t, std::vector<std::string>> location;  // id -> frames, innermost first
  for (const auto &l : p.location()) {
    std::vector<std::string> &frames = location[l.id()];
    for (const auto &line : l.line()) {
      REQUIRE(function.count(line.function_id()));
      frames.push_back(function[line.function_id()]);
    }
    REQUIRE(!frames.empty());
    out.inline_locations += frames.size() > 1;
  }
  for (const auto &s : p.sample()) {
    std::vector<std::string> leaf_first;
    for (uint64_t id : s.location_id()) {
      REQUIRE(location.count(id));
      for (const std::string &f : location[id]) leaf_first.push_back(f);
    }
    std::string stack;
    for (auto it = leaf_first.rbegin(); it != leaf_first.rend(); ++it) stack += (stack.empty() ? "" : ";") + *it;
    REQUIRE(s.value_size() == 1);
    out.stacks[stack] += uint64_t(s.value(0));
  }
  return out;
}
#endif

struct Build {
  std::string name;
  std::vector<std::string> flags;
  bool early = true;  // inlined functions keep their probes
};

// Compiles e2e/inlined.c with `b`, records it in `mode`, and returns the profile directory.
fs::path build_and_record(const TempDir &dir, const Build &b, const std::string &mode) {
#ifndef HCCT_RUNTIME_SO
  skip_test("the runtime (libhcct.so) is not part of this build");
#else
  if (!have(kGcc)) skip_test("gcc is not installed");
  const fs::path exe = dir / b.name;
  if (!fs::exists(exe)) {
    std::vector<std::string> cc = {kGcc, "-O2", "-g", "-o", exe.string(), HCCT_EXPORT_TRUTH_SOURCE};
    cc.insert(cc.end(), b.flags.begin(), b.flags.end());
    Result r = run(cc);
    INFO(r.err);
    REQUIRE(r.status == 0);
  }
  const fs::path data = dir / (b.name + "." + mode + ".data");
  std::vector<std::string> args = {"record", "--mode", mode, "-o", data.string()};
  if (mode == "hcct") args.insert(args.end(), {"--epsilon", "0.1"});  // 10 counters: unmonitored contexts
  // Calls only: a time sample (hcct mode samples by default; one lands now and then on a loaded
  // machine) would give the exports a second event and pprof three values a sample. The time
  // exports have tests of their own (test_time_exports.cc).
  args.insert(args.end(), {"--options", "time=off", "--", exe.string()});
  Result rec = hcct_cmd(args, {{"HCCT_RUNTIME", HCCT_RUNTIME_SO}});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  return data;
#endif
}

// The profile's N: the sum of the exported counts (JSON), which is `calls` in cct mode and once the
// HCCT's counters are all in use.
uint64_t exported_total(const fs::path &data) {
  Result r = hcct_cmd({"export", data.string(), "-f", "json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  uint64_t n = 0;
  const json doc = json::parse(r.out);
  for (const json &t : doc["trees"]) {
    CHECK(t["total"] == t["calls"]);
    n += t["total"].get<uint64_t>();
  }
  return n;
}

void check_build(const Build &b) {
#ifndef HCCT_TEST_PPROF_PROTO
  skip_test("protoc/libprotobuf or pprof's profile.proto (golang-github-google-pprof-dev) missing at configure time");
#else
  TempDir dir;
  for (const std::string mode : {"cct", "hcct"}) {
    INFO(b.name << ", mode " << mode);
    const fs::path data = build_and_record(dir, b, mode);
    // Every frame kept (no default pruning), so that the two formats see the same tree; with
    // symbols and without (no inline chains then: every ancestor at its entry).
    Stacks want;
    PprofStacks got;
    for (const bool symbols : {false, true}) {
      INFO((symbols ? "symbolized" : "--no-symbols"));
      std::vector<std::string> folded_args = {"export", data.string(), "-f", "folded", "--min-share", "0", "--depth", "0"};
      const fs::path pb = dir / (b.name + "." + mode + ".pb");
      std::vector<std::string> pprof_args = {"export", data.string(), "-f", "pprof", "--min-share", "0", "--depth", "0",
                                             "-o", pb.string()};
      if (!symbols) {
        folded_args.push_back("--no-symbols");
        pprof_args.push_back("--no-symbols");
      }
      Result folded = hcct_cmd(folded_args), pprof = hcct_cmd(pprof_args);
      INFO(folded.err << pprof.err);
      REQUIRE(folded.status == 0);
      REQUIRE(pprof.status == 0);
      want = folded_stacks(folded.out);
      got = pprof_stacks(pb);
      // Line for line, counts included.
      CHECK(stack_differences(want, got.stacks) == "");
      CHECK(got.stacks.size() == want.size());
    }
    // The tree's stacks themselves: each function once in its own place, inlined ones included.
    if (mode == "cct") {
      const std::string chain = b.early ? "main;rec;run;step;compare;ltnum;leaf" : "main;rec;run;compare;leaf";
      CHECK(want.count(chain));
      // Early: rec(0) is called from main 13 times; late: gcc made rec's recursion a loop.
      CHECK(want.at(chain) == (b.early ? 13 : 50));
    }
    // The call sites really were inline chains (else this test checks nothing about them).
    if (b.early) CHECK(got.inline_locations > 0);
  }
#endif
}

// The line of e2e/inlined.c that contains `text`.
uint32_t source_line(const std::string &text) {
  std::istringstream in(hcct::test::read_text(HCCT_EXPORT_TRUTH_SOURCE));
  uint32_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find(text) != std::string::npos) return n;
  }
  FAIL("no line with " << text << " in " << HCCT_EXPORT_TRUTH_SOURCE);
  return 0;
}

// A callgrind file's arcs: "caller -> callee" -> the lines (in the caller's file) of its calls.
// Names are compressed ("fn=(3) name" the first time, "fn=(3)" after).
std::map<std::string, std::set<uint32_t>> callgrind_arcs(const fs::path &file) {
  std::map<std::string, std::set<uint32_t>> out;
  std::map<std::string, std::string> names;
  auto name = [&](const std::string &ref) {
    const size_t close = ref.find(')');
    if (ref.empty() || ref[0] != '(' || close == std::string::npos) return ref;
    const std::string id = ref.substr(0, close + 1);
    if (close + 2 < ref.size()) names[id] = ref.substr(close + 2);
    return names[id];
  };
  std::istringstream in(hcct::test::read_text(file));
  std::string fn, cfn;
  bool after_calls = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("fn=", 0) == 0) fn = name(line.substr(3));
    else if (line.rfind("cfn=", 0) == 0) cfn = name(line.substr(4));
    else if (line.rfind("calls=", 0) == 0) after_calls = true;
    else if (after_calls) {
      out[fn + " -> " + cfn].insert(uint32_t(std::stoul(line.substr(0, line.find(' ')))));
      after_calls = false;
    }
  }
  return out;
}

// The builds of e2e/inlined.c this build can make.
std::vector<Build> builds() {
  std::vector<Build> out = {{"gcc_finstrument", {"-finstrument-functions"}, true}};
#ifdef HCCT_PLUGIN
  out.push_back({"plugin_early", {"-fplugin=" HCCT_PLUGIN, "-fplugin-arg-hcct_plugin-stage=early"}, true});
  out.push_back({"plugin_late", {"-fplugin=" HCCT_PLUGIN, "-fplugin-arg-hcct_plugin-stage=late"}, false});
#endif
  return out;
}

}  // namespace

TEST_CASE("export truth: callgrind_annotate on compiled programs with inlining and recursion, cct and hcct",
          "[cli][export][callgrind][e2e]") {
  if (!have(kCallgrindAnnotate)) skip_test("callgrind_annotate (valgrind) is not installed");
  TempDir dir;
  for (const Build &b : builds()) {
    for (const std::string mode : {"cct", "hcct"}) {
      INFO(b.name << ", mode " << mode);
      const fs::path data = build_and_record(dir, b, mode);
      const fs::path cg = dir / (b.name + "." + mode + ".callgrind");
      Result r = hcct_cmd({"export", data.string(), "-f", "callgrind", "-o", cg.string()});
      INFO(r.err);
      REQUIRE(r.status == 0);
      check_callgrind(cg, exported_total(data));
      // Each call at a line of its caller's function: through functions inlined into the caller,
      // at the caller's definition when an inlined probe reported the caller's own return address.
      const std::map<std::string, std::set<uint32_t>> arcs = callgrind_arcs(cg);
      // An HCCT keeps fewer contexts: there, an arc is checked where it was kept.
      auto expect = [&](const std::string &arc, uint32_t line) {
        INFO(arc);
        if (mode == "hcct" && !arcs.count(arc)) return;
        CHECK((arcs.count(arc) ? arcs.at(arc) : std::set<uint32_t>{}) == std::set<uint32_t>{line});
      };
      const uint32_t compare_def = source_line("int compare(int a, int b)"), run_def = source_line("int run(int n)");
      if (b.early) {
        expect("compare -> ltnum", compare_def);
        expect("ltnum -> leaf", source_line("if (a == 3) leaf(a);"));
        expect("step -> compare", source_line("return compare(i, 5);"));
        expect("run -> step", run_def);
      } else {
        expect("compare -> leaf", compare_def);  // where ltnum was inlined
        expect("run -> compare", source_line("s += step(i);"));
      }
      expect("rec -> run", source_line("return run(10);"));
      expect("main -> rec", source_line("s += rec(i % 4);"));
    }
  }
}

TEST_CASE("export truth: pprof stacks equal folded stacks, gcc -finstrument-functions -O2", "[cli][export][pprof][e2e]") {
  check_build(builds().at(0));
}

TEST_CASE("export truth: pprof stacks equal folded stacks, hcct plugin before inlining", "[cli][export][pprof][e2e]") {
#ifndef HCCT_PLUGIN
  skip_test("the GCC plugin is not part of this build");
#else
  check_build(builds().at(1));
#endif
}

TEST_CASE("export truth: pprof stacks equal folded stacks, hcct plugin after inlining", "[cli][export][pprof][e2e]") {
#ifndef HCCT_PLUGIN
  skip_test("the GCC plugin is not part of this build");
#else
  check_build(builds().at(2));
#endif
}

TEST_CASE("report says that an inlined probe's call site is not in its parent", "[cli][export][e2e]") {
  TempDir dir;
  const Build b = builds().at(0);
  const fs::path data = build_and_record(dir, b, "cct");
  Result r = hcct_cmd({"report", data.string(), "--width", "0", "--phi", "0"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  // ltnum's probe reported compare's return address, a line in run: never shown as ltnum's site.
  size_t ltnum = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" ltnum ") != std::string::npos) {
      ++ltnum;
      CHECK_THAT(line, Catch::EndsWith("@ inlined into compare"));
    } else if (line.find(" compare ") != std::string::npos) {
      CHECK_THAT(line, !Catch::Contains("inlined into"));
    }
  }
  CHECK(ltnum > 0);
}

TEST_CASE("view says that an inlined probe's call site is not in its parent", "[cli][view][e2e]") {
  TempDir dir;
  const fs::path data = build_and_record(dir, builds().at(0), "cct");
  const fs::path page = dir.path() / "view.html";
  Result v = hcct_cmd({"view", data.string(), "-o", page.string()});
  if (v.status == 1 && v.err.find("built without the flame graph library") != std::string::npos)
    skip_test("hcct was built without d3-flame-graph: " + v.err);
  INFO(v.err);
  REQUIRE(v.status == 0);
  CHECK_THAT(hcct::test::read_text(page), Catch::Contains("inlined into compare"));
}

TEST_CASE("export truth: DOT and JSON state unmonitored contexts and inlined probes' call sites", "[cli][export][e2e]") {
  TempDir dir;
  const Build b = builds().at(0);
  for (const std::string mode : {"cct", "hcct"}) {
    INFO(mode);
    const fs::path data = build_and_record(dir, b, mode);
    Result j = hcct_cmd({"export", data.string(), "-f", "json"});
    INFO(j.err);
    REQUIRE(j.status == 0);
    const json doc = json::parse(j.out);
    // ltnum is inlined into compare with its probe, which reports compare's return address: the
    // export says the site is not in the parent. compare's own site (in run, through the inlined
    // step) is.
    size_t ltnum = 0, compare = 0, unmonitored = 0;
    for (const json &t : doc["trees"]) {
      for (const json &n : t["nodes"]) {
        if (!n.contains("function")) continue;
        const std::string f = n["function"]["name"];
        if (f == "ltnum") {
          ++ltnum;
          CHECK(n.value("call_outside_parent", false));
        } else if (f == "compare") {
          ++compare;
          CHECK(!n.contains("call_outside_parent"));
        }
        unmonitored += n.contains("monitored") && !n["monitored"].get<bool>();
      }
    }
    CHECK(ltnum > 0);
    CHECK(compare > 0);
    Result d = hcct_cmd({"export", data.string(), "-f", "dot"});
    INFO(d.err);
    REQUIRE(d.status == 0);
    CHECK_THAT(d.out, Catch::Contains("[label=\"inlined into compare\"]"));
    CHECK(lines_with(d.out, "[label=\"inlined into compare\"]").size() == ltnum);
    // An unmonitored context's count is unknown, not 0.
    CHECK(lines_with(d.out, "not monitored: count unknown").size() == unmonitored);
    if (mode == "hcct") CHECK(unmonitored > 0);
    CHECK_THAT(d.out, !Catch::Contains("\\n0 (0.00%)"));
  }
}
