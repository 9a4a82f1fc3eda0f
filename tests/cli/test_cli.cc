// The hcct tool end to end: run as a subprocess on profiles written with the analysis writer (real
// addresses from tests/analysis/symtest) and, where the runtime is built, on a recorded program.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "hcct/analysis/writer.h"
#include "cli_util.h"
#include "testutil.h"

using namespace hcct::analysis;
using hcct::test::marker_line;
using hcct::test::TempDir;
using nlohmann::json;
namespace fs = std::filesystem;

using namespace clitest;

TEST_CASE("help teaches, with examples", "[cli]") {
  Result r = hcct_cmd({"--help"});
  CHECK(r.status == 0);
  for (const char *sub : {"record", "report", "dump", "info"}) {
    CHECK_THAT(r.out, Catch::Contains(sub));
    Result s = hcct_cmd({sub, "--help"});
    CHECK(s.status == 0);
    CHECK_THAT(s.out, Catch::Contains("Examples:"));
    CHECK_THAT(s.out, Catch::Contains(std::string("hcct ") + sub));
  }
}

TEST_CASE("hcct --version names the release", "[cli]") {
  Result r = hcct_cmd({"--version"});
  CHECK(r.status == 0);
  CHECK(r.out == "hcct " HCCT_VERSION "\n");
}

TEST_CASE("usage errors exit 1 with one message", "[cli]") {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {}, {"frobnicate"}, {"report", "--phi", "2"}, {"report", "--bogus"}, {"report", "--thread", "1", "--merge-threads"},
           {"record", "--mode", "fast", "--", "true"}, {"record", "--epsilon", "0", "--", "true"}, {"record"}}) {
    Result r = hcct_cmd(args);
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.rfind("hcct: ", 0) == 0);
  }
}

TEST_CASE("input errors name the file", "[cli]") {
  TempDir dir;
  SECTION("missing directory") {
    Result r = hcct_cmd({"report", (dir / "none").string()});
    CHECK(r.status == 1);
    CHECK(r.err == "hcct: " + (dir / "none").string() + ": No such file or directory\n");
  }
  SECTION("no profiles") {
    Result r = hcct_cmd({"info", dir.path().string()});
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains("no profile files"));
  }
  SECTION("corrupt profile") {
    std::ofstream(dir / "7.0.hcct") << "HCCTDUMP and then nonsense that is long enough for a header";
    for (const char *cmd : {"report", "dump", "info"}) {
      Result r = hcct_cmd({cmd, dir.path().string()});
      CHECK(r.status == 1);
      CHECK(r.err.rfind("hcct: " + (dir / "7.0.hcct").string() + ": ", 0) == 0);
      CHECK(count_lines(r.err) == 1);
    }
  }
  SECTION("no such process or thread") {
    ProfileDir pd;
    Result r = hcct_cmd({"report", pd.path(), "--pid", "1"});
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains("no process 1"));
    CHECK_THAT(r.err, Catch::Contains("4242 (threads 0 1)"));
    r = hcct_cmd({"dump", pd.path(), "--thread", "9"});
    CHECK(r.status == 1);
  }
}

