// Every path out of an instrumented function leaves the tree right, tail calls included (issue 13):
// tests/plugin/programs/tail_calls.c built with the plugin before inlining (stage=early) and after
// it (stage=late), at -O0/-O1/-O2/-O3/-Os, with and without sibling calls, run under
// LD_PRELOAD=libhcct.so with mode=cct:key=routine. Each recorded tree must be the analytic one, with
// no unmatched exit and the depth of the real recursion. The runtime pops frames whose stack is
// gone, which can hide a missing exit probe, so each build also runs under the strict trace
// runtime (tests/plugin/trace_runtime.c): every exit pairs with the innermost open entry, in its
// frame, and none is left open.
//
// The analytic tree follows the machine stack: a call the compiler emitted as a sibling call (`jmp
// callee`) runs after its caller's frame is gone, so its context is the caller's caller. Which calls
// are sibling calls is read from the binary (objdump), and the test also requires that the builds
// meant to have them do have each of them (else it would not exercise what it claims), and that no
// exit probe is ever jumped to.
#include <catch2/catch.hpp>

#include <functional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hcct/analysis/reader.h"
#include "hcct/analysis/symbolizer.h"
#include "plugin_record.h"
#include "plugin_util.h"

using namespace plugintest;
namespace ha = hcct::analysis;

namespace {

constexpr int kRounds = 300;
constexpr unsigned kDepth = 2001;  // is_even(2001): 2002 frames when not sibling calls

const std::string kProgram = std::string(HCCT_PLUGIN_PROGRAMS) + "/tail_calls.c";

// The functions of tail_calls.c that get probes (`pick` is inlined: it has probes only in early
// builds, and is spliced out of the trees).
const std::set<std::string> kFunctions = {"main",    "work",      "twist",    "note",
                                          "mark",    "merged",    "dispatch", "is_even",
                                          "is_odd",  "measure",   "compare",  "sort_pair",
                                          "indirect", "outer",    "forward",
                                          "doubled"};

// A jump from one function to another: "caller>callee", the callee "*" for an indirect jump.
using SiblingCalls = std::set<std::string>;

// The function part of an objdump symbol: "merged.cold" -> "merged", "qsort@plt" -> "qsort".
std::string function_of(std::string sym) {
  for (const char *cut : {"@", "+", ".cold"}) {
    size_t at = sym.find(cut);
    if (at != std::string::npos)
      sym = sym.substr(0, at);
  }
  return sym;
}

// Every jump out of a function in `exe`'s text (sibling calls), from its disassembly.
SiblingCalls sibling_calls(const std::string &exe) {
  RunResult r = run("objdump -d --no-show-raw-insn " + sh_quote(exe));
  REQUIRE(r.status == 0);
  static const std::regex kFunctionStart(R"(^[0-9a-f]+ <([^>]+)>:$)");
  static const std::regex kJump(R"(^\s*[0-9a-f]+:\s+jmp\s+([^<#]*)(?:#.*)?(?:<([^>]+)>)?\s*$)");
  SiblingCalls out;
  std::string current;
  for (const std::string &line : split_lines(r.output)) {
    std::smatch m;
    if (std::regex_match(line, m, kFunctionStart)) {
      current = function_of(m[1]);
      continue;
    }
    if (!std::regex_match(line, m, kJump))
      continue;
    std::string operand = m[1];
    std::string target = m[2].matched ? function_of(m[2]) : "*";
    if (operand.rfind('*', 0) == 0 && !m[2].matched)
      target = "*";
    if (target != current)
      out.insert(current + ">" + target);
  }
  return out;
}

// The calling-context tree tail_calls.c makes on the machine stack: `call` and `tail_call` mirror
// its functions, a sibling call leaving the caller's frame before the callee's starts.
class Machine {
public:
  explicit Machine(SiblingCalls sibling) : sibling_(std::move(sibling)) {}

  // An instrumented function: one context, entered from the function on top of the stack.
  void function(const std::string &name, const std::function<void()> &body) {
    stack_.push_back(name);
    ++tree_[stack_];
    body();
    if (!left_)
      stack_.pop_back();
    left_ = false;
  }

