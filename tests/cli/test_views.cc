// hcct's views for people, end to end: the readable report (width, folded recursion, totals,
// focus, the default for thin profiles), the flat profile, diff and the HTML view.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "hcct/analysis/text.h"
#include "hcct/analysis/reader.h"
#include "hcct/analysis/view.h"

using namespace clitest;
using nlohmann::json;

namespace {

// Columns of a line on a terminal: its code points.
size_t columns(const std::string &line) {
  size_t w = 0;
  for (unsigned char c : line) w += (c & 0xc0) != 0x80;
  return w;
}

using hcct::analysis::with_commas;  // hcct/analysis/text.h: the CLI's number format

std::vector<std::string> all_lines(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// root -> main -> f -> f -> ... -> f, `depth` calls of f, every node counted once.
ThreadProfile deep_recursion(uint32_t depth) {
  std::mt19937_64 rng(1);
  std::vector<Node> nodes(2);
  nodes[1] = {0x401000, 0, 1, 0, 0};
  for (uint32_t i = 0; i < depth; ++i) nodes.push_back({0x401100, i ? uint64_t(0x401180) : uint64_t(0x401010), 1, uint32_t(nodes.size() - 1), 0});
  ThreadProfile p = hcct::test::make_profile(nodes, Mode::cct, rng);
  for (size_t i = 1; i < p.nodes.size(); ++i) p.nodes[i].count = 1;
  p.meta.calls = p.nodes.size() - 1;
  return p;
}

// A wide random tree with many functions, in a directory of its own.
struct RandomProfile {
  TempDir dir;
  ThreadProfile profile;
  explicit RandomProfile(uint64_t seed, size_t nodes = 3000, Mode mode = Mode::cct) {
    std::mt19937_64 rng(seed);
    profile = hcct::test::make_profile(hcct::test::random_tree(rng, nodes, 40, 4), mode, rng, 7000);
    write_profile(dir / profile_file_name(7000, 0), profile);
  }
  std::string path() const { return dir.path().string(); }
};

}  // namespace

TEST_CASE("report: no line is wider than --width", "[cli][report][view]") {
  ProfileDir pd;
  RandomProfile rp(3);
  TempDir deep;
  write_profile(deep / profile_file_name(4242, 0), deep_recursion(5000));
  for (size_t width : {20, 40, 57, 80, 132}) {
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"report", pd.path(), "--phi", "0"},
             {"report", pd.path(), "--phi", "0", "--inline", "--templates"},
             {"report", pd.path(), "--flat", "--phi", "0"},
             {"report", rp.path(), "--phi", "0", "--no-symbols"},
             {"report", deep.path().string(), "--phi", "0", "--no-symbols", "--no-fold"},
             {"report", pd.path(), "--phi", "0", "--focus", "leaf"}}) {
      args.push_back("--width");
      args.push_back(std::to_string(width));
      Result r = hcct_cmd(args);
      INFO(args[1] << " " << args.back() << "\n" << r.out << r.err);
      REQUIRE(r.status == 0);
      for (const std::string &line : all_lines(r.out)) {
        INFO(line);
        CHECK(columns(line) <= width);
      }
    }
  }
  // Without --width and without a terminal: $COLUMNS.
  Result r = hcct_cmd({"report", pd.path(), "--phi", "0"}, {{"COLUMNS", "33"}});
  REQUIRE(r.status == 0);
  for (const std::string &line : all_lines(r.out)) CHECK(columns(line) <= 33);
}

