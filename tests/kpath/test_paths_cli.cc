// `hcct paths` and `hcct guide` as commands (docs/KPATH.md, docs/GUIDE.md, docs/CLI.md), on a small
// program built with the kpath plugin and recorded with each run-time forest:
//   - `paths --json` carries "format": "hcct-paths", "version": 1, the recorded forest kind, path IDs
//     as JSON numbers, and validates against docs/hcct-paths.schema.json (python3-jsonschema), which
//     rejects the old shape; the text and DOT outputs name the forest kind; graphviz reads the DOT;
//   - --min-share is a fraction in [0, 1] in both commands (as in report/export): out-of-range values
//     are refused; every node shown clears the share, and the share hides nodes that 0 shows;
//   - --help teaches (columns, examples); input errors are one line "hcct: ..." naming the argument or
//     directory, with a non-zero exit status; a binary gone since the run is one warning, not an error.
#include <catch2/catch.hpp>

#include "support/command.h"
#include "support/skip.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path work() { return hcct::test::work_directory("tests/kpath/work/paths_cli"); }

const std::string kSchema = std::string(HCCT_SOURCE_DIR) + "/docs/hcct-paths.schema.json";

struct Result {
  int status = -1;
  std::string out, err;
};

std::string read_file(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a shell command; stdout and stderr captured separately.
Result sh(const std::string &cmd) {
  fs::path err = work() / ("stderr." + std::to_string(getpid()));
  hcct::test::CommandResult c = hcct::test::run_status(cmd + " 2>" + err.string());
  Result r;
  r.status = c.status;
  r.out = std::move(c.output);
  r.err = read_file(err);
  fs::remove(err);
  return r;
}

Result tool(const std::string &args) { return sh(std::string(HCCT_TOOL) + " " + args); }

// One error line: "hcct: ..." with every `needle` in it, a non-zero status and nothing on stdout.
void check_error(const Result &r, const std::vector<std::string> &needles) {
  INFO("stderr: " << r.err << "stdout: " << r.out);
  CHECK(r.status != 0);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("hcct: ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  for (const std::string &n : needles) CHECK(r.err.find(n) != std::string::npos);
}

// A loop whose common path (7 of 8 iterations) is mostly followed by itself and whose rare path
// never follows itself, and a second function with a loop of its own.
const char kProgram[] = R"(#include <stdlib.h>
__attribute__((noinline)) long spin(int n) {
  long s = 0;
  for (int i = 0; i < n; ++i) s += i & 3 ? i : -i;
  return s;
}
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8000;
  long s = 0;
  for (int i = 0; i < n; ++i) {
    if (i % 8 == 7) s += spin(i % 64);
    else s += i;
  }
  return (int)(s & 1);
}
)";

// Built once per process under a private name: test cases may run in parallel processes (ctest -j),
// and a binary replaced while another process runs it would be recorded as "(deleted)", without
// metadata. Removed at exit.
struct Program {
  fs::path exe;
  Program() {
    const std::string tmp = "." + std::to_string(getpid());
    fs::path src = work() / "twopaths.c";
    exe = work() / ("twopaths" + tmp);
    std::ofstream(src.string() + tmp) << kProgram;
    fs::rename(src.string() + tmp, src);  // the same text whoever writes it last
    hcct::test::run_command(std::string(HCCT_CLANG) + " -g -O0 -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + src.string() +
                            " -o " + exe.string() + " " + HCCT_RUNTIME + " -Wl,-rpath," +
                            fs::path(HCCT_RUNTIME).parent_path().string() + " 2>&1");
  }
  ~Program() {
    std::error_code ec;
    fs::remove(exe, ec);
  }
};

const fs::path &program() {
  static const Program p;
  return p.exe;
}

// Records one run into a fresh directory `name` with HCCT_OPTIONS=<options>.
fs::path record(const std::string &name, const std::string &options) {
  fs::path data = work() / name;
  fs::remove_all(data);
  hcct::test::run_command("HCCT_OPTIONS='" + options + ":out=" + data.string() + "' " + program().string() + " 2>&1");
  return data;
}

bool have_jsonschema() { return sh("/usr/bin/python3 -c 'import jsonschema'").status == 0; }