  // The function on top of the stack ends by calling `callee` (a function() or library code);
  // `key` names the callee as sibling_calls() does.
  void tail_call(const std::string &key, const std::function<void()> &callee) {
    bool sibling = sibling_.count(stack_.back() + ">" + key) != 0;
    if (sibling)
      stack_.pop_back();
    callee();
    if (!sibling)
      stack_.pop_back();
    left_ = true;  // the caller's frame is gone either way
  }

  const Tree &tree() const { return tree_; }

private:
  SiblingCalls sibling_;
  Path stack_;
  Tree tree_;
  bool left_ = false;
};

Tree expected_tree(const SiblingCalls &sibling) {
  Machine m(sibling);
  auto leaf = [&m](const char *name) { return [&m, name] { m.function(name, [] {}); }; };
  std::function<void(unsigned)> is_even, is_odd;
  is_even = [&](unsigned n) {
    m.function("is_even", [&] {
      if (n != 0)
        m.tail_call("is_odd", [&] { is_odd(n - 1); });
    });
  };
  is_odd = [&](unsigned n) {
    m.function("is_odd", [&] {
      if (n != 0)
        m.tail_call("is_even", [&] { is_even(n - 1); });
    });
  };
  m.function("main", [&] {
    for (int i = 0; i < kRounds; ++i) {
      m.function("merged", [&] {
        if (i % 3 == 0)
          m.tail_call("work", leaf("work"));
        else if (i % 3 == 1)
          m.tail_call("twist", leaf("twist"));
      });
      m.function("dispatch", [&] {
        if (i & 1)
          m.tail_call("note", leaf("note"));
        else if (i & 2)
          m.tail_call("mark", leaf("mark"));
      });
      m.function("indirect", [&] { m.tail_call("*", leaf(i & 1 ? "twist" : "work")); });
      m.function("measure", [&] {
        if (i & 1)
          m.tail_call("strtol", [] {});  // not instrumented
      });
      m.function("sort_pair", [&] {
        if (i % 5 != 2)
          m.tail_call("qsort", leaf("compare"));  // qsort of two elements compares once
      });
      m.function("outer", [&] {
        if (i & 4)
          m.tail_call("work", leaf("work"));
        else
          m.function("twist", [] {});  // twist(x) + 1: an ordinary call
      });
      m.function("forward", [&] { m.function("doubled", [] {}); });  // then __builtin_return
    }
    is_even(kDepth);
  });
  return m.tree();
}

// The sibling calls every build with sibling calls (-O2, -O3, -Os after inlining) must have.
const SiblingCalls kWantedSiblingCalls = {
    "merged>work", "merged>twist", "dispatch>note", "dispatch>mark",   "is_even>is_odd",
    "is_odd>is_even", "indirect>*", "measure>strtol", "sort_pair>qsort", "outer>work"};

struct Recorded {
  Tree tree;                     // projected on kFunctions
  std::set<std::string> others;  // instrumented functions outside kFunctions
  uint64_t unmatched_exits = 0, max_depth = 0;
};

Recorded record(const std::string &exe, const std::string &expected_output) {
  const ha::ThreadProfile t = record_cct_by_routine(exe, expected_output);
  ha::Symbolizer symbols(t.modules, nullptr, [](const std::string &w) { FAIL_CHECK(w); });
  Recorded out;
  out.unmatched_exits = t.meta.unmatched_exits;
  out.max_depth = t.meta.max_depth;
  std::vector<Path> paths(t.nodes.size());
  for (uint32_t i = 1; i < t.nodes.size(); ++i) {
    const ha::Node &n = t.nodes[i];
    std::string name = symbols.routine(n.routine).function;
    paths[i] = paths[n.parent];
    if (!kFunctions.count(name)) {
      out.others.insert(name);
      continue;
    }
    paths[i].push_back(name);
    if (n.count)
      out.tree[paths[i]] += n.count;
  }
  return out;
}

size_t depth_of(const Tree &tree) {
  size_t depth = 0;
  for (const auto &[path, count] : tree)
    depth = std::max(depth, path.size());
  return depth;
}

} // namespace

