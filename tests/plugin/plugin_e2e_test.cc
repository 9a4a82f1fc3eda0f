// End-to-end tests of the GCC plugin with the real runtime: the examples built with the plugin and
// built with -finstrument-functions, run under LD_PRELOAD=libhcct.so with
// HCCT_OPTIONS=mode=cct:key=routine, must record the same calling-context tree — same contexts, same
// exact counts. Trees are compared by symbol names (addresses differ between the builds) read back
// with the analysis library. Selection options must change the tree exactly as removing the
// deselected functions' probes would.
//
// The runtime pops frames whose stack is gone (docs/RUNTIME-ABI.md, "Robustness"), so these trees
// would look right even if exit probes were missing on exception paths; the strict pairing of every
// exit with its entry is checked by the trace tests in plugin_test.cc.
#include <catch2/catch.hpp>

#include <algorithm>
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


// Runs `exe` with libhcct preloaded and returns the main thread's tree.
Tree record(const std::string &exe, const char *expected_output) {
  const ha::ThreadProfile t = record_cct_by_routine(exe, expected_output);

  ha::Symbolizer symbols(t.modules, nullptr, [](const std::string &w) { FAIL_CHECK(w); });
  std::vector<Path> paths(t.nodes.size());
  Tree tree;
  uint64_t total = 0;
  for (uint32_t i = 1; i < t.nodes.size(); ++i) {
    const ha::Node &n = t.nodes[i];
    const ha::Symbol &s = symbols.routine(n.routine);
    INFO("node " << i << ": " << s.function);
    CHECK(s.resolved);
    paths[i] = paths[n.parent];
    paths[i].push_back(s.function);
    tree[paths[i]] += n.count;
    total += n.count;
  }
  CHECK(total == t.meta.calls);
  return tree;
}

// The tree the runtime records when the functions in `removed` have no probes: their nodes vanish
// and their callees' contexts lose them (with key=routine a context is the sequence of instrumented
// functions on the stack), so siblings that become equal merge and their counts add.
Tree contract(const Tree &tree, const std::set<std::string> &removed) {
  Tree out;
  for (const auto &[path, count] : tree) {
    if (removed.count(path.back()))
      continue;
    Path kept;
    for (const std::string &fn : path)
      if (!removed.count(fn))
        kept.push_back(fn);
    out[kept] += count;
  }
  return out;
}

std::set<std::string> functions(const Tree &tree) {
  std::set<std::string> names;
  for (const auto &[path, count] : tree)
    names.insert(path.begin(), path.end());
  return names;
}

uint64_t count_of(const Tree &tree, const Path &path) {
  auto it = tree.find(path);
  return it == tree.end() ? 0 : it->second;
}

// Sum and deepest nesting of the contexts of `fn`.
struct Occurrences {
  uint64_t calls = 0;
  size_t max_depth = 0;  // most `fn` frames on one path
};
Occurrences occurrences(const Tree &tree, const std::string &fn) {
  Occurrences o;
  for (const auto &[path, count] : tree) {
    if (path.back() != fn)
      continue;
    o.calls += count;
    o.max_depth = std::max<size_t>(o.max_depth, std::count(path.begin(), path.end(), fn));
  }
  return o;
}

void check_c_tree(const Tree &t) {
  INFO(describe(t));
  CHECK(count_of(t, {"main"}) == 1);
  CHECK(count_of(t, {"main", "apply"}) == 10);
  CHECK(count_of(t, {"main", "apply", "square"}) == 5);
  CHECK(count_of(t, {"main", "apply", "cube"}) == 5);
  CHECK(count_of(t, {"main", "fib"}) == 1);
  Occurrences fib = occurrences(t, "fib");
  CHECK(fib.calls == 1973);    // 2 * F(16) - 1
  CHECK(fib.max_depth == 15);  // fib(15) down to fib(1)
  CHECK(count_of(t, {"main", "lib_sum"}) == 1);
  CHECK(count_of(t, {"main", "lib_sum", "lib_step"}) == 100);
  CHECK(count_of(t, {"main", "lib_each"}) == 1);
  CHECK(count_of(t, {"main", "lib_each", "square"}) == 20);  // called back from the library
  // hidden() is no_instrument_function: its callee appears directly under quiet().
  CHECK(count_of(t, {"main", "quiet", "leaf_under_hidden"}) == 3);
  CHECK(functions(t).count("hidden") == 0);
}

