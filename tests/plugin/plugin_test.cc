// Tests of the GCC plugin (gcc-plugin/hcct_plugin.cc) that need no runtime: the selection options'
// effect on the instrumented-function list, argument validation, -fchecking builds of C and C++ at
// -O0/-O2/-O3 with a -fPIC shared library, and the probes' behaviour under a tracing stand-in for
// the runtime (tests/plugin/trace_runtime.c).
#include <catch2/catch.hpp>

#include <cxxabi.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "plugin_util.h"

using namespace plugintest;
using Names = std::set<std::string>;

namespace {

const Names kAllSelectable = {
    "app::tiny_leaf",  "app::tiny_caller",  "app::big_leaf",       "app::Widget::check",
    "app::twice<int>", "app::twice<double>", "util::helper",        "main",
    "hdr::header_leaf", "hdr::header_caller",
};

Names without(Names names, const Names &removed) {
  for (const std::string &n : removed)
    names.erase(n);
  return names;
}

} // namespace

TEST_CASE("default selection: every function but the never-instrumented ones", "[plugin][select]") {
  std::string dir = work_dir("select_default");
  // opted_out (no_instrument_function) and naked_fn (naked) are never listed.
  for (const char *opt : {"-O0", "-O2", "-O3"}) {
    INFO(opt);
    CHECK(selected_names(dir, {}, opt) == kAllSelectable);
  }
}

TEST_CASE("include= keeps only matching qualified names", "[plugin][select]") {
  std::string dir = work_dir("select_include");
  CHECK(selected_names(dir, {"include=^app::"}) ==
        Names{"app::tiny_leaf", "app::tiny_caller", "app::big_leaf", "app::Widget::check",
              "app::twice<int>", "app::twice<double>"});
  // Several include= options select the union; the match is a search, anchors are the user's.
  CHECK(selected_names(dir, {"include=^util::", "include=^main$"}) == Names{"util::helper", "main"});
  CHECK(selected_names(dir, {"include=Widget::check"}) == Names{"app::Widget::check"});
  CHECK(selected_names(dir, {"include=twice<double>$"}) == Names{"app::twice<double>"});
  CHECK(selected_names(dir, {"include=^nothing_matches$"}).empty());
}

TEST_CASE("exclude= removes matching names, also from an include= selection", "[plugin][select]") {
  std::string dir = work_dir("select_exclude");
  CHECK(selected_names(dir, {"exclude=::twice<"}) ==
        without(kAllSelectable, {"app::twice<int>", "app::twice<double>"}));
  CHECK(selected_names(dir, {"exclude=^hdr::", "exclude=^main$"}) ==
        without(kAllSelectable, {"hdr::header_leaf", "hdr::header_caller", "main"}));
  CHECK(selected_names(dir, {"include=^app::", "exclude=tiny|twice"}) ==
        Names{"app::big_leaf", "app::Widget::check"});
}

TEST_CASE("include-file= and exclude-file= select by source file or directory", "[plugin][select]") {
  std::string dir = work_dir("select_file");
  const Names header = {"hdr::header_leaf", "hdr::header_caller"};
  CHECK(selected_names(dir, {"exclude-file=selection\\.h$"}) == without(kAllSelectable, header));
  CHECK(selected_names(dir, {"include-file=selection\\.h$"}) == header);
  // Paths are absolute, so a directory pattern works for every file below it.
  CHECK(selected_names(dir, {"exclude-file=/examples/plugin/"}).empty());
  CHECK(selected_names(dir, {"include-file=^/"}) == kAllSelectable);
  // File and name rules combine.
  CHECK(selected_names(dir, {"include-file=selection\\.cc$", "include=^app::Widget"}) ==
        Names{"app::Widget::check"});
}

