// The offline tools on profiles that are legal but extreme or hostile (issues 13, 14, 21): output
// linear in the profile whatever its depth, no wait on a FIFO named in a profile, messages that
// bytes from a file cannot forge, lost calls and unmatched exits stated wherever counts are shown,
// and merged META figures combined by their own rules.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "hcct/analysis/reader.h"
#include "hcct/format.h"
#include "testutil.h"

using namespace clitest;
using nlohmann::json;

namespace {

// A cct profile of one recursion `depth` calls deep: every context entered once.
ThreadProfile deep_chain(uint32_t depth, uint64_t pid = 6000) {
  ThreadProfile p = hcct::test::small_profile(Mode::cct);
  p.meta.pid = pid;
  p.meta.tid = pid;
  p.meta.extra.clear();
  p.nodes.assign(size_t(depth) + 1, Node{});
  for (uint32_t i = 1; i <= depth; ++i) p.nodes[i] = {0x401100, i == 1 ? 0x7f0000001234ull : 0x401150ull, 1, i - 1, 0};
  p.meta.calls = depth;
  p.meta.max_depth = depth;
  p.meta.nodes_peak = depth + 1;
  return p;
}

// Runs `hcct ARGS` with stdout counted, not kept: at most `limit` + 1 bytes are read, so that a
// quadratic output fails the check instead of filling the disk. Returns {exit status, bytes}.
std::pair<int, uint64_t> output_size(const std::vector<std::string> &args, uint64_t limit) {
  std::string cmd = "'" + hcct_exe() + "'";
  for (const std::string &a : args) cmd += " '" + a + "'";
  Result r = run({"/bin/bash", "-c",
                  cmd + " 2>/dev/null | head -c " + std::to_string(limit + 1) + " | wc -c; exit ${PIPESTATUS[0]}"},
                 {}, {}, 600);
  return {r.status, std::stoull(r.out)};
}

}  // namespace

TEST_CASE("report, dump and the exports stay linear in a 10^6-deep recursion", "[cli][limits]") {
  TempDir dir;
  constexpr uint32_t kDepth = 1000000;
  write_profile(dir / profile_file_name(6000, 0), deep_chain(kDepth));
  const std::string d = dir.path().string();
  // Per context a line of bounded width: count, share, at most 31 indents and a depth marker, two
  // placeholder names. Indenting by depth would need ~10^12 bytes.
  const uint64_t bound = uint64_t(kDepth) * 200;
  for (std::vector<std::string> args : {std::vector<std::string>{"report", d, "--phi", "0", "--no-symbols"},
                                        std::vector<std::string>{"dump", d, "--no-symbols"}}) {
    auto [status, bytes] = output_size(args, bound);
    INFO(args[0]);
    CHECK(status == 0);
    CHECK(bytes <= bound);
  }
  SECTION("the deepest lines carry a depth marker instead of indentation") {
    Result r = run({"/bin/bash", "-c", "'" + hcct_exe() + "' dump '" + d + "' --no-symbols | tail -n 2 | head -n 1"});
    CHECK_THAT(r.out, Catch::Contains("[depth 1000000] "));
    CHECK(r.out.size() < 200);
  }
  SECTION("folded and pprof keep 128 frames by default, charge the rest and say so") {
    Result r = hcct_cmd({"export", d, "-f", "folded", "--no-symbols"});
    REQUIRE(r.status == 0);
    CHECK(count_lines(r.out) == 128);
    uint64_t sum = 0;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) sum += std::stoull(line.substr(line.rfind(' ') + 1));
    CHECK(sum == kDepth);  // totals kept: the deeper calls are charged to depth 128
    CHECK_THAT(r.err, Catch::Contains("999,872 calls"));
    CHECK_THAT(r.err, Catch::Contains("--depth 0 keeps every frame"));
    auto [status, bytes] = output_size({"export", d, "-f", "pprof", "--no-symbols"}, 1 << 20);
    CHECK(status == 0);
    CHECK(bytes < (1 << 20));
  }
  SECTION("json, dot and callgrind are one object of bounded size per context") {
    for (const char *f : {"json", "dot", "callgrind"}) {
      // JSON: a node object with its two symbol objects, about 400 bytes.
      auto [status, bytes] = output_size({"export", d, "-f", f, "--no-symbols"}, uint64_t(kDepth) * 500);
      INFO(f);
      CHECK(status == 0);
      CHECK(bytes <= uint64_t(kDepth) * 500);
    }
  }
}

