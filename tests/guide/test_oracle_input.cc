// Hostile input to the oracle's thresholds (hcct/oracle.h, docs/GUIDE.md "Online hotness oracle"):
// HCCT_ORACLE and HCCT_ORACLE_GUIDE, read by programs/oracle_keys.c (linked with libhcct's core),
// which prints the threshold each of its keys got. Every malformed value must give exactly one
// line on stderr naming the variable (or file) and the problem, and the program must run with
// its defaults: no crash, no hang, no threshold taken from a value that was not understood.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/command.h"

namespace fs = std::filesystem;

namespace {

// One directory per test process: ctest -j runs this program's test cases at once, and they write
// files of the same names (stderr, good.json, ...).
fs::path work() {
  static const fs::path dir = hcct::test::work_directory("tests/guide/work/oracle_input/" + std::to_string(getpid()));
  return dir;
}

std::string read(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const fs::path &p, const std::string &text) { std::ofstream(p, std::ios::binary) << text; }

// Single-quoted for sh.
std::string quote(const std::string &s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Run {
  std::string out, err;
};

// Runs oracle_keys with `env` (assignments, already quoted) and the keys; it must exit 0.
Run keys(const std::string &env, const std::vector<std::string> &args) {
  std::string cmd = "env -u HCCT_ORACLE -u HCCT_ORACLE_GUIDE " + env + " timeout 20 " + HCCT_ORACLE_KEYS;
  for (const std::string &a : args) cmd += " " + quote(a);
  fs::path err = work() / "stderr";
  Run r;
  r.out = hcct::test::run_command(cmd + " 2>" + err.string());
  r.err = read(err);
  return r;
}

const std::vector<std::string> kKeys{"a.c:1", "a.c:2", "b.c:3"};
const std::string kDefaults = "a.c:1 1000\na.c:2 1000\nb.c:3 1000\n";

size_t lines(const std::string &s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

// A malformed HCCT_ORACLE: one line naming it and the problem, defaults everywhere.
void rejected_spec(const std::string &spec, const std::string &problem) {
  INFO("HCCT_ORACLE=" << spec);
  Run r = keys("HCCT_ORACLE=" + quote(spec), kKeys);
  CHECK(r.out == kDefaults);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.rfind("hcct oracle: HCCT_ORACLE='", 0) == 0);
  CHECK(r.err.find(problem) != std::string::npos);
  CHECK(r.err.find("; ignored\n") != std::string::npos);
}

// A guidance file the oracle cannot use: one line naming the file and the problem, defaults.
void rejected_guide(const fs::path &file, const std::string &problem) {
  INFO("guide " << file << ": " << (fs::is_regular_file(file) ? read(file).substr(0, 300) : std::string("(not a file)")));
  Run r = keys("HCCT_ORACLE_GUIDE=" + quote(file.string()), kKeys);
  CHECK(r.out == kDefaults);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.rfind("hcct oracle: HCCT_ORACLE_GUIDE=" + file.string() + ": ", 0) == 0);
  CHECK(r.err.find(problem) != std::string::npos);
  CHECK(r.err.find("; thresholds ignored\n") != std::string::npos);
}

fs::path guide_file(const std::string &name, const std::string &text) {
  fs::path p = work() / name;
  write(p, text);
  return p;
}

std::string guide_text(const std::string &loops) {
  return "{\"format\": \"hcct-guide\", \"version\": 1, \"k\": 4, \"loops\": [" + loops + "]}";
}

}  // namespace

