// Instrumentation before and after inlining (docs/INLINING.md): programs whose exits skip exit
// probes — exceptions thrown and rethrown through several frames, longjmp out of several frames —
// built with clang -finstrument-functions (no exit probe on unwinding), with the plugin before
// inlining (stage=early: exit probes run as cleanups) and after inlining (stage=late: no exit probe
// on exception or longjmp paths), run under LD_PRELOAD=libhcct.so with mode=cct:key=routine. In
// every build, each noinline function's count in each calling context must equal the analytic one
// (examples/plugin/eh_rethrow.cc, longjmp_deep.c), and no other context may appear among them: the
// runtime must recover the contexts from its stack-pointer tags and its longjmp/catch interposers.
//
// Contexts are projected on the noinline functions: frames of other functions (inlined helpers in
// early builds, the C++ runtime's, clones' origins) are spliced out, as tests/e2e does.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hcct/analysis/reader.h"
#include "hcct/analysis/symbolizer.h"
#include "plugin_record.h"
#include "plugin_util.h"

using namespace plugintest;
namespace ha = hcct::analysis;

namespace {


// "pass_through(int)" -> "pass_through"; "thrower(int) [clone .constprop.0]" or the symbol-table
// form "thrower.constprop.0" -> "thrower"; "Guard::~Guard()" -> "Guard::~Guard".
std::string base_name(std::string name) {
  size_t clone = name.find(" [clone");
  if (clone != std::string::npos)
    name = name.substr(0, clone);
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<')
      ++depth;
    else if (name[i] == '>')
      --depth;
    else if (name[i] == '(' && depth == 0 && i > 0) {
      name = name.substr(0, i);
      break;
    }
  }
  for (const char *suffix : {".constprop.", ".isra.", ".part.", ".cold", ".lto_priv."}) {
    size_t at = name.find(suffix);
    if (at != std::string::npos)
      name = name.substr(0, at);
  }
  return name;
}

// The main thread's tree projected on `keep`, with the counts of merged contexts added.
Tree record(const std::string &exe, const std::string &expected_output,
            const std::set<std::string> &keep) {
  const ha::ThreadProfile t = record_cct_by_routine(exe, expected_output);
  ha::Symbolizer symbols(t.modules, nullptr, [](const std::string &w) { FAIL_CHECK(w); });
  std::vector<Path> paths(t.nodes.size());
  Tree tree;
  for (uint32_t i = 1; i < t.nodes.size(); ++i) {
    const ha::Node &n = t.nodes[i];
    paths[i] = paths[n.parent];
    std::string name = base_name(symbols.routine(n.routine).function);
    bool kept = keep.count(name) != 0;
    // A .part clone called from its origin is one source-level activation.
    if (kept && !(paths[i].size() && paths[i].back() == name &&
                  symbols.routine(n.routine).function.find(".part.") != std::string::npos))
      paths[i].push_back(name);
    else
      kept = false;
    if (kept && n.count)
      tree[paths[i]] += n.count;
  }
  return tree;
}

struct Build {
  std::string label, exe;
};

// The three builds of one example: clang -finstrument-functions, plugin early, plugin late.
std::vector<Build> builds(const std::string &name, const std::string &source, bool cxx,
                          const std::string &opt) {
  std::string dir = work_dir("inline_" + name + opt);
  std::string gcc = std::string(cxx ? HCCT_CXX : HCCT_CC) + " " + opt +
                    " -g -fchecking -Wall -Werror ";
  std::string clang = std::string(cxx ? HCCT_CLANGXX : HCCT_CLANG) + " " + opt + " -g ";
  struct Recipe {
    std::string label, file, command;
  };
  std::vector<Recipe> recipes = {
      {"clang -finstrument-functions", "clang", clang + "-finstrument-functions"},
      {"plugin stage=early", "early", gcc + plugin_flags({"stage=early"})},
      {"plugin stage=late", "late", gcc + plugin_flags({"stage=late"})},
  };
  std::vector<Build> out;
  for (const Recipe &recipe : recipes) {
    Build b{recipe.label + " " + opt, dir + "/" + recipe.file};
    RunResult r = run(recipe.command + " " + sh_quote(example(source)) + " -o " + sh_quote(b.exe));
    INFO(b.label << ":\n" << r.output);
    REQUIRE(r.status == 0);
    REQUIRE(r.output.empty());
    out.push_back(b);
  }
  return out;
}

const int kRounds = 300;

