// A real program under kpath (label `real`): Lua 5.4 from Debian's source package (cached by
// scripts/debian-source.sh; the test skips with status 77 when it is not, and never downloads),
// built with clang -O2 -fpass-plugin=kpath.so, running bench/real's mixed script on its short
// input. The k-IPF recorded by the default configuration (k = 8, the default forest, the inline
// fast path taking most items) and by BLPP (k = 1) must equal n-gram counting of the stream that a
// traced run (path_trace=1, every item through the runtime) of the same deterministic input
// recorded. Lua seeds its string hashes from the clock and addresses: the build fixes the seed
// (-Dluai_makeseed=sizeof, i.e. a constant), and the runs have address randomisation off. Even so
// the program's path counts depend on where its stack starts, so every run's environment has the
// same size: the HCCT_OPTIONS below are spelled to the same length (with options of different
// lengths, BLPP counted 3,630,233 paths against the traced run's 3,630,232).
//
// The bounded forest (path_epsilon, docs/KPATH.md, "Bounded forests") at k = 16 and the default ε
// against the same oracle: its guarantee on every sequence, no hot sequence (φ = 10^-3) missing,
// and an average error of the hot sequences' counts of at most 1 %.
#include <catch2/catch.hpp>

#include "support/command.h"
#include "support/skip.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "hcct/analysis/kpath_ipf.h"
#include "hcct/analysis/kpath_profile.h"

namespace fs = std::filesystem;
namespace an = hcct::analysis;

namespace {

std::string run(const std::string &cmd) { return hcct::test::run_command(cmd); }

// The unpacked lua5.4 tree that scripts/debian-source.sh cached, or a skip.
fs::path cached_lua_source() {
  const char *cache = std::getenv("HCCT_SOURCE_CACHE");
  const char *home = std::getenv("HOME");
  fs::path dir = cache ? fs::path(cache) : fs::path(home ? home : "/") / ".cache/hcct/sources";
  std::ifstream in(dir / "lua5.4.dir");
  std::string tree;
  if (!(in >> tree) || !fs::exists(fs::path(tree) / "src" / "lvm.c"))
    hcct::test::skip_test("Lua 5.4's source is not cached in " + dir.string() +
                          " (scripts/debian-source.sh lua5.4 fetches it)");
  return tree;
}

fs::path work() { return hcct::test::work_directory("tests/kpath/work/real"); }

// Lua built with the pass and linked with the runtime, once per test run.
fs::path build_lua(const fs::path &tree) {
  fs::path dir = work() / "lua";
  fs::remove_all(dir);
  fs::copy(tree / "src", dir, fs::copy_options::recursive);
  std::string runtime = HCCT_RUNTIME;
  run("make -C " + dir.string() + " -j2 linux 'CC=" + HCCT_CLANG + " -std=gnu99' 'MYCFLAGS=-g -fpass-plugin=" +
      HCCT_KPATH_PLUGIN + " -Dluai_makeseed=sizeof' 'MYLIBS=" + runtime + " -Wl,-rpath," +
      fs::path(runtime).parent_path().string() + "' 2>&1");
  return dir / "lua";
}

// bench/real/workloads.py's mixed script, the one the benchmark runs.
fs::path lua_script() {
  fs::path script = work() / "mixed.lua";
  run("python3 -c 'import sys; sys.path.insert(0, \"" + std::string(HCCT_SOURCE_DIR) +
      "/bench/real\"); import workloads; sys.stdout.write(workloads.LUA_SCRIPT)' > " + script.string());
  return script;
}

struct Recorded {
  std::vector<an::ThreadPaths> threads;
  uint64_t paths = 0, slow = 0;
  std::string output;
};

Recorded record(const fs::path &lua, const fs::path &script, const std::string &options) {
  fs::path out = work() / "data";
  fs::remove_all(out);
  fs::path stderr_file = work() / "stderr";
  Recorded r;
  r.output = run("HCCT_OPTIONS='verbose=1:" + options + ":out=" + out.string() + "' setarch -R " + lua.string() + " " +
                 script.string() + " 0.05 2>" + stderr_file.string());
  std::ifstream in(stderr_file);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  for (size_t at = s.find("hcct kpath: thread"); at != std::string::npos; at = s.find("hcct kpath: thread", at + 1)) {
    r.paths += std::stoull(s.substr(s.find("paths=", at) + 6));
    r.slow += std::stoull(s.substr(s.find("slow=", at) + 5));
  }
  r.threads = an::read_thread_paths(out);
  REQUIRE(!r.threads.empty());
  return r;
}

std::map<std::vector<an::PathLabel>, uint64_t> forest_sequences(const Recorded &r, uint32_t k) {
  an::Ipf all;
  for (const auto &t : r.threads) {
    REQUIRE(t.forest.lost == 0);
    all.merge(an::make_k_ipf(t.forest, k));
  }
  return all.without_zero_counts().sequences();
}

// How many sequences differ, and the first few, for the failure message.
std::string differences(const std::map<std::vector<an::PathLabel>, uint64_t> &got,
                        const std::map<std::vector<an::PathLabel>, uint64_t> &want) {
  size_t differ = 0;
  std::string shown;
  auto note = [&](const std::vector<an::PathLabel> &seq, uint64_t g, uint64_t w) {
    if (g == w) return;
    if (differ++ < 5) {
      for (const auto &l : seq) shown += std::to_string(l.function % 1000) + ":" + std::to_string(l.path) + " ";
      shown += "got " + std::to_string(g) + " want " + std::to_string(w) + "\n";
    }
  };
  for (const auto &[seq, g] : got) note(seq, g, want.count(seq) ? want.at(seq) : 0);
  for (const auto &[seq, w] : want)
    if (!got.count(seq)) note(seq, 0, w);
  return std::to_string(differ) + " sequences differ\n" + shown;
}

}  // namespace

