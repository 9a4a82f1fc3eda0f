// The runtime end to end on compiled programs: exact counts against closed forms, the HCCT against
// the exact CCT of the same run, robustness (deep recursion, threads, fork, exceptions, longjmp,
// bad options, unwritable output) and symbolization (PIE, dlopen).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "harness.h"
#include "hcct/analysis/hot.h"

using namespace e2e;
namespace ha = hcct::analysis;
namespace fs = std::filesystem;

namespace {

const std::string kExamples = EXAMPLES_DIR;
const std::string kE2e = E2E_DIR;

// Number of fib calls at each recursion depth (1-based) of fib(n).
std::vector<uint64_t> fib_calls_by_depth(unsigned n) {
  std::vector<uint64_t> out;
  std::map<unsigned, uint64_t> level{{n, 1}};
  while (!level.empty()) {
    uint64_t total = 0;
    std::map<unsigned, uint64_t> next;
    for (auto &[m, c] : level) {
      total += c;
      if (m >= 2) {
        next[m - 1] += c;
        next[m - 2] += c;
      }
    }
    out.push_back(total);
    level = std::move(next);
  }
  return out;
}

std::map<NamePath, uint64_t> calls_expected(unsigned n, uint64_t rounds) {
  std::map<NamePath, uint64_t> want{{{"main"}, 1},
                                    {{"main", "work"}, 1},
                                    {{"main", "work", "square"}, rounds},
                                    {{"main", "work", "cube"}, rounds},
                                    {{"main", "work", "cube", "square"}, rounds}};
  NamePath path{"main"};
  for (uint64_t c : fib_calls_by_depth(n)) {
    path.push_back("fib");
    want[path] = c;
  }
  return want;
}

const ha::ThreadProfile &only_thread(const ha::ProfileSet &set) {
  REQUIRE(set.processes.size() == 1);
  REQUIRE(set.processes[0].threads.size() == 1);
  return set.processes[0].threads[0];
}

// Contexts below main in the exception and longjmp programs.
std::map<NamePath, uint64_t> unwinding_expected(const std::string &prefix, uint64_t rounds) {
  std::map<NamePath, uint64_t> want{{{"main"}, 1}, {{"main", "after"}, rounds}};
  NamePath path{"main"};
  for (int i = 1; i <= 10; ++i) {
    path.push_back(prefix + std::to_string(i));
    want[path] = rounds;
  }
  return want;
}

std::set<std::string> unwinding_names(const std::string &prefix) {
  std::set<std::string> keep{"main", "after"};
  for (int i = 1; i <= 10; ++i) keep.insert(prefix + std::to_string(i));
  return keep;
}

}  // namespace

TEST_CASE("exact CCT of the C example equals the closed form", "[e2e][cct]") {
  for (const char *key : {"site", "routine"}) {
    auto p = run_profiled({kExamples + "/calls", "18", "5000"}, std::string("mode=cct:key=") + key);
    REQUIRE(p.result.status == 0);
    auto set = ha::read_profiles(p.dir);
    const auto &t = only_thread(set);
    CHECK(named_counts(t) == calls_expected(18, 5000));
    CHECK(t.meta.unmatched_exits == 0);  // a typed META field since the tools know it
    CHECK(t.meta.calls == 2 + 3 * 5000 + 2 * 4181 - 1);  // main, work, 3R leaves, fib(18) calls
  }
}