TEST_CASE("min-size= skips only leaf functions below the threshold", "[plugin][select]") {
  std::string dir = work_dir("select_size");
  // The two-statement leaves are tiny_leaf, header_leaf and the two twice<> instances.
  const Names tiny = {"app::tiny_leaf", "hdr::header_leaf", "app::twice<int>", "app::twice<double>"};
  CHECK(selected_names(dir, {"min-size=0"}) == kAllSelectable);
  CHECK(selected_names(dir, {"min-size=2"}) == kAllSelectable);
  CHECK(selected_names(dir, {"min-size=3"}) == without(kAllSelectable, tiny));
  // big_leaf is a leaf, just a bigger one; tiny_caller stays however small, since it makes a call
  // and skipping it would reparent its callee in the tree.
  Names big = without(kAllSelectable, tiny);
  big.erase("app::big_leaf");
  CHECK(selected_names(dir, {"min-size=100"}) == big);
  CHECK(big.count("app::tiny_caller"));
}

TEST_CASE("selection does not depend on the optimisation level", "[plugin][select]") {
  // The statement count is taken before lowering, so a function's fate is the same at every -O.
  std::string dir = work_dir("select_levels");
  Names o0 = selected_names(dir, {"min-size=3", "exclude=helper"}, "-O0");
  CHECK(selected_names(dir, {"min-size=3", "exclude=helper"}, "-O2") == o0);
  CHECK(selected_names(dir, {"min-size=3", "exclude=helper"}, "-O3") == o0);
}

TEST_CASE("list= writes name, absolute file:line and symbol, appending", "[plugin][select][list]") {
  std::string dir = work_dir("list_format");
  std::string list = dir + "/list.txt";
  // Compile through a relative path: the list still names the file absolutely and normalised.
  std::filesystem::path src = std::filesystem::path(example("selection.cc"));
  std::string rel = "../" + src.parent_path().filename().string() + "/./" + src.filename().string();
  std::string cmd = "cd " + sh_quote(src.parent_path().string()) + " && " + HCCT_CXX + " -O2 -c " +
                    sh_quote(rel) + " -o " + sh_quote(dir + "/a.o") + " " + plugin_flags({"list=" + list});
  RunResult r = run(cmd);
  INFO(r.output);
  REQUIRE(r.status == 0);
  r = run(cmd);  // a second compile appends
  REQUIRE(r.status == 0);
  std::vector<ListEntry> entries = read_list(list);
  CHECK(entries.size() == 2 * kAllSelectable.size());
  std::string canonical = std::filesystem::canonical(src).string();
  bool found_tiny = false, found_header = false;
  for (const ListEntry &e : entries) {
    if (e.name == "app::tiny_leaf") {
      found_tiny = true;
      CHECK(e.file == canonical);
      CHECK(e.line == 9);
      CHECK(e.symbol == "_ZN3app9tiny_leafEi");
    }
    if (e.name == "hdr::header_leaf") {
      found_header = true;
      CHECK(e.file == src.parent_path().string() + "/selection.h");
      CHECK(e.symbol == "_ZN3hdr11header_leafEi");
    }
    if (e.name == "main")
      CHECK(e.symbol == "main");
  }
  CHECK(found_tiny);
  CHECK(found_header);
}

TEST_CASE("list= stays line-intact under parallel compiles", "[plugin][select][list]") {
  std::string dir = work_dir("list_parallel");
  std::string list = dir + "/list.txt";
  const int jobs = 8;
  std::string cmd;
  for (int i = 0; i < jobs; ++i)
    cmd += std::string(HCCT_CXX) + " -O0 -c " + sh_quote(example("selection.cc")) + " -o " +
           sh_quote(dir + "/o" + std::to_string(i) + ".o") + " " + plugin_flags({"list=" + list}) +
           " & ";
  cmd += "wait";
  RunResult r = run(cmd);
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::vector<ListEntry> entries = read_list(list);  // fails on any torn line
  CHECK(entries.size() == jobs * kAllSelectable.size());
  CHECK(list_names(entries) == kAllSelectable);
}

// ----------------------------------------------------------------------------------------------
// Argument validation: gcc accepts any -fplugin-arg-*; the plugin must refuse what it cannot honour.

