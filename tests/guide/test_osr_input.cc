// Hostile guidance files for the kpath plugin's OSR points (kpath/src/GuidanceFile.cpp,
// docs/GUIDE.md "OSR points"): clang with HCCT_GUIDE (or -mllvm -hcct-guide) naming a missing,
// non-regular, truncated, deeply nested, mistyped or out-of-range guidance file must stop with a
// compile error naming the file and the problem: never a crash of clang (no stack dump), never a
// build with OSR points the file did not ask for (a line 2^32 + 14 is not line 14).
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/command.h"

namespace fs = std::filesystem;

namespace {

fs::path work() { return hcct::test::work_directory("tests/guide/work/osr_input"); }
std::string programs() { return std::string(HCCT_SOURCE_DIR) + "/tests/guide/programs/"; }

using Result = hcct::test::CommandResult;

// Runs `cmd` (stderr into the output), whatever its exit status.
Result run_any(const std::string &cmd) { return hcct::test::run_status(cmd + " 2>&1"); }

// Compiles osr_loops.c at -O0 with the plugin, no path probes, guidance `file`.
Result compile(const fs::path &file, bool via_mllvm = false) {
  std::string guide = via_mllvm ? std::string(" -Xclang -load -Xclang ") + HCCT_KPATH_PLUGIN + " -mllvm -hcct-guide=" + file.string()
                                : "";
  std::string env = via_mllvm ? "" : "HCCT_GUIDE='" + file.string() + "' ";
  return run_any(env + "HCCT_KPATH_PROFILE=0 timeout 120 " + HCCT_CLANG + " -g -O0 -c -fpass-plugin=" + HCCT_KPATH_PLUGIN +
                 guide + " " + programs() + "osr_loops.c -o " + (work() / "osr_loops.o").string());
}

// clang must fail cleanly with `hcct osr: ... '<file>': <problem>`.
void rejected(const fs::path &file, const std::string &problem, bool via_mllvm = false) {
  Result r = compile(file, via_mllvm);
  std::string head;
  if (fs::is_regular_file(file)) {
    std::ifstream in(file, std::ios::binary);
    head.resize(200);
    in.read(head.data(), 200);
    head.resize(size_t(in.gcount()));
  }
  INFO(file.string() << " (" << head << "):\n" << r.output);
  CHECK(r.status != 0);
  CHECK(r.status < 128);  // not killed by a signal
  CHECK(r.output.find("'" + file.string() + "'") != std::string::npos);
  CHECK(r.output.find(problem) != std::string::npos);
  for (const char *crash : {"Stack dump", "PLEASE submit", "Segmentation", "Aborted", "UNREACHABLE", "Assertion"})
    CHECK(r.output.find(crash) == std::string::npos);
}

fs::path file(const std::string &name, const std::string &text) {
  fs::path p = work() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// f's loop (line 14) is header block 1 at -O0 (test_osr.cc).
std::string loop(const std::string &members) { return "{\"function\": \"f\", \"key\": \"osr_loops.c:14\", " + members + "}"; }
std::string guide(const std::string &loops) {
  return "{\"format\": \"hcct-guide\", \"version\": 1, \"k\": 4, \"loops\": [" + loops + "]}";
}

}  // namespace

TEST_CASE("OSR input: hostile guidance files stop clang with the file and the problem, never a crash") {
  // The valid guide the hostile ones derive from compiles, and its OSR point is there.
  std::string good = guide(loop("\"rank\": 1, \"line\": 14, \"header_block\": 1, \"threshold\": 11") + ", " +
                           loop("\"line\": 14, \"header_block\": 1, \"threshold\": null"));
  {
    fs::path g = file("good.json", good);
    Result r = run_any("HCCT_GUIDE='" + g.string() + "' HCCT_KPATH_PROFILE=0 HCCT_OSR_VERBOSE=1 " + HCCT_CLANG +
                       " -g -O0 -c -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + programs() + "osr_loops.c -o " +
                       (work() / "good.o").string());
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("hcct osr: f: OSR point osr_loops.c:14 at header block 1 (line 14), threshold 11") != std::string::npos);
  }

  rejected(work() / "missing.json", "cannot read the guidance file");
  rejected(work(), "cannot read the guidance file");  // a directory
  rejected(file("empty.json", ""), "not JSON");
  // Truncated anywhere: some prefixes.
  for (size_t n : {size_t(1), size_t(10), size_t(30), size_t(55), good.size() / 2, good.size() - 20, good.size() - 1})
    rejected(file("truncated.json", good.substr(0, n)), "not JSON");

