// OSR points from a guidance file (docs/GUIDE.md, "OSR points") and the oracle through libhcct:
//   - the handler fires exactly at the threshold-th header execution of each entry of each guided
//     loop, nowhere else (tests/guide/programs/osr_loops.c: the loops record their variables, so
//     the handler also sees where in the loop it was called), at -O0 and -O2, with and without
//     path probes;
//   - without a handler (no libhcct) the program prints what the unguided build prints; with
//     libhcct's default handler the events are recorded and reported;
//   - a guidance that does not match warns and inserts nothing (or uses the header on the line);
//   - the oracle's thresholds from HCCT_ORACLE / HCCT_ORACLE_GUIDE, profiler off or on;
//   - the worked example: every mode prints the baseline's checksum, the guided build switches.
#include <catch2/catch.hpp>

#include "guide_programs.h"
#include "support/command.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using guide_programs::programs;
using guide_programs::run;
using guide_programs::runtime_link;
fs::path work() { return hcct::test::work_directory("tests/guide/work/osr"); }
std::string clang(const std::string &flags) {
  return std::string(HCCT_CLANG) + " -g " + flags + " -I" + HCCT_SOURCE_DIR + "/libhcct/include -fpass-plugin=" +
         HCCT_KPATH_PLUGIN + " ";
}

// Profiles osr_loops.c built with `flags`, writes its guidance with the given thresholds per key
// suffix (line), returns the guidance file.
fs::path guidance(const std::string &flags, const std::string &name, const std::map<uint32_t, uint64_t> &thresholds) {
  fs::path exe = work() / (name + "_profile");
  run(clang(flags) + programs() + "osr_loops.c -o " + exe.string() + " " + runtime_link() + " 2>&1");
  fs::path data = exe.string() + ".data";
  fs::remove_all(data);
  run("HCCT_OPTIONS='k=4:out=" + data.string() + "' " + exe.string() + " >/dev/null");
  fs::path g = work() / (name + ".guide.json");
  run(std::string(HCCT_TOOL) + " guide " + data.string() + " --min-share 0 -o " + g.string() + " >/dev/null");
  std::ifstream in(g);
  json j = json::parse(in);
  REQUIRE(j["loops"].size() == 4);
  for (json &l : j["loops"]) {
    auto it = thresholds.find(l["line"].get<uint32_t>());
    l["threshold"] = it == thresholds.end() ? json() : json(it->second);
  }
  std::ofstream(g) << j.dump(1);
  return g;
}

std::vector<std::string> lines_of(const fs::path &p, const std::string &prefix) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);)
    if (l.rfind(prefix, 0) == 0) out.push_back(l);
  std::sort(out.begin(), out.end());
  return out;
}

std::string read(const fs::path &p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Lines of osr_loops.c: f's loop 14, g's 23, h's outer 33 and inner 34.
const std::map<uint32_t, uint64_t> kThresholds{{14, 11}, {23, 1000}, {33, 3}, {34, 50}};

// What the test handler prints: "osr KEY FUNCTION VERSION THRESHOLD ITERATION INNER_I OUTER_A".
// f(5), f(10), f(20) run 6, 11, 21 header executions: T = 11 fires in f(10) and f(20) with i = 9
// done last; g(100000): once at 1000 (i = 998 done); h's inner loop, 51 per entry, 4 entries:
// four times at 50 (b = 48 done; a = -1, 0, 1, 2 finished outer iterations); h's outer loop, 5
// header executions: once at 3 (a = 1 done, the inner loop's last b = 49).
const std::vector<std::string> kExpected = [] {
  std::vector<std::string> v{
      "osr osr_loops.c:14 f 1 11 11 9 -1",      "osr osr_loops.c:14 f 1 11 11 9 -1",
      "osr osr_loops.c:23 g 1 1000 1000 998 -1", "osr osr_loops.c:34 h 1 50 50 48 -1",
      "osr osr_loops.c:34 h 1 50 50 48 0",       "osr osr_loops.c:34 h 1 50 50 48 1",
      "osr osr_loops.c:34 h 1 50 50 48 2",       "osr osr_loops.c:33 h 1 3 3 49 1"};
  std::sort(v.begin(), v.end());
  return v;
}();

}  // namespace

TEST_CASE("OSR points: the handler fires exactly at each guided loop's threshold, nowhere else") {
  for (std::string flags : {"-O0", "-O2"}) {
    for (std::string profile : {"0", "1"}) {
      INFO(flags << ", path probes " << profile);
      std::string name = "loops" + flags + "_p" + profile;
      fs::path g = guidance(flags, name, kThresholds);
      fs::path exe = work() / (name + "_guided");
      std::string warnings = run("HCCT_GUIDE=" + g.string() + " HCCT_KPATH_PROFILE=" + profile + " " + clang(flags) +
                                 programs() + "osr_loops.c " + programs() + "osr_handler.c -o " + exe.string() + " " +
                                 runtime_link() + " 2>&1");
      CHECK(warnings.find("warning") == std::string::npos);
      fs::path log = exe.string() + ".log";
      fs::path data = exe.string() + ".data";
      std::string out = run("HCCT_OPTIONS='k=4:out=" + data.string() + "' " + exe.string() + " 2>" + log.string());
      CHECK(lines_of(log, "osr ") == kExpected);
      // Scaled so that g(200000) still fires once: once per entry, not per multiple.
      run(exe.string() + " 2 2>" + log.string() + " >/dev/null");
      CHECK(lines_of(log, "osr ") == kExpected);
    }
  }
}

