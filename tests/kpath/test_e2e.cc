// End to end: the examples (examples/kpath/) compiled with clang -fpass-plugin=kpath.so and linked
// with libhcct.
//   - The k-IPF from the recorded forest — the k-slab forest (forest=ksf, thesis Algorithm 4) and
//     the k-window forest (forest=kwf) alike — equals direct n-gram counting over the raw stream the
//     same run recorded (path_trace=1), for several k; BLPP (k = 1) equals the 1-IPF.
//   - Every recorded path ID decodes through the metadata in the binary.
//   - Masked convolution: the 10-IPF shows both branches repeating in long runs (thesis Fig. 6.2).
//   - Edge counts implied by the k = 1 profile equal clang's own profile of the same run
//     (-fprofile-instr-generate, llvm-cov export): function entry counts and, for every two-way
//     branch whose source location maps to one coverage branch region, both outcome counts.
//   - `hcct paths` prints the forest (text and JSON).
//   - With the inline fast path active (no trace), the k-IPF equals n-gram counting of the stream
//     a traced run of the same deterministic program recorded, and most items never reached the
//     runtime; also with threads, recursion, and a profiling timer whose handler runs instrumented
//     loops at arbitrary points of the interrupted code (its own function is left out).
#include <catch2/catch.hpp>

#include "support/command.h"
#include "guide_compare.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "hcct/analysis/kpath_ipf.h"
#include "hcct/analysis/kpath_metadata.h"
#include "hcct/analysis/kpath_profile.h"

namespace fs = std::filesystem;
namespace an = hcct::analysis;
using hcct::kpath::EdgeKind;

namespace {

std::string run(const std::string &cmd) { return hcct::test::run_command(cmd); }

fs::path work() { return hcct::test::work_directory("tests/kpath/work/e2e"); }

struct Example {
  const char *source;
  const char *args;
};
// Both run-time forests (docs/KPATH.md, "Runtime"), as HCCT_OPTIONS values and as read back.
struct ForestChoice {
  const char *option;
  an::ForestKind kind;
};
const ForestChoice kForests[] = {{"ksf", an::ForestKind::kSlab}, {"kwf", an::ForestKind::kWindow}};

const Example kExamples[] = {
    {"masked_conv.c", "200 300 2"},
    {"collatz.c", "20000"},
    {"lexer.c", "200000 2"},
};

fs::path build(const Example &e, const std::string &flags, const std::string &tag) {
  fs::path exe = work() / (fs::path(e.source).stem().string() + "." + tag);
  run(std::string(HCCT_CLANG) + " -g " + flags + " -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + HCCT_SOURCE_DIR +
      "/examples/kpath/" + e.source + " -o " + exe.string() + " " + HCCT_RUNTIME + " -Wl,-rpath," +
      fs::path(HCCT_RUNTIME).parent_path().string() + " 2>&1");
  return exe;
}

an::ThreadPaths record(const fs::path &exe, const Example &e, const std::string &options, const std::string &env = "") {
  fs::path out = exe.string() + ".data";
  fs::remove_all(out);
  run(env + " HCCT_OPTIONS='" + options + ":out=" + out.string() + "' " + exe.string() + " " + e.args + " 2>&1");
  auto threads = an::read_thread_paths(out);
  REQUIRE(threads.size() == 1);
  return std::move(threads.front());
}

// Runs `exe` with HCCT_OPTIONS=verbose=1:<options>; returns every thread's paths and the sums of the
// runtime's own statistics ("paths=", "slow=") that verbose=1 prints per thread.
struct Recorded {
  std::vector<an::ThreadPaths> threads;
  uint64_t paths = 0, slow = 0;
};
Recorded record_all(const fs::path &exe, const std::string &args, const std::string &options) {
  fs::path out = exe.string() + ".data";
  fs::remove_all(out);
  std::string text = run("HCCT_OPTIONS='verbose=1:" + options + ":out=" + out.string() + "' " + exe.string() + " " + args + " 2>&1");
  Recorded r;
  r.threads = an::read_thread_paths(out);
  for (size_t at = text.find("hcct kpath: thread"); at != std::string::npos; at = text.find("hcct kpath: thread", at + 1)) {
    r.paths += std::stoull(text.substr(text.find("paths=", at) + 6));
    r.slow += std::stoull(text.substr(text.find("slow=", at) + 5));
  }
  return r;
}

// All threads' streams of a traced run, without the activations of the functions in `skip`.
std::vector<std::vector<an::PathLabel>> traced_streams(const Recorded &r, const std::set<uint64_t> &skip = {}) {
  std::vector<std::vector<an::PathLabel>> out;
  for (const auto &t : r.threads) {
    REQUIRE(t.trace);
    REQUIRE(t.trace_lost == 0);
    for (auto &s : an::activation_streams(*t.trace))
      if (!s.empty() && !skip.count(s.front().function)) out.push_back(std::move(s));
  }
  return out;
}

// The K-IPF of all threads, without the trees of the functions in `skip`.
std::map<std::vector<an::PathLabel>, uint64_t> forest_sequences(const Recorded &r, uint32_t k, const std::set<uint64_t> &skip = {}) {
  an::Ipf all;
  for (const auto &t : r.threads) {
    REQUIRE(t.forest.lost == 0);
    all.merge(an::make_k_ipf(t.forest, k));
  }
  auto seqs = all.without_zero_counts().sequences();
  for (auto it = seqs.begin(); it != seqs.end();)
    it = skip.count(it->first.front().function) ? seqs.erase(it) : std::next(it);
  return seqs;
}

// The first few sequences whose counts differ, for failure messages.
std::string first_differences(const std::map<std::vector<an::PathLabel>, uint64_t> &got,
                              const std::map<std::vector<an::PathLabel>, uint64_t> &want) {
  std::string out;
  int shown = 0;
  auto show = [&](const std::vector<an::PathLabel> &seq, uint64_t g, uint64_t w) {
    if (g == w || shown++ >= 8) return;
    for (const auto &l : seq) out += std::to_string(l.function % 1000) + ":" + std::to_string(l.path) + " ";
    out += "got " + std::to_string(g) + " want " + std::to_string(w) + "\n";
  };
  for (const auto &[seq, g] : got) show(seq, g, want.count(seq) ? want.at(seq) : 0);
  for (const auto &[seq, w] : want)
    if (!got.count(seq)) show(seq, 0, w);
  return out;
}

}  // namespace