TEST_CASE("oracle input: HCCT_ORACLE that is malformed, huge, overflowing or ambiguous is ignored with one line") {
  // Accepted values first (the test can tell accepted from ignored).
  CHECK(keys("", kKeys).out == kDefaults);
  CHECK(keys("", kKeys).err.empty());
  Run ok = keys("HCCT_ORACLE='a.c:1=5,b.c:3=0,a.c:1=5,b.c:3=18446744073709551615'", kKeys);
  CHECK(ok.err.find("a key given a second") != std::string::npos);  // b.c:3 twice, different
  ok = keys("HCCT_ORACLE='a.c:1=5,b.c:3=18446744073709551615,a.c:1=5'", kKeys);
  CHECK(ok.err.empty());
  CHECK(ok.out == "a.c:1 5\na.c:2 1000\nb.c:3 18446744073709551615\n");
  // Empty: unset.
  ok = keys("HCCT_ORACLE=", kKeys);
  CHECK(ok.err.empty());
  CHECK(ok.out == kDefaults);

  rejected_spec("a.c:1", "a key without =T at byte 5");
  rejected_spec("=5", "an empty key at byte 0");
  rejected_spec("a.c:1=", "not a decimal integer at byte 6");
  rejected_spec("a.c:1=-1", "not a decimal integer");
  rejected_spec("a.c:1=abc", "not a decimal integer");
  rejected_spec("a.c:1=5b", "not a decimal integer at byte 7");
  rejected_spec("a.c:1=1.5", "not a decimal integer");
  rejected_spec("a.c:1= 5", "not a decimal integer");
  rejected_spec("a.c:1=18446744073709551616", "above 2^64-1");  // 2^64
  rejected_spec("a.c:1=99999999999999999999999999", "above 2^64-1");
  rejected_spec("a.c:1=5,", "a trailing ','");
  rejected_spec(",a.c:1=5", "an empty key");
  rejected_spec("a.c:1=5,,a.c:2=6", "an empty key at byte 8");
  rejected_spec("a.c:1=5;a.c:2=6", "not a decimal integer");
  rejected_spec("a.c:1=1,a.c:1=2", "a key given a second, different threshold at byte 8");
  rejected_spec("a.c=1=5", "not a decimal integer");  // '=' in a key
  // Binary garbage: shown escaped, on one line (a newline in the value must not split it).
  rejected_spec(std::string("a.c:1=5\n\x01\x02\x7f\xff=3"), "\\x0a\\x01\\x02\\x7f");
  // Huge: 9000 bytes (valid syntax), only a prefix shown.
  std::string huge;
  for (int i = 0; huge.size() < 9000; ++i) huge += (i ? "," : "") + std::string("k") + std::to_string(i) + "=1";
  INFO("huge");
  Run r = keys("HCCT_ORACLE=" + quote(huge + ",a.c:1=5"), kKeys);
  CHECK(r.out == kDefaults);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("is longer than 8191 bytes; ignored") != std::string::npos);
  CHECK(r.err.size() < 300);
}