TEST_CASE("report: symbolized hot tree in text", "[cli][report]") {
  ProfileDir pd;
  Result r = hcct_cmd({"report", pd.path(), "--pid", "4242", "--thread", "0", "--phi", "0.1", "--width", "0"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::Contains("pid 4242, thread 0"));
  CHECK_THAT(r.out, Catch::Contains("mode cct, key site: N = 705 calls; phi = 0.1, threshold floor(phi*N) = 70"));
  CHECK_THAT(r.out, Catch::Contains("# 2 hot contexts of 5 nodes"));
  CHECK_THAT(r.out, Catch::Contains("arg with space"));

  // Tree lines: main (cold: total 705, self 1), then its hot children by total: leaf (500) before
  // Widget (201 with the leaf below it). The 3-count leaf and the 1-count leaf below Widget are
  // not hot.
  std::vector<std::string> tree;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') tree.push_back(line);
  REQUIRE(tree.size() == 3);
  CHECK_THAT(tree[0], Catch::StartsWith("    705  100.00%        1    0.14%  main ("));
  CHECK_THAT(tree[1], Catch::StartsWith("    500   70.92%      500   70.92%    fixture_leaf ("));
  std::string leaf_def = "prog.c:" + std::to_string(marker_line(kSymtestDir / "prog.c", "MARK:leaf_def"));
  std::string call = "prog.c:" + std::to_string(marker_line(kSymtestDir / "prog.c", "MARK:main_calls_leaf"));
  CHECK_THAT(tree[1], Catch::Contains(leaf_def + ")  @ "));
  CHECK_THAT(tree[1], Catch::EndsWith(call));
  CHECK_THAT(tree[2], Catch::Contains("symtest::Widget::compute(int) ("));
  CHECK_THAT(tree[2], Catch::Contains("lib.cc:" + std::to_string(marker_line(kSymtestDir / "lib.cc", "MARK:widget_def"))));
  CHECK_THAT(tree[2], Catch::StartsWith("    201   28.51%      200   28.37%    symtest::Widget"));
}

TEST_CASE("report: lower phi, inline chains, depth", "[cli][report]") {
  ProfileDir pd;
  Result r = hcct_cmd({"report", pd.path(), "--pid", "4242", "--thread", "0", "--phi", "0", "--inline", "--width", "0"});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("# 5 hot contexts of 5 nodes"));
  std::string chain = "prog.c:" + std::to_string(marker_line(kSymtestDir / "prog.c", "MARK:helper_calls_leaf")) +
                      " in fixture_helper, inlined at ";
  CHECK(lines_with(r.out, chain).size() == 1);
  REQUIRE(lines_with(r.out, "inlined at").size() == 1);
  CHECK(lines_with(r.out, "inlined at")[0].find("main_calls_helper") == std::string::npos);
  // Without --inline: the innermost frame only, marked.
  Result folded = hcct_cmd({"report", pd.path(), "--pid", "4242", "--thread", "0", "--phi", "0", "--width", "0"});
  REQUIRE(folded.status == 0);
  CHECK(lines_with(folded.out, "inlined at").empty());
  std::string innermost = "prog.c:" + std::to_string(marker_line(kSymtestDir / "prog.c", "MARK:helper_calls_leaf")) + " [inlined]";
  CHECK(lines_with(folded.out, innermost).size() == 1);

  Result d = hcct_cmd({"report", pd.path(), "--pid", "4242", "--thread", "0", "--phi", "0", "--depth", "1"});
  REQUIRE(d.status == 0);
  CHECK(lines_with(d.out, "fixture_leaf").empty());
  CHECK(lines_with(d.out, "main (").size() == 1);
  CHECK_THAT(lines_with(d.out, "main (")[0], Catch::EndsWith("..."));
}

TEST_CASE("report: hcct mode header and unmonitored counts", "[cli][report]") {
  ProfileDir pd;
  Result r = hcct_cmd({"report", pd.path(), "--pid", "5000", "--phi", "0.1", "--width", "0"});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("mode hcct"));
  CHECK_THAT(r.out, Catch::Contains("epsilon = 0.2 (5 counters)"));
  // The fixture's counters never filled (min_count 0): nothing was evicted, so no estimate is off.
  CHECK_THAT(r.out, Catch::Contains("counts are exact (the counters never filled, nothing was evicted)"));
  CHECK_THAT(r.out, !Catch::Contains("at most 0 above"));
  // main is an unmonitored cold ancestor: no count of its own, a total of the estimates below it.
  auto main_line = lines_with(r.out, "main (");
  REQUIRE(main_line.size() == 1);
  CHECK_THAT(main_line[0], Catch::StartsWith("    704   99.86%        -        -  main ("));
}

TEST_CASE("report: hcct mode header states Space-Saving's bound once counters were evicted", "[cli][report]") {
  TempDir dir;
  ThreadProfile p = hcct::test::symtest_profile(fixture(), Mode::hcct, 5000, 0);
  p.meta.min_count = 3;
  write_profile(dir / profile_file_name(5000, 0), p);
  Result r = hcct_cmd({"report", dir.path().string(), "--phi", "0.1", "--width", "0"});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("counts are estimates, each at most 3 above the true count"));
  CHECK_THAT(r.out, !Catch::Contains("counts are exact"));
}