TEST_CASE("e2e: with the inline fast path, k-IPF equals n-gram counting of a traced run of the same program") {
  for (const Example &e : kExamples) {
    fs::path exe = build(e, "-O2", "fast");
    Recorded traced = record_all(exe, e.args, "k=2:path_trace=1");  // tracing keeps every item on the slow path
    REQUIRE(traced.slow == traced.paths);
    auto streams = traced_streams(traced);
    for (const ForestChoice &forest : kForests)
    for (uint32_t k : {2u, 5u, 10u, 16u}) {
      INFO(e.source << " " << forest.option << " k = " << k);
      Recorded fast = record_all(exe, e.args, "k=" + std::to_string(k) + ":forest=" + forest.option);
      for (const auto &t : fast.threads) CHECK(t.forest.kind == forest.kind);
      CHECK(fast.paths == traced.paths);
      // Most items never reached the runtime (counts, not times); lexer's classify() runs one
      // item per activation, which needs the runtime's root lookup.
      CHECK(fast.slow * (std::string(e.source) == "lexer.c" ? 1 : 4) < fast.paths);
      auto got = forest_sequences(fast, k), want = an::count_ngrams(streams, k).sequences();
      INFO(first_differences(got, want));
      CHECK(got == want);
    }
  }
}

TEST_CASE("e2e: two hot loop paths that differ in the first of two branches stay on the inline fast path") {
  // examples/kpath/diamonds.c: two branches in a loop, only the first varies, so the two hot paths'
  // IDs differ by the second one's path count, 2 — the same low bit. The site's slot (the parity of
  // the body's one bits) still separates them, and the second chance would catch them if not: both
  // must be taken without the runtime.
  fs::path exe = build({"diamonds.c", "200000"}, "-O2", "fast");
  Recorded traced = record_all(exe, "200000", "k=2:path_trace=1");
  auto streams = traced_streams(traced);
  // The premise: the two loop paths that occur most share their low bit (a slot by the low bit
  // alone would put them in one slot).
  std::map<uint64_t, uint64_t> by_path;
  for (const auto &s : streams)
    for (const auto &l : s) ++by_path[l.path];
  std::vector<std::pair<uint64_t, uint64_t>> hot;
  for (auto [path, n] : by_path) hot.push_back({n, path});
  std::sort(hot.rbegin(), hot.rend());
  REQUIRE(hot.size() >= 2);
  REQUIRE(hot[1].first * 4 > hot[0].first);
  REQUIRE((hot[0].second & 1) == (hot[1].second & 1));
  for (const ForestChoice &forest : kForests) {
    INFO(forest.option);
    Recorded fast = record_all(exe, "200000", std::string("k=4:forest=") + forest.option);
    CHECK(fast.paths == traced.paths);
    CHECK(fast.slow * 100 < fast.paths);  // counts, not times
    auto got = forest_sequences(fast, 4), want = an::count_ngrams(streams, 4).sequences();
    INFO(first_differences(got, want));
    CHECK(got == want);
  }
}