TEST_CASE("folded and pprof leave out contexts below 1e-6 of all calls by default and say so", "[cli][limits]") {
  TempDir dir;
  ThreadProfile p = hcct::test::small_profile(Mode::cct);  // counts 7, 5, 300, 2, 1
  p.nodes[3].count = 10000000;                              // N = 10,000,015: floor(1e-6 N) = 10
  p.meta.calls = 10000015;
  write_profile(dir / profile_file_name(77, 0), p);
  const std::string d = dir.path().string();
  Result r = hcct_cmd({"export", d, "-f", "folded", "--no-symbols"});
  REQUIRE(r.status == 0);
  CHECK(count_lines(r.out) == 1);
  CHECK_THAT(r.err, Catch::Contains("4 contexts below 1e-6 of all calls (15 calls, 0.00%) are left out; --min-share 0 keeps everything"));
  r = hcct_cmd({"export", d, "-f", "folded", "--no-symbols", "--min-share", "0"});
  CHECK(count_lines(r.out) == 5);
  CHECK(r.err.empty());
  r = hcct_cmd({"export", d, "-f", "json", "--no-symbols"});  // formats of one object per context: no default
  CHECK(json::parse(r.out)["trees"][0]["selected"] == 5);
}

namespace {

void varint(Bytes &b, uint64_t v) {
  for (; v >= 0x80; v >>= 7) b.push_back(uint8_t(v | 0x80));
  b.push_back(uint8_t(v));
}

// A thread file whose module map names `module_path`, with a one-path BLPP KPTH section (k = 1) so
// that `hcct paths` and `hcct guide` look for kpath metadata in the module's file.
Bytes kpath_profile_naming(const std::string &module_path) {
  ThreadProfile p = hcct::test::small_profile();
  p.modules[0].path = module_path;
  Bytes kpth;
  for (uint64_t v : {2, 1, 0, 5, 1, 0, 1}) varint(kpth, v);  // version k forest paths enters lost count
  varint(kpth, 0);                                          // a root
  for (int i = 0; i < 8; ++i) kpth.push_back(i == 0 ? 9 : 0);  // function id 9
  varint(kpth, 0);                                          // path 0
  varint(kpth, 5);                                          // count
  std::vector<Section> sections{{hcct::format::kTagMeta, 0, encode_meta(meta_entries(p.meta))},
                                {hcct::format::kTagModules, 0, encode_modules(p.modules)},
                                {hcct::format::kTagTree, 0, encode_tree(p.nodes)},
                                {hcct::format::kTagPaths, 0, kpth}};
  return encode_file(sections);
}

}  // namespace

TEST_CASE("a FIFO named as a module gives one warning and every tool finishes", "[cli][limits]") {
  TempDir dir;
  const fs::path fifo = dir / "module.fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const fs::path data = dir / "data";
  fs::create_directories(data);
  Bytes file = kpath_profile_naming(fifo.string());
  std::ofstream(data / "77.0.hcct", std::ios::binary).write(reinterpret_cast<const char *>(file.data()), long(file.size()));
  for (std::vector<std::string> args :
       {std::vector<std::string>{"paths", data.string()},
        std::vector<std::string>{"guide", data.string(), "-o", (dir / "guide.json").string()},
        std::vector<std::string>{"report", data.string(), "--phi", "0"}}) {
    args.insert(args.begin(), hcct_exe());
    Result r = run(args, {}, {}, 30);  // a tool that opens the FIFO waits for a writer forever
    INFO(args[1] << ": " << r.err);
    CHECK(r.status == 0);
    CHECK(lines_with(r.err, fifo.string()).size() == 1);
    CHECK_THAT(r.err, Catch::Contains("not a regular file"));
  }
}

