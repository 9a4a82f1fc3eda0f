// Static bursting end to end: a program that toggles bursts itself (burst=manual) records exactly
// the contexts and counts of its burst windows — after a deep calling path, deep recursion across
// burst boundaries, threads that entered their path between bursts — with -finstrument-functions
// and GCC-plugin builds and every way of re-synchronising; and the timer on the examples, against
// the exact CCT of the same run (thesis §5.1.2 metrics: hot-edge coverage, counter error).
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>

#include "harness.h"
#include "support/skip.h"
#include "hcct/analysis/hot.h"

using namespace e2e;
namespace ha = hcct::analysis;

namespace {

const std::string kExamples = EXAMPLES_DIR;

std::string meta(const ha::ThreadProfile &t, const char *key) {
  const std::string *v = t.meta.find_extra(key);
  return v ? *v : std::string();
}

// The contexts whose counts differ, for failure messages.
std::string diff(const std::map<std::string, uint64_t> &got, const std::map<std::string, uint64_t> &want) {
  std::string out;
  size_t shown = 0;
  for (auto &[k, v] : got)
    if ((!want.count(k) || want.at(k) != v) && shown++ < 20) out += "got " + k + " = " + std::to_string(v) + "\n";
  for (auto &[k, v] : want)
    if ((!got.count(k) || got.at(k) != v) && shown++ < 40) out += "want " + k + " = " + std::to_string(v) + "\n";
  return out;
}

struct Toggle {
  int depth = 4000, threads = 4, k = 1000;
  // Contexts as run_length_counts writes them ("main>rec*N>leaf"): the recursion is 4000 deep.
  std::map<std::string, uint64_t> main_expected() const {
    std::map<std::string, uint64_t> want;
    want["main>outer>middle>inner>leaf"] = uint64_t(k);
    want["main>outer>middle>inner>other"] = 1;
    want["main>outer>middle>inner>other>leaf"] = 1;
    for (int n = 1; n <= depth + 1; ++n) {
      const std::string rec = "main>" + frame_run("rec", n);
      if (n >= depth * 3 / 10 + 2 && n <= depth * 7 / 10 + 1) want[rec] = 1;
      if (n >= depth / 5 + 2 && n <= depth / 2 + 1) want[rec + ">leaf"] = 1;
    }
    return want;
  }
  std::map<std::string, uint64_t> worker_expected() const {
    return {{"worker>level1>level2>leaf", uint64_t(k)},
            {"worker>level1>level2>other", 1},
            {"worker>level1>level2>other>leaf", 1}};
  }
  uint64_t main_events() const { return 1 + 1 + 3 + 1 + 1 + 2 * uint64_t(k) + 2 + 2 * uint64_t(depth + 1); }
  uint64_t worker_events() const { return 3 + 2 * uint64_t(k) + 2; }
  std::vector<std::string> argv(const std::string &exe) const {
    return {exe, std::to_string(depth), std::to_string(threads), std::to_string(k)};
  }
};

}  // namespace

TEST_CASE("manual bursts record exactly the events of each burst window", "[bursting][e2e]") {
  Toggle t;
  std::vector<std::string> exes{BURST_TOGGLE};
  if (std::string(BURST_TOGGLE_PLUGIN).size()) exes.push_back(BURST_TOGGLE_PLUGIN);
  auto plain = run(t.argv(exes[0]));
  REQUIRE(plain.status == 0);
  for (const auto &exe : exes) {
    bool plugin = exe != exes[0];
    for (const char *sync : {"auto", "shadow", "unwind"}) {
      for (const char *mode : {"mode=cct", "mode=hcct:epsilon=1e-5:exact=1"}) {
        std::string options = std::string(mode) + ":burst=manual:burst_sync=" + sync;
        INFO(exe << " " << options);
        auto p = run_profiled(t.argv(exe), options);
        REQUIRE(p.result.status == 0);
        CHECK(p.result.out == plain.out);  // the program's output is unchanged
        CHECK(p.result.err.empty());
        auto set = ha::read_profiles(p.dir);
        REQUIRE(set.processes.size() == 1);
        const auto &threads = set.processes[0].threads;
        REQUIRE(threads.size() == size_t(t.threads) + 1);
        bool exact = std::string(mode).find("exact=1") != std::string::npos;
        bool events_known = exact || std::string(sync) == "shadow" || (!plugin && std::string(sync) == "auto");
        for (const auto &th : threads) {
          bool is_main = th.meta.thread_seq == 0;
          auto got = run_length_counts(th);
          auto want = is_main ? t.main_expected() : t.worker_expected();
          INFO("thread " << th.meta.thread_seq << "\n" << diff(got, want));
          CHECK(got == want);
          CHECK(meta(th, "burst") == "manual");
          CHECK(meta(th, "burst_sync") == sync);
          CHECK(meta(th, "bursts") == (is_main ? "3" : "1"));
          CHECK(th.meta.unmatched_exits == 0);  // a typed META field since the tools know it
          CHECK(meta(th, "sampled_fraction_basis") == (events_known ? "events" : "time"));
          if (events_known) {
            uint64_t events = is_main ? t.main_events() : t.worker_events();
            CHECK(meta(th, "events") == std::to_string(events));
            CHECK(std::stod(meta(th, "sampled_fraction")) == Approx(double(th.meta.calls) / double(events)));
          }
        }
        if (exact) {  // the exact side saw every event, bursts or not
          auto ex = ha::read_profiles(p.dir / "exact");
          REQUIRE(ex.processes.size() == 1);
          REQUIRE(ex.processes[0].threads.size() == threads.size());
          for (const auto &e : ex.processes[0].threads) {
            CHECK(e.meta.calls == (e.meta.thread_seq == 0 ? t.main_events() : t.worker_events()));
            CHECK(e.meta.find_extra("burst") == nullptr);
          }
        }
      }
    }
  }
}

TEST_CASE("bad burst options: one message, the program runs unprofiled", "[bursting][e2e]") {
  auto plain = run({kExamples + "/calls", "10", "100"});
  for (const char *bad : {"burst=2", "burst=1:burst_interval=0", "burst=1:burst_interval=2:burst_length=30",
                          "mode=empty:burst=1", "burst_sync=fast"}) {
    INFO(bad);
    auto p = run_profiled({kExamples + "/calls", "10", "100"}, bad);
    CHECK(p.result.status == 0);
    CHECK(p.result.out == plain.out);
    CHECK(std::count(p.result.err.begin(), p.result.err.end(), '\n') == 1);
    CHECK(p.result.err.find("hcct: HCCT_OPTIONS:") == 0);
  }
}

namespace {

using Path = std::vector<std::pair<uint64_t, uint64_t>>;

std::vector<Path> paths_of(const ha::ThreadProfile &t) {
  std::vector<Path> out(t.nodes.size());
  for (size_t i = 1; i < t.nodes.size(); ++i) {
    out[i] = out[t.nodes[i].parent];
    out[i].emplace_back(t.nodes[i].routine, t.nodes[i].call_site);
  }
  return out;
}

struct Accuracy {
  double min_coverage = 1;     // over τ ≥ 2τ̃
  double avg_error = 0;        // over the exact CCT's hot contexts held by the sampled HCCT
  double max_error = 0;
  size_t hot = 0;
  size_t missing = 0;  // hot in the exact CCT, not counted in the sampled HCCT
  double tau_tilde = 0;
};

// Thesis §5.1.2: w(e) the exact count, w̃(e) the sampled estimate divided by the sampled fraction;
// hot edge coverage for τ: exact contexts with w ≥ τ·w_max that are in the sampled (φ,ε)-HCCT;
// τ̃ = ⌊φN⌋ / w_max, the smallest τ with full coverage without bursting.
Accuracy accuracy(const ha::ThreadProfile &sampled, const ha::ThreadProfile &exact, double phi) {
  double f = std::stod(meta(sampled, "sampled_fraction"));
  REQUIRE(f > 0);
  REQUIRE(f < 1);
  auto epaths = paths_of(exact);
  auto spaths = paths_of(sampled);
  auto shot = ha::query_hot(sampled, phi);
  std::map<Path, size_t> in_hcct;
  for (size_t i = 1; i < sampled.nodes.size(); ++i)
    if (shot.cls[i] != ha::NodeClass::pruned) in_hcct[spaths[i]] = i;
  uint64_t wmax = 0;
  for (size_t i = 1; i < exact.nodes.size(); ++i) wmax = std::max(wmax, exact.nodes[i].count);
  uint64_t threshold = ha::hot_threshold(phi, exact.meta.calls);
  Accuracy a;
  a.tau_tilde = double(threshold) / double(wmax);
  for (double tau = 2 * a.tau_tilde; tau <= 1; tau *= 2) {
    size_t hot = 0, covered = 0;
    for (size_t i = 1; i < exact.nodes.size(); ++i) {
      if (double(exact.nodes[i].count) < tau * double(wmax)) continue;
      ++hot;
      covered += in_hcct.count(epaths[i]);
    }
    if (hot) a.min_coverage = std::min(a.min_coverage, double(covered) / double(hot));
  }
  // Counter error as in the thesis: over the hot contexts that the sampled (φ,ε)-HCCT holds (hot
  // contexts it misses are what coverage measures; near ⌊φN⌋ sampling may miss a few).
  double sum = 0;
  size_t measured = 0;
  for (size_t i = 1; i < exact.nodes.size(); ++i) {
    uint64_t w = exact.nodes[i].count;
    if (w < threshold || w == 0) continue;
    ++a.hot;
    auto it = in_hcct.find(epaths[i]);
    if (it == in_hcct.end() || !sampled.countable(uint32_t(it->second))) {
      ++a.missing;
      continue;
    }
    double err = std::fabs(double(w) - double(sampled.nodes[it->second].count) / f) / double(w);
    sum += err;
    ++measured;
    a.max_error = std::max(a.max_error, err);
  }
  a.avg_error = measured ? sum / double(measured) : 0;
  return a;
}

}  // namespace