TEST_CASE("e2e: fast path under threads, recursion and a profiling timer interrupting anywhere") {
  fs::path exe = work() / "fastpath";
  run(std::string(HCCT_CLANG) + " -g -O2 -pthread -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + HCCT_SOURCE_DIR +
      "/tests/kpath/programs/fastpath.c -o " + exe.string() + " " + HCCT_RUNTIME + " -Wl,-rpath," +
      fs::path(HCCT_RUNTIME).parent_path().string() + " 2>&1");
  an::PathMetadata meta;
  REQUIRE(meta.add_elf(exe));
  // Compared: walk and thread_main. Not: the handler's functions (they run a varying number of
  // times), and main (its first path depends on the argument).
  uint64_t handler = 0;
  std::set<uint64_t> skip;
  for (const auto &[id, f] : meta.functions()) {
    if (f.info.name == "handler_work") handler = id;
    if (f.info.name == "handler_work" || f.info.name == "on_timer" || f.info.name == "main") skip.insert(id);
  }
  REQUIRE(handler != 0);
  REQUIRE(skip.size() == 3);
  Recorded traced = record_all(exe, "0", "k=2:path_trace=1");
  REQUIRE(traced.threads.size() == 3);
  auto streams = traced_streams(traced, skip);
  for (const ForestChoice &forest : kForests)
  for (uint32_t k : {3u, 8u}) {
    INFO(forest.option << " k = " << k);
    for (int timer : {0, 1}) {
      Recorded fast = record_all(exe, std::to_string(timer), "k=" + std::to_string(k) + ":forest=" + forest.option);
      REQUIRE(fast.threads.size() == 3);
      CHECK(fast.slow * 2 < fast.paths);
      auto got = forest_sequences(fast, k, skip), want = an::count_ngrams(streams, k).sequences();
      INFO(first_differences(got, want));
      CHECK(got == want);
      if (timer) {  // the handler did run, and was profiled
        uint64_t handler_items = 0;
        for (const auto &t : fast.threads)
          for (const auto &n : t.forest.nodes)
            if (n.label.function == handler) handler_items += n.count;
        CHECK(handler_items > 0);
      }
    }
  }
}

// Functions with one path and no loop carry no probe (docs/KPATH.md, "Functions without probes"),
// nor do those whose other paths are ruled out by tests of constant functions: they are in the
// metadata, flagged, and in no profile or trace; every other function's k-IPF is
// exact (n-gram counting of a traced run) and the same as from a build that probes them
// (HCCT_KPATH_SINGLE_PATH_PROBES=1, where `twice`'s one path counts its calls); `hcct paths` says
// how many functions have no probe.
TEST_CASE("e2e: functions with one path and no loop carry no probe, and the rest stay exact") {
  auto build_with = [](const std::string &tag, const std::string &env) {
    fs::path exe = work() / ("unprobed." + tag);
    run(env + " " + HCCT_CLANG + " -g -O2 -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + HCCT_SOURCE_DIR +
        "/tests/kpath/programs/unprobed.c -o " + exe.string() + " " + HCCT_RUNTIME + " -Wl,-rpath," +
        fs::path(HCCT_RUNTIME).parent_path().string() + " 2>&1");
    return exe;
  };
  fs::path bare = build_with("bare", ""), probed = build_with("probed", "HCCT_KPATH_SINGLE_PATH_PROBES=1");
  an::PathMetadata meta, meta_probed;
  REQUIRE(meta.add_elf(bare));
  REQUIRE(meta_probed.add_elf(probed));
  std::set<uint64_t> single;  // mix, twice, little_endian and low_byte (two paths, one ruled out)
  uint64_t twice = 0;
  for (const auto &[id, f] : meta.functions()) {
    INFO(f.info.name);
    bool one = f.info.num_paths == 1 || f.info.name == "low_byte";
    CHECK(bool(f.info.flags & hcct::kpath::kFlagNotProbed) == one);
    if (one) single.insert(id);
    if (f.info.name == "twice") twice = id;
    if (f.info.name == "low_byte") CHECK(f.info.num_paths == 2);
  }
  CHECK(single.size() == 4);
  REQUIRE(single.count(twice));
  for (const auto &[id, f] : meta_probed.functions()) CHECK_FALSE(f.info.flags & hcct::kpath::kFlagNotProbed);

  const std::string args = "20000";
  std::string output = run(bare.string() + " " + args);
  uint64_t twice_calls = std::stoull(output.substr(output.find(' ') + 1));
  REQUIRE(twice_calls > 1000);
  Recorded traced = record_all(bare, args, "k=2:path_trace=1");
  auto streams = traced_streams(traced);
  for (const auto &s : streams) CHECK_FALSE(single.count(s.front().function));
  Recorded traced_probed = record_all(probed, args, "k=2:path_trace=1");
  auto streams_probed = traced_streams(traced_probed, single);
  for (uint32_t k : {1u, 2u, 8u, 16u}) {
    INFO("k = " << k);
    Recorded fast = record_all(bare, args, "k=" + std::to_string(k));
    auto got = forest_sequences(fast, k), want = an::count_ngrams(streams, k).sequences();
    INFO(first_differences(got, want));
    CHECK(got == want);
    for (const auto &[seq, count] : got) CHECK_FALSE(single.count(seq.front().function));
    // The same sequences and counts as the build with probes everywhere, without its two functions.
    Recorded with = record_all(probed, args, "k=" + std::to_string(k));
    CHECK(forest_sequences(with, k, single) == got);
    CHECK(an::count_ngrams(streams_probed, k).sequences() == want);
    auto all = forest_sequences(with, k);
    CHECK(all[std::vector<an::PathLabel>{{twice, 0}}] == twice_calls);
  }
  std::string text = run(std::string(HCCT_TOOL) + " paths " + bare.string() + ".data 2>&1");
  CHECK_THAT(text, Catch::Contains("# 4 functions without loops that can run only one path carry no probe"));
  auto j = nlohmann::json::parse(run(std::string(HCCT_TOOL) + " paths --json " + bare.string() + ".data"));
  CHECK(j["unprobed_functions"] == 4);
  CHECK_THAT(run(std::string(HCCT_TOOL) + " paths --function twice " + bare.string() + ".data 2>&1; echo status=$?"),
             Catch::Contains("'twice': it carries no probe") && Catch::Contains("status=1"));
  record_all(probed, args, "k=2");
  CHECK_THAT(run(std::string(HCCT_TOOL) + " paths " + probed.string() + ".data 2>&1"),
             !Catch::Contains("carry no probe"));
}