TEST_CASE("exact CCT of the threaded C++ example equals the closed form", "[e2e][cct]") {
  const int threads = 3, iters = 7000;
  auto p = run_profiled({kExamples + "/shapes", std::to_string(threads), std::to_string(iters)}, "mode=cct");
  REQUIRE(p.result.status == 0);
  auto set = ha::read_profiles(p.dir);
  REQUIRE(set.processes.size() == 1);
  REQUIRE(set.processes[0].threads.size() == threads + 1);
  uint64_t fails = 0, odd_ok = 0, even_ok = 0;
  for (int i = 0; i < iters; ++i) {
    if (i % 7 == 0) ++fails;
    else if (i % 2) ++odd_ok;
    else ++even_ok;
  }
  std::map<NamePath, uint64_t> want{{{"worker"}, 1},
                                    {{"worker", "checked_area"}, uint64_t(iters)},
                                    {{"worker", "checked_area", "Square::area"}, odd_ok},
                                    {{"worker", "checked_area", "Circle::area"}, even_ok},
                                    {{"worker", "checked_area", "fail"}, fails},
                                    {{"worker", "scaled<double>"}, odd_ok + even_ok}};
  std::set<std::string> keep{"worker", "checked_area", "Square::area", "Circle::area", "fail",
                             "scaled<double>"};
  for (const auto &t : set.processes[0].threads) {
    auto got = projected_counts(t, keep);
    // Every exit found its frame, including exits gcc tail-calls from void functions' epilogues.
    CHECK(t.meta.unmatched_exits == 0);  // a typed META field since the tools know it
    if (t.meta.thread_seq == 0) CHECK(got.empty());
    else CHECK(got == want);
  }
}

TEST_CASE("the HCCT contains every hot context of the exact CCT of the same run", "[e2e][hcct]") {
  struct Case {
    std::vector<std::string> argv;
    std::string epsilon;
  };
  for (const Case &c : {Case{{kExamples + "/calls", "22", "20000"}, "0.002"},
                        Case{{kExamples + "/shapes", "2", "20000"}, "0.01"}}) {
    auto p = run_profiled(c.argv, "mode=hcct:exact=1:epsilon=" + c.epsilon);
    REQUIRE(p.result.status == 0);
    auto hcct = ha::read_profiles(p.dir);
    auto exact = ha::read_profiles(p.dir / "exact");
    REQUIRE(hcct.processes.size() == 1);
    REQUIRE(exact.processes[0].threads.size() == hcct.processes[0].threads.size());
    size_t hot_checked = 0;
    for (size_t k = 0; k < hcct.processes[0].threads.size(); ++k) {
      const auto &h = hcct.processes[0].threads[k];
      const auto &e = exact.processes[0].threads[k];
      REQUIRE(h.meta.calls == e.meta.calls);
      // Exact counts by (routine, site) path; within one run addresses are identical.
      std::map<std::vector<std::pair<uint64_t, uint64_t>>, uint64_t> truth;
      std::vector<std::vector<std::pair<uint64_t, uint64_t>>> epath(e.nodes.size());
      for (size_t i = 1; i < e.nodes.size(); ++i) {
        epath[i] = epath[e.nodes[i].parent];
        epath[i].emplace_back(e.nodes[i].routine, e.nodes[i].call_site);
        truth[epath[i]] = e.nodes[i].count;
      }
      std::vector<std::vector<std::pair<uint64_t, uint64_t>>> hpath(h.nodes.size());
      std::map<std::vector<std::pair<uint64_t, uint64_t>>, size_t> in_hcct;
      for (size_t i = 1; i < h.nodes.size(); ++i) {
        hpath[i] = hpath[h.nodes[i].parent];
        hpath[i].emplace_back(h.nodes[i].routine, h.nodes[i].call_site);
        in_hcct[hpath[i]] = i;
      }
      for (double phi : {0.05, 0.01, 0.002, 0.0005}) {
        auto hot_exact = ha::query_hot(e, phi);
        auto hot_hcct = ha::query_hot(h, phi);
        for (size_t i = 1; i < e.nodes.size(); ++i) {
          if (hot_exact.cls[i] != ha::NodeClass::hot) continue;
          ++hot_checked;
          auto it = in_hcct.find(epath[i]);
          REQUIRE(it != in_hcct.end());
          CHECK(hot_hcct.cls[it->second] == ha::NodeClass::hot);
          CHECK(h.nodes[it->second].count >= e.nodes[i].count);
          CHECK(h.nodes[it->second].count <= e.nodes[i].count + h.meta.min_count);
        }
        // And nothing reported hot is at or below floor((phi - epsilon) N).
        uint64_t cold = ha::hot_threshold(std::max(0.0, phi - h.meta.epsilon), h.meta.calls);
        for (size_t i = 1; i < h.nodes.size(); ++i)
          if (hot_hcct.cls[i] == ha::NodeClass::hot) CHECK(truth.at(hpath[i]) > cold);
      }
    }
    CHECK(hot_checked > 10);
  }
}