TEST_CASE("tail calls: every path out leaves the tree right, early and late, at every level",
          "[plugin][tailcall]") {
  std::string dir = work_dir("tailcall");
  std::string defines = "-DTAIL_ROUNDS=" + std::to_string(kRounds) +
                        " -DTAIL_DEPTH=" + std::to_string(kDepth);
  RunResult plain = run(std::string(HCCT_CC) + " -O2 " + defines + " " + sh_quote(kProgram) +
                        " -o " + sh_quote(dir + "/plain") + " && " + sh_quote(dir + "/plain"));
  INFO(plain.output);
  REQUIRE(plain.status == 0);

  for (const char *stage : {"early", "late"}) {
    for (const char *opt : {"-O0", "-O1", "-O2", "-O3", "-Os"}) {
      for (const char *sibling : {"", "-fno-optimize-sibling-calls"}) {
        std::string label = std::string(stage) + " " + opt + " " + sibling;
        INFO(label);
        std::string exe = dir + "/" + stage + opt + (*sibling ? "-nosib" : "");
        RunResult r = run(std::string(HCCT_CC) + " " + opt + " " + sibling + " " + defines +
                          " -g -fchecking -Wall -Werror " +
                          plugin_flags({std::string("stage=") + stage}) + " " +
                          sh_quote(kProgram) + " -o " + sh_quote(exe));
        INFO(r.output);
        REQUIRE(r.status == 0);
        REQUIRE(r.output.empty());

        SiblingCalls jumps = sibling_calls(exe);
        std::string jump_list;
        for (const std::string &j : jumps)
          jump_list += j + " ";
        INFO("jumps out of functions: " << jump_list);
        // The exit probe is a call in every build, never a jump. (The unit's constructor may end in
        // `jmp __hcct_register_unit`: no probe.)
        for (const std::string &j : jumps) {
          CHECK(j.find(">__hcct_exit") == std::string::npos);
          CHECK(j.find(">__hcct_enter") == std::string::npos);
        }
        // The premise: builds with sibling calls after inlining have every one the program forces;
        // in the others no instrumented function ends in a jump (early: the exit probe follows
        // every call).
        bool wants_sibling_calls = std::string(stage) == "late" && !*sibling &&
                                   std::string(opt) != "-O0" && std::string(opt) != "-O1";
        for (const std::string &wanted : kWantedSiblingCalls)
          CHECK(jumps.count(wanted) == (wants_sibling_calls ? 1u : 0u));

        std::string trace_out = exe + ".trace";
        RunResult traced = run("env HCCT_TRACE_OUT=" + sh_quote(trace_out) + " LD_PRELOAD=" +
                               sh_quote(HCCT_TRACE_RUNTIME) + " " + sh_quote(exe));
        CHECK(traced.status == 0);
        CHECK(traced.output == plain.output);
        Trace trace = read_trace(trace_out);
        CHECK(trace.totals.at("enters") > 0);
        CHECK(trace.totals.at("exits") == trace.totals.at("enters"));
        CHECK(trace.totals.at("mismatches") == 0);
        CHECK(trace.totals.at("frame_mismatches") == 0);
        CHECK(trace.totals.at("open") == 0);

        Recorded got = record(exe, plain.output);
        Tree want = expected_tree(jumps);
        INFO("recorded:\n" << describe(got.tree) << "expected:\n" << describe(want));
        CHECK(got.unmatched_exits == 0);
        CHECK(got.tree == want);
        // Nothing else was recorded but the inlined helper's own probes in early builds, which add
        // one level under `outer`.
        bool early = std::string(stage) == "early";
        CHECK(got.others == (early ? std::set<std::string>{"pick"} : std::set<std::string>{}));
        CHECK(got.max_depth == depth_of(want));
      }
    }
  }
}
