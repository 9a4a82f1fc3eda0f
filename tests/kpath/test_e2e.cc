// End to end: the examples (examples/kpath/) compiled with clang -fpass-plugin=kpath.so and linked
// with libhcct.
//   - The k-IPF from the recorded k-SF equals direct n-gram counting over the raw stream the same
//     run recorded (path_trace=1), for several k; BLPP (k = 1) equals the 1-IPF.
//   - Every recorded path ID decodes through the metadata in the binary.
//   - Masked convolution: the 10-IPF shows both branches repeating in long runs (thesis Fig. 6.2).
//   - Edge counts implied by the k = 1 profile equal clang's own profile of the same run
//     (-fprofile-instr-generate, llvm-cov export): function entry counts and, for every two-way
//     branch whose source location maps to one coverage branch region, both outcome counts.
//   - `hcct paths` prints the forest (text and JSON).
#include <catch2/catch.hpp>

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

std::string run(const std::string &cmd) {
  std::string out;
  FILE *p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  INFO(cmd << "\n" << out);
  REQUIRE(rc == 0);
  return out;
}

fs::path work() {
  fs::path d = fs::path(HCCT_BINARY_DIR) / "tests/kpath/work/e2e";
  fs::create_directories(d);
  return d;
}

struct Example {
  const char *source;
  const char *args;
};
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

}  // namespace

TEST_CASE("e2e: k-IPF from the k-SF equals n-gram counting of the same run's stream") {
  for (const Example &e : kExamples) {
    fs::path exe = build(e, "-O2", "O2");
    an::PathMetadata meta;
    REQUIRE(meta.add_elf(exe));
    for (uint32_t k : {1u, 2u, 5u, 10u}) {
      INFO(e.source << " k = " << k);
      an::ThreadPaths t = record(exe, e, "k=" + std::to_string(k) + ":path_trace=1");
      REQUIRE(t.trace);
      REQUIRE(t.trace_lost == 0);
      REQUIRE(t.forest.lost == 0);
      REQUIRE(t.forest.k == k);
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
  fs::path exe = build(e, "-O2", "O2");
  an::ThreadPaths t = record(exe, e, "k=10");
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