TEST_CASE("bytes from a file cannot forge a message or reach the terminal", "[cli][limits]") {
  TempDir dir;
  const std::string forged = "evil\nhcct: forged line\x1b[2J\x1b]0;title\x07 \xc2\x9b";  // 39 bytes: quoted whole
  SECTION("a META key and value in info and report") {
    ThreadProfile p = hcct::test::small_profile(Mode::cct);
    p.meta.extra = {{forged, forged}};
    p.meta.cmdline = {"prog", forged};
    write_profile(dir / profile_file_name(77, 0), p);
    for (const char *cmd : {"info", "report"}) {
      Result r = hcct_cmd({cmd, dir.path().string()});
      INFO(cmd << ": " << r.out);
      CHECK(r.status == 0);
      CHECK(r.out.find('\x1b') == std::string::npos);
      CHECK(r.out.find('\x07') == std::string::npos);
      CHECK(r.out.find("\xc2\x9b") == std::string::npos);
      CHECK(!lines_with(r.out, "forged line").empty());
      for (const std::string &line : lines_with(r.out, "forged line"))
        CHECK_THAT(line, Catch::Contains("evil\\nhcct: forged line\\e[2J\\e]0;title\\x07 \\u009b"));
      CHECK(r.out.find("\nhcct: forged") == std::string::npos);
    }
  }
  SECTION("a bad META value quoted in an error") {
    ThreadProfile p = hcct::test::small_profile(Mode::cct);
    auto entries = meta_entries(p.meta);
    for (auto &[k, v] : entries)
      if (k == "status") v = forged;
    std::vector<Section> sections{{hcct::format::kTagMeta, 0, encode_meta(entries)},
                                  {hcct::format::kTagModules, 0, encode_modules(p.modules)},
                                  {hcct::format::kTagTree, 0, encode_tree(p.nodes)}};
    Bytes file = encode_file(sections);
    std::ofstream(dir / "77.0.hcct", std::ios::binary).write(reinterpret_cast<const char *>(file.data()), long(file.size()));
    for (const char *cmd : {"info", "report", "dump"}) {
      Result r = hcct_cmd({cmd, dir.path().string()});
      INFO(cmd << ": " << r.err);
      CHECK(r.status == 1);
      CHECK(count_lines(r.err) == 1);
      CHECK(r.err.find('\x1b') == std::string::npos);
      CHECK_THAT(r.err, Catch::Contains("evil\\nhcct: forged line\\e[2J\\e]0;title\\x07 \\u009b"));
    }
  }
}

namespace {

// small_profile (cct, N = 315) with `lost` calls lost and `unmatched` unmatched exits.
ThreadProfile lossy(uint64_t lost, uint64_t unmatched, uint64_t pid = 77, uint64_t seq = 0) {
  ThreadProfile p = hcct::test::small_profile(Mode::cct);
  p.meta.pid = pid;
  p.meta.tid = pid + seq;
  p.meta.thread_seq = seq;
  p.meta.lost = lost;
  p.meta.unmatched_exits = unmatched;
  return p;
}

}  // namespace