TEST_CASE("oracle input: guidance files that are missing, not regular, truncated, nested or mistyped are ignored with one line") {
  // The guide the hostile ones derive from: accepted, with escapes decoded and keys with ',' '='.
  std::string good = guide_text(
      "{\"rank\": 1, \"key\": \"a.c:1\", \"threshold\": 7, \"paths\": [{\"id\": 1, \"lines\": \"^1^\"}]},"
      "{\"rank\": 2, \"key\": \"a.c:2\", \"threshold\": null},"
      "{\"rank\": 3, \"key\": \"q\\\"u\\\\o\\/te\\u00e9\\ud83d\\ude00:4\", \"threshold\": 11},"
      "{\"rank\": 4, \"key\": \"x,y=z.c:5\", \"threshold\": 12, \"nested\": {\"a\": [1, 2.5e3, -1, true, false, null, \"}]\"]}}");
  fs::path g = guide_file("good.json", good);
  Run r = keys("HCCT_ORACLE_GUIDE=" + quote(g.string()), {"a.c:1", "a.c:2", "q\"u\\o/te\xc3\xa9\xf0\x9f\x98\x80:4", "x,y=z.c:5", "q\"u\\o/te:4"});
  CHECK(r.err.empty());
  CHECK(r.out == "a.c:1 7\na.c:2 1000\nq\"u\\o/te\xc3\xa9\xf0\x9f\x98\x80:4 11\nx,y=z.c:5 12\nq\"u\\o/te:4 1000\n");
  // HCCT_ORACLE still wins.
  r = keys("HCCT_ORACLE=a.c:1=3 HCCT_ORACLE_GUIDE=" + quote(g.string()), {"a.c:1"});
  CHECK(r.out == "a.c:1 3\n");

  // Every proper prefix of the good guide is truncated JSON.
  for (size_t n = 0; n < good.size(); n += (n < 40 || good.size() - n < 40) ? 1 : 7) {
    fs::path t = guide_file("truncated.json", good.substr(0, n));
    rejected_guide(t, n == 0 ? "empty file" : n < good.size() ? "at byte" : "");
  }

  rejected_guide(work() / "does-not-exist.json", "cannot open the file: No such file or directory");
  rejected_guide(work(), "not a regular file");
  rejected_guide(work() / "stderr" / "x.json", "cannot open the file: Not a directory");
  fs::path fifo = work() / "fifo.json";
  fs::remove(fifo);
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  rejected_guide(fifo, "not a regular file");  // and no hang waiting for a writer
  rejected_guide("/dev/zero", "not a regular file");

  struct Case {
    const char *name;
    std::string text, problem;
  };
  std::string deep(100000, '[');
  std::vector<Case> cases{
      {"spaces", "  \n\t ", "not a JSON object at byte 5"},
      {"array", "[1, 2]", "not a JSON object at byte 0"},
      {"garbage", std::string("\x7f" "ELF\x02\x01\x01\0\0\0{\"format\"", 18), "not a JSON object"},
      {"no-format", "{\"version\": 1, \"loops\": []}", "no \"format\": \"hcct-guide\""},
      {"other-format", "{\"format\": \"hcct-guidance\", \"version\": 1}", "\"format\" is not \"hcct-guide\""},
      {"format-number", "{\"format\": 5}", "\"format\" is not a string"},
      {"no-version", "{\"format\": \"hcct-guide\", \"loops\": []}", "no \"version\": 1"},
      {"version-2", "{\"format\": \"hcct-guide\", \"version\": 2, \"loops\": []}", "unsupported \"version\""},
      {"version-string", "{\"format\": \"hcct-guide\", \"version\": \"1\"}", "unsupported \"version\""},
      {"loops-object", guide_text("").replace(guide_text("").find('['), 2, "{}"), "\"loops\" is not an array"},
      {"loop-number", guide_text("5"), "a loop is not an object"},
      {"threshold-string", guide_text("{\"key\": \"a.c:1\", \"threshold\": \"5\"}"), "\"threshold\" is not a non-negative integer or null"},
      {"threshold-float", guide_text("{\"key\": \"a.c:1\", \"threshold\": 5.0}"), "\"threshold\" is not a non-negative integer or null"},
      {"threshold-exp", guide_text("{\"key\": \"a.c:1\", \"threshold\": 5e2}"), "\"threshold\" is not a non-negative integer or null"},
      {"threshold-negative", guide_text("{\"key\": \"a.c:1\", \"threshold\": -5}"), "\"threshold\" is not a non-negative integer or null"},
      {"threshold-true", guide_text("{\"key\": \"a.c:1\", \"threshold\": true}"), "\"threshold\" is not a non-negative integer or null"},
      {"threshold-2^64", guide_text("{\"key\": \"a.c:1\", \"threshold\": 18446744073709551616}"), "\"threshold\" is above 2^64-1"},
      {"threshold-huge", guide_text("{\"key\": \"a.c:1\", \"threshold\": 1" + std::string(400, '0') + "}"), "above 2^64-1"},
      {"key-number", guide_text("{\"key\": 5, \"threshold\": 5}"), "a loop's \"key\" is not a string"},
      {"key-nul", guide_text("{\"key\": \"a.c:1\\u0000x\", \"threshold\": 5}"), "contains \\u0000"},
      {"key-long", guide_text("{\"key\": \"" + std::string(5000, 'k') + "\", \"threshold\": 5}"), "longer than 4095 bytes"},
      {"key-bad-escape", guide_text("{\"key\": \"a\\qb\", \"threshold\": 5}"), "\"key\" is not a string"},
      {"key-lone-surrogate", guide_text("{\"key\": \"a\\udc00\", \"threshold\": 5}"), "\"key\" is not a string"},
      {"key-raw-newline", guide_text("{\"key\": \"a\nb\", \"threshold\": 5}"), "\"key\" is not a string"},
      {"unterminated-string", "{\"format\": \"hcct-guide\", \"version\": 1, \"x\": \"abc\\\"}", "malformed JSON"},
      {"deep", "{\"format\": \"hcct-guide\", \"version\": 1, \"x\": " + deep, "nested deeper than 64"},
      {"deep-in-loop", guide_text("{\"key\": \"a.c:1\", \"threshold\": 5, \"x\": " + deep + "}"), "nested deeper than 64"},
      {"nul-in-number", std::string("{\"format\": \"hcct-guide\", \"version\": 1, \"x\": 1") + std::string(2, '\0') + "}", "malformed JSON"},
      {"trailing", guide_text("") + " {}", "data after the JSON object"},
      {"missing-comma", "{\"format\": \"hcct-guide\" \"version\": 1}", "malformed JSON"},
      {"loop-missing-brace", guide_text("{\"key\": \"a.c:1\", \"threshold\": 5"), "malformed loop object"},
  };
  // 64 KiB of thresholds: too many loops, rejected as a whole (not a silent prefix).
  std::string many;
  for (int i = 0; i < 5000; ++i) many += (i ? "," : "") + std::string("{\"key\": \"many.c:") + std::to_string(i) + "\", \"threshold\": 5}";
  cases.push_back({"too-many", guide_text(many), "too many loops"});
  for (const Case &c : cases) rejected_guide(guide_file(std::string(c.name) + ".json", c.text), c.problem);

  // One key, two thresholds: the first applies, and it is said once.
  fs::path dup = guide_file("dup.json", guide_text("{\"key\": \"a.c:1\", \"threshold\": 7}, {\"key\": \"b.c:3\", \"threshold\": 9},"
                                                   "{\"key\": \"a.c:1\", \"threshold\": 70}, {\"key\": \"b.c:3\", \"threshold\": 9}"));
  r = keys("HCCT_ORACLE_GUIDE=" + quote(dup.string()), kKeys);
  CHECK(r.out == "a.c:1 7\na.c:2 1000\nb.c:3 9\n");
  CHECK(r.err == "hcct oracle: HCCT_ORACLE_GUIDE gives loop key 'a.c:1' several thresholds; the first, 7, applies\n");
  // A path with a newline is shown escaped: still one line.
  fs::path odd = work() / "odd\nname.json";
  write(odd, "{");
  r = keys("HCCT_ORACLE_GUIDE=" + quote(odd.string()), kKeys);
  CHECK(r.out == kDefaults);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("odd\\x0aname.json: malformed JSON at byte 1") != std::string::npos);
}