Result validate(const fs::path &doc) {
  fs::path script = work() / ("validate." + std::to_string(getpid()) + ".py");
  std::ofstream(script) << "import json, sys, jsonschema\n"
                           "schema = json.load(open(sys.argv[2]))\n"
                           "jsonschema.Draft202012Validator.check_schema(schema)\n"
                           "jsonschema.Draft202012Validator(schema).validate(json.load(open(sys.argv[1])))\n";
  Result r = sh("/usr/bin/python3 " + script.string() + " " + doc.string() + " " + kSchema);
  fs::remove(script);
  return r;
}

json paths_json(const fs::path &data, const std::string &extra = "") {
  Result r = tool("paths " + data.string() + " --json " + extra);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

// Every node of a function's forest, with its depth (roots 0).
void each_node(const json &nodes, int depth, const std::function<void(const json &, int)> &fn) {
  for (const json &n : nodes) {
    fn(n, depth);
    each_node(n["children"], depth + 1, fn);
  }
}

const json &function_named(const json &doc, const std::string &name) {
  for (const json &f : doc["functions"])
    if (f["name"] == name) return f;
  FAIL("no function " << name);
  throw;
}

}  // namespace

TEST_CASE("paths --json: format, version, forest kind, numeric path IDs, schema", "[kpath][cli]") {
  // The schema and DOT checks below need both tools: without one the test case is SKIPPED, not
  // passed with fewer checks.
  if (!have_jsonschema()) hcct::test::skip_test("python3-jsonschema not installed");
  if (access("/usr/bin/dot", X_OK) != 0) hcct::test::skip_test("graphviz not installed");
  struct Case {
    std::string options, kind;
    uint32_t k;
  };
  for (const Case &c : {Case{"k=4:forest=ksf", "k-SF", 4}, Case{"k=4:forest=kwf", "kWF", 4}, Case{"k=1", "BLPP", 1}}) {
    SECTION(c.options) {
      fs::path data = record("json-" + c.kind, c.options);
      json j = paths_json(data, "--min-share 0");
      CHECK(j["format"] == "hcct-paths");
      CHECK(j["version"] == 1);
      CHECK(j["k"] == c.k);
      CHECK(j["recorded_k"] == c.k);
      CHECK(j["forest_kind"] == c.kind);
      CHECK(j["min_share"] == 0.0);
      REQUIRE(j["threads"].size() == 1);
      CHECK(j["threads"][0]["forest_kind"] == c.kind);
      CHECK(j["threads"][0]["lost"] == 0);
      const json &m = function_named(j, "main");
      CHECK(m["line"] == 7);
      CHECK(fs::path(m["file"].get<std::string>()).filename() == "twopaths.c");
      // The legend lists exactly the IDs in the forest, as numbers, each decoded.
      std::set<uint64_t> legend, used;
      for (const json &p : m["paths"]) {
        REQUIRE(p["id"].is_number_unsigned());
        legend.insert(p["id"].get<uint64_t>());
        CHECK(p["lines"].is_string());
        CHECK(p["blocks"].is_array());
      }
      uint64_t roots = 0;
      int deepest = 0;
      each_node(m["forest"], 0, [&](const json &n, int depth) {
        REQUIRE(n["path"].is_number_unsigned());
        used.insert(n["path"].get<uint64_t>());
        if (depth == 0) roots += n["count"].get<uint64_t>();
        deepest = std::max(deepest, depth);
      });
      CHECK(legend == used);
      CHECK(roots == m["total"].get<uint64_t>());  // nothing hidden at --min-share 0
      CHECK(deepest == int(c.k) - 1);
      // The text header and the DOT label name the forest kind.
      Result text = tool("paths " + data.string());
      REQUIRE(text.status == 0);
      std::string first = text.out.substr(0, text.out.find('\n'));
      CHECK_THAT(first, Catch::Contains(std::to_string(c.k) + "-IPF from") && Catch::Contains(c.kind) &&
                            Catch::Contains("recorded with k = " + std::to_string(c.k)));
      Result dot = tool("paths " + data.string() + " --dot");
      REQUIRE(dot.status == 0);
      CHECK_THAT(dot.out, Catch::Contains(c.kind));
      // -o writes exactly what standard output gets, and nothing else is printed.
      for (const std::string format : {"", " --json", " --dot"}) {
        fs::path file = work() / ("paths-o-" + c.kind + ".out");
        Result to_file = tool("paths " + data.string() + format + " -o " + file.string());
        REQUIRE(to_file.status == 0);
        CHECK(to_file.out.empty());
        CHECK(read_file(file) == tool("paths " + data.string() + format).out);
      }
      {
        fs::path file = work() / ("kipf-" + c.kind + ".dot");
        std::ofstream(file) << dot.out;
        Result g = sh("/usr/bin/dot -Tsvg " + file.string() + " -o /dev/null");
        INFO(g.err);
        CHECK(g.status == 0);
        CHECK(g.err.empty());
      }
      {
        for (const std::string extra : {"--min-share 0", "", "--min-share 0.5", "--function spin", "--k 1"}) {
          fs::path doc = work() / ("paths-" + c.kind + ".json");
          Result r = tool("paths " + data.string() + " --json " + extra);
          REQUIRE(r.status == 0);
          std::ofstream(doc) << r.out;
          Result v = validate(doc);
          INFO(extra << "\n" << v.out << v.err);
          CHECK(v.status == 0);
        }
      }
    }
  }
}