// BLPP counter arrays (issue 24; hcct/kpath_abi.h): functions with few paths count each path in a
// thread-local array, with no runtime call; the runtime folds the arrays into the BLPP roots when it
// writes the profile. The 1-IPF must equal the traced run's path counts, with every function in
// arrays (the runtime never called for an item), with some over a small bound (arrays and the
// root table mixed), and under threads, recursion and a profiling timer whose handler counts into
// the interrupted thread's array.
TEST_CASE("e2e: BLPP counter arrays count every path without calling the runtime") {
  auto build_with = [](const std::string &source, const std::string &tag, const std::string &env) {
    fs::path exe = work() / (fs::path(source).stem().string() + "." + tag);
    run(env + " " + HCCT_CLANG + " -g -O2 -pthread -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + HCCT_SOURCE_DIR + "/" +
        source + " -o " + exe.string() + " " + HCCT_RUNTIME + " -Wl,-rpath," +
        fs::path(HCCT_RUNTIME).parent_path().string() + " 2>&1");
    return exe;
  };
  for (const Example &e : kExamples) {
    std::string source = std::string("examples/kpath/") + e.source;
    fs::path exe = build_with(source, "counters", "");
    Recorded traced = record_all(exe, e.args, "k=1:path_trace=1");  // tracing turns the arrays off
    REQUIRE(traced.slow == traced.paths);
    auto want = an::count_ngrams(traced_streams(traced), 1).sequences();
    INFO(e.source);
    Recorded fast = record_all(exe, e.args, "k=1");
    CHECK(fast.paths == traced.paths);
    CHECK(fast.slow == 0);
    auto got = forest_sequences(fast, 1);
    INFO(first_differences(got, want));
    CHECK(got == want);
    // Only functions of at most 2 paths in arrays: the others through the root cache and table.
    fs::path mixed = build_with(source, "counters2", "HCCT_KPATH_COUNTER_PATHS=2");
    Recorded both = record_all(mixed, e.args, "k=1");
    CHECK(both.slow > 0);
    got = forest_sequences(both, 1);
    INFO(first_differences(got, want));
    CHECK(got == want);
    // A forest from the same binary: the arrays stay off.
    Recorded forest = record_all(exe, e.args, "k=4");
    CHECK(forest.paths == traced.paths);
  }
  fs::path exe = build_with("tests/kpath/programs/fastpath.c", "counters", "");
  an::PathMetadata meta;
  REQUIRE(meta.add_elf(exe));
  std::set<uint64_t> skip;
  for (const auto &[id, f] : meta.functions())
    if (f.info.name == "handler_work" || f.info.name == "on_timer" || f.info.name == "main") skip.insert(id);
  REQUIRE(skip.size() == 3);
  Recorded traced = record_all(exe, "0", "k=1:path_trace=1");
  REQUIRE(traced.threads.size() == 3);
  auto want = an::count_ngrams(traced_streams(traced, skip), 1).sequences();
  for (int timer : {0, 1}) {
    INFO("fastpath.c, timer " << timer);
    Recorded fast = record_all(exe, std::to_string(timer), "k=1");
    REQUIRE(fast.threads.size() == 3);
    CHECK(fast.slow == 0);
    auto got = forest_sequences(fast, 1, skip);
    INFO(first_differences(got, want));
    CHECK(got == want);
  }
}

// Counter arrays are sparse virtual memory: the runtime reads only the pages that
// /proc/self/pagemap says were touched when it folds them (kpath_runtime.cc, touched_pages). A
// module of 20 functions of 2^16 paths each (a 10 MB array per thread), of which the run touches a
// few pages of three functions, far apart: every count is still found, at k = 1 and k = 4.
TEST_CASE("e2e: sparse counter arrays: the fold finds every count on the pages a run touched") {
  fs::path source = work() / "sparse_counters.c";
  {
    std::ofstream out(source);
    for (int f = 0; f < 20; ++f) {
      out << "__attribute__((noinline)) unsigned wide_" << f << "(unsigned x) {\n  unsigned s = " << f << ";\n";
      for (int bit = 0; bit < 16; ++bit) out << "  if (x & " << (1u << bit) << "u) s += " << (bit + 1) * (f + 3) << "u;\n";
      out << "  return s;\n}\n";
    }
    out << "#include <stdio.h>\n#include <stdlib.h>\nint main(int argc, char **argv) {\n"
           "  unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 1000, sum = 0;\n"
           "  for (unsigned i = 0; i < n; ++i) {\n"
           "    unsigned x = (i * 2654435761u >> 7) & 0x3Fu, hi = (i % 3) << 14;\n"
           "    sum += wide_0(x | hi) + wide_9(x << 3 | hi) + wide_19(x | 0x8000u);\n  }\n"
           "  printf(\"%u\\n\", sum);\n  return 0;\n}\n";
  }
  fs::path exe = work() / "sparse_counters";
  run(std::string(HCCT_CLANG) + " -O1 -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + source.string() + " -o " + exe.string() + " " +
      HCCT_RUNTIME + " -Wl,-rpath," + fs::path(HCCT_RUNTIME).parent_path().string() + " 2>&1");
  Recorded traced = record_all(exe, "5000", "k=4:path_trace=1");  // tracing turns the arrays off
  REQUIRE(traced.slow == traced.paths);
  auto streams = traced_streams(traced);
  for (uint32_t k : {1u, 4u}) {
    INFO("k = " << k);
    Recorded fast = record_all(exe, "5000", "k=" + std::to_string(k));
    CHECK(fast.paths == traced.paths);
    CHECK(fast.slow < fast.paths / 4);  // (the wide functions counted in their arrays)
    auto got = forest_sequences(fast, k), want = an::count_ngrams(streams, k).sequences();
    INFO(first_differences(got, want));
    CHECK(got == want);
  }
}