TEST_CASE("real: Lua's k-IPF (exact kWF, BLPP) equals n-gram counting of a traced run, and the bounded kWF keeps its guarantee") {
  fs::path tree = cached_lua_source();
  fs::path lua = build_lua(tree);
  fs::path script = lua_script();
  // Exact runs say path_epsilon=0 (the default bounds the forest); all options have one length.
  const std::string traced_options = "k=16:path_trace=1:path_epsilon=0.0000";
  const std::string exact_options = "k=8:path_trace=0:path_epsilon=0.00000";
  const std::string blpp_options = "k=1:path_trace=0:path_epsilon=0.00000";
  // The short input's exact kWF at k = 16 has 123 k nodes, below the default ε's budget once grown
  // (k/(2ε) = 80 k live nodes, up to 4 × 80 k with the default path_grow): ε = 5·10^-4 (16 k,
  // grown to 64 k, half the exact forest) makes it sweep, still below φ = 10^-3.
  const std::string bounded_options = "k=16:path_trace=0:path_epsilon=0.0005";
  for (const std::string *o : {&exact_options, &blpp_options, &bounded_options})
    REQUIRE(o->size() == traced_options.size());
  Recorded traced = record(lua, script, traced_options);
  REQUIRE(traced.slow == traced.paths);  // tracing sends every item through the runtime
  std::vector<std::vector<an::PathLabel>> streams;
  for (const auto &t : traced.threads) {
    REQUIRE(t.trace);
    REQUIRE(t.trace_lost == 0);
    for (auto &s : an::activation_streams(*t.trace))
      if (!s.empty()) streams.push_back(std::move(s));
  }
  // The exact forest (k = 8, the default forest kind) and BLPP.
  for (auto [options, k] : {std::pair<std::string, uint32_t>{exact_options, 8}, {blpp_options, 1}}) {
    INFO("HCCT_OPTIONS '" << options << "', k = " << k);
    Recorded fast = record(lua, script, options);
    REQUIRE(fast.output == traced.output);
    REQUIRE(fast.paths == traced.paths);
    // The inline fast path took most items (counts, not times): what is checked is its forest.
    CHECK(fast.slow * 4 < fast.paths);
    auto got = forest_sequences(fast, k), want = an::count_ngrams(streams, k).sequences();
    INFO(differences(got, want));
    CHECK(got == want);
  }

  // The bounded forest at k = 16: every count within its bound, no hot sequence missing, hot counts
  // within 1 % on average.
  Recorded bounded = record(lua, script, bounded_options);
  REQUIRE(bounded.output == traced.output);
  REQUIRE(bounded.paths == traced.paths);
  REQUIRE(bounded.threads.size() == 1);  // Lua runs one thread: one N, one bound
  const an::KsfForest &forest = bounded.threads[0].forest;
  REQUIRE(forest.bound.bounded());
  CHECK(forest.bound.sweeps > 0);  // the budget was reached: this is a bounded run, not an exact one
  CHECK(forest.bound.forced_sweeps == 0);
  CHECK(forest.bound.delta <= uint64_t(5e-4 * double(forest.paths)));
  auto got = an::make_k_ipf(forest, 16).sequences();
  auto want = an::count_ngrams(streams, 16).sequences();
  size_t over = 0, under = 0;
  for (const auto &[seq, count] : got) {
    uint64_t truth = want.count(seq) ? want.at(seq) : 0;
    if (count > truth) ++over;
    if (truth > count + forest.bound.error_bound(seq.size())) ++under;
  }
  size_t missing_cold_violations = 0;
  double phi = 1e-3, error_sum = 0;
  size_t hot = 0, false_negatives = 0;
  for (const auto &[seq, truth] : want) {
    auto it = got.find(seq);
    if (it == got.end() && truth > forest.bound.error_bound(seq.size())) ++missing_cold_violations;
    if (double(truth) < phi * double(forest.paths)) continue;
    ++hot;
    if (it == got.end()) {
      ++false_negatives;
      continue;
    }
    error_sum += double(truth - it->second) / double(truth);
  }
  INFO("N " << forest.paths << ", delta " << forest.bound.delta << ", cuts " << forest.bound.cuts << ", sweeps "
            << forest.bound.sweeps << ", nodes " << forest.nodes.size() << ", hot " << hot);
  CHECK(over == 0);
  CHECK(under == 0);
  CHECK(missing_cold_violations == 0);
  CHECK(hot > 100);
  CHECK(false_negatives == 0);
  CHECK(error_sum / double(hot) <= 0.01);
}