TEST_CASE("report: a million-deep recursion is a few lines", "[cli][report][view]") {
  TempDir dir;
  write_profile(dir / profile_file_name(4242, 0), deep_recursion(1000000));
  Result r = hcct_cmd({"report", dir.path().string(), "--phi", "0", "--no-symbols", "--width", "0"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::vector<std::string> tree;
  for (const std::string &line : all_lines(r.out))
    if (!line.empty() && line[0] != '#') tree.push_back(line);
  INFO(r.out);
  REQUIRE(tree.size() == 2);  // main, and f once
  CHECK_THAT(tree[1], Catch::Contains(" ↻1,000,000 (recursion folded: 1,000,000 contexts, depth 2..1,000,001)"));
  CHECK_THAT(tree[1], Catch::StartsWith("1,000,000  100.00%  1,000,000  100.00%    "));  // total, self
  CHECK(r.out.size() < 4096);
  CHECK_THAT(r.out, Catch::Contains("999,999 contexts folded"));
}

TEST_CASE("report: totals are self plus the children's, ranked by total", "[cli][report][view]") {
  RandomProfile rp(5, 400);
  Result r = hcct_cmd({"report", rp.path(), "--phi", "0", "--no-symbols", "--width", "0", "--no-fold"});
  REQUIRE(r.status == 0);
  // Parse the tree: total, self, indentation depth.
  struct Line {
    uint64_t total, self;
    size_t depth;
  };
  auto number = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ','), s.end());
    return std::stoull(s);
  };
  std::vector<Line> lines;
  for (const std::string &line : all_lines(r.out)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string total, tshare, self, sshare;
    in >> total >> tshare >> self >> sshare;
    size_t ctx = 0;  // after the four columns and their two spaces
    for (int column = 0; column < 4; ++column) {
      ctx = line.find_first_not_of(' ', ctx);
      ctx = line.find(' ', ctx);
    }
    ctx += 2;
    size_t indent = line.find_first_not_of(' ', ctx) - ctx;
    lines.push_back({number(total), number(self), indent / 2 + 1});
  }
  // --phi 0 --no-fold: every context (random_tree may give two siblings one key: one context).
  REQUIRE(lines.size() > rp.profile.nodes.size() / 2);
  REQUIRE(lines.size() <= rp.profile.nodes.size() - 1);
  uint64_t top = 0, self = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    uint64_t children = 0, previous = UINT64_MAX;
    for (size_t j = i + 1; j < lines.size() && lines[j].depth > lines[i].depth; ++j) {
      if (lines[j].depth != lines[i].depth + 1) continue;
      children += lines[j].total;
      CHECK(lines[j].total <= previous);  // siblings ranked by total
      previous = lines[j].total;
    }
    CHECK(lines[i].total == lines[i].self + children);
    if (lines[i].depth == 1) top += lines[i].total;
    self += lines[i].self;
  }
  CHECK(top == rp.profile.meta.calls);
  CHECK(self == rp.profile.meta.calls);
}

TEST_CASE("report --flat: per function, self adds up to N", "[cli][report][flat]") {
  RandomProfile rp(9, 2000);
  Result r = hcct_cmd({"report", rp.path(), "--flat", "--phi", "0", "--json", "--no-symbols"});
  REQUIRE(r.status == 0);
  json j = json::parse(r.out);
  CHECK(j["schema"] == "hcct-flat/1");
  json &rep = j["reports"][0];
  uint64_t self = 0, contexts = 0;
  for (const json &f : rep["functions"]) {
    self += f["self"].get<uint64_t>();
    contexts += f["contexts"].get<uint64_t>();
    CHECK(f["total"].get<uint64_t>() >= f["self"].get<uint64_t>());
  }
  CHECK(self == rp.profile.meta.calls);
  CHECK(contexts == rp.profile.nodes.size() - 1);
  Result t = hcct_cmd({"report", rp.path(), "--flat", "--phi", "0", "--no-symbols", "--width", "0"});
  REQUIRE(t.status == 0);
  CHECK_THAT(t.out, Catch::Contains("self adds up to " + with_commas(rp.profile.meta.calls)));
}