TEST_CASE("timer bursts on the examples: hot edges covered, counters within 10 % after scaling",
          "[bursting][e2e][accuracy]") {
  struct Case {
    std::vector<std::string> argv;
    std::string options;
  };
  const double phi = 1e-4;
  for (const Case &c :
       // By routine, fib's levels are hot contexts: fib(32) runs for a fraction of a second, so the
       // schedule is scaled down (same 10 % duty cycle) to give it enough bursts. At 2 ms / 0.2 ms
       // (~420 bursts in the whole run) the average error of its 20 hot contexts ranged over
       // 1.8-15 % in 11 runs (sampling error, docs/BURSTING.md "The estimator"): one in 11 failed.
       // At 0.2 / 0.02 ms, ten times the windows at the same fraction.
       {Case{{kExamples + "/calls", "32", "10000000"}, "key=routine:burst_interval=0.2:burst_length=0.02"},
        Case{{kExamples + "/calls", "27", "6000000"}, "key=site"},
        Case{{kExamples + "/shapes", "2", "600000"}, "key=site"}}) {
    std::string options = "mode=hcct:exact=1:epsilon=2e-5:burst=1:" + c.options;
    INFO(c.argv[0] << " " << options);
    auto p = run_profiled(c.argv, options);
    REQUIRE(p.result.status == 0);
    auto sampled = ha::read_profiles(p.dir);
    auto exact = ha::read_profiles(p.dir / "exact");
    REQUIRE(sampled.processes.size() == 1);
    const auto &st = sampled.processes[0].threads;
    const auto &et = exact.processes[0].threads;
    REQUIRE(st.size() == et.size());
    for (size_t k = 0; k < st.size(); ++k) {
      if (et[k].meta.calls < 100000) continue;  // threads that only start others
      // The exact side saw every event: the fraction is calls / events, exactly.
      CHECK(meta(st[k], "events") == std::to_string(et[k].meta.calls));
      CHECK(meta(st[k], "sampled_fraction_basis") == "events");
      uint64_t bursts = std::stoull(meta(st[k], "bursts"));
      CHECK(bursts >= 1);
      // The event clock's own default schedule, or the one given.
      bool given = c.options.find("burst_interval") != std::string::npos;
      CHECK(meta(st[k], "burst_interval_ns") == (given ? "200000" : "100000"));
      CHECK(meta(st[k], "burst_length_ns") == (given ? "20000" : "10000"));
      auto a = accuracy(st[k], et[k], phi);
      INFO("thread " << k << ": fraction " << meta(st[k], "sampled_fraction") << ", bursts " << bursts
                     << ", hot " << a.hot << ", avg error " << a.avg_error << ", max error "
                     << a.max_error << ", coverage " << a.min_coverage << ", tau~ " << a.tau_tilde);
      CHECK(a.hot >= 3);
      CHECK(a.missing * 5 <= a.hot);
      CHECK(a.min_coverage == 1.0);
      // ≤ 10 %. Keyed by routine, fib's levels are hot contexts of a recursive phase whose in-burst
      // slowdown differs from the rest of the run: on the time clock its sampled fraction differed
      // from the whole run's (4-11 % seen); the event clock samples every phase alike (≈ 1.5 %).
      CHECK(a.avg_error <= 0.10);
      WARN("accuracy " << c.argv[0] << " " << c.options << " thread " << k << ": fraction "
                       << meta(st[k], "sampled_fraction") << ", bursts " << bursts << ", hot contexts "
                       << a.hot << " (" << a.missing << " missed), avg counter error " << 100 * a.avg_error << " %, max "
                       << 100 * a.max_error << " %, min coverage (tau >= 2 tau~) " << a.min_coverage);
    }
  }
}

TEST_CASE("timer bursts with the plugin's gate closed between bursts: contexts stay exact",
          "[bursting][e2e]") {
  const std::string exe = kExamples + "/calls_plugin";
#ifdef HCCT_EXPECT_PLUGIN_EXAMPLE
  REQUIRE(std::filesystem::exists(exe));
#else
  if (!std::filesystem::exists(exe)) hcct::test::skip_test("built without the GCC plugin: no " + exe);
#endif
  // Unwinding at every burst start must rebuild true contexts: every context recorded is one of
  // the closed form's (fib levels below main, work's callees), none with frames left out or added.
  // Long enough for several 20 ms intervals: at 6·10^6 calls the program (30 ms with the gate
  // closed) sometimes ended before its first burst, and wrote no profile.
  auto p = run_profiled({exe, "29", "20000000"}, "mode=cct:key=routine:burst=1:burst_sync=auto");
  REQUIRE(p.result.status == 0);
  auto set = ha::read_profiles(p.dir);
  const auto &t = set.processes.at(0).threads.at(0);
  CHECK(meta(t, "sampled_fraction_basis") == "time");
  CHECK(std::stoull(meta(t, "bursts")) >= 1);
  auto counts = named_counts(t);
  CHECK(counts.size() >= 3);
  for (auto &[path, count] : counts) {
    std::string joined;
    for (auto &n : path) joined += n + ">";
    INFO(joined << " = " << count);
    REQUIRE(path.front() == "main");
    bool fib = true;
    for (size_t i = 1; i < path.size(); ++i) fib = fib && path[i] == "fib";
    bool work = path.size() >= 2 && path[1] == "work" &&
                (path.size() == 2 || (path.size() == 3 && (path[2] == "square" || path[2] == "cube")) ||
                 (path.size() == 4 && path[2] == "cube" && path[3] == "square"));
    CHECK((fib || work));
  }
  CHECK(counts.count({"main", "work", "cube", "square"}));

  // Issue 16: what such a fraction is worth is stated (it over-states the fraction of calls by each
  // phase's in-burst slowdown; docs/BURSTING.md, "Closed-gate bursts"), not "errors of 10-50 %".
  Result r = run({HCCT_TOOL, "report", p.dir.string()});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("# estimator: fraction of wall time in bursts (gate closed between bursts"));
  Result c = run({HCCT_TOOL, "compare", p.dir.string(), p.dir.string(), "--phi", "1e-3"});
  CHECK_THAT(c.out, Catch::Contains("scaled counts are low by up to that factor"));
}

namespace {

const std::string kPrograms = BURST_PROGRAMS_DIR;

// The builds of a test program: -finstrument-functions, and the GCC plugin's when it was built.
std::vector<std::string> builds_of(const std::string &name) {
  std::vector<std::string> out{kPrograms + "/" + name};
  if (std::string(BURST_TOGGLE_PLUGIN).size()) out.push_back(kPrograms + "/" + name + "_plugin");
  return out;
}

// Sum of the counts of the contexts main > `phase` > callee, from named_counts.
double phase_calls(const std::map<NamePath, uint64_t> &counts, const std::string &phase) {
  double sum = 0;
  for (auto &[path, count] : counts)
    if (path.size() == 3 && path[0] == "main" && path[1] == phase) sum += double(count);
  return sum;
}

}  // namespace