namespace {

void expect_compile_error(const std::vector<std::string> &args, const std::string &message) {
  std::string dir = work_dir("bad_args");
  RunResult r = run(std::string(HCCT_CC) + " -O0 -c " + sh_quote(example("cct_lib.c")) + " -o " +
                    sh_quote(dir + "/x.o") + " " + plugin_flags_as_given(args));
  INFO("args: " << args.front() << "\noutput: " << r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("error") != std::string::npos);
  CHECK(r.output.find(message) != std::string::npos);
  CHECK(!std::filesystem::exists(dir + "/x.o"));
}

} // namespace

TEST_CASE("bad plugin arguments are compile errors", "[plugin][args]") {
  expect_compile_error({"incldue=foo"}, "unknown option '-fplugin-arg-hcct_plugin-incldue'");
  expect_compile_error({"verbose"}, "unknown option");
  expect_compile_error({"include=("}, "invalid regular expression");
  expect_compile_error({"exclude=a{2,1}"}, "invalid regular expression");
  expect_compile_error({"exclude-file=[z-a]"}, "invalid regular expression");
  expect_compile_error({"include-file=*+"}, "invalid regular expression");
  expect_compile_error({"include"}, "needs a regular expression");
  expect_compile_error({"exclude="}, "needs a regular expression");
  expect_compile_error({"min-size=abc"}, "expected a non-negative decimal number");
  expect_compile_error({"min-size=-1"}, "expected a non-negative decimal number");
  expect_compile_error({"min-size=12abc"}, "expected a non-negative decimal number");
  expect_compile_error({"min-size= 3"}, "expected a non-negative decimal number");
  expect_compile_error({"min-size"}, "expected a non-negative decimal number");
  expect_compile_error({"min-size=99999999999999999999999"}, "expected a non-negative decimal number");
  expect_compile_error({"list=/nonexistent-dir/list.txt"}, "cannot open");
  expect_compile_error({"list"}, "needs a file name");
  expect_compile_error({"stage=middle"}, "expected 'early' (before inlining) or 'late'");
  expect_compile_error({"stage"}, "expected 'early' (before inlining) or 'late'");
  expect_compile_error({"stage=late", "stage=early"}, "given twice");
  expect_compile_error({"unwind-table=maybe"}, "expected 'yes' (a site table per unit) or 'no'");
  expect_compile_error({"unwind-table"}, "expected 'yes' (a site table per unit) or 'no'");
  expect_compile_error({"unwind-table=yes", "unwind-table=no"}, "given twice");
  expect_compile_error({"clock=tick"}, "expected 'gate' (test the gate at both probes) or 'count'");
  expect_compile_error({"clock"}, "expected 'gate' (test the gate at both probes) or 'count'");
  expect_compile_error({"clock=gate", "clock=count"}, "given twice");
  std::string dir = work_dir("bad_args_list");
  expect_compile_error({"list=" + dir + "/a", "list=" + dir + "/b"}, "given twice");
}

TEST_CASE("stage=late rejects -flto", "[plugin][args]") {
  std::string dir = work_dir("late_lto");
  RunResult r = run(std::string(HCCT_CC) + " -O2 -flto -c " + sh_quote(example("cct_lib.c")) + " -o " +
                    sh_quote(dir + "/x.o") + " " + plugin_flags({"stage=late"}));
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("does not support '-flto'") != std::string::npos);
}

TEST_CASE("the default stage is late, and early under -flto", "[plugin][args][late]") {
  // inner() is inlined into outer() at -O2: the late stage probes outer only, the early stage
  // both. Under -flto the late stage cannot run, so naming no stage there means early (no error).
  std::string dir = work_dir("default_stage");
  std::string src = dir + "/d.c";
  write_file(src, "extern int g(int);\n"
                  "static inline int inner(int x) { return g(x) * 2; }\n"
                  "int outer(int x) { return inner(x) + inner(x + 1); }\n");
  struct Case {
    const char *flags;
    std::set<std::string> expected;
  };
  for (const Case &c : {Case{"-O2", {"outer"}}, Case{"-O2 -flto", {"inner", "outer"}}}) {
    INFO(c.flags);
    std::string list = dir + "/list.txt";
    std::filesystem::remove(list);
    RunResult r = run(std::string(HCCT_CC) + " " + c.flags + " -c -o " + sh_quote(dir + "/d.o") + " " +
                      sh_quote(src) + " " + plugin_flags_as_given({"list=" + list}));
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output.empty());
    CHECK(list_names(read_list(list)) == c.expected);
  }
}

