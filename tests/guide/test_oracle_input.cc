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
// files of the same names (stderr, good.thresholds, ...).
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

// A thresholds file (hcct/guide_format.h) holding `lines` between its header and its end.
std::string thresholds_text(const std::string &lines) { return "# hcct-thresholds 1\n" + lines + "# end\n"; }

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

TEST_CASE("oracle input: thresholds files that are missing, not regular, cut, mistyped or too large are ignored with one line") {
  // The file the hostile ones derive from: accepted, keys with ',' '=' and any bytes but NUL and
  // newline, comments and empty lines skipped.
  std::string good = thresholds_text(
      "a.c:1=7\n"
      "# a comment\n"
      "\n"
      "q\"u\\o/te\xc3\xa9\xf0\x9f\x98\x80:4=11\n"
      "x,y=z.c:5=12\n"
      "b.c:3=18446744073709551615\n");
  fs::path g = guide_file("good.thresholds", good);
  Run r = keys("HCCT_ORACLE_GUIDE=" + quote(g.string()),
               {"a.c:1", "a.c:2", "q\"u\\o/te\xc3\xa9\xf0\x9f\x98\x80:4", "x,y=z.c:5", "x,y", "b.c:3"});
  CHECK(r.err.empty());
  CHECK(r.out == "a.c:1 7\na.c:2 1000\nq\"u\\o/te\xc3\xa9\xf0\x9f\x98\x80:4 11\nx,y=z.c:5 12\nx,y 1000\nb.c:3 18446744073709551615\n");
  // HCCT_ORACLE still wins.
  r = keys("HCCT_ORACLE=a.c:1=3 HCCT_ORACLE_GUIDE=" + quote(g.string()), {"a.c:1"});
  CHECK(r.out == "a.c:1 3\n");

  // Every proper prefix of the good file is a cut file: refused, never half read.
  for (size_t n = 0; n < good.size(); ++n) {
    fs::path t = guide_file("cut.thresholds", good.substr(0, n));
    rejected_guide(t, n == 0 ? "empty file" : "at byte");
  }

  rejected_guide(work() / "does-not-exist.thresholds", "cannot open the file: No such file or directory");
  rejected_guide(work(), "not a regular file");
  rejected_guide(work() / "stderr" / "x.thresholds", "cannot open the file: Not a directory");
  fs::path fifo = work() / "fifo.thresholds";
  fs::remove(fifo);
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  rejected_guide(fifo, "not a regular file");  // and no hang waiting for a writer
  rejected_guide("/dev/zero", "not a regular file");

  struct Case {
    const char *name;
    std::string text, problem;
  };
  std::string many;  // 5000 thresholds of 21-byte keys: over the 64 KiB the oracle keeps
  for (int i = 0; i < 5000; ++i) many += "many.c:" + std::to_string(1000000 + i) + "-loop=5\n";
  std::vector<Case> cases{
      {"json", R"({"format": "hcct-guide", "version": 1, "loops": []})", "JSON, not a thresholds file"},
      {"spaces", "  \n\t ", "not a thresholds file (its first line is not '# hcct-thresholds 1'"},
      {"garbage", std::string("\x7f" "ELF\x02\x01\x01", 7), "not a thresholds file"},
      {"version-2", "# hcct-thresholds 2\n# end\n", "unsupported thresholds file version (this reader knows 1) at byte 18"},
      {"header-crlf", "# hcct-thresholds 1\r\n# end\n", "not a thresholds file"},
      {"nul", thresholds_text(std::string("a.c:1=5\0x\n", 10)), "a NUL byte at byte 27"},
      {"no-equals", thresholds_text("a.c:1\n"), "a line without =T at byte 25"},
      {"empty-key", thresholds_text("=5\n"), "an empty key at byte 20"},
      {"empty-threshold", thresholds_text("a.c:1=\n"), "a threshold that is not a decimal integer at byte 26"},
      {"negative", thresholds_text("a.c:1=-1\n"), "not a decimal integer at byte 26"},
      {"float", thresholds_text("a.c:1=1.5\n"), "not a decimal integer at byte 27"},
      {"space", thresholds_text("a.c:1= 5\n"), "not a decimal integer at byte 26"},
      {"trailing-space", thresholds_text("a.c:1=5 \n"), "not a decimal integer at byte 27"},
      {"crlf", thresholds_text("a.c:1=5\r\n"), "not a decimal integer at byte 27"},
      {"2^64", thresholds_text("a.c:1=18446744073709551616\n"), "a threshold above 2^64-1"},
      {"huge", thresholds_text("a.c:1=1" + std::string(400, '0') + "\n"), "a threshold above 2^64-1"},
      {"key-long", thresholds_text(std::string(4096, 'k') + "=5\n"), "a key longer than 4095 bytes"},
      {"no-end", "# hcct-thresholds 1\na.c:1=5\n", "no '# end' line (a cut file?) at byte 28"},
      {"no-newline", "# hcct-thresholds 1\na.c:1=5\n# end", "a last line without a newline (a cut file?) at byte 28"},
      {"after-end", thresholds_text("a.c:1=5\n") + "b.c:3=6\n", "data after '# end' at byte 34"},
      {"two-ends", thresholds_text("a.c:1=5\n") + "# end\n", "data after '# end'"},
      {"too-many", thresholds_text(many), "too many thresholds (64 KiB of them)"},
  };
  for (const Case &c : cases) rejected_guide(guide_file(std::string(c.name) + ".thresholds", c.text), c.problem);

  // One key, two thresholds: the first applies, and it is said once.
  fs::path dup = guide_file("dup.thresholds", thresholds_text("a.c:1=7\nb.c:3=9\na.c:1=70\nb.c:3=9\n"));
  r = keys("HCCT_ORACLE_GUIDE=" + quote(dup.string()), kKeys);
  CHECK(r.out == "a.c:1 7\na.c:2 1000\nb.c:3 9\n");
  CHECK(r.err == "hcct oracle: HCCT_ORACLE_GUIDE gives loop key 'a.c:1' several thresholds; the first, 7, applies\n");
  // A path with a newline is shown escaped: still one line.
  fs::path odd = work() / "odd\nname.thresholds";
  write(odd, "{");
  r = keys("HCCT_ORACLE_GUIDE=" + quote(odd.string()), kKeys);
  CHECK(r.out == kDefaults);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("odd\\x0aname.thresholds: JSON, not a thresholds file") != std::string::npos);
}
