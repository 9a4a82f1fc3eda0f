// `hcct guide` (docs/GUIDE.md):
//   - tests/guide/programs/loops.c: every loop statistic against values computed by hand from the
//     program text (iterations = header executions, entries, iterations per entry, paths by kind
//     and count, run lengths), and the recommendations the rules of docs/GUIDE.md give;
//   - the kpath examples: the guidance names the loops one expects (masked convolution: the filter
//     loop first, its copy path unrolled x8; collatz: the trajectory loop is the hottest, the OSR
//     point goes into the loop that calls it; lexer: lex's loops).
#include <catch2/catch.hpp>

#include "support/command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string run(const std::string &cmd) { return hcct::test::run_command(cmd); }

fs::path work() { return hcct::test::work_directory("tests/guide/work"); }

// Builds `source` with the kpath plugin, runs it with k, returns the guidance JSON.
json guide(const std::string &source, const std::string &flags, const std::string &args, uint32_t k,
           const std::string &options = "") {
  fs::path exe = work() / fs::path(source).stem();
  run(std::string(HCCT_CLANG) + " -g " + flags + " -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + source + " -o " + exe.string() +
      " " + HCCT_RUNTIME + " -Wl,-rpath," + fs::path(HCCT_RUNTIME).parent_path().string() + " 2>&1");
  fs::path data = exe.string() + ".data";
  fs::remove_all(data);
  run("HCCT_OPTIONS='k=" + std::to_string(k) + ":out=" + data.string() + "' " + exe.string() + " " + args + " >/dev/null 2>&1");
  fs::path out = exe.string() + ".guide.json", thresholds = exe.string() + ".thresholds";
  run(std::string(HCCT_TOOL) + " guide " + data.string() + " " + options + " -o " + out.string() + " --thresholds " +
      thresholds.string() + " >/dev/null");
  std::ifstream in(out);
  json g = json::parse(in);
  // The oracle's thresholds file holds every loop of the guidance that has a threshold, in order.
  std::string expected = "# hcct-thresholds 1\n";
  for (const json &l : g["loops"])
    if (!l["threshold"].is_null())
      expected += l["key"].get<std::string>() + "=" + std::to_string(l["threshold"].get<uint64_t>()) + "\n";
  expected += "# end\n";
  std::ifstream t(thresholds);
  CHECK(std::string(std::istreambuf_iterator<char>(t), {}) == expected);
  return g;
}

const json *loop_at(const json &g, const std::string &function, uint32_t line) {
  for (const json &l : g["loops"])
    if (l["function"] == function && l["line"] == line) return &l;
  return nullptr;
}

std::map<std::string, std::vector<uint64_t>> counts_by_kind(const json &l) {
  std::map<std::string, std::vector<uint64_t>> out;
  for (const json &p : l["paths"]) out[p["kind"].get<std::string>()].push_back(p["count"].get<uint64_t>());
  for (auto &[k, v] : out) std::sort(v.rbegin(), v.rend());
  return out;
}

const json &path_with_count(const json &l, uint64_t count) {
  for (const json &p : l["paths"])
    if (p["count"] == count) return p;
  FAIL("no path with count " << count);
  throw;
}

}  // namespace