TEST_CASE("stage=late: probes in the optimised body only, in every clone, at every level",
          "[plugin][codegen][late]") {
  // inner() is inlined into outer() at -O2: only outer gets probes there; at -O0 nothing is
  // inlined and both do. -fdump-tree-optimized shows the probes (the late pass runs before it).
  std::string dir = work_dir("late_codegen");
  std::string src = dir + "/l.c";
  write_file(src, "extern int g(int);\n"
                  "static inline int inner(int x) { return g(x) * 2; }\n"
                  "int outer(int x) { return inner(x) + inner(x + 1); }\n");
  for (const char *opt : {"-O0", "-O2"}) {
    INFO(opt);
    std::string list = dir + "/list" + opt + ".txt";
    std::filesystem::remove(list);
    RunResult r = run(std::string(HCCT_CC) + " " + opt + " -fchecking -c -o " + sh_quote(dir + "/l.o") +
                      " " + sh_quote(src) + " " + plugin_flags({"stage=late", "list=" + list}));
    INFO(r.output);
    REQUIRE(r.status == 0);
    std::set<std::string> names = list_names(read_list(list));
    if (std::string(opt) == "-O0")
      CHECK(names == std::set<std::string>{"inner", "outer"});
    else
      CHECK(names == std::set<std::string>{"outer"});
    RunResult nm = run("nm " + sh_quote(dir + "/l.o"));
    CHECK(nm.output.find(" w __hcct_enter_open\n") != std::string::npos);
    CHECK(nm.output.find(" w __hcct_exit_open\n") != std::string::npos);
  }
}

TEST_CASE("good arguments compile cleanly", "[plugin][args]") {
  std::string dir = work_dir("good_args");
  RunResult r = run(std::string(HCCT_CC) + " -O2 -Wall -Werror -c " + sh_quote(example("cct_lib.c")) +
                    " -o " + sh_quote(dir + "/x.o") + " " +
                    plugin_flags({"include=.", "exclude=^$", "include-file=.", "exclude-file=^$",
                                  "min-size=4", "list=" + dir + "/l.txt"}));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.empty());
}

// ----------------------------------------------------------------------------------------------
// Builds under -fchecking and probe behaviour at run time.

namespace {

// Runs `exe` under the trace runtime and returns its report, per function by demangled name.
Trace traced_run(const std::string &exe, const char *expected_output,
                 const std::string &env = "") {
  std::string out = exe + ".trace";
  RunResult r = run("env " + env + " HCCT_TRACE_OUT=" + sh_quote(out) +
                    " LD_PRELOAD=" + sh_quote(HCCT_TRACE_RUNTIME) + " " + sh_quote(exe));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output == expected_output);
  Trace t = read_trace(out);
  Trace demangled = t;
  demangled.calls.clear();
  for (const auto &[name, n] : t.calls) {
    int status = 0;
    char *d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    demangled.calls[status == 0 && d ? d : name] += n;
    std::free(d);
  }
  return demangled;
}

void check_balanced(const Trace &t) {
  CHECK(t.totals.at("enters") > 0);
  CHECK(t.totals.at("exits") == t.totals.at("enters"));
  CHECK(t.totals.at("mismatches") == 0);
  CHECK(t.totals.at("frame_mismatches") == 0);
  CHECK(t.totals.at("open") == 0);
  CHECK(t.totals.at("bad_sites") == 0);
  CHECK(t.totals.at("overflow") == 0);
}