TEST_CASE("robustness: recursion one million frames deep", "[e2e][robustness]") {
  for (const char *mode : {"cct", "hcct"}) {
    auto p = run_profiled({kE2e + "/e2e_deep_recursion", "1000000"}, std::string("mode=") + mode);
    REQUIRE(p.result.status == 0);
    CHECK(p.result.out == "depth 1000000\n");
    auto set = ha::read_profiles(p.dir);
    const auto &worker = set.processes.at(0).threads.at(1);
    CHECK(worker.meta.calls == 1000001);  // run + 1,000,000 descend
    CHECK(worker.meta.max_depth == 1000001);
    if (std::string(mode) == "cct") {
      CHECK(worker.nodes.size() == 1000002);
      for (size_t i = 1; i < worker.nodes.size(); ++i) CHECK(worker.nodes[i].count == 1);
    }
  }
}

// What profiling adds to a program's peak resident set is its tree, its shadow stack and little
// else: never a copy of the profile file the size of the tree (the file streams out through a
// small buffer). Peak RSS with mode=cct against mode=empty, for a chain of 200,000 contexts (a file
// of 3.4 MB, which a whole-file buffer added): at most 48 bytes a node (sizeof(Node)), 16 a frame
// (sizeof(Frame)) and 8 a level of depth (the dump's walk keeps one index per level) over empty,
// plus 1 MB for the rest (thread state, the file buffer, the output directory). Measured: 14.4 MB
// over empty against a bound of 15.1 MB; 17.1 MB with the whole-file buffer.
TEST_CASE("memory: peak RSS over mode=empty stays within the tree and the shadow stack", "[e2e][robustness][memory]") {
  const std::string depth = "200000";
  auto empty = run({kE2e + "/e2e_deep_recursion", depth},
                   {std::string("LD_PRELOAD=") + HCCT_RUNTIME, "HCCT_OPTIONS=mode=empty"});
  REQUIRE(empty.status == 0);
  auto p = run_profiled({kE2e + "/e2e_deep_recursion", depth}, "mode=cct");
  REQUIRE(p.result.status == 0);
  auto set = ha::read_profiles(p.dir);
  const auto &worker = set.processes.at(0).threads.at(1);
  REQUIRE(worker.nodes.size() == 200002);
  const long nodes = long(worker.meta.nodes_peak ? worker.meta.nodes_peak : worker.nodes.size());
  const long bound_kb = (nodes * (48 + 16 + 8)) / 1024 + 1024;
  INFO("peak RSS empty " << empty.max_rss_kb << " KB, cct " << p.result.max_rss_kb << " KB, nodes " << nodes
                         << ", bound over empty " << bound_kb << " KB");
  CHECK(p.result.max_rss_kb - empty.max_rss_kb <= bound_kb);
}

TEST_CASE("robustness: 32 threads, thread churn, OpenMP and a thread live at exit", "[e2e][robustness]") {
  const int churn = 2000;
  auto p = run_profiled({kE2e + "/e2e_threads", std::to_string(churn)}, "mode=cct");
  REQUIRE(p.result.status == 0);
  CHECK(p.result.out == "done\n");
  CHECK(p.result.err.empty());
  auto set = ha::read_profiles(p.dir);
  REQUIRE(set.processes.size() == 1);
  const auto &threads = set.processes[0].threads;
  // main, the forever thread, 32 long-lived, the churned ones, 3 more OpenMP workers.
  CHECK(threads.size() == 1 + 1 + 32 + churn + 3);
  uint64_t task = 0, omp = 0, spin = 0;
  bool spinner_live = false;
  for (const auto &t : threads) {
    auto counts = named_counts(t);
    for (auto &[path, c] : counts) {
      if (path.back() == "task") task += c;
      if (path.back() == "omp_task") omp += c;
      if (path.back() == "spin") {
        spin += c;
        spinner_live = t.meta.status == ha::ThreadStatus::live_at_exit;
      }
    }
  }
  CHECK(task == 32 * 1000 + uint64_t(churn) * 10);
  CHECK(omp == 4 * 100);
  CHECK(spinner_live);  // (libgomp's pool threads are live at exit too)
  CHECK(spin > 0);
}