  struct Case {
    const char *name;
    std::string text, problem;
  };
  std::vector<Case> cases{
      {"deep", std::string(1000000, '['), "nested deeper than 256 levels"},
      {"deep-in-loop", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 11, \"x\": " + std::string(300, '{'))),
       "nested deeper than 256 levels"},
      {"garbage", std::string("\x7f" "ELF\x02\x01\x01\0\0\0\xff\xfe", 13), "not JSON"},
      {"bad-utf8", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 11, \"file\": \"\xc3\x28\"")), "not JSON"},
      {"other-format", "{\"format\": \"other\", \"version\": 1, \"loops\": []}", "not a guidance file"},
      {"version-3", "{\"format\": \"hcct-guide\", \"version\": 3, \"loops\": []}", "unsupported guidance version"},
      {"version-1.5", "{\"format\": \"hcct-guide\", \"version\": 1.5, \"loops\": []}", "unsupported guidance version"},
      {"no-version", "{\"format\": \"hcct-guide\", \"loops\": []}", "unsupported guidance version"},
      {"loops-object", "{\"format\": \"hcct-guide\", \"version\": 1, \"loops\": {}}", "no \"loops\" array"},
      {"loop-number", guide("5"), "loops[0] is not an object"},
      {"no-function", guide("{\"line\": 14, \"header_block\": 1, \"threshold\": 11}"), "loops[0]: needs \"function\""},
      {"no-threshold", guide(loop("\"line\": 14, \"header_block\": 1")), "needs \"function\", \"line\", \"header_block\" and \"threshold\""},
      {"line-string", guide(loop("\"line\": \"14\", \"header_block\": 1, \"threshold\": 11")), "\"line\" and \"header_block\" must be integers"},
      {"line-negative", guide(loop("\"line\": -14, \"header_block\": 1, \"threshold\": 11")), "must be integers in [0, 2^32-1]"},
      // 2^32 + 14 and 2^64 + 14 would have been line 14 once truncated to 32 bits.
      {"line-2^32+14", guide(loop("\"line\": 4294967310, \"header_block\": 1, \"threshold\": 11")), "must be integers in [0, 2^32-1]"},
      {"line-2^64+14", guide(loop("\"line\": 18446744073709551630, \"header_block\": 1, \"threshold\": 11")), "is out of range (above 2^63-1)"},
      {"block-2^32+1", guide(loop("\"line\": 14, \"header_block\": 4294967297, \"threshold\": 11")), "must be integers in [0, 2^32-1]"},
      {"block-float", guide(loop("\"line\": 14, \"header_block\": 1.0, \"threshold\": 11")), "must be integers"},
      {"threshold-0", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 0")), "\"threshold\" must be a positive integer"},
      {"threshold-negative", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": -11")), "\"threshold\" must be a positive integer"},
      {"threshold-float", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 11.5")), "\"threshold\" must be a positive integer"},
      {"threshold-exp", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 1e3")), "\"threshold\" must be a positive integer"},
      {"threshold-string", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": \"11\"")), "\"threshold\" must be a positive integer"},
      {"threshold-2^64", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 18446744073709551616")), "integer 18446744073709551616 at byte"},
      // (LLVM 14's JSON parser alone reads any integer of 2^63 or more as 2^63-1: checked on the text.)
      {"threshold-2^63", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 9223372036854775808")), "integer 9223372036854775808 at byte"},
      {"threshold-10^30", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 1" + std::string(30, '0'))), "is out of range (above 2^63-1)"},
      {"function-id-number", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 11, \"function_id\": 123")), "\"function_id\" must be a string"},
      {"function-id-garbage", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 11, \"function_id\": \"0xzz\"")), "\"function_id\" is not a 64-bit number"},
      {"function-id-2^64", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 11, \"function_id\": \"0x10000000000000000\"")), "\"function_id\" is not a 64-bit number"},
      {"key-number", guide("{\"function\": \"f\", \"key\": 5, \"line\": 14, \"header_block\": 1, \"threshold\": 11}"), "\"key\" must be a string"},
      {"rank-negative", guide(loop("\"rank\": -1, \"line\": 14, \"header_block\": 1, \"threshold\": 11")), "\"rank\" must be an integer in [0, 2^32-1]"},
      {"trailing", guide(loop("\"line\": 14, \"header_block\": 1, \"threshold\": 11")) + " {}", "not JSON"},
  };
  for (const Case &c : cases) rejected(file(std::string(c.name) + ".json", c.text), c.problem);
  // A bad HCCT_KPATH_PROFILE is the same kind of compile error.
  {
    Result r = run_any("HCCT_KPATH_PROFILE=maybe " + std::string(HCCT_CLANG) + " -O0 -c -fpass-plugin=" + HCCT_KPATH_PLUGIN +
                       " " + programs() + "osr_loops.c -o " + (work() / "profile.o").string());
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("error: hcct kpath: HCCT_KPATH_PROFILE='maybe' is not 0 or 1") != std::string::npos);
    CHECK(r.output.find("Stack dump") == std::string::npos);
  }
  // So is a bad HCCT_KPATH_STAGE.
  {
    Result r = run_any("HCCT_KPATH_STAGE=middle " + std::string(HCCT_CLANG) + " -O0 -c -fpass-plugin=" + HCCT_KPATH_PLUGIN +
                       " " + programs() + "osr_loops.c -o " + (work() / "stage.o").string());
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("error: hcct kpath: stage 'middle' (-kpath-stage or HCCT_KPATH_STAGE) is not 'early' or 'late'") !=
          std::string::npos);
    CHECK(r.output.find("Stack dump") == std::string::npos);
  }
  // The same through -mllvm -hcct-guide.
  rejected(file("deep-mllvm.json", std::string(100000, '{')), "nested deeper than 256 levels", true);
  rejected(file("line-mllvm.json", guide(loop("\"line\": 4294967310, \"header_block\": 1, \"threshold\": 11"))),
           "must be integers in [0, 2^32-1]", true);
}