TEST_CASE("paths: the schema rejects what it should", "[kpath][cli]") {
  if (!have_jsonschema()) hcct::test::skip_test("python3-jsonschema not installed");
  {
    // The schema really checks: the shape before version 1 (string path IDs, no format) is refused,
    // and so is a string ID in today's shape.
    fs::path data = record("reject", "k=3:forest=kwf");
    json j = paths_json(data);
    fs::path doc = work() / "broken.json";
    json old = j;
    old.erase("format");
    old.erase("version");
    std::ofstream(doc) << old.dump();
    CHECK(validate(doc).status != 0);
    json bad = j;
    REQUIRE(!bad["functions"].empty());
    bad["functions"][0]["forest"][0]["path"] = std::to_string(bad["functions"][0]["forest"][0]["path"].get<uint64_t>());
    std::ofstream(doc) << bad.dump();
    CHECK(validate(doc).status != 0);
    std::ofstream(doc) << j.dump();
    CHECK(validate(doc).status == 0);
  }
}

TEST_CASE("paths: threads of both forests are summed and reported as mixed", "[kpath][cli]") {
  fs::path data = record("mixed", "k=4:forest=ksf");
  hcct::test::run_command("HCCT_OPTIONS='k=4:forest=kwf:out=" + data.string() + "' " + program().string() + " 2>&1");
  json j = paths_json(data, "--min-share 0");
  CHECK(j["forest_kind"] == "mixed");
  REQUIRE(j["threads"].size() == 2);
  std::set<std::string> kinds;
  for (const json &t : j["threads"]) kinds.insert(t["forest_kind"].get<std::string>());
  CHECK(kinds == std::set<std::string>{"k-SF", "kWF"});
  // Two identical deterministic runs: every count is even, the sum of two equal forests.
  json one = paths_json(data, "--min-share 0 --pid " + std::to_string(j["threads"][0]["pid"].get<uint64_t>()));
  CHECK(function_named(j, "main")["total"].get<uint64_t>() == 2 * function_named(one, "main")["total"].get<uint64_t>());
  Result text = tool("paths " + data.string());
  CHECK_THAT(text.out.substr(0, text.out.find('\n')), Catch::Contains("k-SFs and kWFs") && Catch::Contains("2 threads"));
}

TEST_CASE("paths and guide: --min-share is a fraction from 0 to 1", "[kpath][cli]") {
  fs::path data = record("share", "k=4");
  for (const char *cmd : {"paths", "guide"}) {
    for (const char *bad : {"1.5", "50", "-0.1"}) {
      Result r = tool(std::string(cmd) + " " + data.string() + " --min-share " + bad);
      INFO(cmd << " --min-share " << bad);
      check_error(r, {"--min-share"});
    }
  }
  // paths: every node shown clears the share; at 0 some do not (so the filter did something).
  json all = paths_json(data, "--min-share 0"), half = paths_json(data, "--min-share 0.5");
  CHECK(half["min_share"] == 0.5);
  auto below = [](const json &doc, double f) {
    size_t n = 0, total = 0;
    for (const json &fn : doc["functions"])
      each_node(fn["forest"], 0, [&](const json &node, int depth) {
        ++total;
        if (depth == 0 ? node["share_of_function"].get<double>() < f
                       : node["share_of_parent"].get<double>() < f || node["share_of_root"].get<double>() < f)
          ++n;
      });
    return std::pair(n, total);
  };
  CHECK(below(half, 0.5).first == 0);
  CHECK(below(all, 0.5).first > 0);
  CHECK(below(half, 0.5).second < below(all, 0.5).second);
  // The default is 0.01: the rare path after the common one (1 in 7) stays; below 1 % goes.
  json dflt = paths_json(data);
  CHECK(dflt["min_share"] == 0.01);
  CHECK(below(dflt, 0.01).first == 0);
  // guide: loops below the share of all loop iterations are left out.
  auto loops = [&](const std::string &share) {
    fs::path out = work() / "share.guide.json";
    Result r = tool("guide " + data.string() + " --min-share " + share + " -o " + out.string() + " --json");
    INFO(r.err);
    REQUIRE(r.status == 0);
    return json::parse(r.out)["loops"];
  };
  json every = loops("0"), big = loops("0.5");
  CHECK(every.size() >= 2);  // main's loop and spin's
  CHECK(big.size() >= 1);
  CHECK(big.size() < every.size());
  for (const json &l : big) CHECK(l["share_of_program"].get<double>() >= 0.5);
}