TEST_CASE("robustness: fork gives the child its own profile", "[e2e][robustness]") {
  auto p = run_profiled({kE2e + "/e2e_forks"}, "mode=cct");
  REQUIRE(p.result.status == 0);
  CHECK(p.result.out == "child exited with 7\n");
  auto set = ha::read_profiles(p.dir);
  REQUIRE(set.processes.size() == 2);
  const ha::ThreadProfile *parent = nullptr, *child = nullptr;
  for (auto &proc : set.processes) {
    REQUIRE(proc.threads.size() == 1);
    (proc.threads[0].meta.ppid == set.processes[0].pid || proc.threads[0].meta.ppid == set.processes[1].pid
         ? child
         : parent) = &proc.threads[0];
  }
  REQUIRE(parent);
  REQUIRE(child);
  CHECK(child->meta.ppid == parent->meta.pid);
  auto pc = named_counts(*parent);
  auto cc = named_counts(*child);
  CHECK(pc.at({"main", "before"}) == 10);
  CHECK(pc.at({"main", "after"}) == 30);
  CHECK(pc.at({"main", "spawn"}) == 1);
  CHECK(pc.count({"main", "spawn", "in_child"}) == 0);
  // The child starts from the context it was forked in, with nothing counted before the fork.
  CHECK(cc == std::map<NamePath, uint64_t>{{{"main", "spawn", "in_child"}, 20}});
  CHECK(child->meta.calls == 20);
}

TEST_CASE("robustness: exceptions through 10 frames, gcc and clang builds", "[e2e][robustness]") {
  for (const char *exe : {"/e2e_exceptions", "/e2e_exceptions_clang"}) {
    INFO(exe);
    auto p = run_profiled({kE2e + exe, "50"}, "mode=cct");
    REQUIRE(p.result.status == 0);
    CHECK(p.result.out == "caught 50\n");
    auto set = ha::read_profiles(p.dir);
    CHECK(projected_counts(only_thread(set), unwinding_names("f")) == unwinding_expected("f", 50));
  }
}

TEST_CASE("robustness: longjmp out of 10 frames, gcc and clang builds", "[e2e][robustness]") {
  for (const char *exe : {"/e2e_longjmps", "/e2e_longjmps_clang"}) {
    for (const char *mode : {"cct", "hcct"}) {
      INFO(exe << " " << mode);
      auto p = run_profiled({kE2e + exe, "50"}, std::string("mode=") + mode);
      REQUIRE(p.result.status == 0);
      CHECK(p.result.out == "jumps 50\n");
      auto set = ha::read_profiles(p.dir);
      // clang also instruments glibc's inline atoi: compare on the functions of the test.
      CHECK(projected_counts(only_thread(set), unwinding_names("l")) == unwinding_expected("l", 50));
    }
  }
}

TEST_CASE("robustness: a bad HCCT_OPTIONS or output directory changes nothing but one message", "[e2e][robustness]") {
  auto native = run({kExamples + "/calls", "15", "100"});
  REQUIRE(native.status == 0);
  struct Case {
    std::string options, message;
  };
  for (const Case &c :
       {Case{"mode=fast", "hcct: HCCT_OPTIONS: mode='fast' is not one of off, empty, cct, hcct; profiling is off for this run\n"},
        Case{"epsilon=2:mode=hcct", "hcct: HCCT_OPTIONS: epsilon='2' must be a number in [1e-7, 1); profiling is off for this run\n"},
        Case{"mode=cct:out=/proc/self/hcct-cannot-exist",
             "hcct: cannot create or write the profile directory '/proc/self/hcct-cannot-exist': No such file or directory; profiling is off for this run\n"},
        Case{"mode=cct:out=/etc/hostname/sub",
             "hcct: cannot create or write the profile directory '/etc/hostname/sub': Not a directory; profiling is off for this run\n"}}) {
    INFO(c.options);
    auto r = run({kExamples + "/calls", "15", "100"},
                 {std::string("LD_PRELOAD=") + HCCT_RUNTIME, "HCCT_OPTIONS=" + c.options});
    CHECK(r.status == native.status);
    CHECK(r.out == native.out);
    CHECK(r.err == c.message);
  }
}