TEST_CASE("hand-computed loop statistics, value by value") {
  json g = guide(std::string(HCCT_SOURCE_DIR) + "/tests/guide/programs/loops.c", "-O0", "", 32, "--min-share 0");
  REQUIRE(g["format"] == "hcct-guide");
  REQUIRE(g["k"] == 32);

  // g(100000): one entry, 100001 header executions (the last one leaves).
  const json *lg = loop_at(g, "g", 15);
  REQUIRE(lg);
  CHECK((*lg)["rank"] == 1);
  CHECK((*lg)["iterations"] == 100001);
  CHECK((*lg)["entries"] == 1);
  CHECK((*lg)["innermost"] == true);
  CHECK((*lg)["threshold"] == 1000);  // mean 100001 >= 20000
  auto kinds = counts_by_kind(*lg);
  CHECK(kinds["entry"] == std::vector<uint64_t>{1});
  CHECK(kinds["cycle"] == std::vector<uint64_t>{99999});
  CHECK(kinds["exit"] == std::vector<uint64_t>{1});
  // One entry with >= 32 iterations.
  CHECK((*lg)["entries_at_least"] == std::vector<uint64_t>(32, 1));
  // The cycle path: one run of 99999, so path^j occurs 99999 - j + 1 times.
  const json &cycle = path_with_count(*lg, 99999);
  for (uint32_t j = 1; j <= 32; ++j) CHECK(cycle["repeats"][j - 1] == 99999 - j + 1);
  for (uint32_t j = 1; j < 32; ++j) CHECK(cycle["runs_at_least"][j - 1] == 1);
  bool osr = false, unroll16 = false;
  for (const json &r : (*lg)["recommendations"]) {
    if (r["kind"] == "osr-point") osr = true;
    if (r["kind"] == "unroll" && r["factor"] == 16) unroll16 = true;
  }
  CHECK(osr);
  CHECK(unroll16);

  // f(5), f(10), f(20): entries 3, header executions 6 + 11 + 21 = 38.
  const json *lf = loop_at(g, "f", 6);
  REQUIRE(lf);
  CHECK((*lf)["rank"] == 2);
  CHECK((*lf)["iterations"] == 38);
  CHECK((*lf)["entries"] == 3);
  CHECK((*lf)["threshold"].is_null());  // mean 12.7: too short for an OSR point
  // Per entry 6, 11, 21 header executions: entries with at least j.
  for (uint32_t j = 1; j <= 32; ++j) {
    uint64_t want = (j <= 6) + (j <= 11) + (j <= 21);
    INFO("j = " << j);
    CHECK((*lf)["entries_at_least"][j - 1] == want);
  }
  // Paths: the entry (i = 0 takes the else branch) 3; body with i % 4 != 3 after a back edge
  // 3 + 7 + 14 = 24; with i % 4 == 3: 1 + 2 + 5 = 8; the exit test 3.
  kinds = counts_by_kind(*lf);
  CHECK(kinds["entry"] == std::vector<uint64_t>{3});
  CHECK(kinds["cycle"] == (std::vector<uint64_t>{24, 8}));
  CHECK(kinds["exit"] == std::vector<uint64_t>{3});
  // Runs of the else path, per entry: f(5) 2,1; f(10) 2,3,2; f(20) 2,3,3,3,3.
  const json &a = path_with_count(*lf, 24);
  std::vector<uint64_t> repeats(32, 0), runs(31, 0);
  repeats[0] = 24, repeats[1] = 14, repeats[2] = 5;
  runs[0] = 10, runs[1] = 9, runs[2] = 5;
  CHECK(a["repeats"].get<std::vector<uint64_t>>() == repeats);
  CHECK(a["runs_at_least"].get<std::vector<uint64_t>>() == runs);
  const json &b = path_with_count(*lf, 8);
  CHECK(b["repeats"][0] == 8);
  CHECK(b["repeats"][1] == 0);
  CHECK(b["runs_at_least"][0] == 8);
  CHECK(std::abs(a["share"].get<double>() - 24.0 / 38) < 1e-9);
  for (const json &r : (*lf)["recommendations"]) CHECK(r["kind"] != "unroll");  // runs of 1-3 only
}

TEST_CASE("the examples' guidance names the expected loops") {
  std::string dir = std::string(HCCT_SOURCE_DIR) + "/examples/kpath/";
  {
    json g = guide(dir + "masked_conv.c", "-O2", "600 800 1", 10);
    // Loops rank by share of iterations (make_mask's short per-pixel loop may come first); the
    // first loop with an OSR point is filter_conv's.
    const json *osr = nullptr;
    for (const json &l : g["loops"])
      if (!osr && !l["threshold"].is_null()) osr = &l;
    REQUIRE(osr);
    const json &first = *osr;
    CHECK(first["function"] == "filter_conv");
    CHECK(first["threshold"] == 1000);
    bool unroll8 = false;
    for (const json &r : first["recommendations"])
      if (r["kind"] == "unroll" && r["factor"] == 8 && r["share"].get<double>() > 0.9) unroll8 = true;
    CHECK(unroll8);  // the thesis's Fig. 6.4
  }
  {
    // The trajectory loop in steps() has the most iterations, but ~100 per entry: no OSR point
    // there; the OSR point goes into main's loop over the start values (one long entry), which
    // calls it.
    json g = guide(dir + "collatz.c", "-O2", "20000", 8);
    uint64_t most = 0;
    std::string hottest;
    for (const json &l : g["loops"])
      if (l["iterations"].get<uint64_t>() > most) most = l["iterations"], hottest = l["function"];
    CHECK(hottest == "steps");
    // Ranked by share of iterations: the hottest loop first, with no OSR point; main's loop after
    // it, with one.
    CHECK(g["loops"][0]["function"] == "steps");
    CHECK(g["loops"][0]["threshold"].is_null());
    const json *main_loop = nullptr;
    for (const json &l : g["loops"])
      if (l["function"] == "main") main_loop = &l;
    REQUIRE(main_loop);
    CHECK((*main_loop)["threshold"] == 1000);
    for (size_t i = 1; i < g["loops"].size(); ++i)
      CHECK(g["loops"][i - 1]["iterations"].get<uint64_t>() >= g["loops"][i]["iterations"].get<uint64_t>());
  }
  {
    json g = guide(dir + "lexer.c", "-O2", "200000 2", 8);
    bool lex = false;
    for (size_t i = 0; i < 3 && i < g["loops"].size(); ++i) lex |= g["loops"][i]["function"] == "lex";
    CHECK(lex);
  }
}