// A library with counter arrays, loaded with dlopen and unloaded before the profiles are written
// (tests/kpath/programs/dl_counted_*.c): the runtime folds the arrays with its own copy of the
// library's table and leaves the library's thread-local words alone once it is gone. Each thread's
// roots of step() count its calls exactly, at k = 1 (walk() in its array too) and at k = 4.
TEST_CASE("e2e: counter arrays of a library unloaded before the profiles are written") {
  fs::path lib = work() / "libdl_counted.so";
  fs::path exe = work() / "dl_counted_main";
  std::string rpath = " -Wl,-rpath," + fs::path(HCCT_RUNTIME).parent_path().string();
  run(std::string(HCCT_CLANG) + " -g -O1 -fPIC -shared -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + HCCT_SOURCE_DIR +
      "/tests/kpath/programs/dl_counted_lib.c -o " + lib.string() + " " + HCCT_RUNTIME + rpath + " 2>&1");
  run(std::string(HCCT_CLANG) + " -g -O1 -pthread " + HCCT_SOURCE_DIR + "/tests/kpath/programs/dl_counted_main.c -o " +
      exe.string() + " -ldl " + HCCT_RUNTIME + rpath + " 2>&1");
  an::PathMetadata meta;
  REQUIRE(meta.add_elf(lib));
  uint64_t step_id = 0;
  for (const auto &[id, f] : meta.functions())
    if (f.info.name == "step") step_id = id;
  REQUIRE(step_id != 0);
  for (const char *k : {"1", "4"}) {
    INFO("k=" << k);
    fs::path out = exe.string() + ".data";
    fs::remove_all(out);
    auto result = hcct::test::run_status("HCCT_OPTIONS='k=" + std::string(k) + ":verbose=1:out=" + out.string() + "' " +
                                         exe.string() + " " + lib.string() + " 2>&1");
    const std::string &text = result.output;
    INFO(text);
    REQUIRE(result.status == 0);
    size_t at = text.find("steps ");
    REQUIRE(at != std::string::npos);
    uint64_t steps = std::stoull(text.substr(at + 6));
    CHECK(steps > 0);
    auto threads = an::read_thread_paths(out);
    REQUIRE(threads.size() == 2);
    for (const auto &t : threads) {
      uint64_t counted = 0;
      for (const an::KsfNode &n : t.forest.nodes)
        if (n.parent == an::kNoParent && n.label.function == step_id) counted += n.count;
      CHECK(counted == steps);
    }
  }
}

// The bounded kWF under the real runtime: three threads sweeping their own forests (each moves its
// thread's token), recursion (callers' windows evicted while callees run: cuts), and a profiling
// timer whose handler runs instrumented code anywhere, also inside a sweep. At k = 8 the exact
// forests have about 14,600 nodes per thread, nearly uniformly used (random branches);
// path_epsilon = 0.002 gives a budget of 2,000 live nodes, too small for the slack εN to free enough: sweeps
// are forced, and the profile's bound (not εN) is what must hold. Every count of the compared
// functions must lie within the summed bound of the traced run's n-gram count, and every sequence
// missing must have run at most that often.
TEST_CASE("e2e: bounded kWF under threads, recursion and a profiling timer keeps its guarantee") {
  fs::path exe = work() / "fastpath-bounded";
  run(std::string(HCCT_CLANG) + " -g -O2 -pthread -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + HCCT_SOURCE_DIR +
      "/tests/kpath/programs/fastpath.c -o " + exe.string() + " " + HCCT_RUNTIME + " -Wl,-rpath," +
      fs::path(HCCT_RUNTIME).parent_path().string() + " 2>&1");
  an::PathMetadata meta;
  REQUIRE(meta.add_elf(exe));
  std::set<uint64_t> skip;  // as above: the handler's functions and main vary from run to run
  for (const auto &[id, f] : meta.functions())
    if (f.info.name == "handler_work" || f.info.name == "on_timer" || f.info.name == "main") skip.insert(id);
  REQUIRE(skip.size() == 3);
  Recorded traced = record_all(exe, "0", "k=2:path_trace=1:path_epsilon=0");
  auto streams = traced_streams(traced, skip);
  const uint32_t k = 8;
  auto want = an::count_ngrams(streams, k).sequences();
  for (int timer : {0, 1}) {
    INFO("timer " << timer);
    Recorded bounded = record_all(exe, std::to_string(timer), "k=8:path_epsilon=0.002");
    REQUIRE(bounded.threads.size() == 3);
    uint64_t delta = 0, cuts = 0, sweeps = 0;
    for (const auto &t : bounded.threads) {
      REQUIRE(t.forest.bound.bounded());
      if (t.forest.bound.forced_sweeps == 0) CHECK(t.forest.bound.delta <= uint64_t(0.002 * double(t.forest.paths)));
      delta += t.forest.bound.delta;
      cuts += t.forest.bound.cuts;
      sweeps += t.forest.bound.sweeps;
    }
    CHECK(sweeps >= 3);
    auto bound = [&](size_t n) { return delta + (n - 1) * cuts; };
    auto got = forest_sequences(bounded, k, skip);
    INFO("delta " << delta << ", cuts " << cuts << ", sweeps " << sweeps);
    size_t over = 0, under = 0, missing = 0;
    for (const auto &[seq, count] : got) {
      uint64_t truth = want.count(seq) ? want.at(seq) : 0;
      over += count > truth;
      under += truth > count + bound(seq.size());
    }
    for (const auto &[seq, truth] : want) missing += !got.count(seq) && truth > bound(seq.size());
    CHECK(over == 0);
    CHECK(under == 0);
    CHECK(missing == 0);
  }
}