TEST_CASE("report --focus: re-rooted, and a pattern matching nothing is an error naming it", "[cli][report][focus]") {
  ProfileDir pd;
  Result r = hcct_cmd({"report", pd.path(), "--pid", "4242", "--thread", "0", "--phi", "0", "--focus", "Widget", "--width", "0"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("# callers of symtest::Widget::compute(int) (total 201"));
  CHECK_THAT(r.out, Catch::Contains("main > symtest::Widget::compute(int)"));
  std::vector<std::string> tree;
  for (const std::string &line : all_lines(r.out))
    if (!line.empty() && line[0] != '#') tree.push_back(line);
  REQUIRE(tree.size() == 2);  // Widget::compute, then the leaf it calls
  CHECK_THAT(tree[0], Catch::Contains("  symtest::Widget::compute(int) ("));
  CHECK_THAT(tree[1], Catch::Contains("    fixture_leaf ("));

  Result none = hcct_cmd({"report", pd.path(), "--focus", "no_such_function_xyz"});
  CHECK(none.status == 1);
  CHECK(none.out.empty());
  CHECK(none.err == "hcct: --focus 'no_such_function_xyz' matches no function of the selected threads\n");
}

TEST_CASE("report: calls spread thin still show the largest totals, and say why", "[cli][report][view]") {
  RandomProfile rp(13, 3000);
  Result r = hcct_cmd({"report", rp.path(), "--phi", "0.5", "--no-symbols"});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("no context reaches the threshold on its own"));
  size_t tree = 0;
  for (const std::string &line : all_lines(r.out)) tree += !line.empty() && line[0] != '#';
  CHECK(tree >= 30);
}

namespace {

// Two runs of the fixture program: B ran the inlined call of fixture_leaf 600 times instead of 3.
struct TwoRuns {
  TempDir dir;
  std::string a() const { return (dir / "a").string(); }
  std::string b() const { return (dir / "b").string(); }
  TwoRuns() {
    fs::create_directories(dir / "a");
    fs::create_directories(dir / "b");
    ThreadProfile p = hcct::test::symtest_profile(fixture(), Mode::cct, 4242, 0);
    write_profile(dir / "a" / profile_file_name(4242, 0), p);
    p.nodes[3].count = 600;  // fixture_leaf through the inlined helper
    p.meta.calls += 597;
    write_profile(dir / "b" / profile_file_name(4242, 0), p);
  }
};

}  // namespace