Tree eh_expected() {
  int t = 0;  // rounds that throw
  for (int i = 0; i < kRounds; ++i)
    t += i % 3 != 0;
  const uint64_t r = kRounds;
  Path tr = {"main", "top", "translator"};
  Path rt = {"main", "top", "translator", "rethrower"};
  Path pt = {"main", "top", "translator", "rethrower", "pass_through"};
  auto with = [](Path p, const char *fn) {
    p.push_back(fn);
    return p;
  };
  return {
      {{"main"}, 1},
      {{"main", "top"}, r},
      {tr, r},
      {rt, r},
      {pt, r},
      {with(pt, "Guard::Guard"), r},
      {with(pt, "thrower"), r},
      {with(pt, "Guard::~Guard"), r},
      {with(rt, "note"), uint64_t(t)},
      {with(tr, "wrap"), uint64_t(t)},
      {{"main", "top", "recover"}, uint64_t(t)},
      {{"main", "after"}, r},
  };
}

const std::set<std::string> kEhFunctions = {"main",   "top",     "translator", "rethrower",
                                            "pass_through", "thrower", "Guard::Guard",
                                            "Guard::~Guard", "note", "wrap", "recover", "after"};

Tree longjmp_expected() {
  uint64_t r = kRounds, odd = 0, to_top = 0;
  for (int i = 0; i < kRounds; ++i) {
    odd += i % 2;
    to_top += i % 2 == 0 && i % 10 == 0;
  }
  Path m = {"main", "top", "d1", "middle"};
  auto with = [](Path p, std::vector<std::string> more) {
    p.insert(p.end(), more.begin(), more.end());
    return p;
  };
  return {
      {{"main"}, 1},
      {{"main", "top"}, r},
      {{"main", "top", "d1"}, r},
      {m, r},
      {with(m, {"d2"}), r},
      {with(m, {"d2", "d3"}), r},
      {with(m, {"d2", "d3", "leaf"}), r},
      {with(m, {"recover_mid"}), odd},
      {with(m, {"after_mid"}), r - to_top},
      {{"main", "top", "recover_top"}, to_top},
      {{"main", "after"}, r},
  };
}

const std::set<std::string> kLongjmpFunctions = {"main", "top", "d1", "middle", "d2", "d3", "leaf",
                                                 "recover_mid", "after_mid", "recover_top", "after"};

std::string eh_output() {
  long total = 0;
  for (int i = 0; i < kRounds; ++i)
    if (i % 3 != 0)
      total += (i * 2 + 1) % 7;
  return std::to_string(total) + "\n";
}

} // namespace

TEST_CASE("longjmp out of several frames: exact contexts in clang, early and late builds",
          "[plugin][inline][longjmp]") {
  for (const char *opt : {"-O0", "-O2", "-O3"}) {
    for (const Build &b : builds("longjmp", "longjmp_deep.c", false, opt)) {
      INFO(b.label);
      RunResult plain = run(sh_quote(b.exe));
      REQUIRE(plain.status == 0);
      Tree t = record(b.exe, plain.output, kLongjmpFunctions);
      INFO("recorded:\n" << describe(t) << "expected:\n" << describe(longjmp_expected()));
      CHECK(t == longjmp_expected());
    }
  }
}

// Exit probes run as cleanups in early builds: the contexts are exact whatever the runtime does.
TEST_CASE("exceptions rethrown through several frames: exact contexts, plugin before inlining",
          "[plugin][inline][eh]") {
  for (const char *opt : {"-O0", "-O2", "-O3"}) {
    std::vector<Build> all = builds("eh", "eh_rethrow.cc", true, opt);
    const Build &b = all[1];
    INFO(b.label);
    Tree t = record(b.exe, eh_output(), kEhFunctions);
    INFO("recorded:\n" << describe(t) << "expected:\n" << describe(eh_expected()));
    CHECK(t == eh_expected());
  }
}

// Without exit probes on unwinding (clang, and the plugin after inlining) the runtime must pop the
// frames the exception left before a cleanup (Guard::~Guard in pass_through's landing pad) calls
// an instrumented function: the unwinder runs the cleanup before any __cxa_begin_catch, and the
// stack-pointer rule alone would take the dead thrower frame for ~Guard's caller. The interposed
// personality routine pops them (docs/INLINING.md, "Runtime: cleanups during unwinding").
TEST_CASE("exceptions rethrown through several frames: exact contexts, clang and plugin after inlining",
          "[plugin][inline][eh]") {
  for (const char *opt : {"-O0", "-O2", "-O3"}) {
    std::vector<Build> all = builds("eh", "eh_rethrow.cc", true, opt);
    for (const Build &b : {all[0], all[2]}) {
      INFO(b.label);
      Tree t = record(b.exe, eh_output(), kEhFunctions);
      INFO("recorded:\n" << describe(t) << "expected:\n" << describe(eh_expected()));
      CHECK(t == eh_expected());
    }
  }
}