// Growing budgets (path_grow; docs/KPATH.md, "Growing budgets") across a fork: three threads of
// the parent hold a floor each (k = 4, ε = 0.01: 200 nodes) while main forks; the child's loop needs
// about 300 nodes. With path_grow=2 the allowance is two floors, all of it the child's (the
// parent's other threads are gone there and gave theirs back), so the child's forest grows once
// and never sweeps; with path_grow=1 it sweeps. The parent's forests stay at one floor.
TEST_CASE("e2e: a forked child's bounded forest grows into the allowance its parent's threads held") {
  fs::path exe = work() / "grow-fork";
  run(std::string(HCCT_CLANG) + " -g -O2 -pthread -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + HCCT_SOURCE_DIR +
      "/tests/kpath/programs/grow_fork.c -o " + exe.string() + " " + HCCT_RUNTIME + " -Wl,-rpath," +
      fs::path(HCCT_RUNTIME).parent_path().string() + " 2>&1");
  auto child_line = [&](const std::string &grow) {
    fs::path out = work() / ("grow-fork-" + grow + ".data");
    fs::remove_all(out);
    std::string text = run("HCCT_OPTIONS='k=4:path_epsilon=0.01:verbose=1:path_grow=" + grow + ":out=" + out.string() +
                           "' " + exe.string() + " 100 2>&1");
    INFO(text);
    size_t at = text.find("child ");
    REQUIRE(at != std::string::npos);
    std::string pid = text.substr(at + 6, text.find(':', at) - at - 6);
    size_t line = text.find("hcct kpath: thread " + pid + ":");
    REQUIRE(line != std::string::npos);
    CHECK(text.find("parent ") != std::string::npos);
    CHECK(text.find("child exited 0") != std::string::npos);
    return text.substr(line, text.find('\n', line) - line);
  };
  std::string grown = child_line("2"), fixed = child_line("1");
  CHECK(grown.find(" budget=400 grown=1 ") != std::string::npos);
  CHECK(grown.find(" sweeps=0 ") != std::string::npos);
  CHECK(fixed.find(" budget=200 grown=0 ") != std::string::npos);
  CHECK(fixed.find(" sweeps=0 ") == std::string::npos);
}

TEST_CASE("e2e: k-IPF from the k-SF and from the kWF equals n-gram counting of the same run's stream") {
  for (const Example &e : kExamples) {
    fs::path exe = build(e, "-O2", "O2");
    an::PathMetadata meta;
    REQUIRE(meta.add_elf(exe));
    for (const ForestChoice &forest : kForests)
    for (uint32_t k : {1u, 2u, 5u, 10u}) {
      INFO(e.source << " " << forest.option << " k = " << k);
      an::ThreadPaths t = record(exe, e, "k=" + std::to_string(k) + ":forest=" + forest.option + ":path_trace=1");
      REQUIRE(t.trace);
      REQUIRE(t.trace_lost == 0);
      REQUIRE(t.forest.lost == 0);
      REQUIRE(t.forest.k == k);
      CHECK(t.forest.kind == (k == 1 ? an::ForestKind::kBlpp : forest.kind));
      auto streams = an::activation_streams(*t.trace);
      uint64_t length = 0;
      for (const auto &s : streams) length += s.size();
      CHECK(t.forest.paths == length);
      CHECK(length > 1000);
      CHECK(an::make_k_ipf(t.forest, k).sequences() == an::count_ngrams(streams, k).sequences());
      // Every recorded label decodes through the binary's metadata.
      for (const auto &n : t.forest.nodes) {
        const an::PathFunction *f = meta.find(n.label.function);
        REQUIRE(f);
        REQUIRE(an::decode_path(*f, n.label.path));
      }
    }
  }
}