TEST_CASE("diff: a profile against itself is empty", "[cli][diff]") {
  ProfileDir pd;
  Result r = hcct_cmd({"diff", pd.path(), pd.path(), "--min-change", "0"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(lines_with(r.out, "no context's share changed").size() == 3);  // three threads
  Result j = hcct_cmd({"diff", pd.path(), pd.path(), "--min-change", "0", "--json"});
  REQUIRE(j.status == 0);
  json doc = json::parse(j.out);
  CHECK(doc["schema"] == "hcct-diff/1");
  REQUIRE(doc["comparisons"].size() == 3);
  for (const json &c : doc["comparisons"]) {
    CHECK(c["changed"] == 0);
    CHECK(c["changes"].empty());
  }
}

TEST_CASE("diff: the known change ranks first", "[cli][diff]") {
  TwoRuns runs;
  Result j = hcct_cmd({"diff", runs.a(), runs.b(), "--json"});
  INFO(j.out << j.err);
  REQUIRE(j.status == 0);
  json doc = json::parse(j.out);
  json &changes = doc["comparisons"][0]["changes"];
  REQUIRE(changes.size() >= 2);
  json &first = changes[0];
  CHECK(first["path"] == json::array({"main", "fixture_leaf"}));
  CHECK(first["call"]["frames"].size() == 2);  // the call inside the inlined helper
  CHECK(first["self_a"].get<double>() == Approx(3.0 / 705));
  CHECK(first["self_b"].get<double>() == Approx(600.0 / 1302));
  Result t = hcct_cmd({"diff", runs.a(), runs.b(), "--width", "0"});
  REQUIRE(t.status == 0);
  std::vector<std::string> rows;
  for (const std::string &line : all_lines(t.out))
    if (!line.empty() && line[0] != '#') rows.push_back(line);
  REQUIRE(!rows.empty());
  CHECK_THAT(rows[0], Catch::StartsWith("   0.43%   46.08%  +45.66%"));
  CHECK_THAT(rows[0], Catch::Contains("main > fixture_leaf  @ "));
  CHECK_THAT(rows[0], Catch::EndsWith("prog.c:" + std::to_string(hcct::test::marker_line(kSymtestDir / "prog.c",
                                                                                        "MARK:helper_calls_leaf")) +
                                      " [inlined]"));
}

namespace {

// Headless Chromium on a page: its DOM after the scripts ran, and its console on stderr.
struct Browser {
  std::string exe;
  Browser() {
    for (const char *candidate : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
      if (access(candidate, X_OK) == 0) {
        exe = candidate;
        break;
      }
  }
  Result run(const std::vector<std::string> &extra, const std::string &url) const {
    std::vector<std::string> args{exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                  "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
                                  "--user-data-dir=" + (profile / "chromium").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(url);
    return clitest::run(args, {}, {}, 120);
  }
  TempDir profile;
};

// Where the view test keeps its page and screenshot for people to look at (ctest leaves them).
fs::path artifacts() {
  fs::path dir = fs::path(HCCT_BINARY_DIR) / "tests" / "cli" / "view-artifacts";
  fs::create_directories(dir);
  return dir;
}

// Chromium's console messages that report an error (uncaught exceptions, failed loads).
std::vector<std::string> console_errors(const std::string &stderr_text) {
  std::vector<std::string> out;
  for (const std::string &line : all_lines(stderr_text))
    if (line.find(":CONSOLE") != std::string::npos &&
        (line.find("rror") != std::string::npos || line.find("Uncaught") != std::string::npos))
      out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("view: one self-contained page that loads cleanly in Chromium, shows the hottest context, search highlights",
          "[cli][view]") {
  ProfileDir pd;
  const fs::path page = artifacts() / "view.html";
  Result w = hcct_cmd({"view", pd.path(), "--pid", "4242", "--thread", "0", "-o", page.string()});
  if (w.status == 1 && w.err.find("built without the flame graph library") != std::string::npos)
    skip_test("hcct was built without d3-flame-graph (npm could not fetch it at configure time): " + w.err);
  INFO(w.err);
  REQUIRE(w.status == 0);
  const std::string html = hcct::test::read_text(page);
  // Self-contained: no resource from elsewhere.
  CHECK(html.find("<script src") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("flamegraph") != std::string::npos);

  Browser browser;
  if (browser.exe.empty()) skip_test("no chromium (Debian: apt-get install chromium): the browser checks are skipped");
  const std::string url = "file://" + page.string();
  Result dom = browser.run({"--dump-dom"}, url + "#search=fixture_leaf");
  INFO(dom.err.substr(0, 4000));
  REQUIRE(dom.status == 0);
  CHECK(console_errors(dom.err).empty());
  CHECK_THAT(dom.out, Catch::Contains("<div id=\"errors\"></div>"));  // window.onerror saw nothing
  CHECK_THAT(dom.out, Catch::Contains("hottest context: main &gt; fixture_leaf — self 500 (70.92%)"));
  // The search: d3-flame-graph paints matching frames #E600E6 and reports how many.
  CHECK_THAT(dom.out, Catch::Contains("3 frames match (71.49% of the total)"));  // two call sites in main, one in Widget
  CHECK_THAT(dom.out, Catch::Contains("#E600E6"));
  CHECK_THAT(dom.out, Catch::Contains("symtest::Widget::compute(int)"));  // the flat table
  Result shot = browser.run({"--screenshot=" + (artifacts() / "view.png").string(), "--window-size=1280,900",
                             "--hide-scrollbars"}, url + "#search=fixture_leaf");
  CHECK(shot.status == 0);
  CHECK(fs::file_size(artifacts() / "view.png") > 10000);
}

TEST_CASE("view: two profiles give the diff", "[cli][view][diff]") {
  TwoRuns runs;
  const fs::path page = artifacts() / "view-diff.html";
  Result w = hcct_cmd({"view", runs.a(), runs.b(), "-o", page.string()});
  if (w.status == 1 && w.err.find("built without the flame graph library") != std::string::npos)
    skip_test("hcct was built without d3-flame-graph: " + w.err);
  REQUIRE(w.status == 0);
  Browser browser;
  if (browser.exe.empty()) skip_test("no chromium (Debian: apt-get install chromium): the browser checks are skipped");
  Result dom = browser.run({"--dump-dom"}, "file://" + page.string());
  REQUIRE(dom.status == 0);
  CHECK(console_errors(dom.err).empty());
  CHECK_THAT(dom.out, Catch::Contains("<div id=\"errors\"></div>"));
  CHECK_THAT(dom.out, Catch::Contains("what changed from A to B"));
  // The first row of the change table is the known change.
  size_t table = dom.out.find("calling context</th>");
  REQUIRE(table != std::string::npos);
  size_t row = dom.out.find("<tr>", table);
  REQUIRE(row != std::string::npos);
  std::string first = dom.out.substr(row, dom.out.find("</tr>", row) - row);
  CHECK_THAT(first, Catch::Contains("main &gt; fixture_leaf"));
  CHECK_THAT(first, Catch::Contains("+45.66%"));
  browser.run({"--screenshot=" + (artifacts() / "view-diff.png").string(), "--window-size=1280,1000", "--hide-scrollbars"},
              "file://" + page.string());
}

TEST_CASE("view: 10^5 contexts are pruned to --max-nodes, the loss stated", "[cli][view]") {
  // Frames are drawn only for contexts with at least 1/(4 max_nodes) of the calls (narrower than a
  // pixel otherwise): a limit that binds shows exactly max_nodes.
  RandomProfile rp(21, 100000);
  TempDir out;
  Result w = hcct_cmd({"view", rp.path(), "--no-symbols", "--max-nodes", "300", "-o", (out / "v.html").string()});
  if (w.status == 1 && w.err.find("built without the flame graph library") != std::string::npos)
    skip_test("hcct was built without d3-flame-graph: " + w.err);
  REQUIRE(w.status == 0);
  const std::string html = hcct::test::read_text(out / "v.html");
  size_t data = html.find("<script id=\"hcct-data\" type=\"application/json\">");
  REQUIRE(data != std::string::npos);
  data = html.find('>', data) + 1;
  json doc = json::parse(html.substr(data, html.find("</script>", data) - data));
  json &s = doc["profiles"][0]["summary"];
  CHECK(s["shown"] == 300);
  CHECK(s["contexts"].get<uint64_t>() > 5000);
  CHECK(s["pruned_self"].get<uint64_t>() > 0);
  // What is drawn: 300 frames under the root, whose total is still N.
  size_t frames = 0;
  std::vector<const json *> work{&doc["profiles"][0]["tree"]};
  while (!work.empty()) {
    const json *n = work.back();
    work.pop_back();
    ++frames;
    if (n->contains("c"))
      for (const json &c : (*n)["c"]) work.push_back(&c);
  }
  CHECK(frames == 301);
  CHECK(doc["profiles"][0]["tree"]["v"] == rp.profile.meta.calls);
}

TEST_CASE("info on a kpath-only profile describes its path profile", "[cli][info]") {
  // A real collatz run built with the kpath plugin only (tests/fuzz/corpus: one selector byte, then
  // the file): no calling context, a k-window forest of k = 4.
  std::string bytes = hcct::test::read_text(fs::path(HCCT_SOURCE_DIR) / "tests/fuzz/corpus/kpath_profile/seed-collatz-k4-0.bin");
  REQUIRE(bytes.size() > 1);
  bytes.erase(0, 1);
  ThreadProfile meta = parse_profile(std::span(reinterpret_cast<const unsigned char *>(bytes.data()), bytes.size()), "seed");
  REQUIRE(meta.nodes.size() == 1);
  TempDir dir;
  std::ofstream(dir / profile_file_name(meta.meta.pid, meta.meta.thread_seq), std::ios::binary) << bytes;
  Result r = hcct_cmd({"info", dir.path().string()});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("calls (N) 0") == std::string::npos);
  CHECK_THAT(r.out, Catch::Contains("path profile (kpath): kWF, k = 4: 36 paths in 7 activations, 50 forest nodes"));
  CHECK_THAT(r.out, Catch::Contains("built for path profiling only"));
  Result j = hcct_cmd({"info", dir.path().string(), "--json"});
  REQUIRE(j.status == 0);
  json paths = json::parse(j.out)["processes"][0]["threads"][0]["paths"];
  CHECK(paths["forest"] == "kWF");
  CHECK(paths["k"] == 4);
  CHECK(paths["paths"] == 36);
}