TEST_CASE("symbolization: a default (PIE) gcc build", "[e2e][symbols]") {
  auto p = run_profiled({kExamples + "/calls", "5", "3"}, "mode=cct");
  REQUIRE(p.result.status == 0);
  auto set = ha::read_profiles(p.dir);
  const auto &t = only_thread(set);
  ha::Symbolizer symbols(t.modules);
  // Line of fib's definition in the source.
  std::ifstream src(std::string(HCCT_SOURCE_ROOT) + "/examples/calls.c");
  std::string line;
  uint32_t fib_line = 0;
  for (uint32_t n = 1; std::getline(src, line); ++n)
    if (line.find("unsigned fib(unsigned n)") != std::string::npos) fib_line = n;
  REQUIRE(fib_line > 0);
  bool seen = false;
  for (size_t i = 1; i < t.nodes.size(); ++i) {
    const auto &s = symbols.routine(t.nodes[i].routine);
    if (s.function.rfind("fib", 0) != 0) continue;
    seen = true;
    CHECK(s.resolved);
    CHECK(fs::path(s.file).filename() == "calls.c");
    CHECK(s.line == fib_line);
    // The call site of a recursive call is inside fib itself.
    if (t.nodes[t.nodes[i].parent].routine == t.nodes[i].routine)
      CHECK(symbols.call_site(t.nodes[i].call_site).function.rfind("fib", 0) == 0);
  }
  CHECK(seen);
  CHECK(t.modules.size() >= 2);
  CHECK(t.modules[0].bias != 0);  // PIE: loaded away from its link-time address
}

TEST_CASE("symbolization: a function in a library loaded with dlopen (and unloaded)", "[e2e][symbols]") {
  auto p = run_profiled({kE2e + "/e2e_dlopen_main", E2E_PLUGIN_LIB}, "mode=cct");
  REQUIRE(p.result.status == 0);
  CHECK(p.result.out == "plugin returned 30\n");
  auto set = ha::read_profiles(p.dir);
  const auto &t = only_thread(set);
  auto counts = named_counts(t);
  CHECK(counts.at({"main", "plugin_entry"}) == 1);
  CHECK(counts.at({"main", "plugin_entry", "plugin_leaf"}) == 5);
  ha::Symbolizer symbols(t.modules);
  for (size_t i = 1; i < t.nodes.size(); ++i) {
    const auto &s = symbols.routine(t.nodes[i].routine);
    if (s.function.rfind("plugin_leaf", 0) == 0) {
      CHECK(fs::path(s.file).filename() == "plugin_lib.c");
      CHECK(s.line == 3);
      REQUIRE(s.module);
      CHECK(fs::path(s.module->path).filename() == fs::path(E2E_PLUGIN_LIB).filename());
    }
  }
}