TEST_CASE("paths and guide: input errors are one line naming the file or argument", "[kpath][cli]") {
  fs::path data = record("errors", "k=3");
  fs::path missing = work() / "no-such-dir", empty = work() / "empty";
  fs::remove_all(empty);
  fs::create_directories(empty);
  fs::path g = work() / "err.guide.json";
  for (const std::string cmd : {"paths", "guide"}) {
    INFO(cmd);
    std::string out = cmd == "guide" ? " -o " + g.string() : "";
    check_error(tool(cmd + " " + missing.string() + out), {missing.string(), "no such file or directory"});
    check_error(tool(cmd + " " + empty.string() + out), {empty.string(), "no path profile", "kpath.so"});
    check_error(tool(cmd + " " + data.string() + " --k 0" + out), {"--k"});
    check_error(tool(cmd + " " + data.string() + " --k 7" + out), {"--k 7", "k = 3", data.string()});
    check_error(tool(cmd + " " + data.string() + " --k x" + out), {"--k"});
  }
  check_error(tool("paths " + data.string() + " --function no_such_fn"),
              {"--function 'no_such_fn'", data.string(), "main", "spin"});
  check_error(tool("paths " + data.string() + " --pid 1"), {data.string(), "--pid"});
  check_error(tool("paths " + data.string() + " --json --dot"), {"--dot", "--json"});
  // Profiles of different k: both files named.
  fs::path mixed = record("mixed-k", "k=3");
  hcct::test::run_command("HCCT_OPTIONS='k=2:out=" + mixed.string() + "' " + program().string() + " 2>&1");
  for (const std::string cmd : {"paths", "guide"}) {
    Result r = tool(cmd + " " + mixed.string() + (cmd == "guide" ? " -o " + g.string() : ""));
    check_error(r, {"different k", mixed.string() + "/"});
  }
  check_error(tool("guide " + data.string() + " -o " + (missing / "g.json").string()), {(missing / "g.json").string(), "cannot write"});
  check_error(tool("paths " + data.string() + " -o " + (missing / "p.txt").string()), {(missing / "p.txt").string(), "cannot write"});
  // An error after the output was opened leaves no file (and an old one untouched).
  {
    fs::path kept = work() / "kept.txt";
    std::ofstream(kept) << "old\n";
    check_error(tool("paths " + data.string() + " --function no_such_fn -o " + kept.string()), {"no_such_fn"});
    CHECK(read_file(kept) == "old\n");
    for (const auto &e : fs::directory_iterator(work()))
      CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  }
  // A function name works with and without its parameter list; the wanted function only.
  json spin = paths_json(data, "--function spin");
  REQUIRE(spin["functions"].size() == 1);
  CHECK(spin["functions"][0]["name"] == "spin");
}