// Issue 16: with one sampled fraction for the whole run, a phase that bursts slow down more is
// under-counted and the other over-counted (time-driven bursts sample fewer of its calls). Each
// thread's bursts scheduled in its own calls (the event clock, the default) sample the same
// fraction of every phase.
TEST_CASE("timer bursts: phases with different in-burst slowdowns are each counted within 10 %",
          "[bursting][e2e][accuracy]") {
  const uint64_t dense = 32 * 1000000, sparse = 500000;
  for (const std::string &exe : builds_of("two_phase")) {
    for (const char *mode : {"mode=hcct:epsilon=2e-5", "mode=hcct:epsilon=2e-5:exact=1"}) {
      std::string options = std::string(mode) + ":burst=1:burst_interval=0.1:burst_length=0.01";
      INFO(exe << " " << options);
      auto p = run_profiled({exe, std::to_string(dense), std::to_string(sparse)}, options);
      REQUIRE(p.result.status == 0);
      auto set = ha::read_profiles(p.dir);
      const auto &t = set.processes.at(0).threads.at(0);
      double f = std::stod(meta(t, "sampled_fraction"));
      REQUIRE(f > 0);
      auto counts = named_counts(t);
      // The exact counts: the program's closed form, and the exact side of the same run.
      std::map<std::string, double> want{{"dense", double(dense)}, {"sparse", double(sparse)}};
      if (std::string(mode).find("exact=1") != std::string::npos) {
        auto exact = named_counts(ha::read_profiles(p.dir / "exact").processes.at(0).threads.at(0));
        for (auto &[phase, calls] : want) CHECK(phase_calls(exact, phase) == calls);
      }
      for (auto &[phase, calls] : want) {
        double estimate = phase_calls(counts, phase) / f;
        INFO(phase << ": estimate " << estimate << ", exact " << calls << ", sampled fraction " << f
                   << " (" << meta(t, "sampled_fraction_basis") << "), bursts " << meta(t, "bursts"));
        CHECK(std::fabs(estimate / calls - 1) <= 0.10);
        WARN("two phases " << exe << " " << options << ": " << phase << " estimate / exact = "
                           << estimate / calls);
      }
    }
  }
}

// Issue 16: a plugin build's default burst_sync must give true contexts through instrumented
// functions that were inlined (no machine frame; the old default unwound the machine stack).
TEST_CASE("default burst_sync: true contexts through inlined instrumented functions", "[bursting][e2e]") {
  for (const std::string &exe : builds_of("inlined_probe")) {
    INFO(exe);
    auto p = run_profiled({exe, "1000"}, "mode=cct:burst=manual");
    REQUIRE(p.result.status == 0);
    auto set = ha::read_profiles(p.dir);
    const auto &t = set.processes.at(0).threads.at(0);
    auto counts = named_counts(t);
    std::string all;
    for (auto &[path, count] : counts) {
      for (auto &n : path) all += n + ">";
      all += " = " + std::to_string(count) + "\n";
    }
    INFO(all);
    CHECK(counts[{"main", "outer", "middle", "leaf"}] == 1000);
    CHECK(t.meta.calls == 1000);
  }
}

// Issue 16: `hcct compare` compared sampled counts with whole-run ones (87-95 % "error" on any burst
// profile); it now scales a sampled side by 1/sampled_fraction and says so, as `hcct merge` does
// for each thread with its own fraction; `hcct report` states the estimator's expected error.
TEST_CASE("hcct compare, merge and report scale sampled profiles by their estimator", "[bursting][e2e][cli]") {
  using nlohmann::json;
  const std::string tool = HCCT_TOOL;
  auto p = run_profiled({kExamples + "/shapes", "2", "600000"}, "mode=hcct:exact=1:epsilon=2e-5:burst=1");
  REQUIRE(p.result.status == 0);
  const std::string dir = p.dir.string(), exact = (p.dir / "exact").string();
  auto set = ha::read_profiles(p.dir);
  REQUIRE(set.processes.at(0).threads.size() == 3);

  Result c = run({tool, "compare", dir, exact, "--phi", "1e-4", "--json"});
  INFO(c.err);
  REQUIRE(c.status == 0);
  json j = json::parse(c.out);
  size_t busy = 0;
  for (const json &m : j["comparisons"]) {
    const auto &t = set.processes[0].threads.at(m["test"]["thread"].get<size_t>());
    double f = std::stod(meta(t, "sampled_fraction"));
    INFO("thread " << m["test"]["thread"] << ": " << m.dump());
    CHECK(m["reference"]["count_scale"].get<double>() == 1.0);
    if (m["reference"]["calls"].get<uint64_t>() < 100000) continue;  // the thread that only starts others
    ++busy;
    CHECK(m["test"]["count_scale"].get<double>() == Approx(1 / f));
    CHECK(m["avg_error_percent"].get<double>() <= 10.0);
    for (const json &cov : m["coverage"]) CHECK(cov["ratio"].get<double>() == 1.0);
  }
  CHECK(busy == 2);
  Result text = run({tool, "compare", dir, exact, "--phi", "1e-4"});
  CHECK_THAT(text.out, Catch::Contains("the test is sampled (static bursting): its counts are scaled by 1/sampled_fraction"));

  // Merged threads: each scaled by its own fraction, then compared with the merged exact CCT.
  const auto merged = fresh_dir("burst_merged");
  Result mg = run({tool, "merge", dir, "-o", (merged / "m").string()});
  INFO(mg.err);
  REQUIRE(mg.status == 0);
  CHECK_THAT(mg.err, Catch::Contains("sampled inputs (static bursting) were scaled by their own 1/sampled_fraction"));
  Result mc = run({tool, "compare", (merged / "m").string(), exact, "--merge-threads", "--phi", "1e-4", "--json"});
  INFO(mc.err);
  REQUIRE(mc.status == 0);
  json mj = json::parse(mc.out)["comparisons"].at(0);
  INFO(mj.dump());
  CHECK(mj["test"]["count_scale"].get<double>() == 1.0);  // already whole-run estimates
  CHECK(mj["avg_error_percent"].get<double>() <= 10.0);
  for (const json &cov : mj["coverage"]) CHECK(cov["ratio"].get<double>() == 1.0);

  Result r = run({tool, "report", dir, "--thread", "1"});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("# estimator: every burst window sampled the same fraction"));
}

// Issue 16: the machine stack with the plugin's unit descriptors (hcct/unit_abi.h). A stage=early
// unit's site table puts the instrumented functions inlined into a frame back on the unwound path,
// so burst_sync=auto (the gate closed between bursts) and unwind give the true contexts.
namespace {

std::string plugin_program(const std::string &name) {
  std::string exe = kPrograms + "/" + name;
  if (!std::filesystem::exists(exe)) hcct::test::skip_test("built without the GCC plugin: no " + exe);
  return exe;
}

std::string listing(const std::map<NamePath, uint64_t> &counts) {
  std::string all;
  for (auto &[path, count] : counts) {
    for (auto &n : path) all += n + ">";
    all += " = " + std::to_string(count) + "\n";
  }
  return all;
}

// Every context the sampled tree counted exists in the exact tree of the same run.
void check_sampled_contexts_exist(const std::map<NamePath, uint64_t> &sampled,
                                  const std::map<NamePath, uint64_t> &exact) {
  for (auto &[path, count] : sampled) {
    if (count == 0) continue;
    std::string joined;
    for (auto &n : path) joined += n + ">";
    INFO(joined << " = " << count);
    CHECK(exact.count(path));
  }
}

}  // namespace

TEST_CASE("machine stack: inlined instrumented functions are on the unwound path", "[bursting][e2e]") {
  const std::string exe = plugin_program("inlined_probe_plugin");
  for (const char *sync : {"auto", "unwind"}) {
    INFO("burst_sync=" << sync);
    auto p = run_profiled({exe, "1000"}, std::string("mode=cct:burst=manual:burst_sync=") + sync);
    REQUIRE(p.result.status == 0);
    auto set = ha::read_profiles(p.dir);
    const auto &t = set.processes.at(0).threads.at(0);
    auto counts = named_counts(t);
    INFO(listing(counts));
    CHECK(counts[{"main", "outer", "middle", "leaf"}] == 1000);
    CHECK(counts.count({"main", "outer", "leaf"}) == 0);
    // The gate was closed between bursts: the machine stack was used, not a shadow stack.
    CHECK(meta(t, "sampled_fraction_basis") == "time");
  }
}