unsigned long calls(const Trace &t, const std::string &fn) {
  auto it = t.calls.find(fn);
  return it == t.calls.end() ? 0 : it->second;
}

void check_c_counts(const Trace &t) {
  check_balanced(t);
  CHECK(calls(t, "main") == 1);
  CHECK(calls(t, "apply") == 10);
  CHECK(calls(t, "square") == 25);  // 5 through apply, 20 as lib_each's callback
  CHECK(calls(t, "cube") == 5);
  CHECK(calls(t, "fib") == 1973);  // 2 * F(16) - 1
  CHECK(calls(t, "lib_sum") == 1);
  CHECK(calls(t, "lib_step") == 100);
  CHECK(calls(t, "lib_each") == 1);
  CHECK(calls(t, "quiet") == 1);
  CHECK(calls(t, "hidden") == 0);  // no_instrument_function
  CHECK(calls(t, "leaf_under_hidden") == 3);
  CHECK(t.totals.at("enters") == 2120);  // nothing else is instrumented
}

void check_cxx_counts(const Trace &t) {
  check_balanced(t);
  CHECK(calls(t, "main") == 1);
  CHECK(calls(t, "run_shapes(Shape* const*, int)") == 1);
  CHECK(calls(t, "Circle::area() const") == 6);
  CHECK(calls(t, "Square::area() const") == 3);
  CHECK(calls(t, "Square::side() const") == 6);
  CHECK(calls(t, "int sum_twice<int>(int)") == 1);
  CHECK(calls(t, "double sum_twice<double>(int)") == 1);
  CHECK(calls(t, "int twice<int>(int)") == 5);
  CHECK(calls(t, "double twice<double>(double)") == 5);
  CHECK(calls(t, "main::{lambda(int)#1}::operator()(int) const") == 7);
  CHECK(calls(t, "is_even(unsigned int)") == 5);
  CHECK(calls(t, "is_odd(unsigned int)") == 5);
  CHECK(calls(t, "descend(int, int*)") == 16);
  CHECK(calls(t, "fail(int)") == 4);
  CHECK(calls(t, "Guard::~Guard()") == 16);  // all run by the unwinder: every round throws
  CHECK(calls(t, "scaled(int)") == 12);
  CHECK(calls(t, "lib_sum") == 1);
  CHECK(calls(t, "lib_step") == 50);
  CHECK(calls(t, "lib_each") == 1);
  // Implicit (artificial) special members are instrumented as with -finstrument-functions.
  CHECK(calls(t, "Circle::Circle(double)") == 6);
  CHECK(calls(t, "Shape::Shape()") == 9);
}

} // namespace

TEST_CASE("examples build under -fchecking and run correctly without any runtime", "[plugin][build]") {
  for (const char *opt : {"-O0", "-O2", "-O3"}) {
    INFO(opt);
    Built b = build_examples(std::string("nort") + opt, opt, plugin_flags());
    // The probes reference the runtime weakly: no libhcct, no link error, no crash.
    for (const std::string &file : {b.lib, b.c_exe, b.cxx_exe}) {
      RunResult nm = run("nm -D " + sh_quote(file));
      INFO(file << ":\n" << nm.output);
      for (const char *sym : {"__hcct_gate", "__hcct_enter_open", "__hcct_exit_open"}) {
        CHECK(nm.output.find(std::string("w ") + sym + "\n") != std::string::npos);
        CHECK(nm.output.find(std::string("U ") + sym + "\n") == std::string::npos);
      }
    }
    RunResult r = run(sh_quote(b.c_exe));
    CHECK(r.status == 0);
    CHECK(r.output == kCOutput);
    r = run(sh_quote(b.cxx_exe));
    CHECK(r.status == 0);
    CHECK(r.output == kCxxOutput);
  }
}