TEST_CASE("report --json", "[cli][report]") {
  ProfileDir pd;
  Result r = hcct_cmd({"report", pd.path(), "--phi", "0.1", "--json"});
  REQUIRE(r.status == 0);
  json j = json::parse(r.out);
  CHECK(j["schema"] == "hcct-report/1");
  REQUIRE(j["reports"].size() == 3);  // 4242/0, 4242/1, 5000/0
  json &rep = j["reports"][0];
  CHECK(rep["pid"] == 4242);
  CHECK(rep["threads"] == json::array({0}));
  CHECK(rep["merged"] == false);
  CHECK(rep["calls"] == 705);
  CHECK(rep["threshold"] == 70);
  CHECK(rep["error_bound"] == 0);
  REQUIRE(rep["nodes"].size() == 3);
  json &main_node = rep["nodes"][0];
  CHECK(main_node["parent"].is_null());
  CHECK(main_node["hot"] == false);
  CHECK(main_node["function"]["name"] == "main");
  json &leaf = rep["nodes"][1];
  CHECK(leaf["parent"] == 0);
  CHECK(leaf["depth"] == 2);
  CHECK(leaf["count"] == 500);
  CHECK(leaf["function"]["line"] == marker_line(kSymtestDir / "prog.c", "MARK:leaf_def"));
  CHECK(leaf["call"]["line"] == marker_line(kSymtestDir / "prog.c", "MARK:main_calls_leaf"));
  CHECK(leaf["call"]["frames"].size() == 1);
  CHECK(leaf["routine"].get<std::string>().rfind("0x", 0) == 0);
  json &hcct_rep = j["reports"][2];
  CHECK(hcct_rep["epsilon"] == 0.2);
  CHECK(hcct_rep["nodes"][0]["count"].is_null());
  CHECK(hcct_rep["nodes"][0]["monitored"] == false);
}

TEST_CASE("report --merge-threads adds the threads' counts", "[cli][report]") {
  ProfileDir pd;
  Result r = hcct_cmd({"report", pd.path(), "--pid", "4242", "--merge-threads", "--phi", "0", "--json"});
  REQUIRE(r.status == 0);
  json j = json::parse(r.out);
  REQUIRE(j["reports"].size() == 1);
  json &rep = j["reports"][0];
  CHECK(rep["merged"] == true);
  CHECK(rep["threads"] == json::array({0, 1}));
  CHECK(rep["calls"] == 1410);
  CHECK(rep["nodes"][1]["count"] == 1000);
  Result t = hcct_cmd({"report", pd.path(), "--pid", "4242", "--merge-threads"});
  CHECK_THAT(t.out, Catch::Contains("pid 4242, threads 0,1 merged"));
}

TEST_CASE("report with --no-symbols prints module offsets", "[cli]") {
  ProfileDir pd;
  Result r = hcct_cmd({"report", pd.path(), "--pid", "4242", "--thread", "0", "--phi", "0.1", "--no-symbols"});
  REQUIRE(r.status == 0);
  char expect[80];
  const auto &f = fixture();
  std::snprintf(expect, sizeof expect, "hcct_symtest_prog+0x%llx",
                static_cast<unsigned long long>(f.routines.at("leaf") - f.modules[0].bias));
  CHECK_THAT(r.out, Catch::Contains(expect));
  CHECK(lines_with(r.out, "fixture_leaf").empty());
}

TEST_CASE("a rebuilt binary is reported as stale, once per run", "[cli]") {
  TempDir dir;
  for (uint64_t seq : {0, 1, 2}) {
    ThreadProfile p = hcct::test::symtest_profile(fixture(), Mode::cct, 4242, seq);
    p.modules[0].build_id.assign(20, 0x5a);
    write_profile(dir / profile_file_name(4242, seq), p);
  }
  Result r = hcct_cmd({"report", dir.path().string(), "--phi", "0"});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("(stale binary)"));
  CHECK(count_lines(r.err) == 1);
  CHECK_THAT(r.err, Catch::StartsWith("hcct: warning: "));
}

TEST_CASE("dump lists every node", "[cli][dump]") {
  ProfileDir pd;
  Result r = hcct_cmd({"dump", pd.path(), "--pid", "4242", "--thread", "1"});
  REQUIRE(r.status == 0);
  CHECK(lines_with(r.out, "fixture_leaf").size() == 3);
  CHECK(lines_with(r.out, "(thread start)").size() == 1);
  CHECK(lines_with(r.out, "symtest::Widget::compute(int)").size() == 1);

  Result j = hcct_cmd({"dump", pd.path(), "--json"});
  REQUIRE(j.status == 0);
  json d = json::parse(j.out);
  CHECK(d["schema"] == "hcct-dump/1");
  REQUIRE(d["threads"].size() == 3);
  json &nodes = d["threads"][2]["nodes"];
  REQUIRE(nodes.size() == 6);
  CHECK(nodes[0]["parent"].is_null());
  CHECK(nodes[5]["parent"] == 4);
  CHECK(nodes[5]["depth"] == 3);
  CHECK(nodes[2]["monitored"] == true);
  CHECK(nodes[2]["flags"] == 1);
  CHECK(nodes[4]["function"]["name"] == "symtest::Widget::compute(int)");
}