// Bursts that open inside a .part piece (a frame whose function's enter probe ran in the caller's
// frame), a .cold piece (a frame starting elsewhere than its function), an inlined function and a
// tail-called one: with burst_sync=unwind, every context the bursts recorded is one of the exact
// CCT's of the same run, and the windows' counts are the exact ones.
TEST_CASE("machine stack: split, cold and tail-called functions against the exact tree", "[bursting][e2e]") {
  // The gate build and the count build (clock=count): with burst=manual a count build delivers every
  // event as the gate build does with its gate open, so the windows are exactly the same.
  for (const char *stage : {"early", "late"})
  for (const char *build : {"", "_count"}) {
    const std::string exe = plugin_program(std::string("split_inline_") + stage + build);
    for (const char *sync : {"unwind", "auto"}) {
      INFO(exe << " burst_sync=" << sync);
      auto p = run_profiled({exe, "2000"}, std::string("mode=hcct:exact=1:key=routine:burst=manual:burst_sync=") + sync);
      REQUIRE(p.result.status == 0);
      auto sampled = named_counts(ha::read_profiles(p.dir).processes.at(0).threads.at(0));
      auto exact = named_counts(ha::read_profiles(p.dir / "exact").processes.at(0).threads.at(0));
      INFO("sampled:\n" << listing(sampled) << "exact:\n" << listing(exact));
      check_sampled_contexts_exist(sampled, exact);
      // Four windows each in check_size.cold and check_big.part.0 (two calls each), 200 in
      // middle/leaf, 200 around heavy2's call.
      CHECK(sampled[{"main", "check_size", "complain"}] == 8);
      CHECK(sampled[{"main", "check_big", "complain"}] == 8);
      if (std::string(stage) == "early") {
        CHECK(sampled[{"main", "outer", "middle", "leaf"}] == 600);
        CHECK(sampled[{"main", "twice", "heavy2", "heavy"}] == 200);
      } else {
        CHECK(sampled[{"main", "outer", "leaf"}] == 600);  // middle was inlined before the probes
        CHECK(sampled[{"main", "heavy2", "heavy"}] == 200);  // twice tail-called heavy2
      }
      CHECK(sampled[{"main", "concat", "heavy"}] > 0);
    }
  }
}

// The unmatched exits of burst_sync=auto (19-45 per run on the C programs of bench/real, ~430 on
// the C++ one; docs/BURSTING.md "Why exits went unmatched"). Bursts open (1) below a frame whose
// call into the next pushed stack arguments, and below one that grew by alloca: the unwinder's stack
// pointer for such a frame is lower than its probes', so its exit found its own frame "stale" and
// popped it; (2) in a function called in tail position but not by a jump (the callee needs stack
// arguments the caller did not receive), whose caller's exit probe ran at stage=late before the
// call: the caller's frame is still on the machine stack; (3) below an inlined C++ constructor and
// destructor, whose debug scope names the abstract constructor while their probes pass the clone
// (C1/C2) inlined: the site table left them out. Each window closes after the frames around the
// burst start returned, so their exits are processed: none may go unmatched, every sampled context
// must be one of the exact CCT's of the same run, and the windows' counts are known.
TEST_CASE("machine stack: no unmatched exits, no false contexts (stack arguments, alloca, tail "
          "position, inlined constructors)", "[bursting][e2e]") {
  struct Case {
    std::string program;
    const char *sync;
    std::vector<std::pair<NamePath, uint64_t>> windows;  // contexts and their sampled counts
  };
  const uint64_t rounds = 1000;
  const NamePath pusher_leaf{"main", "pusher", "many", "leaf"}, grower_leaf{"main", "grower", "take", "leaf"};
  const NamePath forwarded{"main", "forwarder", "target", "leaf"}, targeted{"main", "target", "leaf"};
  std::vector<Case> cases{
      {kPrograms + "/machine_frames", "unwind", {{pusher_leaf, rounds}, {grower_leaf, rounds}, {forwarded, rounds}}}};
  for (const char *sync : {"auto", "unwind"}) {
    cases.push_back({plugin_program("machine_frames_early"), sync,
                     {{pusher_leaf, rounds}, {grower_leaf, rounds}, {forwarded, rounds}}});
    // stage=late: forwarder left before target ran (its exit probe precedes the call), and take
    // tail-calls leaf.
    cases.push_back({plugin_program("machine_frames_late"), sync,
                     {{pusher_leaf, rounds}, {{"main", "grower", "leaf"}, rounds}, {targeted, rounds}}});
    cases.push_back({plugin_program("inlined_ctor"), sync,
                     {{{"main", "use", "Holder::Holder", "make", "leaf"}, rounds},
                      {{"main", "use", "Holder::~Holder", "drop", "leaf"}, rounds}}});
  }
  for (const Case &c : cases) {
    INFO(c.program << " burst_sync=" << c.sync);
    auto p = run_profiled({c.program, std::to_string(rounds)},
                          std::string("mode=hcct:exact=1:key=routine:burst=manual:burst_sync=") + c.sync);
    REQUIRE(p.result.status == 0);
    auto set = ha::read_profiles(p.dir);
    const auto &t = set.processes.at(0).threads.at(0);
    auto sampled = named_counts(t);
    auto exact = named_counts(ha::read_profiles(p.dir / "exact").processes.at(0).threads.at(0));
    INFO("sampled:\n" << listing(sampled) << "exact:\n" << listing(exact));
    CHECK(t.meta.unmatched_exits == 0);
    check_sampled_contexts_exist(sampled, exact);
    for (auto &[path, count] : c.windows) CHECK(sampled[path] == count);
  }
}

// The time clock's timer thread (burst_sync=unwind|auto) must not turn a single-threaded program
// into a multi-threaded one for glibc: once pthread_create has run, malloc, free and stdio take
// atomic locks for good (2.5-3.5 % of Lua's CPU time with no burst at all, docs/BENCHMARKS.md
// "Plugin bursting on real programs, session 9"). The thread is made with clone().
TEST_CASE("time-clock bursts leave a single-threaded program single-threaded for glibc", "[bursting][e2e]") {
  const std::string exe = kPrograms + "/single_threaded";
  Result plain = run({exe, "1000"});
  REQUIRE(plain.status == 0);
  if (plain.out.find("single_threaded 1") == std::string::npos)
    hcct::test::skip_test("glibc counts this program multi-threaded without the runtime: " + plain.out);
  auto p = run_profiled({exe}, "mode=hcct:burst=1:burst_sync=unwind");
  REQUIRE(p.result.status == 0);
  CHECK_THAT(p.result.out, Catch::Contains("single_threaded 1"));
  auto set = ha::read_profiles(p.dir);
  const auto &t = set.processes.at(0).threads.at(0);
  INFO("bursts " << meta(t, "bursts") << ", " << p.result.out);
  CHECK(std::stoull(meta(t, "bursts")) > 0);  // the timer thread ran
  CHECK(meta(t, "burst_clock") == "time");
}

// A burst opened in a signal handler: the walk by unwind rules cannot step through the signal frame
// and libgcc's unwinder walks instead; the contexts are the exact CCT's.
TEST_CASE("machine stack: a burst opened in a signal handler", "[bursting][e2e]") {
  const int rounds = 200;
  for (const char *stage : {"early", "late"}) {
    const std::string exe = plugin_program(std::string("signal_burst_") + stage);
    for (const char *sync : {"auto", "unwind"}) {
      INFO(exe << " burst_sync=" << sync);
      auto p = run_profiled({exe, std::to_string(rounds)},
                            std::string("mode=hcct:exact=1:key=routine:burst=manual:burst_sync=") + sync);
      REQUIRE(p.result.status == 0);
      auto set = ha::read_profiles(p.dir);
      auto exact_set = ha::read_profiles(p.dir / "exact");
      const auto &t = set.processes.at(0).threads.at(0);
      auto sampled = named_counts(t);
      auto exact = named_counts(exact_set.processes.at(0).threads.at(0));
      INFO("sampled:\n" << listing(sampled) << "exact:\n" << listing(exact));
      CHECK(t.meta.unmatched_exits == 0);
      check_sampled_contexts_exist(sampled, exact);
      uint64_t leaves = 0;
      for (auto &[path, count] : sampled)
        if (!path.empty() && path.back() == "leaf") {
          leaves += count;
          CHECK(exact[path] == count);  // every call of leaf in the run is in a burst
        }
      CHECK(leaves == uint64_t(rounds));
    }
  }
}