TEST_CASE("probes pair up exactly, exceptions included, at every level", "[plugin][build][trace]") {
  for (const char *opt : {"-O0", "-O2", "-O3"}) {
    INFO(opt);
    Built b = build_examples(std::string("trace") + opt, opt, plugin_flags());
    SECTION(std::string("C ") + opt) { check_c_counts(traced_run(b.c_exe, kCOutput)); }
    SECTION(std::string("C++ ") + opt) { check_cxx_counts(traced_run(b.cxx_exe, kCxxOutput)); }
  }
}

// tests/plugin/programs/std_members.cc spends its calls in small members of std::string,
// std::vector and std::map; several are libstdc++'s explicit instantiations (`extern template`),
// whose out-of-line copy is libstdc++.so's, without probes: they are seen only where gcc inlines
// them, so the two builds see the same functions only if gcc makes the same inlining decisions in
// both (gcc-plugin/hcct_plugin.cc, gate_pending_probes). The trace runtime also implements the
// -finstrument-functions hooks.
TEST_CASE("stage=early probes the same functions as -finstrument-functions, at every level",
          "[plugin][build][trace][same]") {
  std::string dir = work_dir("same_functions");
  std::string src = sh_quote(std::string(HCCT_PLUGIN_PROGRAMS) + "/std_members.cc");
  const char *output = "235 1060 31 45\n";
  const std::string size = "std::__cxx11::basic_string<char, std::char_traits<char>, "
                           "std::allocator<char> >::size() const";
  for (const char *opt : {"-O0", "-O1", "-O2", "-O3", "-Os"}) {
    INFO(opt);
    std::string ref = dir + "/ref" + opt, plugin = dir + "/plugin" + opt;
    for (const std::string &cmd :
         {std::string(HCCT_CXX) + " " + opt + " -finstrument-functions " + src + " -o " + sh_quote(ref),
          std::string(HCCT_CXX) + " " + opt + " -fchecking " + plugin_flags() + " " + src + " -o " +
              sh_quote(plugin)}) {
      RunResult r = run(cmd);
      INFO(cmd << "\n" << r.output);
      REQUIRE(r.status == 0);
    }
    Trace want = traced_run(ref, output);
    Trace got = traced_run(plugin, output);
    check_balanced(got);
    CHECK(want.totals.at("mismatches") == 0);
    std::string diff;
    for (const auto &[fn, n] : want.calls)
      if (calls(got, fn) != n)
        diff += "  " + fn + ": -finstrument-functions " + std::to_string(n) + ", plugin " +
                std::to_string(calls(got, fn)) + "\n";
    for (const auto &[fn, n] : got.calls)
      if (!want.calls.count(fn))
        diff += "  " + fn + ": -finstrument-functions 0, plugin " + std::to_string(n) + "\n";
    INFO("functions entered a different number of times:\n" << diff);
    CHECK(got.calls == want.calls);
    // The premise: with optimisation for speed, inlined copies of libstdc++'s own instances report.
    if (std::string(opt) != "-O0" && std::string(opt) != "-Os")
      CHECK(calls(want, size) > 0);
  }
}

TEST_CASE("a closed gate keeps every probe out of the runtime", "[plugin][build][trace]") {
  Built b = build_examples("gate_closed", "-O2", plugin_flags());
  for (const std::string &exe : {b.c_exe, b.cxx_exe}) {
    Trace t = traced_run(exe, exe == b.c_exe ? kCOutput : kCxxOutput, "HCCT_TRACE_GATE=0");
    CHECK(t.totals.at("enters") == 0);
    CHECK(t.totals.at("exits") == 0);
  }
}

TEST_CASE("selection options change what the runtime sees", "[plugin][build][trace]") {
  Built b = build_examples("select_trace", "-O2", plugin_flags({"exclude=^(fib|cube)$", "min-size=3"}));
  Trace t = traced_run(b.c_exe, kCOutput);
  check_balanced(t);
  CHECK(calls(t, "fib") == 0);
  CHECK(calls(t, "cube") == 0);
  // square (2 statements) and lib_step are tiny leaves; apply and lib_sum make calls.
  CHECK(calls(t, "square") == 0);
  CHECK(calls(t, "lib_step") == 0);
  CHECK(calls(t, "apply") == 10);
  CHECK(calls(t, "lib_sum") == 1);
  CHECK(calls(t, "main") == 1);
}