// Issue 13: a library unloaded and another loaded at the same addresses shared contexts (the calls
// into the second were counted in the first's nodes, named after one of them).
TEST_CASE("reused addresses: code loaded where an unloaded library was gets contexts of its own", "[e2e][symbols]") {
  for (const char *options : {"mode=cct", "mode=hcct:epsilon=1e-6", "mode=hcct:exact=1"}) {
    INFO(options);
    auto p = run_profiled({kE2e + "/e2e_reused_addresses", E2E_REUSE_ALPHA, E2E_REUSE_GAMMA}, options);
    REQUIRE(p.result.status == 0);
    // The premise: the loader put the second library where the first was.
    std::string alpha_at, gamma_at;
    std::istringstream out(p.result.out);
    std::string word, at, where;
    while (out >> word >> at >> where) {
      if (word == "alpha_entry") alpha_at = where;
      if (word == "gamma_entry") gamma_at = where;
      if (word == "total") break;
    }
    REQUIRE(!alpha_at.empty());
    REQUIRE(alpha_at == gamma_at);
    CHECK(p.result.out.find("total 43 worker 16") != std::string::npos);
    auto set = ha::read_profiles(p.dir);
    REQUIRE(set.processes.size() == 1);
    REQUIRE(set.processes[0].threads.size() == 2);
    for (const auto &t : set.processes[0].threads) {
      bool is_main = t.meta.thread_seq == 0;
      std::string root = is_main ? "main" : "worker";
      auto counts = projected_counts(t, {root, "alpha_entry", "alpha_work", "gamma_entry", "gamma_work"});
      std::map<NamePath, uint64_t> expected{
          {{root}, 1},
          {{root, "alpha_entry"}, 1},
          {{root, "alpha_entry", "alpha_work"}, is_main ? 5u : 3u},
          {{root, "gamma_entry"}, 1},
          {{root, "gamma_entry", "gamma_work"}, is_main ? 7u : 4u}};
      CHECK(counts == expected);
      CHECK(t.meta.unmatched_exits == 0);
      // Each context symbolizes against its own library.
      ha::Symbolizer symbols(t.modules);
      for (size_t i = 1; i < t.nodes.size(); ++i) {
        const auto &s = symbols.routine(t.nodes[i].routine);
        for (const char *name : {"alpha", "gamma"}) {
          if (s.function.rfind(name, 0) != 0) continue;
          INFO(s.function);
          REQUIRE(s.module);
          CHECK(fs::path(s.module->path).filename().string().find(name) != std::string::npos);
          CHECK(fs::path(s.file).filename() == "reuse_lib.c");
        }
      }
    }
    if (std::string(options).find("exact=1") != std::string::npos) {
      auto exact = ha::read_profiles(p.dir / "exact");
      REQUIRE(exact.processes.size() == 1);
      for (const auto &t : exact.processes[0].threads) {
        auto counts = named_counts(t);
        std::string root = t.meta.thread_seq == 0 ? "main" : "worker";
        CHECK(counts.count({root, "alpha_entry"}) == 1);
        CHECK(counts.count({root, "gamma_entry"}) == 1);
      }
    }
  }
}

TEST_CASE("the runtime linked statically instead of preloaded", "[e2e]") {
  fs::path dir = fresh_dir("static");
  auto r = run({kE2e + "/e2e_static_exceptions", "20"}, {"HCCT_OPTIONS=mode=cct:out=" + dir.string()});
  REQUIRE(r.status == 0);
  CHECK(r.out == "caught 20\n");
  auto set = ha::read_profiles(dir);
  CHECK(projected_counts(only_thread(set), unwinding_names("f")) == unwinding_expected("f", 20));
  // Without HCCT_OPTIONS the linked runtime profiles in hcct mode into ./hcct.data; mode=off is silent.
  auto off = run({kE2e + "/e2e_static_exceptions", "20"}, {"HCCT_OPTIONS=mode=off"});
  CHECK(off.status == 0);
  CHECK(off.err.empty());
}

TEST_CASE("robustness: an instrumented signal handler, on the thread's stack and on a sigaltstack", "[e2e][robustness]") {
  for (const char *mode : {"cct", "hcct"}) {
    INFO(mode);
    auto p = run_profiled({kE2e + "/e2e_signals"}, std::string("mode=") + mode);
    REQUIRE(p.result.status == 0);
    int handled = 0;
    REQUIRE(std::sscanf(p.result.out.c_str(), "handled %d", &handled) == 1);
    CHECK(handled >= 4000);
    auto set = ha::read_profiles(p.dir);
    const auto &t = only_thread(set);
    uint64_t counted = 0;
    for (auto &[path, c] : named_counts(t)) {
      if (path.back() == "in_handler") {
        counted += c;
        // A handler runs as a call in the context it interrupted.
        REQUIRE(path.size() >= 3);
        CHECK(path.front() == "main");
        CHECK(path[path.size() - 2] == "on_alarm");
        CHECK(std::count(path.begin(), path.end(), "on_alarm") == 1);
      }
    }
    // A handler that interrupts the runtime itself has all four of its events dropped (on_alarm's
    // and in_handler's enter and exit); every other invocation is counted.
    CHECK(counted + t.meta.dropped / 4 == uint64_t(handled));
    CHECK(t.meta.dropped % 4 == 0);
    if (std::string(mode) == "cct") CHECK(t.meta.unmatched_exits == 0);  // a typed META field since the tools know it
  }
}