TEST_CASE("paths: a binary gone since the run is one warning, IDs stay, lines are null", "[kpath][cli]") {
  fs::path copy = work() / ("gone." + std::to_string(getpid()));
  fs::copy_file(program(), copy, fs::copy_options::overwrite_existing);
  fs::path data = work() / "gone";
  fs::remove_all(data);
  hcct::test::run_command("HCCT_OPTIONS='k=2:out=" + data.string() + "' " + copy.string() + " 2>&1");
  fs::remove(copy);
  Result r = tool("paths " + data.string() + " --json --min-share 0");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.rfind("hcct: warning: no kpath metadata for 2 functions", 0) == 0);
  CHECK_THAT(r.err, Catch::Contains("missing: " + copy.string()));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  json j = json::parse(r.out);
  REQUIRE(j["functions"].size() == 2);
  for (const json &f : j["functions"]) {
    CHECK(f["name"].get<std::string>().rfind("function 0x", 0) == 0);
    CHECK(f["file"].is_null());
    CHECK(f["static_paths"].is_null());
    for (const json &p : f["paths"]) {
      CHECK(p["lines"].is_null());
      CHECK(!p.contains("blocks"));
    }
  }
  if (have_jsonschema()) {
    fs::path doc = work() / "gone.json";
    std::ofstream(doc) << r.out;
    Result v = validate(doc);
    INFO(v.out << v.err);
    CHECK(v.status == 0);
  }
  Result text = tool("paths " + data.string());
  CHECK(text.status == 0);
  CHECK_THAT(text.out, Catch::Contains(": (no metadata)"));
}

TEST_CASE("paths and guide: --help explains the output and gives examples", "[kpath][cli]") {
  Result p = tool("paths --help");
  REQUIRE(p.status == 0);
  for (const char *want : {"--min-share", "Examples:", "hcct paths --function", "--json", "--dot", "X = share of its parent",
                           "Y = of its root", "static", "hcct-paths.schema.json", "kpath.so", "HCCT_OPTIONS=k="})
    CHECK_THAT(p.out, Catch::Contains(want));
  CHECK_THAT(p.out, !Catch::Contains("X %"));  // the percent wording of --min-share is gone
  Result g = tool("guide --help");
  REQUIRE(g.status == 0);
  for (const char *want : {"--min-share", "Examples:", "hcct guide", "iterations", "entries", "cycle", "osr-point", "unroll",
                           "HCCT_GUIDE=", "kpath.so"})
    CHECK_THAT(g.out, Catch::Contains(want));
}

// ---- Bounded forests (path_epsilon; docs/KPATH.md, "Bounded forests"): a loop whose every fourth
// iteration takes one of eight pseudo-random paths, so at k = 8 the windows outnumber a small
// budget, kept fixed (path_grow=1), and the runtime sweeps. The program is deterministic: a run with path_epsilon=0 is the
// oracle of the same stream.

namespace {

const char kNoisyProgram[] = R"(#include <stdlib.h>
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200000;
  unsigned x = 1;
  long s = 0;
  for (int i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    if (i % 4 != 3) {
      s += i;
    } else {
      if (x >> 31) s ^= x;
      if ((x >> 30) & 1) s += 3;
      if ((x >> 29) & 1) s -= 1;
    }
  }
  return (int)(s & 1);
}
)";

fs::path noisy_program() {
  static const fs::path exe = [] {
    const std::string tmp = "." + std::to_string(getpid());
    fs::path src = work() / "noisy.c";
    fs::path out = work() / ("noisy" + tmp);
    std::ofstream(src.string() + tmp) << kNoisyProgram;
    fs::rename(src.string() + tmp, src);
    hcct::test::run_command(std::string(HCCT_CLANG) + " -g -O0 -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + src.string() +
                            " -o " + out.string() + " " + HCCT_RUNTIME + " -Wl,-rpath," +
                            fs::path(HCCT_RUNTIME).parent_path().string() + " 2>&1");
    return out;
  }();
  return exe;
}

fs::path record_noisy(const std::string &name, const std::string &options) {
  fs::path data = work() / name;
  fs::remove_all(data);
  hcct::test::run_command("HCCT_OPTIONS='" + options + ":out=" + data.string() + "' " + noisy_program().string() + " 2>&1");
  return data;
}

// Every sequence of a `paths --json` document: (function, path IDs) -> (count, error bound).
std::map<std::vector<std::string>, std::pair<uint64_t, uint64_t>> sequences_of(const json &doc) {
  std::map<std::vector<std::string>, std::pair<uint64_t, uint64_t>> out;
  std::function<void(const json &, std::vector<std::string>)> walk = [&](const json &n, std::vector<std::string> seq) {
    seq.push_back(std::to_string(n["path"].get<uint64_t>()));
    out[seq] = {n["count"].get<uint64_t>(), n["error_bound"].get<uint64_t>()};
    for (const json &c : n["children"]) walk(c, seq);
  };
  for (const json &f : doc["functions"])
    for (const json &r : f["forest"]) walk(r, {f["function_id"].get<std::string>()});
  return out;
}

}  // namespace