TEST_CASE("OSR points: no handler behaves like the unguided build, the default handler records") {
  fs::path g = guidance("-O2", "nohandler", kThresholds);
  fs::path plain = work() / "loops_plain";
  run(std::string(HCCT_CLANG) + " -g -O2 " + programs() + "osr_loops.c -o " + plain.string());
  std::string want = run(plain.string());

  // OSR points only, no libhcct, no handler: the weak reference is null and nothing is called.
  fs::path bare = work() / "loops_bare";
  run("HCCT_GUIDE=" + g.string() + " HCCT_KPATH_PROFILE=0 " + clang("-O2") + programs() + "osr_loops.c -o " +
      bare.string() + " 2>&1");
  CHECK(run("nm " + bare.string() + " | grep -c ' w hcct_osr_handler'") == "1\n");
  CHECK(run("ldd " + bare.string() + " | grep -c libhcct || true") == "0\n");
  CHECK(run(bare.string() + " 2>&1") == want);

  // With libhcct: its default handler counts the events and reports them at exit.
  fs::path rec = work() / "loops_default";
  run("HCCT_GUIDE=" + g.string() + " HCCT_KPATH_PROFILE=0 " + clang("-O2") + programs() + "osr_loops.c -o " +
      rec.string() + " " + runtime_link() + " 2>&1");
  fs::path log = rec.string() + ".log";
  CHECK(run("HCCT_OPTIONS=mode=off HCCT_ORACLE_REPORT=1 HCCT_OSR_LOG=1 " + rec.string() + " 2>" + log.string()) == want);
  std::vector<std::string> events = lines_of(log, "hcct osr: osr_loops.c");
  std::string all = read(log);
  CHECK(all.find("hcct osr: osr_loops.c:14 (f, header block 1, threshold 11) fired 2 times") != std::string::npos);
  CHECK(all.find("hcct osr: osr_loops.c:23 (g, header block 1, threshold 1000) fired 1 times") != std::string::npos);
  CHECK(all.find("threshold 50) fired 4 times") != std::string::npos);
  CHECK(all.find("threshold 3) fired 1 times") != std::string::npos);
  CHECK(std::count_if(events.begin(), events.end(), [](const std::string &l) { return l.find("fired at iteration") != std::string::npos; }) == 8);
}

TEST_CASE("OSR points: a guidance that does not match warns") {
  fs::path g = guidance("-O0", "mismatch", kThresholds);
  json j = json::parse(read(g));
  for (json &l : j["loops"]) {
    if (l["line"] == 14) l["header_block"] = 0;  // wrong block, right line: found by its line
    if (l["line"] == 23) l["line"] = 22;         // no loop header at line 22: nothing inserted
  }
  std::ofstream(g) << j.dump(1);
  fs::path exe = work() / "loops_mismatch";
  std::string warnings = run("HCCT_GUIDE=" + g.string() + " HCCT_KPATH_PROFILE=0 " + clang("-O0") + programs() +
                             "osr_loops.c " + programs() + "osr_handler.c -o " + exe.string() + " 2>&1");
  CHECK(warnings.find("hcct osr: warning: guided loop osr_loops.c:14 (f, header block 0, line 14) does not match f: "
                      "block 0 is not a loop header; using the loop header at line 14 (block 1)") != std::string::npos);
  CHECK(warnings.find("hcct osr: warning: guided loop osr_loops.c:23 (g, header block 1, line 22) does not match g: "
                      "block 1 starts at line 23, and 0 loop headers start at line 22: no OSR point inserted") !=
        std::string::npos);
  fs::path log = exe.string() + ".log";
  run(exe.string() + " 2>" + log.string() + " >/dev/null");
  std::vector<std::string> want;
  for (const std::string &l : kExpected)
    if (l.find(":23 ") == std::string::npos) want.push_back(l);
  CHECK(lines_of(log, "osr ") == want);

  // Input errors: clear messages, no crash.
  fs::path bad = work() / "bad.json";
  std::ofstream(bad) << "{\"format\": \"something else\"}";
  std::string err = hcct::test::run_command("HCCT_GUIDE=" + bad.string() + " " + clang("-O0") + programs() +
                                            "osr_loops.c -o /dev/null 2>&1 || true");
  CHECK(err.find("hcct osr: guidance file '" + bad.string() + "': not a guidance file") != std::string::npos);
  err = run("HCCT_GUIDE=" + (work() / "missing.json").string() + " " + clang("-O0") + programs() +
            "osr_loops.c -o /dev/null 2>&1 || true");
  CHECK(err.find("hcct osr: cannot read the guidance file") != std::string::npos);
}