TEST_CASE("info describes processes and threads", "[cli][info]") {
  ProfileDir pd;
  Result r = hcct_cmd({"info", pd.path(), "--modules"});
  REQUIRE(r.status == 0);
  CHECK(lines_with(r.out, "process 4242").size() == 1);
  CHECK(lines_with(r.out, "process 5000").size() == 1);
  CHECK(lines_with(r.out, "  thread ").size() == 3);
  CHECK(lines_with(r.out, "calls (N) 705").size() == 3);
  CHECK(lines_with(r.out, "libhcct_symtest_lib.so").size() == 2);

  Result j = hcct_cmd({"info", pd.path(), "--json", "--pid", "5000"});
  REQUIRE(j.status == 0);
  json d = json::parse(j.out);
  CHECK(d["schema"] == "hcct-info/1");
  REQUIRE(d["processes"].size() == 1);
  json &t = d["processes"][0]["threads"][0];
  CHECK(t["mode"] == "hcct");
  CHECK(t["counters"] == 5);
  CHECK(t["nodes"] == 5);
  CHECK(t["monitored"] == 4);
  CHECK(t["tree_depth"] == 3);
  CHECK(d["processes"][0]["cmdline"][1] == "arg with space");
  CHECK(t["modules"].size() == fixture().modules.size());
}

TEST_CASE("record: environment, exit status, summary", "[cli][record]") {
  TempDir dir;
  const std::string sh = "/bin/sh";
  const std::vector<std::pair<std::string, std::string>> env = {{"HCCT_RUNTIME", FAKE_RUNTIME},
                                                                {"LD_PRELOAD", ""}};
  SECTION("options and preload reach the program; its exit status comes back") {
    Result r = hcct_cmd({"record", "--mode", "hcct", "--epsilon", "0.001", "--key", "routine", "-o", "prof",
                         "--options", "extra=1", "--", sh, "-c",
                         "printf '%s\\n%s\\n' \"$LD_PRELOAD\" \"$HCCT_OPTIONS\" > env.txt; exit 7"},
                        env, dir.path());
    CHECK(r.status == 7);
    std::string got = hcct::test::read_text(dir / "env.txt");
    std::string runtime = fs::canonical(FAKE_RUNTIME).string();
    CHECK(got == runtime + "\nmode=hcct:epsilon=0.001:key=routine:out=" + (dir / "prof").string() + ":follow=1:extra=1\n");
    CHECK_THAT(r.err, Catch::Contains("no profile was written"));
  }
  SECTION("an existing LD_PRELOAD is kept, first") {
    auto env2 = env;
    env2[1].second = FAKE_RUNTIME;
    Result r = hcct_cmd({"record", "--", sh, "-c", "printf '%s' \"$LD_PRELOAD\" > env.txt"}, env2, dir.path());
    CHECK(r.status == 0);
    CHECK(hcct::test::read_text(dir / "env.txt") == std::string(FAKE_RUNTIME) + ":" + fs::canonical(FAKE_RUNTIME).string());
  }
  SECTION("arguments after PROG belong to PROG") {
    Result r = hcct_cmd({"record", sh, "-c", "echo \"$0 $1\" > args.txt", "--mode", "x"}, env, dir.path());
    CHECK(r.status == 0);
    CHECK(hcct::test::read_text(dir / "args.txt") == "--mode x\n");
  }
  SECTION("killed by a signal: 128 + signal") {
    Result r = hcct_cmd({"record", "--", sh, "-c", "kill -KILL $$"}, env, dir.path());
    CHECK(r.status == 128 + SIGKILL);
    CHECK_THAT(r.err, Catch::Contains("killed by signal 9"));
  }
  SECTION("files written during the run are counted") {
    ThreadProfile p = hcct::test::small_profile();
    write_profile(dir / "template.hcct", p);
    fs::create_directory(dir / "hcct.data");
    write_profile(dir / "hcct.data" / "1.0.hcct", p);  // from an earlier run: not counted
    Result r = hcct_cmd({"record", "--append", "--", sh, "-c",
                         "cp template.hcct hcct.data/77.0.hcct; cp template.hcct hcct.data/77.1.hcct; "
                         "cp template.hcct hcct.data/78.0.hcct; cp template.hcct hcct.data/.79.0.hcct.tmp"},
                        env, dir.path());
    CHECK(r.status == 0);
    CHECK_THAT(r.err, Catch::Contains("recorded 3 threads of 2 processes in"));
  }
  SECTION("a program that cannot run") {
    Result r = hcct_cmd({"record", "--", (dir / "nonexistent").string()}, env, dir.path());
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains("cannot run"));
    CHECK(count_lines(r.err) == 1);
  }
  SECTION("no runtime") {
    Result r = hcct_cmd({"record", "--", sh, "-c", "true"}, {{"HCCT_RUNTIME", (dir / "nope.so").string()}}, dir.path());
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains("HCCT_RUNTIME"));
  }
  SECTION("':' in the output directory is refused") {
    Result r = hcct_cmd({"record", "-o", "a:b", "--", sh, "-c", "true"}, env, dir.path());
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains("':'"));
  }
}