void check_cxx_tree(const Tree &t) {
  INFO(describe(t));
  const std::string d = "descend(int, int*)", guard = "Guard::~Guard()";
  CHECK(count_of(t, {"main"}) == 1);
  CHECK(count_of(t, {"main", "run_shapes(Shape* const*, int)", "Circle::area() const"}) == 6);
  CHECK(count_of(t, {"main", "run_shapes(Shape* const*, int)", "Square::area() const",
                     "Square::side() const"}) == 6);
  CHECK(count_of(t, {"main", "int sum_twice<int>(int)", "int twice<int>(int)"}) == 5);
  CHECK(count_of(t, {"main", "double sum_twice<double>(int)", "double twice<double>(double)"}) == 5);
  // Exceptions: each of the 4 rounds unwinds 4 descend frames; the exit probes run during unwinding,
  // so every round lands in the same contexts, each destructor under its own frame.
  CHECK(count_of(t, {"main", d}) == 4);
  CHECK(count_of(t, {"main", d, guard}) == 4);
  CHECK(count_of(t, {"main", d, d, d, d}) == 4);
  CHECK(count_of(t, {"main", d, d, d, d, guard}) == 4);
  CHECK(count_of(t, {"main", d, d, d, d, "fail(int)"}) == 4);
  CHECK(occurrences(t, d).max_depth == 4);
  // Mutual recursion: is_even(9) > is_odd(8) > ... > is_odd(0), 10 frames.
  CHECK(occurrences(t, "is_even(unsigned int)").calls == 5);
  CHECK(occurrences(t, "is_odd(unsigned int)").calls == 5);
  CHECK(occurrences(t, "is_odd(unsigned int)").max_depth == 5);
  // The lambda, called through a template.
  uint64_t lambda = 0;
  for (const auto &[path, count] : t)
    if (path.size() == 3 && path[0] == "main" && path[1].rfind("int for_n<", 0) == 0 &&
        path[2] == "main::{lambda(int)#1}::operator()(int) const")
      lambda += count;
  CHECK(lambda == 7);
  CHECK(count_of(t, {"main", "lib_sum", "lib_step"}) == 50);
  CHECK(count_of(t, {"main", "lib_each", "scaled(int)"}) == 12);
}

} // namespace

TEST_CASE("plugin builds record the same CCT as -finstrument-functions builds", "[plugin][e2e]") {
  for (const char *opt : {"-O0", "-O2", "-O3"}) {
    INFO(opt);
    Built plugin = build_examples(std::string("e2e_plugin") + opt, opt, plugin_flags());
    Built ref = build_examples(std::string("e2e_ref") + opt, opt, "-finstrument-functions");

    Tree c = record(plugin.c_exe, kCOutput);
    check_c_tree(c);
    Tree c_ref = record(ref.c_exe, kCOutput);
    CHECK(c == c_ref);

    Tree cxx = record(plugin.cxx_exe, kCxxOutput);
    check_cxx_tree(cxx);
    Tree cxx_ref = record(ref.cxx_exe, kCxxOutput);
    INFO("plugin:\n" << describe(cxx) << "reference:\n" << describe(cxx_ref));
    CHECK(cxx == cxx_ref);
  }
}

TEST_CASE("selection options shape the recorded CCT", "[plugin][e2e]") {
  // exclude= removes inner functions (C: apply, so square and cube move up to main; C++: is_odd and
  // the virtual area()s), min-size=3 removes the two-statement leaves (square, lib_step, ...).
  Built ref = build_examples("e2e_select_ref", "-O2", "-finstrument-functions");
  std::string list = work_dir("e2e_select_list") + "/list.txt";
  for (const char *lang : {"C", "C++"}) {
    INFO(lang);
    bool c = std::string(lang) == "C";
    std::filesystem::remove(list);
    Built plugin = build_examples(std::string("e2e_select_") + (c ? "c" : "cxx"), "-O2",
                                  plugin_flags({"exclude=^(apply|is_odd)$", "exclude=::area$",
                                                "min-size=3", "list=" + list}));
    Tree got = record(c ? plugin.c_exe : plugin.cxx_exe, c ? kCOutput : kCxxOutput);
    Tree full = record(c ? ref.c_exe : ref.cxx_exe, c ? kCOutput : kCxxOutput);

    // What the plugin instrumented, by demangled symbol (the list's third column).
    std::set<std::string> instrumented;
    for (const ListEntry &e : read_list(list))
      instrumented.insert(ha::demangle(e.symbol.c_str()));
    std::set<std::string> removed;
    for (const std::string &fn : functions(full))
      if (!instrumented.count(fn))
        removed.insert(fn);
    INFO("plugin:\n" << describe(got) << "reference:\n" << describe(full));
    CHECK(got == contract(full, removed));
    CHECK(!removed.empty());

    if (c) {
      CHECK(removed == std::set<std::string>{"apply", "square", "lib_step", "leaf_under_hidden"});
      CHECK(count_of(got, {"main", "cube"}) == 5);  // reparented from apply
      CHECK(count_of(got, {"main", "lib_sum"}) == 1);
      CHECK(count_of(got, {"main", "lib_sum", "lib_step"}) == 0);
    } else {
      CHECK(removed.count("is_odd(unsigned int)"));
      CHECK(removed.count("Circle::area() const"));
      CHECK(removed.count("Square::area() const"));
      // is_even's recursion now nests directly: 5 is_even frames.
      CHECK(occurrences(got, "is_even(unsigned int)").max_depth == 5);
      // Square::side is a two-statement leaf: gone, not reparented.
      CHECK(removed.count("Square::side() const"));
      CHECK(count_of(got, {"main", "run_shapes(Shape* const*, int)"}) == 1);
    }
  }
}

TEST_CASE("with profiling off the runtime records nothing", "[plugin][e2e]") {
  Built plugin = build_examples("e2e_off", "-O2", plugin_flags());
  std::string out = plugin.dir + "/off.hcct";
  RunResult r = run("env HCCT_OPTIONS=" + sh_quote("mode=off:out=" + out) + " LD_PRELOAD=" +
                    sh_quote(HCCT_RUNTIME_SO) + " " + sh_quote(plugin.cxx_exe));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output == kCxxOutput);
  bool any_profile = false;
  if (std::filesystem::exists(out))
    for (const auto &entry : std::filesystem::directory_iterator(out))
      any_profile |= ha::parse_profile_file_name(entry.path().filename().string()).has_value();
  CHECK(!any_profile);
}