TEST_CASE("one probe shape at both stages: a load, a test of the byte in memory and a not-taken branch, calls in the "
          "function, the exit probe never a tail call",
          "[plugin][codegen]") {
  // The hot path of someone else's program: check the shape documented in docs/GCC-PLUGIN.md.
  // v's exit probe sits in tail position (a void function ending in a call): gcc must not turn it
  // into a jump, since probe ABI 2's exit passes no call site for the runtime to detect that.
  std::string dir = work_dir("codegen");
  std::string src = dir + "/f.c";
  write_file(src, "extern int g(int);\nextern void h(int);\n"
                  "int f(int x) { return g(x) + 1; }\n"
                  "void v(int x) { h(x); }\n");
  auto count = [](const std::string &text, const std::string &needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
      ++n;
    return n;
  };
  for (const char *opt : {"-O2", "-O3", "-Os"}) {
    for (const char *stage : {"stage=early", "stage=late"}) {
      INFO(opt << " " << stage);
      RunResult r = run(std::string(HCCT_CC) + " " + opt + " -fPIC -fchecking -S -o - " +
                        sh_quote(src) + " " + plugin_flags({stage}));
      INFO(r.output);
      REQUIRE(r.status == 0);
      const std::string &all = r.output;
      auto body_of = [&](const std::string &fn) {
        size_t begin = all.find("\n" + fn + ":\n");
        size_t end = all.find(".size\t" + fn + ", .-" + fn);
        REQUIRE(begin != std::string::npos);
        REQUIRE(end != std::string::npos);
        return all.substr(begin, end - begin);
      };
      std::string body = body_of("f");
      // Each probe reloads the unit's gate pointer (RIP-relative, no GOT) and tests the byte it
      // points to: no select, no GOT load of the gate in the function.
      CHECK(count(body, "__hcct_gate_ptr(%rip)") == 2);
      CHECK(count(body, "__hcct_gate@GOTPCREL") == 0);
      CHECK(count(body, "cmov") == 0);
      // The runtime's ABI 2 entries are called through their GOT slots, not PLT stubs, from the
      // function's own text.
      CHECK(count(body, "call\t*__hcct_enter_open@GOTPCREL(%rip)") == 1);
      CHECK(count(body, "call\t*__hcct_exit_open@GOTPCREL(%rip)") == 1);
      CHECK(count(body, "@PLT") == 1);  // g only
      CHECK(count(body, ".text.unlikely") == 0);
      CHECK(count(body, "f.cold") == 0);
      // The byte is tested in memory, one instruction (a volatile byte would take a movzbl and a
      // testb: combine leaves volatile memory alone).
      CHECK(count(body, "movzbl") == 0);
      CHECK(count(body, "cmpb\t$0, (%r") == 2);
      // Off, the path through f falls through both tests: the first instruction after each test
      // of the gate byte is a not-taken jne. (-Os lays the calls out inline, jumping over them.)
      if (std::string(opt) != "-Os")
        CHECK(count(body, "cmpb\t$0, (%rax)\n\tjne\t") + count(body, "cmpb\t$0, (%rdx)\n\tjne\t") == 2);

      std::string vbody = body_of("v");
      CHECK(count(vbody, "call\t*__hcct_exit_open@GOTPCREL(%rip)") == 1);
      CHECK(count(vbody, "jmp\t*__hcct_exit_open") == 0);
      CHECK(count(all, "__hcct_enter\t") + count(all, "__hcct_exit\t") == 0);  // no ABI 1 entries

      // The unit's constructor points the gate pointer at __hcct_gate when the runtime is there,
      // and runs first among the module's constructors.
      CHECK(count(all, "\t.quad\t__hcct_gate_closed\n") == 1);  // the pointer's initial value
      CHECK(count(all, ".section\t.init_array.00001,") == 1);
      CHECK(count(all, "movq\t__hcct_gate@GOTPCREL(%rip), %rax") == 1);
      CHECK(count(all, "movq\t%rax, __hcct_gate_ptr(%rip)") == 1);
    }
  }
}