// Found by tests/fuzz/fuzz_oracle_guide (corpus: oracle_guide/regress-*), which compares what the
// oracle takes from a guidance file with what nlohmann::json reads in it: text that is not JSON was
// accepted (a value "+", a number "01"), a member name or "format" with \u0000 in it was read as the
// name before the NUL, and a second "loops" array added its loops to the first one's where a JSON
// reader keeps only the last.
TEST_CASE("oracle input: guidance files that are not JSON or are ambiguous are ignored with one line") {
  struct Case {
    const char *name;
    std::string text, problem;
  };
  const std::string head = "{\"format\": \"hcct-guide\", \"version\": 1, \"x\": ";
  std::vector<Case> cases{
      {"number-plus", head + "+}", "malformed JSON"},
      {"number-minus-minus", head + "--1}", "malformed JSON"},
      {"number-e", head + "e}", "malformed JSON"},
      {"number-inner-minus", head + "1-2}", "malformed JSON"},
      {"number-leading-zero", head + "01}", "malformed JSON"},
      {"number-dot", head + ".5}", "malformed JSON"},
      {"number-trailing-dot", head + "1.}", "malformed JSON"},
      {"number-bare-exponent", head + "1e}", "malformed JSON"},
      {"number-in-loop", guide_text("{\"key\": \"a.c:1\", \"threshold\": 5, \"x\": [1, +]}"), "malformed JSON in a loop"},
      {"version-leading-zero", "{\"format\": \"hcct-guide\", \"version\": 01}", "unsupported \"version\""},
      {"threshold-leading-zero", guide_text("{\"key\": \"a.c:1\", \"threshold\": 07}"), "\"threshold\" is not a non-negative integer or null"},
      {"format-nul", "{\"format\": \"hcct-guide\\u0000x\", \"version\": 1}", "\"format\" is not \"hcct-guide\""},
      {"two-loops", "{\"format\": \"hcct-guide\", \"version\": 1, \"loops\": [{\"key\": \"a.c:1\", \"threshold\": 5}], \"loops\": []}",
       "a second \"loops\""},
  };
  for (const Case &c : cases) rejected_guide(guide_file(std::string(c.name) + ".json", c.text), c.problem);

  // A member whose name is "key" or "threshold" up to a \u0000 is another member: no threshold.
  fs::path g = guide_file("nul-name.json", guide_text("{\"key\\u0000x\": \"a.c:1\", \"threshold\": 5},"
                                                      "{\"key\": \"a.c:2\", \"threshold\\u0000\": 6},"
                                                      "{\"key\": \"b.c:3\", \"threshold\": 7}"));
  Run r = keys("HCCT_ORACLE_GUIDE=" + quote(g.string()), kKeys);
  CHECK(r.err.empty());
  CHECK(r.out == "a.c:1 1000\na.c:2 1000\nb.c:3 7\n");
}