TEST_CASE("e2e: masked convolution's 10-IPF shows both branches repeating in long runs") {
  const Example e{"masked_conv.c", "600 800 1"};  // the default image: faces of realistic size
  fs::path exe = build(e, "-O2", "conv");  // its own binary and data: test cases may run in parallel
  for (const ForestChoice &forest : kForests) {
  INFO(forest.option);
  an::ThreadPaths t = record(exe, e, std::string("k=10:forest=") + forest.option);
  CHECK(t.forest.kind == forest.kind);
  an::PathMetadata meta;
  REQUIRE(meta.add_elf(exe));
  an::Ipf ipf = an::make_k_ipf(t.forest, 10);
  // The two most frequent roots of filter_conv are the copy and the convolution path.
  std::vector<uint32_t> roots;
  for (uint32_t r : ipf.roots()) {
    const an::PathFunction *f = meta.find(ipf.nodes()[r].label.function);
    if (f && f->info.name == "filter_conv") roots.push_back(r);
  }
  std::sort(roots.begin(), roots.end(), [&](uint32_t a, uint32_t b) { return ipf.nodes()[a].count > ipf.nodes()[b].count; });
  REQUIRE(roots.size() >= 2);
  for (int i = 0; i < 2; ++i) {
    uint32_t v = roots[i];
    uint64_t root_count = ipf.nodes()[v].count;
    // Follow the child with the same label: the run of 10 identical paths.
    for (int depth = 1; depth < 10; ++depth) {
      uint32_t next = an::kNoParent;
      for (uint32_t c : ipf.nodes()[v].children)
        if (ipf.nodes()[c].label == ipf.nodes()[v].label) next = c;
      REQUIRE(next != an::kNoParent);
      v = next;
    }
    double share = double(ipf.nodes()[v].count) / double(root_count);
    INFO("root " << ipf.nodes()[roots[i]].label.path << " repeats 10 times in " << share * 100 << "% of cases");
    CHECK(share > 0.9);
  }
  std::string text = run(std::string(HCCT_TOOL) + " paths " + exe.string() + ".data --k 10 --function filter_conv");
  CHECK(text.find("filter_conv") != std::string::npos);
  CHECK(text.find("masked_conv.c") != std::string::npos);
  auto j = nlohmann::json::parse(run(std::string(HCCT_TOOL) + " paths " + exe.string() + ".data --k 10 --function filter_conv --json"));
  REQUIRE(j["functions"].size() == 1);
  CHECK(j["functions"][0]["name"] == "filter_conv");
  CHECK(j["functions"][0]["forest"].size() >= 2);
  }
}

// The case study from a bounded profile (docs/KPATH.md, "Bounded forests"): the exact kWF of this
// run has 964 nodes at k = 10; path_epsilon = 0.05 gives a budget of 464, and path_grow=1 keeps it
// there (the default would grow it to 4 · 464, above the exact forest), so the runtime sweeps.
// `hcct guide` must give the same guidance as from the exact profile: the same loops in the same
// order, the same OSR thresholds, the same recommendations (kind, path, unrolling factor).
TEST_CASE("e2e: masked convolution: hcct guide gives the same guidance from a bounded profile as from an exact one") {
  const Example e{"masked_conv.c", "600 800 1"};
  fs::path exe = build(e, "-O2", "conv-bounded");
  auto guide = [&](const std::string &options, const std::string &name) {
    an::ThreadPaths t = record(exe, e, options);
    fs::path data = work() / (name + ".data");
    fs::remove_all(data);
    fs::rename(exe.string() + ".data", data);
    fs::path out = work() / (name + ".guide.json");
    run(std::string(HCCT_TOOL) + " guide " + data.string() + " -o " + out.string() + " --json 2>&1");
    std::ifstream in(out);
    return std::pair{std::move(t), nlohmann::json::parse(in)};
  };
  auto [exact_t, exact] = guide("k=10:path_epsilon=0", "conv-exact");
  auto [bounded_t, bounded] = guide("k=10:path_epsilon=0.05:path_grow=1", "conv-bounded");
  REQUIRE_FALSE(exact_t.forest.bound.bounded());
  REQUIRE(bounded_t.forest.bound.bounded());
  CHECK(bounded_t.forest.bound.sweeps > 0);  // it did evict
  CHECK(bounded_t.forest.nodes.size() < exact_t.forest.nodes.size());
  CHECK(bounded["counts"]["bounded"] == true);
  CHECK(exact["counts"]["bounded"] == false);
  REQUIRE(exact["loops"].size() == bounded["loops"].size());
  REQUIRE(exact["loops"].size() > 0);
  for (size_t i = 0; i < exact["loops"].size(); ++i) {
    const auto &x = exact["loops"][i], &y = bounded["loops"][i];
    INFO("loop #" << i + 1 << " " << x["key"]);
    CHECK(x["key"] == y["key"]);
    CHECK(x["function"] == y["function"]);
    CHECK(x["header_block"] == y["header_block"]);
    hcct::test::check_same_guidance(x, y);
  }
}