TEST_CASE("exit probes stay calls through -flto", "[plugin][codegen]") {
  // The tail-call pass runs again at link time, where the plugin is not loaded: what keeps the exit
  // probe a call must be in the streamed IR.
  std::string dir = work_dir("codegen_lto");
  std::string src = dir + "/v.c";
  write_file(src, "__attribute__((noinline)) void h(volatile int *p) { *p = 1; }\n"
                  "__attribute__((noinline)) void v(volatile int *p) { h(p); }\n"
                  "int main(void) { volatile int x = 0; v(&x); return x - 1; }\n");
  std::string exe = dir + "/v";
  RunResult r = run(std::string(HCCT_CC) + " -O2 -flto -fPIE -pie -fchecking -o " + sh_quote(exe) +
                    " " + sh_quote(src) + " " + plugin_flags());
  INFO(r.output);
  REQUIRE(r.status == 0);
  RunResult d = run("objdump -d --no-show-raw-insn " + sh_quote(exe));
  REQUIRE(d.status == 0);
  size_t begin = d.output.find("<v>:\n");
  REQUIRE(begin != std::string::npos);
  std::string vbody = d.output.substr(begin, d.output.find("\n\n", begin) - begin);
  INFO(vbody);
  CHECK(vbody.find("__hcct_exit_open") != std::string::npos);
  CHECK(vbody.find("jmp    *") == std::string::npos);  // no tail call through the GOT
  CHECK(run(sh_quote(exe)).status == 0);
}

TEST_CASE("a unit with no instrumented function gets no gate constructor", "[plugin][codegen]") {
  std::string dir = work_dir("codegen_none");
  std::string src = dir + "/n.c";
  write_file(src, "int n(int x) { return x + 1; }\nint table[4] = {1, 2, 3, 4};\n");
  RunResult r = run(std::string(HCCT_CC) + " -O2 -fPIC -fchecking -S -o - " + sh_quote(src) + " " +
                    plugin_flags({"exclude=^n$"}));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find(".init_array") == std::string::npos);
  CHECK(r.output.find("__hcct") == std::string::npos);
}

TEST_CASE("a unit that defines the runtime's symbols keeps them strong", "[plugin][codegen]") {
  // The runtime itself, or a stub, compiled with the plugin: the probes must use its definitions,
  // not declare the names weak (varasm's `.weak` would turn the definitions weak), and the runtime
  // entry points themselves get no probes.
  std::string dir = work_dir("unit_defines_runtime");
  std::string src = dir + "/rt.c";
  write_file(src, "unsigned char __hcct_gate = 1;\n"
                  "void __hcct_enter_open(void *fn, void *site) { (void)fn; (void)site; }\n"
                  "void __hcct_exit_open(void *fn) { (void)fn; }\n"
                  "int user(int x) { return x * 2; }\n");
  for (const char *opt : {"-O0", "-O2"}) {
    INFO(opt);
    std::string obj = dir + "/rt.o", list = dir + "/list.txt";
    std::filesystem::remove(list);
    RunResult r = run(std::string(HCCT_CC) + " " + opt + " -fchecking -c " + sh_quote(src) + " -o " +
                      sh_quote(obj) + " " + plugin_flags({"list=" + list}));
    INFO(r.output);
    REQUIRE(r.status == 0);
    RunResult nm = run("nm " + sh_quote(obj));
    INFO(nm.output);
    CHECK(nm.output.find(" D __hcct_gate\n") != std::string::npos);
    CHECK(nm.output.find(" T __hcct_enter_open\n") != std::string::npos);
    CHECK(nm.output.find(" T __hcct_exit_open\n") != std::string::npos);
    CHECK(list_names(read_list(list)) == std::set<std::string>{"user"});
  }
}