TEST_CASE("paths and guide: a bounded forest shows its error bounds, --phi leaves out no hot sequence", "[kpath][cli]") {
  fs::path bounded = record_noisy("noisy-bounded", "k=8:path_epsilon=0.05:path_grow=1");
  fs::path exact = record_noisy("noisy-exact", "k=8:path_epsilon=0");
  json b = paths_json(bounded, "--min-share 0"), e = paths_json(exact, "--min-share 0");
  REQUIRE(b["bounded"] == true);
  CHECK(e["bounded"] == false);
  CHECK(e["error_bound"]["delta"] == 0);
  REQUIRE(b["threads"].size() == 1);
  CHECK(b["threads"][0]["path_epsilon"] == 0.05);
  CHECK(b["paths"] == e["paths"]);  // the same stream
  uint64_t n = b["paths"].get<uint64_t>();
  // Every count of the bounded forest within its bound of the exact one (the oracle), never above.
  auto got = sequences_of(b), want = sequences_of(e);
  CHECK(got.size() < want.size());  // it did evict
  for (const auto &[seq, cb] : got) {
    INFO("sequence of " << seq.size() - 1 << " paths, bounded " << cb.first << " (+" << cb.second << ")");
    REQUIRE(want.count(seq));
    CHECK(cb.first <= want.at(seq).first);
    CHECK(want.at(seq).first <= cb.first + cb.second);
  }
  // --phi: everything shown may have run phi·N times; nothing that did is missing when phi·N is
  // above the bound (B(8) = delta + 7·cuts); below it, what is missing ran at most B(n) times.
  uint64_t delta = b["error_bound"]["delta"].get<uint64_t>(), cuts = b["error_bound"]["cuts"].get<uint64_t>();
  auto bound = [&](size_t paths) { return delta + (paths - 1) * cuts; };
  for (double phi : {0.2, 0.1, 0.05, 0.01, 0.001}) {
    INFO("phi " << phi << ", delta " << delta << ", cuts " << cuts << ", N " << n);
    json hot = paths_json(bounded, "--phi " + std::to_string(phi));
    CHECK(hot["phi"] == phi);
    auto shown = sequences_of(hot);
    for (const auto &[seq, cb] : shown) CHECK(double(cb.first + cb.second) >= phi * double(n));
    size_t hot_exact = 0;
    for (const auto &[seq, ce] : want)
      if (double(ce.first) >= phi * double(n)) {
        ++hot_exact;
        if (double(bound(seq.size() - 1)) < phi * double(n)) CHECK(shown.count(seq));
        else if (!shown.count(seq)) CHECK(ce.first <= bound(seq.size() - 1));
      }
    CHECK(hot_exact > 0);
  }
  CHECK(double(bound(8)) < 0.05 * double(n));  // so phi = 0.05 and above were checked in full
  // The text says which guarantee holds and shows each bound; an exact profile says nothing of it.
  Result text = tool("paths " + bounded.string());
  REQUIRE(text.status == 0);
  CHECK(text.out.find("# bounded forest, path_epsilon = 0.05") != std::string::npos);
  CHECK(text.out.find("(+<=") != std::string::npos);
  Result plain = tool("paths " + exact.string());
  CHECK(plain.out.find("# bounded") == std::string::npos);
  CHECK(plain.out.find("(+<=") == std::string::npos);
  check_error(tool("paths " + bounded.string() + " --phi 0.1 --min-share 0.1"), {"--phi", "--min-share"});
  check_error(tool("paths " + bounded.string() + " --phi 2"), {"--phi"});
  // hcct guide says the counts come from a bounded profile, with the bound.
  fs::path g = work() / "noisy.guide.json";
  Result guide = tool("guide " + bounded.string() + " -o " + g.string());
  REQUIRE(guide.status == 0);
  CHECK(guide.out.find("counts from a bounded path profile (path_epsilon = 0.05)") != std::string::npos);
  json gj = json::parse(read_file(g));
  CHECK(gj["counts"]["bounded"] == true);
  Result exact_guide = tool("guide " + exact.string() + " -o " + g.string());
  CHECK(exact_guide.out.find("bounded path profile") == std::string::npos);
  if (have_jsonschema()) {
    fs::path doc = work() / "noisy.paths.json";
    std::ofstream(doc) << b.dump();
    Result v = validate(doc);
    INFO(v.err);
    CHECK(v.status == 0);
  }
}