TEST_CASE("lost calls and unmatched exits are stated and shares are of all calls", "[cli][limits]") {
  TempDir dir;
  ThreadProfile p = lossy(685, 2000);  // N = 315, all calls 1,000
  REQUIRE(p.meta.calls == 315);
  write_profile(dir / profile_file_name(77, 0), p);
  const std::string d = dir.path().string();
  SECTION("report: header warnings, shares of N + lost, JSON fields") {
    Result r = hcct_cmd({"report", d, "--phi", "0", "--no-symbols"});
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("N = 315 calls counted + 685 lost = 1,000 calls"));
    CHECK_THAT(r.out, Catch::Contains("# warning: 685 calls (68.50% of all calls) were lost when tree memory (max_mb) ran out"));
    CHECK_THAT(r.out, Catch::Contains("# warning: 2,000 exits had no matching enter"));
    CHECK(lines_with(r.out, "   300   30.00%  ").size() == 1);  // node 3: 300 of 1,000, not of 315
    Result j = hcct_cmd({"report", d, "--phi", "0", "--no-symbols", "--json"});
    json doc = json::parse(j.out);
    const json &rep = doc["reports"][0];
    CHECK(rep["lost"] == 685);
    CHECK(rep["all_calls"] == 1000);
    CHECK(rep["unmatched_exits"] == 2000);
    for (const json &n : rep["nodes"])
      if (n["count"] == 300) CHECK(n["share"].get<double>() == Approx(0.3));
  }
  SECTION("the threshold is of all calls") {
    // floor(0.005 * 1,000) = 5 keeps the counts 7, 5 and 300; of N it would be 1 and keep all five.
    Result j = hcct_cmd({"report", d, "--phi", "0.005", "--no-symbols", "--json"});
    json doc = json::parse(j.out);
    CHECK(doc["reports"][0]["threshold"] == 5);
    CHECK(doc["reports"][0]["hot"] == 3);
  }
  SECTION("info and dump") {
    Result r = hcct_cmd({"info", d});
    CHECK_THAT(r.out, Catch::Contains("calls (N) 315, lost 685, dropped 3, unmatched exits 2,000"));
    CHECK_THAT(r.out, Catch::Contains("warning: 685 calls"));
    CHECK_THAT(r.out, Catch::Contains("warning: 2,000 exits had no matching enter"));
    json info = json::parse(hcct_cmd({"info", d, "--json"}).out);
    CHECK(info["processes"][0]["threads"][0]["lost"] == 685);
    CHECK(info["processes"][0]["threads"][0]["unmatched_exits"] == 2000);
    CHECK(!info["processes"][0]["threads"][0]["extra"].contains("lost"));
    Result dump = hcct_cmd({"dump", d, "--no-symbols"});
    CHECK_THAT(dump.out, Catch::Contains("315 calls counted + 685 lost"));
    CHECK_THAT(dump.out, Catch::Contains("# warning: 2,000 exits"));
  }
  SECTION("exports carry them where the format can, and say so on stderr") {
    Result r = hcct_cmd({"export", d, "-f", "json", "--no-symbols"});
    json doc = json::parse(r.out);
    CHECK(doc["trees"][0]["lost"] == 685);
    CHECK(doc["trees"][0]["all_calls"] == 1000);
    CHECK_THAT(r.err, Catch::Contains("685 calls (68.50% of all calls) were lost"));
    r = hcct_cmd({"export", d, "-f", "callgrind", "--no-symbols"});
    CHECK_THAT(r.out, Catch::Contains("desc: Lost calls: 685"));
    r = hcct_cmd({"export", d, "-f", "dot", "--no-symbols"});
    CHECK_THAT(r.out, Catch::Contains("300 (30.00%)"));
    r = hcct_cmd({"export", d, "-f", "folded", "--no-symbols"});
    CHECK_THAT(r.err, Catch::Contains("were lost"));
    CHECK(hcct_cmd({"export", d, "-f", "pprof", "-o", (dir / "p.pb").string()}).status == 0);
    CHECK_THAT(hcct::test::read_text(dir / "p.pb"), Catch::Contains("lost calls: 685"));
  }
  SECTION("compare and merge") {
    Result r = hcct_cmd({"compare", d, d, "--no-symbols"});
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("# warning: reference: 685 calls"));
    TempDir out;
    ThreadProfile other = lossy(15, 1, 77, 1);
    other.meta.cmdline = {"prog", "other", "input"};
    write_profile(dir / profile_file_name(77, 1), other);
    r = hcct_cmd({"merge", d, "-o", (out / "m").string()});
    CHECK(r.status == 0);
    CHECK_THAT(r.err, Catch::Contains("N = 630 calls counted + 700 lost = 1,330 calls"));
    ThreadProfile m = read_profile(out / "m" / "77.0.hcct");
    CHECK(m.meta.lost == 700);
    CHECK(m.meta.unmatched_exits == 2001);
    Result merged = hcct_cmd({"report", (out / "m").string(), "--no-symbols"});
    CHECK_THAT(merged.out, Catch::Contains("# command: prog 'a b' (merged with 1 other commands"));
    CHECK_THAT(merged.out, Catch::Contains("# warning: 700 calls"));
  }
}

TEST_CASE("a merged bursting profile scales each thread by its own fraction", "[cli][limits][merge]") {
  TempDir dir;
  // Thread 0 sampled half its calls, thread 1 a quarter: whole-run estimates are 2x and 4x.
  for (auto [seq, fraction] : {std::pair<uint64_t, const char *>{0, "0.5"}, {1, "0.25"}}) {
    ThreadProfile p = lossy(0, 0, 77, seq);
    p.meta.extra = {{"burst", "timer"}, {"bursts", "10"}, {"events", seq ? "1260" : "630"},
                    {"sampled_fraction", fraction}, {"sampled_fraction_basis", "events"}};
    write_profile(dir / profile_file_name(77, seq), p);
  }
  const std::string d = dir.path().string();
  auto counts = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"report", d, "--phi", "0", "--no-symbols", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    json doc = json::parse(hcct_cmd(args).out);
    std::map<std::string, double> out;  // routine and call site -> whole-run estimate
    for (const json &rep : doc["reports"]) {
      double scale = rep.contains("scale") && !rep["scale"].is_null() ? rep["scale"].get<double>() : 1.0;
      for (const json &n : rep["nodes"])
        out[n["routine"].get<std::string>() + "@" + n["call_site"].dump()] += n["count"].get<double>() * scale;
    }
    return out;
  };
  std::map<std::string, double> per_thread = counts({});
  std::map<std::string, double> merged = counts({"--merge-threads"});
  REQUIRE(merged.size() == per_thread.size());
  for (const auto &[k, v] : per_thread) CHECK(merged[k] == Approx(v));
  CHECK(per_thread.begin()->second > 0);
  Result text = hcct_cmd({"report", d, "--merge-threads", "--no-symbols"});
  CHECK_THAT(text.out, Catch::Contains("each thread's counts were scaled by its own sampled fraction"));
  CHECK_THAT(text.out, !Catch::Contains("scale by"));
}