TEST_CASE("oracle through libhcct: thresholds from HCCT_ORACLE and the thresholds file, profiler off or on") {
  fs::path exe = work() / "oracle_prog";
  run(std::string(HCCT_CLANG) + " -g -O2 -I" + HCCT_SOURCE_DIR + "/libhcct/include " + programs() + "oracle_prog.c -o " +
      exe.string() + " " + runtime_link());
  fs::path g = work() / "oracle.thresholds";
  std::ofstream(g) << "# hcct-thresholds 1\nprog.c:1=40\nprog.c:3=7\n# end\n";
  for (std::string options : {std::string("mode=off"), "mode=hcct:out=" + (work() / "oracle_prog.data").string()}) {
    INFO(options);
    fs::path log = exe.string() + ".log";
    // HCCT_ORACLE wins over the thresholds file, which wins over the default (1000).
    std::string out = run("HCCT_OPTIONS=" + options + " HCCT_ORACLE=prog.c:3=1500 HCCT_ORACLE_GUIDE=" + g.string() +
                          " HCCT_ORACLE_REPORT=1 " + exe.string() + " 2>" + log.string());
    CHECK(out == "fired prog.c:1 40\nfired prog.c:1 40\nfired prog.c:1 40\nfired prog.c:3 1500\n");
    std::string report = read(log);
    CHECK(report.find("hcct oracle: prog.c:1  40  3  150  3\n") != std::string::npos);
    CHECK(report.find("hcct oracle: prog.c:2  1000  1  50  0\n") != std::string::npos);
    CHECK(report.find("hcct oracle: prog.c:3  1500  1  2000  1\n") != std::string::npos);
  }
  // A malformed HCCT_ORACLE is ignored with a message; the thresholds file still applies.
  std::string err = run("HCCT_OPTIONS=mode=off HCCT_ORACLE='prog.c:1' HCCT_ORACLE_GUIDE=" + g.string() + " " +
                        exe.string() + " 2>&1");
  CHECK(err.find("hcct oracle: HCCT_ORACLE='prog.c:1' is not key=T") != std::string::npos);
  CHECK(err.find("fired prog.c:3 7") != std::string::npos);
  err = run("HCCT_OPTIONS=mode=off HCCT_ORACLE_GUIDE=/nonexistent.thresholds " + exe.string() + " 2>&1");
  CHECK(err.find("hcct oracle: HCCT_ORACLE_GUIDE=/nonexistent.thresholds: cannot open the file") != std::string::npos);
}

TEST_CASE("worked example: identical output in every mode, the guided build switches") {
  fs::path dir = fs::path(HCCT_BINARY_DIR) / "examples/osr";
  REQUIRE(fs::exists(dir / "masked_conv_osr_guided"));
  // The guidance names filter_conv first, under the key the example registers with the oracle.
  json g = json::parse(read(dir / "masked_conv_osr.guide.json"));
  const json *osr = nullptr;  // the first loop with an OSR point (loops rank by share of iterations)
  for (const json &l : g["loops"])
    if (!osr && !l["threshold"].is_null()) osr = &l;
  REQUIRE(osr);
  CHECK((*osr)["function"] == "filter_conv");
  CHECK((*osr)["threshold"] == 1000);
  CHECK(run((dir / "masked_conv_osr").string() + " key") == (*osr)["key"].get<std::string>() + "\n");
  const std::string args = " 300 400 3";
  std::string want = run("HCCT_OPTIONS=mode=off " + (dir / "masked_conv_osr").string() + " base" + args);
  CHECK(want.find("checksum") != std::string::npos);
  for (std::string mode : {"spec", "oracle"})
    CHECK(run("HCCT_OPTIONS=mode=off " + (dir / "masked_conv_osr").string() + " " + mode + args) == want);
  for (std::string mode : {"base", "osr"}) {
    fs::path log = work() / "masked_conv_osr.log";
    std::string out = run("HCCT_OPTIONS=mode=off MASKED_CONV_VERBOSE=1 " + (dir / "masked_conv_osr_guided").string() + " " +
                          mode + args + " 2>" + log.string());
    CHECK(out == want);
    CHECK(read(log) == std::string("masked_conv_osr: ") + (mode == "osr" ? "3" : "0") + " OSR switches\n");
  }
  CHECK(run((dir / "masked_conv_osr_nohandler").string() + " base" + args) == want);
  // The oracle switches once per pass at its threshold, the one of `hcct guide --thresholds`'s file
  // (read without a word).
  std::string report = run("HCCT_OPTIONS=mode=off HCCT_ORACLE_REPORT=1 HCCT_ORACLE_GUIDE=" +
                           (dir / "masked_conv_osr.thresholds").string() + " " + (dir / "masked_conv_osr").string() +
                           " oracle" + args + " 2>&1 >/dev/null");
  CHECK(report.rfind("hcct oracle: loop  threshold  entries  iterations  fired\n", 0) == 0);
  CHECK(report.find("hcct oracle: masked_conv_osr.c:73  1000  3  360000  3\n") != std::string::npos);
}