namespace {

// Edge counts (u, successor block) implied by a BLPP profile: kBranch edges of every path, and the
// back edge a path ends with when its source has exactly one restart successor.
std::map<std::pair<uint32_t, uint32_t>, uint64_t> edge_counts(const an::PathFunction &f, const std::map<uint64_t, uint64_t> &paths,
                                                              uint64_t *entries) {
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> out;
  *entries = 0;
  for (auto [id, count] : paths) {
    auto edges = f.graph.decode(id);
    REQUIRE(edges);
    if (f.graph.edges()[edges->front()].kind != EdgeKind::kStart) *entries += count;
    for (uint32_t e : *edges) {
      const auto &d = f.graph.edges()[e];
      if (d.kind == EdgeKind::kBranch) out[{d.from, d.to}] += count;
      if (d.kind == EdgeKind::kBreak) {
        std::set<uint32_t> restart(f.info.blocks[d.from].succs.begin(), f.info.blocks[d.from].succs.end());
        for (uint32_t o : f.graph.out(d.from))
          if (f.graph.edges()[o].kind == EdgeKind::kBranch) restart.erase(f.graph.edges()[o].to);
        if (restart.size() == 1) out[{d.from, *restart.begin()}] += count;
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("e2e: edge counts of the k=1 profile equal clang's instrumentation profile of the same run") {
  size_t compared_branches = 0, compared_functions = 0;
  for (const Example &e : kExamples) {
    fs::path exe = build(e, "-O0 -fprofile-instr-generate -fcoverage-mapping", "pgo");
    fs::path raw = exe.string() + ".profraw", prof = exe.string() + ".profdata";
    an::ThreadPaths t = record(exe, e, "k=1", "LLVM_PROFILE_FILE=" + raw.string());
    run(std::string(HCCT_PROFDATA) + " merge -o " + prof.string() + " " + raw.string());
    auto cov = nlohmann::json::parse(run(std::string(HCCT_COV) + " export -format=text -instr-profile " + prof.string() + " " + exe.string()));
    an::PathMetadata meta;
    REQUIRE(meta.add_elf(exe));
    std::map<uint64_t, std::map<uint64_t, uint64_t>> paths;  // function -> path -> count
    for (const auto &n : t.forest.nodes) paths[n.label.function][n.label.path] += n.count;
    for (const auto &cf : cov["data"][0]["functions"]) {
      std::string name = cf["name"];
      name = name.substr(name.find(':') == std::string::npos ? 0 : name.find(':') + 1);  // "file.c:static"
      const an::PathFunction *f = nullptr;
      for (const auto &[id, pf] : meta.functions())
        if (pf.info.name == name) f = &pf;
      REQUIRE(f);
      // A function with one path and no loop carries no probe: its count is its entries, which
      // this profile does not have (docs/KPATH.md, "Functions without probes").
      if (f->info.flags & hcct::kpath::kFlagNotProbed) {
        CHECK(f->info.num_paths == 1);
        continue;
      }
      uint64_t entries = 0;
      auto edges = edge_counts(*f, paths[f->info.id], &entries);
      INFO(e.source << ": " << name);
      CHECK(entries == cf["count"].get<uint64_t>());
      ++compared_functions;
      // Two-way branches by line: compared where the line has exactly one on each side.
      std::map<uint32_t, std::vector<uint32_t>> ours;
      for (uint32_t b = 0; b < f->info.blocks.size(); ++b) {
        const auto &bi = f->info.blocks[b];
        if (bi.succs.size() == 2 && bi.succs[0] != bi.succs[1] && bi.term_line) ours[bi.term_line].push_back(b);
      }
      std::map<uint32_t, std::vector<nlohmann::json>> theirs;
      for (const auto &br : cf["branches"]) theirs[br[0].get<uint32_t>()].push_back(br);
      for (auto &[line, blocks] : ours) {
        if (blocks.size() != 1 || theirs[line].size() != 1) continue;
        const auto &bi = f->info.blocks[blocks[0]];
        INFO("line " << line);
        // clang may branch on the negated condition (`if (!p)`): compare the two outcomes as a pair.
        std::multiset<uint64_t> mine{edges[{blocks[0], bi.succs[0]}], edges[{blocks[0], bi.succs[1]}]};
        std::multiset<uint64_t> clang{theirs[line][0][4].get<uint64_t>(), theirs[line][0][5].get<uint64_t>()};
        CHECK(mine == clang);
        ++compared_branches;
      }
    }
  }
  CHECK(compared_functions >= 6);
  CHECK(compared_branches >= 8);
}

TEST_CASE("e2e: forest= accepts ksf and kwf and names both in its error") {
  const Example e{"collatz.c", "1000"};
  fs::path exe = build(e, "-O2", "forest");  // its own binary: test cases may run in parallel
  std::string text = run("HCCT_OPTIONS='forest=xyz' " + exe.string() + " 1000 2>&1");
  CHECK(text.find("forest='xyz' is not one of ksf, kwf") != std::string::npos);
  for (const ForestChoice &forest : kForests) {
    an::ThreadPaths t = record(exe, e, std::string("k=4:forest=") + forest.option);
    CHECK(t.forest.kind == forest.kind);
    CHECK(t.forest.paths > 0);
  }
}