#ifdef HCCT_E2E_WORK
TEST_CASE("record and report a real instrumented program", "[cli][e2e]") {
  TempDir dir;
  const fs::path src = fs::path(HCCT_SOURCE_DIR) / "tests/cli/e2e/work.c";
  const std::vector<std::pair<std::string, std::string>> env = {{"HCCT_RUNTIME", HCCT_RUNTIME_SO}};

  SECTION("cct mode: exact counts") {
    Result rec = hcct_cmd({"record", "--mode", "cct", "-o", "cct.data", "--", HCCT_E2E_WORK}, env, dir.path());
    INFO(rec.err);
    REQUIRE(rec.status == 0);
    CHECK_THAT(rec.err, Catch::Contains("recorded 2 threads of 1 process"));
    Result r = hcct_cmd({"report", "cct.data", "--merge-threads", "--phi", "0.01", "--json"}, {}, dir.path());
    INFO(r.err);
    REQUIRE(r.status == 0);
    json rep = json::parse(r.out)["reports"][0];
    // main 1 + mid 120 + leaf 12000 + rare 1 + worker 1
    CHECK(rep["calls"] == 12123);
    uint64_t leaf_total = 0;
    for (json &n : rep["nodes"]) {
      if (n["function"]["name"] == "leaf") {
        leaf_total += n["count"].get<uint64_t>();
        CHECK(n["function"]["line"] == marker_line(src, "MARK:leaf_def"));
        CHECK(n["call"]["line"] == marker_line(src, "MARK:mid_calls_leaf"));
      }
    }
    CHECK(leaf_total == 12000);
  }
  SECTION("hcct mode: the hot context is found") {
    Result rec = hcct_cmd({"record", "--mode", "hcct", "--epsilon", "0.01", "--", HCCT_E2E_WORK}, env, dir.path());
    INFO(rec.err);
    REQUIRE(rec.status == 0);
    Result r = hcct_cmd({"report", "--thread", "0", "--phi", "0.5", "--json"}, {}, dir.path());
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    json rep = json::parse(r.out)["reports"][0];
    CHECK(rep["mode"] == "hcct");
    CHECK(rep["calls"] == 10102);  // main, 100 mid, 10,000 leaf, rare
    // Only main -> mid -> leaf reaches half of N; its estimate exceeds the true 10,000 by at most
    // the error bound.
    REQUIRE(rep["hot"] == 1);
    REQUIRE(rep["nodes"].size() == 3);
    json &leaf = rep["nodes"][2];
    CHECK(leaf["function"]["name"] == "leaf");
    CHECK(leaf["count"].get<uint64_t>() >= 10000);
    CHECK(leaf["count"].get<uint64_t>() <= 10000 + rep["error_bound"].get<uint64_t>());
    CHECK(rep["nodes"][0]["function"]["name"] == "main");
    CHECK(rep["nodes"][1]["function"]["name"] == "mid");
    Result info = hcct_cmd({"info", "--json"}, {}, dir.path());
    REQUIRE(info.status == 0);
    json i = json::parse(info.out);
    CHECK(i["processes"][0]["threads"].size() == 2);
  }
}
#endif