// The same for the wall-clock sampler's thread (time=wall, docs/RUNTIME.md "Wall-clock time"),
// started with pthread_create until session 10 (single_threaded 0 then).
TEST_CASE("the wall-clock sampler leaves a single-threaded program single-threaded for glibc", "[bursting][e2e]") {
  const std::string exe = kPrograms + "/single_threaded";
  Result plain = run({exe, "1000"});
  REQUIRE(plain.status == 0);
  if (plain.out.find("single_threaded 1") == std::string::npos)
    hcct::test::skip_test("glibc counts this program multi-threaded without the runtime: " + plain.out);
  for (const char *options : {"mode=hcct:time=wall", "mode=hcct:time=wall:burst=1:burst_sync=unwind"}) {
    INFO(options);
    auto p = run_profiled({exe}, options);
    REQUIRE(p.result.status == 0);
    CHECK_THAT(p.result.out, Catch::Contains("single_threaded 1"));
    auto set = ha::read_profiles(p.dir);
    const auto &t = set.processes.at(0).threads.at(0);
    INFO(p.result.out << p.result.err);
    CHECK(t.meta.time == "wall");
    CHECK(t.meta.samples + t.meta.samples_lost > 0);  // the sampler thread ran
  }
}

// Units that cannot be unwound right: burst_sync=auto keeps the shadow stack for them. A unit built
// with -fplugin-arg-hcct_plugin-unwind-table=no, and an object with the plugin's probes and no
// descriptor at all (built before descriptors existed).
TEST_CASE("machine stack: burst_sync=auto keeps a shadow stack for units without a site table",
          "[bursting][e2e]") {
  for (const char *name : {"inlined_probe_no_table", "old_probes"}) {
    const std::string exe = plugin_program(name);
    INFO(name);
    auto p = run_profiled({exe, "1000"}, "mode=cct:burst=manual:burst_sync=auto");
    REQUIRE(p.result.status == 0);
    auto set = ha::read_profiles(p.dir);
    const auto &t = set.processes.at(0).threads.at(0);
    auto counts = named_counts(t);
    INFO(listing(counts));
    CHECK(counts[{"main", "outer", "middle", "leaf"}] == 1000);
    CHECK(meta(t, "sampled_fraction_basis") == "events");  // every event reached the runtime
  }
}

// A plugin-built library loaded with dlopen registers its unit at load: its inlined function is on
// the unwound path. At dlclose the runtime forgets it. The second library has the same code at the
// same addresses (usually: the test says when not) and its own table elsewhere in its data: had the
// first library's table been kept, its chains would be read from the second library's data and the
// second path would hold whatever lies there (seen: 0x3cb8 > 0xd > 0x13c4 > 0x1000 > lib_leaf).
TEST_CASE("machine stack: a dlopen'ed library's site table, registered at load, forgotten at dlclose",
          "[bursting][e2e]") {
  const std::string exe = plugin_program("dl_main");
  const std::string first = kPrograms + "/libdl_lib_table.so", second = kPrograms + "/libdl_lib_shifted.so";
  auto p = run_profiled({exe, "1000", first, second}, "mode=cct:burst=manual:burst_sync=unwind");
  REQUIRE(p.result.status == 0);
  auto counts = named_counts(ha::read_profiles(p.dir).processes.at(0).threads.at(0));
  INFO(listing(counts));
  if (p.result.out.find("same") == std::string::npos)
    WARN("the second library was not loaded at the first one's address: the forgetting is not exercised");
  // Both libraries' windows, each under its own (unloaded or live) lib_run: the same names.
  CHECK(counts[{"main", "lib_run", "lib_outer", "lib_middle", "lib_leaf"}] == 2000);
  for (auto &[path, count] : counts)
    if (path.back() == "lib_leaf" && count) CHECK(path == NamePath{"main", "lib_run", "lib_outer", "lib_middle", "lib_leaf"});
}

// A burst start unwinds only the frames that changed since the thread's previous walk of the machine
// stack; the frames outside the first one still in place (same stack pointer, same return address,
// every frame outside it too) come from that walk (docs/BURSTING.md, "The cost of a burst start").
// deep_bursts opens 300 bursts 50-60 frames deep, the innermost frames different each time, through
// two callers of the same shape under which `mid`'s frame is at the same place: the walk must not
// take a path through the other caller. Before the memo every walk stepped through every frame
// (and the dump had no unwind_frames keys).
TEST_CASE("machine stack: a burst start unwinds only the frames changed since the last one", "[bursting][e2e]") {
  const int rounds = 300, depth = 60;
  std::map<std::string, uint64_t> want;
  for (int r = 0; r < rounds; ++r)
    ++want["main>" + frame_run("descend", uint64_t(depth - (r / 2 % 3) * 5)) + (r % 2 ? ">via_b" : ">via_a") +
           ">mid>open_here>leaf"];
  struct Case {
    std::string program;
    const char *sync;
  };
  std::vector<Case> cases{{kPrograms + "/deep_bursts", "unwind"}};
  if (std::string(BURST_TOGGLE_PLUGIN).size())
    for (const char *sync : {"auto", "unwind"})
      for (const char *stage : {"early", "late"}) cases.push_back({plugin_program(std::string("deep_bursts_") + stage), sync});
  for (const Case &c : cases) {
    INFO(c.program << " burst_sync=" << c.sync);
    auto p = run_profiled({c.program, std::to_string(rounds), std::to_string(depth)},
                          std::string("mode=hcct:exact=1:key=routine:burst=manual:burst_sync=") + c.sync);
    REQUIRE(p.result.status == 0);
    auto set = ha::read_profiles(p.dir);
    auto exact_set = ha::read_profiles(p.dir / "exact");
    const auto &t = set.processes.at(0).threads.at(0);
    const auto &exact = exact_set.processes.at(0).threads.at(0);
    auto sampled = run_length_counts(t);
    auto exact_counts = run_length_counts(exact);
    std::map<std::string, uint64_t> got;
    for (auto &[path, count] : sampled)
      if (count) got[path] = count;
    INFO(diff(got, want));
    CHECK(got == want);
    for (auto &[path, count] : want) CHECK(exact_counts[path] == count);
    CHECK(t.meta.unmatched_exits == 0);
    REQUIRE(!meta(t, "unwind_frames").empty());
    uint64_t walked = std::stoull(meta(t, "unwind_frames")), reused = std::stoull(meta(t, "unwind_frames_reused"));
    INFO("bursts " << meta(t, "bursts") << ", frames unwound " << walked << ", reused " << reused);
    // A full walk steps through 50-60 frames of descend alone per burst; the changed ones are a few.
    CHECK(std::stoull(meta(t, "bursts")) == uint64_t(rounds));
    CHECK(reused > 3 * walked);
    // The frames stepped through outside the runtime's own go by the rule table, not libgcc's
    // unwinder (the rules of ordinary gcc -O2 code).
    REQUIRE(!meta(t, "unwind_frames_by_rules").empty());
    CHECK(std::stoull(meta(t, "unwind_frames_by_rules")) * 3 > walked);
  }
}