TEST_CASE("robustness: exec: the new image is profiled, the program's behaviour unchanged", "[e2e][robustness]") {
  auto p = run_profiled({kE2e + "/e2e_exec_self"}, "mode=cct");
  CHECK(p.result.status == 3);
  CHECK(p.result.out == "after exec\n");
  CHECK(p.result.err.empty());
  auto set = ha::read_profiles(p.dir);
  // Both images, under one pid: the one that called exec wrote its profile before the exec
  // (docs/RUNTIME.md, "Threads"), the new one numbers its thread after it.
  REQUIRE(set.processes.size() == 1);
  REQUIRE(set.processes[0].threads.size() == 2);
  const auto &before = set.processes[0].threads[0], &after = set.processes[0].threads[1];
  CHECK(named_counts(before) == std::map<NamePath, uint64_t>{{{"main"}, 1}, {{"main", "before"}, 5}});
  CHECK(after.meta.thread_seq == 1);
  CHECK(named_counts(after) == std::map<NamePath, uint64_t>{{{"main"}, 1}, {{"main", "after"}, 7}});
}

TEST_CASE("robustness: coroutines on local-array, heap, static and mmap'd stacks, -O0 and -O2", "[e2e][robustness][stacks]") {
  // Issue 26 (a coroutine stack inside main's frame) and issue 13's stack switching: each machine
  // stack keeps its own calling context, rooted where it was first switched into.
  const uint64_t rounds = 300;
  const std::map<NamePath, uint64_t> want{
      {{"main"}, 1},
      {{"main", "foo"}, 1},
      {{"main", "foo", "bar"}, 1},
      {{"main", "foo", "bar", "work"}, 1},
      {{"main", "baz"}, 1},
      {{"main", "pingpong"}, 1},
      {{"main", "pingpong", "consume"}, rounds},
      {{"main", "pingpong", "generator"}, 1},
      {{"main", "pingpong", "generator", "produce"}, rounds}};
  const std::set<std::string> keep{"main", "foo", "bar", "work", "baz", "pingpong", "consume",
                                   "generator", "produce"};
  for (const char *exe : {"/e2e_coroutines_O0", "/e2e_coroutines"}) {
    for (const char *kind : {"local", "heap", "static", "mmap"}) {
      for (const char *mode : {"cct", "hcct"}) {
        INFO(exe << " " << kind << " " << mode);
        auto p = run_profiled({kE2e + exe, kind, std::to_string(rounds)}, std::string("mode=") + mode);
        REQUIRE(p.result.status == 0);
        CHECK(p.result.out == std::string(kind) + " 2\n");
        auto set = ha::read_profiles(p.dir);
        const auto &t = only_thread(set);
        CHECK(projected_counts(t, keep) == want);
        CHECK(t.meta.unmatched_exits == 0);
      }
    }
  }
}

TEST_CASE("robustness: a coroutine pool reusing an abandoned coroutine's stack", "[e2e][robustness][stacks]") {
  // makecontext on the stack of a coroutine abandoned mid-way: the new coroutine is rooted where it
  // is switched into, not under the frames the old one left there (tagged like the new ones).
  const uint64_t rounds = 50;
  const std::map<NamePath, uint64_t> want{
      {{"main"}, 1},
      {{"main", "abandon"}, rounds},
      {{"main", "abandon", "start"}, rounds},
      {{"main", "abandon", "start", "generator"}, rounds},
      {{"main", "abandon", "start", "generator", "produce"}, rounds},
      {{"main", "reuse"}, rounds},
      {{"main", "reuse", "start"}, rounds},
      {{"main", "reuse", "start", "worker"}, rounds},
      {{"main", "reuse", "start", "worker", "work"}, rounds}};
  for (const char *mode : {"cct", "hcct"}) {
    INFO(mode);
    auto p = run_profiled({kE2e + "/e2e_coroutine_pool", std::to_string(rounds)}, std::string("mode=") + mode);
    REQUIRE(p.result.status == 0);
    CHECK(p.result.out == std::to_string(3 * rounds) + "\n");
    auto set = ha::read_profiles(p.dir);
    const auto &t = only_thread(set);
    CHECK(named_counts(t) == want);
    CHECK(t.meta.unmatched_exits == 0);
  }
}