// Between bursts plugin probes keep the shadow stack through the runtime's lean route (runtime.cc,
// lean_enter/lean_exit; docs/BURSTING.md "The cost between bursts"): after longjmp, a throw, a
// signal handler's calls, handlers interrupting the probes themselves and a recursion 100,000 deep,
// each made between bursts, a burst records its one call in the context the program is in. Both
// stages, cct mode (no time sampler) and hcct mode (the CPU-time sampler's handler, whose samples
// taken during a lean event are charged at its end). Nothing with exact=1 here: it keeps every event
// on the full path, and the lean route would not run.
TEST_CASE("shadow stack between bursts: plugin probes' lean route through longjmp, throw, signals, "
          "deep recursion and threads",
          "[bursting][e2e]") {
  const int depth = 100000;
  std::map<std::string, uint64_t> main_want{{"main>jump_test>after_jump>leaf", 1},
                                            {"main>catch_test>after_catch>leaf", 1},
                                            {"main>signal_test>after_signal>leaf", 1},
                                            {"main>storm_test>after_storm>leaf", 1},
                                            {"main>deep_test>" + frame_run("deep", depth + 1) + ">leaf", 1}};
  std::map<std::string, uint64_t> thread_want{{"thread_body>after_thread>leaf", 1}};
  for (const char *stage : {"early", "late"}) {
    const std::string exe = plugin_program(std::string("lean_between_") + stage);
    auto plain = run({exe, std::to_string(depth)});
    REQUIRE(plain.status == 0);
    for (const char *mode : {"mode=cct", "mode=hcct:epsilon=1e-6"}) {
      std::string options = std::string(mode) + ":burst=manual";
      INFO(exe << " " << options);
      auto p = run_profiled({exe, std::to_string(depth)}, options);
      REQUIRE(p.result.status == 0);
      CHECK(p.result.out == plain.out);
      CHECK(p.result.err.empty());
      auto set = ha::read_profiles(p.dir);
      REQUIRE(set.processes.size() == 1);
      const auto &threads = set.processes[0].threads;
      REQUIRE(threads.size() == 2);
      for (const auto &th : threads) {
        auto got = run_length_counts(th);
        const auto &want = th.meta.thread_seq == 0 ? main_want : thread_want;
        INFO("thread " << th.meta.thread_seq << "\n" << diff(got, want));
        CHECK(got == want);
        CHECK(meta(th, "burst_sync") == "shadow");
        CHECK(meta(th, "sampled_fraction_basis") == "events");
        CHECK(th.meta.unmatched_exits == 0);
      }
      // Every enter is counted, in bursts or between them (the event clock's basis): the second
      // thread's are thread_body, 1,000 leaf, after_thread and its leaf; main's include the signal
      // handlers' (how many arrive varies), at least the program's own.
      const auto &second = threads[0].meta.thread_seq == 0 ? threads[1] : threads[0];
      const auto &first = threads[0].meta.thread_seq == 0 ? threads[0] : threads[1];
      CHECK(meta(second, "events") == "1003");
      uint64_t main_enters = 1 + (1 + 51 + 2) + (1 + 51 + 2) + (1 + 1 + 10 * 2 + 2) + (1 + 2000000 + 2) +
                             (1 + uint64_t(depth) + 1 + 1);
      CHECK(std::stoull(meta(first, "events")) >= main_enters);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The count clock (-fplugin-arg-hcct_plugin-clock=count; docs/BURSTING.md, "The count clock"): the
// entry probe counts the thread's calls down in a thread-local countdown of its module and calls
// in when it runs out; the burst it opens rebuilds the path from the machine stack, and the calls
// between bursts are known exactly from the countdowns (the event clock's estimator, with nothing
// called between bursts).

namespace {

// The thread of `set` whose calling contexts start at `root`.
const ha::ThreadProfile *thread_rooted_at(const ha::ProfileSet &set, const std::string &root) {
  for (const auto &t : set.processes.at(0).threads) {
    auto counts = named_counts(t);
    if (!counts.empty() && counts.begin()->first.front() == root) return &t;
  }
  return nullptr;
}

}  // namespace

// The two phases of issue 16 (one that bursts slow down several times, one they barely slow down),
// each within 10 % with the count clock: every window samples the same fraction of the thread's
// calls, counted by the countdown. (The gate build with burst_sync=auto, on the time clock: the
// sparse phase 1.84x.) `events` is every enter of the run: the last gap's, still in the countdown,
// included.
TEST_CASE("count clock: phases with different in-burst slowdowns are each counted within 10 %",
          "[bursting][e2e][accuracy][count]") {
  const std::string exe = plugin_program("two_phase_count");
  const uint64_t dense = 32 * 1000000, sparse = 500000;
  for (const char *mode : {"mode=hcct:epsilon=2e-5", "mode=hcct:epsilon=2e-5:exact=1"}) {
    // The default schedule (0.1 ms / 0.01 ms): at 0.5 / 0.05 the first gap of the sparse phase,
    // planned in the dense phase's calls, spans up to a fifth of it (docs/BURSTING.md, "Phase
    // changes inside a window"), and one run's estimate of that phase varies by about ±12 %.
    for (const char *schedule : {""}) {
      std::string options = std::string(mode) + ":burst=1" + schedule;
      INFO(options);
      auto p = run_profiled({exe, std::to_string(dense), std::to_string(sparse)}, options);
      REQUIRE(p.result.status == 0);
      auto set = ha::read_profiles(p.dir);
      const auto &t = set.processes.at(0).threads.at(0);
      CHECK(meta(t, "burst_sync") == "count");
      CHECK(meta(t, "burst_clock") == "events");
      CHECK(meta(t, "sampled_fraction_basis") == "events");
      // The count clock's own default schedule (session 14), not the event clock's 0.1 / 0.01 ms.
      CHECK(meta(t, "burst_interval_ns") == "100000");
      CHECK(meta(t, "burst_length_ns") == "5000");
      CHECK(std::stoull(meta(t, "unwind_frames")) + std::stoull(meta(t, "unwind_frames_reused")) > 0);
      CHECK(std::stoull(meta(t, "events")) == dense + sparse + 3);  // main, dense, sparse
      double f = std::stod(meta(t, "sampled_fraction"));
      REQUIRE(f > 0);
      auto counts = named_counts(t);
      for (auto &[phase, calls] : std::map<std::string, double>{{"dense", double(dense)}, {"sparse", double(sparse)}}) {
        double estimate = phase_calls(counts, phase) / f;
        INFO(phase << ": estimate " << estimate << ", exact " << calls << ", sampled fraction " << f << ", bursts "
                   << meta(t, "bursts"));
        CHECK(std::fabs(estimate / calls - 1) <= 0.10);
      }
    }
  }
}

// Bursts opened by the countdown anywhere in split, cold, inlined and tail-called functions and
// under frames with stack arguments and alloca (both stages): every sampled context is one of the
// exact CCT's of the same run (exact=1: every event is delivered, the gap counted in the runtime)
// and no exit goes unmatched. (With burst=manual the count builds' windows are checked beside the
// gate builds', "machine stack: split, cold and tail-called functions against the exact tree".)
TEST_CASE("count clock: true contexts through split, cold, inlined and tail-called functions", "[bursting][e2e][count]") {
  for (const char *stage : {"early", "late"}) {
    for (const std::string program : {"split_inline", "machine_frames", "deep_bursts"}) {
      const std::string exe = plugin_program(program + "_" + stage + "_count");
      std::vector<std::string> argv{exe};
      if (program == "split_inline") argv.push_back("20000");
      if (program == "machine_frames") argv.push_back("5000");
      INFO(exe);
      // Bursts of 0.01 ms (f = 10 %): these short runs need many bursts, and the count clock's
      // default (5 %) gives half as many on deep stacks (a burst's length has floors in calls).
      auto p = run_profiled(argv, "mode=hcct:exact=1:key=routine:burst=1:burst_interval=0.1:burst_length=0.01");
      REQUIRE(p.result.status == 0);
      auto set = ha::read_profiles(p.dir);
      auto exact_set = ha::read_profiles(p.dir / "exact");
      const auto &t = set.processes.at(0).threads.at(0);
      auto sampled = named_counts(t);
      auto exact = named_counts(exact_set.processes.at(0).threads.at(0));
      INFO("sampled:\n" << listing(sampled) << "exact:\n" << listing(exact));
      CHECK(meta(t, "burst_sync") == "count");
      CHECK(std::stoull(meta(t, "bursts")) >= 10);
      CHECK(t.meta.unmatched_exits == 0);
      check_sampled_contexts_exist(sampled, exact);
    }
  }
}

// A count build run under a closed-gate sync (unwind, or auto on the machine stack) with no exact
// side: the gate is closed between bursts, and the count probes must keep calling in to see it open
// again. (A countdown set never to run out there left the thread out of every later burst: the run
// wrote no profile at all.)
TEST_CASE("count clock: a count build under a closed-gate sync keeps every burst", "[bursting][e2e][count]") {
  for (const char *stage : {"early", "late"}) {
    const std::string exe = plugin_program(std::string("split_inline_") + stage + "_count");
    for (const char *sync : {"unwind", "auto"}) {
      INFO(exe << " burst=manual burst_sync=" << sync);
      auto p = run_profiled({exe, "2000"}, std::string("mode=hcct:key=routine:burst=manual:burst_sync=") + sync);
      REQUIRE(p.result.status == 0);
      auto set = ha::read_profiles(p.dir);
      REQUIRE(set.processes.size() == 1);
      auto sampled = named_counts(set.processes.at(0).threads.at(0));
      INFO("sampled:\n" << listing(sampled));
      CHECK(sampled[{"main", "check_size", "complain"}] == 8);
      CHECK(sampled[{"main", "check_big", "complain"}] == 8);
      if (std::string(stage) == "early") {
        CHECK(sampled[{"main", "outer", "middle", "leaf"}] == 600);
      } else {
        CHECK(sampled[{"main", "outer", "leaf"}] == 600);
      }
    }
  }
}

// Each thread's countdowns are its own (static TLS), armed at its first enter in each module
// (the countdown starts at 0 in a new thread, and in a module loaded later): each thread's bursts,
// fraction and estimates are its own, and a dlopen'ed count module is counted in the main thread
// and in a thread started after the load.
TEST_CASE("count clock: threads and a dlopen'ed module each counted within 10 %", "[bursting][e2e][accuracy][count]") {
  const std::string exe = plugin_program("count_threads_count");
  const std::string lib = kPrograms + "/libcount_lib.so";
  const uint64_t calls = 400000;
  for (const char *mode : {"mode=hcct", "mode=hcct:exact=1"}) {
    INFO(mode);
    auto p = run_profiled({exe, "4", std::to_string(calls), lib}, std::string(mode) + ":burst=1");
    REQUIRE(p.result.status == 0);
    auto set = ha::read_profiles(p.dir);
    REQUIRE(set.processes.at(0).threads.size() == 6);
    std::map<std::string, int> roots;
    for (const auto &t : set.processes.at(0).threads) {
      auto counts = named_counts(t);
      REQUIRE(!counts.empty());
      const std::string root = counts.begin()->first.front();
      ++roots[root];
      INFO(root << " (tid " << t.meta.tid << "):\n" << listing(counts));
      CHECK(meta(t, "burst_sync") == "count");
      CHECK(meta(t, "sampled_fraction_basis") == "events");
      CHECK(t.meta.unmatched_exits == 0);
      double f = std::stod(meta(t, "sampled_fraction"));
      REQUIRE(f > 0);
      NamePath step = root == "worker" ? NamePath{"worker", "step"} : NamePath{root, "lib_run", "lib_step"};
      // Every enter of the thread: the last gap's, still in its countdowns at its exit, included.
      const std::map<std::string, uint64_t> events{{"worker", 2 * calls + calls / 4 + 1},
                                                   {"main", 3 * calls + 3},
                                                   {"lib_thread", 3 * calls + 2}};
      CHECK(std::stoull(meta(t, "events")) == events.at(root));
      double estimate = double(counts[step]) / f;
      INFO("estimate " << estimate << ", sampled fraction " << f << ", bursts " << meta(t, "bursts"));
      CHECK(std::fabs(estimate / double(calls) - 1) <= 0.10);
      if (std::string(mode).find("exact") != std::string::npos) {
        auto exact_set = ha::read_profiles(p.dir / "exact");
        const ha::ThreadProfile *e = nullptr;
        for (const auto &x : exact_set.processes.at(0).threads)
          if (x.meta.tid == t.meta.tid) e = &x;
        REQUIRE(e);
        auto exact = named_counts(*e);
        CHECK(exact[step] == calls);
        check_sampled_contexts_exist(counts, exact);
      }
    }
    CHECK(roots["worker"] == 4);
    CHECK(roots["main"] == 1);
    CHECK(roots["lib_thread"] == 1);
  }
}

// A forked child inherits the forking thread's countdowns in the middle of a gap: its events (the
// basis of its fraction) are its own from the fork on, exactly (before the fix: the parent's part
// of that gap too, 610,252 instead of 600,000 for 300,000 rounds).
TEST_CASE("count clock: a forked child counts its own calls", "[bursting][e2e][count]") {
  const std::string exe = plugin_program("count_fork_count");
  const uint64_t rounds = 300000;
  auto p = run_profiled({exe, std::to_string(rounds)}, "mode=hcct:burst=1");
  REQUIRE(p.result.status == 0);
  auto set = ha::read_profiles(p.dir);
  REQUIRE(set.processes.size() == 2);
  for (const auto &process : set.processes) {
    const auto &t = process.threads.at(0);
    uint64_t events = std::stoull(meta(t, "events"));
    INFO("pid " << t.meta.pid << " ppid " << t.meta.ppid << " events " << events);
    CHECK(meta(t, "burst_sync") == "count");
    CHECK(t.meta.unmatched_exits == 0);
    CHECK((events == 4 * rounds + 1 || events == 2 * rounds));
    double f = std::stod(meta(t, "sampled_fraction"));
    auto counts = named_counts(t);
    double steps = 0;
    for (auto &[path, count] : counts)
      if (path.back() == "step") steps += double(count);
    double want = events == 2 * rounds ? double(rounds) : 2.0 * double(rounds);
    CHECK(std::fabs(steps / f / want - 1) <= 0.10);
  }
  uint64_t child_events = 0, parent_events = 0;
  for (const auto &process : set.processes) {
    uint64_t e = std::stoull(meta(process.threads.at(0), "events"));
    (e == 2 * rounds ? child_events : parent_events) = e;
  }
  CHECK(child_events == 2 * rounds);
  CHECK(parent_events == 4 * rounds + 1);
}

// A fork from a count module's destructor (programs/count_fork_dlclose.c): the child's one thread
// is inside the dlclose interposer when it begins, and its dlclose returns in the child. Each
// process then makes `rounds` calls of step (each calling leaf) and both must sample them on the
// count clock. Before session 16 the child's hold-off count (the dlcloses under way) was reset to
// 0 by the fork and ended at -1, its count writes refused for ever: no burst in the child, and
// either no call sampled or every call (a burst under way at the fork never ended), in 3 of 3 runs.
TEST_CASE("count clock: a child forked inside a dlclose keeps sampling", "[bursting][e2e][count]") {
  const std::string exe = plugin_program("count_fork_dlclose");
  const uint64_t rounds = 1000000;
  auto p = run_profiled({exe, kPrograms + "/libcount_fork_lib.so", std::to_string(rounds)}, "mode=hcct:burst=1");
  INFO(p.result.err);
  REQUIRE(p.result.status == 0);
  CHECK(p.result.out == "child 0\n");
  auto set = ha::read_profiles(p.dir);
  REQUIRE(set.processes.size() == 2);
  int children = 0;
  for (size_t i = 0; i < 2; ++i) {
    REQUIRE(set.processes.at(i).threads.size() == 1);
    const auto &t = set.processes.at(i).threads.at(0);
    const bool child = t.meta.ppid == set.processes.at(1 - i).threads.at(0).meta.pid;
    children += child;
    uint64_t steps = 0;
    for (auto &[path, count] : named_counts(t))
      if (path.back() == "step") steps += count;
    INFO((child ? "child" : "parent") << " pid " << t.meta.pid << " events " << meta(t, "events") << " bursts "
                                      << meta(t, "bursts") << " calls " << t.meta.calls << " steps " << steps);
    CHECK(meta(t, "burst_sync") == "count");
    CHECK(std::stoull(meta(t, "bursts")) > 0);
    CHECK(t.meta.calls > 0);
    CHECK(steps > 0);
    CHECK(t.meta.unmatched_exits == 0);
    // Sampled, not every call (a burst that never ends takes them all), and in proportion.
    const double f = std::stod(meta(t, "sampled_fraction"));
    CHECK(f < 0.5);
    CHECK(std::fabs(double(steps) / f / double(rounds) - 1) <= 0.10);
  }
  CHECK(children == 1);
}

// A dlclose of a count module (tests/bursting/programs/count_unload.c). The runtime looks the
// unloaded units up holding its units lock; there, the program's own dladdr raises a signal whose
// handler makes the run's first count event (before the fix, deciding the clock spun on that lock
// for ever: killed by the program's alarm), and loads a library that glibc maps where the module
// was and gives its static TLS and module id (before the fix, the module, found mapped by its
// descriptor's address, stayed live: its countdown and exit gate were written into that library's
// TLS, whose sum came out 539 instead of 0).
TEST_CASE("count clock: a dlclose, a signal handler's first count event and a library loaded into the module's TLS",
          "[bursting][e2e][count]") {
  const std::string exe = plugin_program("count_unload");
  for (const char *how : {"signal", "quiet"}) {
    INFO(how);
    const bool quiet = std::string(how) == "quiet";  // (and a schedule given: the count clock keeps it)
    auto p = run_profiled({exe, kPrograms + "/libcount_lib.so", kPrograms + "/libcount_unload_tls.so", "2000000", how},
                          quiet ? "mode=hcct:burst=1:burst_interval=0.2:burst_length=0.02" : "mode=hcct:burst=1");
    REQUIRE(p.result.status == 0);
    const unsigned long handler = std::string(how) == "signal" ? 45 : 0;
    CHECK(p.result.out == "handler " + std::to_string(handler) + " work " +
                              std::to_string(1999999000000ul + handler) + " tls 0\n");
    auto set = ha::read_profiles(p.dir);
    const auto &t = set.processes.at(0).threads.at(0);
    CHECK(meta(t, "burst_sync") == "count");
    CHECK(meta(t, "burst_interval_ns") == (quiet ? "200000" : "100000"));
    CHECK(meta(t, "burst_length_ns") == (quiet ? "20000" : "5000"));
    CHECK(std::stoull(meta(t, "bursts")) >= 10);
    CHECK(t.meta.unmatched_exits == 0);
  }
}

// The count clock's dlclose races (session 15), each at a point chosen by count_races' own dladdr
// and dl_iterate_phdr (programs/count_races.c): a second thread's dlclose unmapping a count module
// while the first thread's forget step checks it (before: a crash in the module's count_tls), a
// dlopen of the unloaded module between a dlclose and its forget step (before: a hang, then its
// enters miscounted), bursts beginning and ending while a dlclose holds the count writes off, and
// the run's first count event in a fork's prepare handler.
// The thread with a context under `root` (called from the thread's root).
const ha::ThreadProfile *thread_calling(const ha::ProfileSet &set, const std::string &root) {
  for (const auto &t : set.processes.at(0).threads)
    for (const auto &[path, count] : named_counts(t))
      if (path.front() == root) return &t;
  return nullptr;
}

// One of count_races' scenarios (its arguments after the program) under the count clock's bursting,
// run to a clean exit, with its profiles.
struct CountRace {
  Profiled run;
  ha::ProfileSet set;
};

CountRace run_count_race(std::vector<std::string> args) {
  args.insert(args.begin(), plugin_program("count_races"));
  auto p = run_profiled(args, "mode=hcct:burst=1");
  INFO(p.result.err);
  REQUIRE(p.result.status == 0);
  return {p, ha::read_profiles(p.dir)};
}

// The thread of the race with a context under `root`, profiled on the count clock.
const ha::ThreadProfile &count_thread(const CountRace &race, const std::string &root) {
  const ha::ThreadProfile *t = thread_calling(race.set, root);
  REQUIRE(t);
  CHECK(meta(*t, "burst_sync") == "count");
  return *t;
}

TEST_CASE("count clock: two threads in dlclose at once, each unloading a count module", "[bursting][e2e][count]") {
  auto race = run_count_race({"close2", kPrograms + "/libcount_lib.so", kPrograms + "/libcount_race_lib.so", "100000"});
  INFO(race.run.result.err);
  CHECK(race.run.result.out == "close2 raced work " + std::to_string(2 * 4999950000ul) + "\n");
  CHECK(count_thread(race, "work").meta.unmatched_exits == 0);
}

TEST_CASE("count clock: a dlopen of the module between a dlclose and its forget step", "[bursting][e2e][count]") {
  const uint64_t calls = 100000;
  auto race = run_count_race({"reopen", kPrograms + "/libcount_lib.so", std::to_string(calls)});
  INFO(race.run.result.err);
  // lib_run twice, work once, lib_sum; the new load's lib_leaf sum.
  const uint64_t events = 2 * (3 * calls + 1) + calls + 2, sum = calls * calls;
  CHECK(race.run.result.out == "reopen events " + std::to_string(events) + " sum " + std::to_string(sum) + "\n");
  const ha::ThreadProfile &t = count_thread(race, "lib_run");
  CHECK(meta(t, "events") == std::to_string(events));  // every enter (both loads'), each counted once
  CHECK(t.meta.unmatched_exits == 0);
}

// A stress test: a thread dlopens and dlcloses a library as fast as it can while main's calls open
// and close bursts (every 0.1 ms). A burst whose last enter came while a dlclose held the count-TLS
// writes off ended with its countdowns still holding its enters, which the gap's next take counted
// again (before session 15: `events` too high in 5 of 5 runs, by 2,291 to 28,998).
TEST_CASE("count clock: bursts ending while a dlclose holds the count writes off", "[bursting][e2e][count]") {
  auto race = run_count_race({"burst", kPrograms + "/libcount_lib.so", kPrograms + "/libcount_unload_tls.so", "1.5"});
  const std::string &out = race.run.result.out;
  INFO(race.run.result.err);
  const std::string prefix = "burst events ";
  REQUIRE(out.rfind(prefix, 0) == 0);
  const std::string enters = out.substr(prefix.size(), out.size() - prefix.size() - 1);
  const ha::ThreadProfile &t = count_thread(race, "work");
  CHECK(std::stoull(meta(t, "bursts")) >= 100);
  CHECK(meta(t, "events") == enters);  // exact: every enter counted once, in a burst or a gap
}

// A burst must not begin before its countdowns and exit gates are written: at the runtime's clock
// read of a burst's start, count_races finds its exit gate open. Before session 15 it was closed
// there, and a dlclose that held the count writes off from that point (count_races' own hooks)
// left the burst with its exits unseen and `events` wrong (2,202,581 and 2,202,559 for 2,202,200).
TEST_CASE("count clock: a burst begins with its exit gates open, even while a dlclose holds the writes off",
          "[bursting][e2e][count]") {
  auto race = run_count_race({"gates", kPrograms + "/libcount_lib.so", kPrograms + "/libcount_unload_tls.so"});
  INFO(race.run.result.err);
  CHECK(race.run.result.out == "gates armed events 2200000\n");  // (no burst started with a closed gate)
  CHECK(meta(count_thread(race, "work"), "events") == "2200000");
}

// Guards the clock's decision against a signal handler's first count event while the runtime holds
// its bursting lock (burst_count_decide takes it with a try-lock since session 15): a prepare
// handler run after the runtime's raises the signal. This passed before too: the runtime's fork
// handlers block signals (its registry lock) until the lock is released again.
TEST_CASE("count clock: the first count event in a signal handler during a fork's prepare handlers",
          "[bursting][e2e][count]") {
  auto race = run_count_race({"fork", "2000000"});
  INFO(race.run.result.err);
  CHECK(race.run.result.out == "fork handler 45 child 0 work " + std::to_string(1999999000000ul + 45) + "\n");
  const ha::ThreadProfile &t = count_thread(race, "work");
  CHECK(std::stoull(meta(t, "bursts")) >= 10);
  CHECK(t.meta.unmatched_exits == 0);
}

// A program built with clock=count runs unchanged without the runtime (the module's stub finds no
// __hcct_enter_count and parks the countdown at INT64_MAX), with it and mode=off, and exhaustively
// (mode=cct: every thread's every event delivered, a dlopen'ed module's too).
TEST_CASE("count clock: a count build without the runtime, with mode=off, and exhaustive", "[bursting][e2e][count]") {
  const std::string exe = plugin_program("count_threads_count");
  const std::string native = kPrograms + "/count_threads";
  const uint64_t calls = 100000;
  Result want = run({native, "3", std::to_string(calls), kPrograms + "/libcount_lib_native.so"});
  REQUIRE(want.status == 0);
  Result alone = run({exe, "3", std::to_string(calls), kPrograms + "/libcount_lib.so"});
  CHECK(alone.status == 0);
  CHECK(alone.out == want.out);
  Result off = run({exe, "3", std::to_string(calls), kPrograms + "/libcount_lib.so"},
                   {std::string("LD_PRELOAD=") + HCCT_RUNTIME, "HCCT_OPTIONS=mode=off"});
  CHECK(off.status == 0);
  CHECK(off.out == want.out);
  auto p = run_profiled({exe, "3", std::to_string(calls), kPrograms + "/libcount_lib.so"}, "mode=cct");
  REQUIRE(p.result.status == 0);
  CHECK(p.result.out == want.out);
  auto set = ha::read_profiles(p.dir);
  REQUIRE(set.processes.at(0).threads.size() == 5);
  for (const char *root : {"worker", "main", "lib_thread"}) {
    const ha::ThreadProfile *t = thread_rooted_at(set, root);
    REQUIRE(t);
    auto counts = named_counts(*t);
    INFO(root << ":\n" << listing(counts));
    CHECK(t->meta.unmatched_exits == 0);
    if (std::string(root) == "worker") {
      CHECK(counts[{"worker", "step"}] == calls);
      CHECK(counts[{"worker", "step", "leaf"}] == calls);
      CHECK(counts[{"worker", "other"}] == calls / 4);  // step tail-calls other
    } else {
      CHECK(counts[{root, "lib_run", "lib_step"}] == calls);
      CHECK(counts[{root, "lib_run", "lib_step", "lib_leaf"}] == calls);  // the first call; the second is a tail call
    }
  }
}
