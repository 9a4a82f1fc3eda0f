#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>
#include <fstream>
#include <sstream>
#include <string>

#include "hcct/runtime_options.h"
#include "options.h"

using namespace hcct::rt;

namespace {
std::string error_of(const char *text) {
  Options o;
  char error[512] = "";
  return parse_options(text, &o, error, sizeof error) ? std::string() : std::string(error);
}
}  // namespace

TEST_CASE("options: defaults and valid settings", "[options]") {
  Options o;
  char error[256];
  REQUIRE(parse_options(nullptr, &o, error, sizeof error));
  CHECK(o.mode == Mode::kHcct);
  CHECK(o.epsilon == 2e-5);
  REQUIRE(parse_options("mode=cct:key=routine:epsilon=1e-3:out=/tmp/x:max_mb=12:verbose=1", &o, error,
                        sizeof error));
  CHECK(o.mode == Mode::kCct);
  CHECK(o.key == KeyBy::kRoutine);
  CHECK(o.epsilon == 1e-3);
  CHECK(std::string(o.out) == "/tmp/x");
  CHECK(o.max_mb == 12);
  CHECK(o.verbose);
  REQUIRE(parse_options("mode=empty::", &o, error, sizeof error));
  CHECK(o.mode == Mode::kEmpty);
}

TEST_CASE("options: every bad value is named", "[options]") {
  CHECK(error_of("mode=fast") == "mode='fast' is not one of off, empty, cct, hcct");
  CHECK(error_of("epsilon=0") == "epsilon='0' must be a number in [1e-7, 1)");
  CHECK(error_of("epsilon=abc") == "epsilon='abc' must be a number in [1e-7, 1)");
  CHECK(error_of("epsilon=1e-3x") == "epsilon='1e-3x' must be a number in [1e-7, 1)");
  CHECK(error_of("max_mb=-1") == "max_mb='-1' must be a whole number of MiB, at least 1");
  CHECK(error_of("colour=red").find("unknown option 'colour'") == 0);
  CHECK(error_of("mode") == "option 'mode' has no value (expected key=value)");
  CHECK(error_of("out=") == "out='' must be a directory path");
  CHECK(error_of("path_grow=0") == "path_grow='0' must be a whole number in [1, 64]");
  CHECK(error_of("path_grow=65") == "path_grow='65' must be a whole number in [1, 64]");
  CHECK(error_of("path_grow=2.5") == "path_grow='2.5' must be a whole number in [1, 64]");
}

TEST_CASE("options: path_grow's bounds are accepted", "[options]") {
  Options o;
  char error[256];
  REQUIRE(parse_options("path_grow=1", &o, error, sizeof error));
  CHECK(o.path_grow == 1);
  REQUIRE(parse_options("path_grow=64", &o, error, sizeof error));
  CHECK(o.path_grow == 64);
}

// Found by tests/fuzz/fuzz_options (corpus: options/regress-newline-*): the message quoted the bad
// text raw, so a newline or escape byte in HCCT_OPTIONS split the runtime's one-line message or
// reached the terminal.
TEST_CASE("options: the message shows control bytes escaped on one line", "[options]") {
  CHECK(error_of("\n") == "option '\\x0a' has no value (expected key=value)");
  CHECK(error_of("a\tb=1").find("unknown option 'a\\x09b'") == 0);
  CHECK(error_of("mode=a\nb") == "mode='a\\x0ab' is not one of off, empty, cct, hcct");
  CHECK(error_of("out=\x1b[2J:k=0") == "k='0' must be a whole number in [1, 256]");
  CHECK(error_of("k=\x1b[2J") == "k='\\x1b[2J' must be a whole number in [1, 256]");
  CHECK(error_of("verbose\x7f") == "option 'verbose\\x7f' has no value (expected key=value)");
}

TEST_CASE("options: static bursting", "[options][bursting]") {
  Options o;
  char error[256];
  REQUIRE(parse_options(nullptr, &o, error, sizeof error));
  CHECK(o.burst == Burst::kOff);
  CHECK(o.burst_interval_ns == 2000000);  // issue 16: 2 ms / 0.2 ms
  CHECK(o.burst_length_ns == 200000);
  CHECK(o.burst_sync == BurstSync::kShadow);  // issue 16: the default that is right with inlining
  REQUIRE(parse_options("burst=1:burst_interval=1500:burst_length=0.25:burst_sync=unwind:mode=cct", &o,
                        error, sizeof error));
  CHECK(o.burst == Burst::kTimer);
  CHECK(o.burst_interval_ns == 1500000000ull);  // intervals of a second and more
  CHECK(o.burst_length_ns == 250000);
  CHECK(o.burst_sync == BurstSync::kUnwind);
  REQUIRE(parse_options("burst=manual:burst_sync=auto", &o, error, sizeof error));
  CHECK(o.burst == Burst::kManual);
  CHECK(o.burst_sync == BurstSync::kAuto);
  CHECK(error_of("burst=yes") == "burst='yes' is not one of 0, 1, manual");
  CHECK(error_of("burst_interval=0") == "burst_interval='0' must be milliseconds in [0.001, 86400000]");
  CHECK(error_of("burst_length=-2") == "burst_length='-2' must be milliseconds in [0.001, 86400000]");
  CHECK(error_of("burst_sync=fast") == "burst_sync='fast' is not one of auto, shadow, unwind");
  CHECK(error_of("burst=1:burst_interval=2:burst_length=30") ==
        "burst_length (30.000 ms) must not exceed burst_interval (2.000 ms)");
  CHECK(error_of("burst=1:mode=empty") == "burst needs mode=cct or mode=hcct");
}

// The event clock's default schedule (0.1 / 0.01 ms) applies when neither burst_interval nor
// burst_length is given (burst_runtime.cc; checked in the dumps by burst_e2e_test's "timer bursts on
// the examples"); one given alone sets the other at the defaults' ratio, 10:1, on either clock.
TEST_CASE("options: whether the burst schedule was given, and one alone sets the other", "[options]") {
  using Schedule = std::tuple<bool, uint64_t, uint64_t>;
  auto given = [](const char *text) {
    Options o;
    char error[256];
    INFO(text);
    REQUIRE(parse_options(text, &o, error, sizeof error));
    return Schedule(o.burst_schedule_given(), o.burst_interval_ns, o.burst_length_ns);
  };
  CHECK(given("burst=1") == Schedule(false, 2000000, 200000));
  CHECK(given("burst=1:burst_length=0.05") == Schedule(true, 500000, 50000));
  CHECK(given("burst=1:burst_interval=3") == Schedule(true, 3000000, 300000));
  // Shorter than the time clock's default length: valid (it was refused, the length staying 0.2).
  CHECK(given("burst=1:burst_interval=0.1") == Schedule(true, 100000, 10000));
  CHECK(given("burst=1:burst_interval=0.005") == Schedule(true, 5000, 1000));  // the 1 µs floor
  const uint64_t day = uint64_t(86400000) * 1000000;
  CHECK(given("burst=1:burst_length=86400000") == Schedule(true, day, day));  // the one-day ceiling: always on
  CHECK(given("burst=1:burst_interval=4:burst_length=1") == Schedule(true, 4000000, 1000000));
}

// The option table (hcct/runtime_options.h) is the one source: the parser's defaults are the
// table's, every name it lists is parsed, and the README's option table is the table, row for row.
namespace {
bool same(const Options &a, const Options &b) {
  return a.mode == b.mode && a.key == b.key && a.epsilon == b.epsilon && a.max_mb == b.max_mb &&
         a.verbose == b.verbose && a.path_k == b.path_k && a.path_trace == b.path_trace &&
         a.path_forest == b.path_forest && a.path_epsilon == b.path_epsilon && a.path_grow == b.path_grow &&
         a.path_burst_starts == b.path_burst_starts && a.path_burst_interval == b.path_burst_interval && a.follow == b.follow && a.exact == b.exact && a.burst == b.burst &&
         a.burst_interval_ns == b.burst_interval_ns && a.burst_length_ns == b.burst_length_ns &&
         a.burst_sync == b.burst_sync && a.time == b.time && a.sample_hz == b.sample_hz &&
         a.sample_signal == b.sample_signal && std::strcmp(a.out, b.out) == 0 && std::strcmp(a.log, b.log) == 0;
}

std::string readme_row(const hcct::runtime_options::Option &o) {
  std::string values;
  if (o.choice) {
    std::string list = o.values;
    for (size_t start = 0; start <= list.size();) {
      size_t comma = std::min(list.find(", ", start), list.size());
      values += (values.empty() ? "`" : ", `") + list.substr(start, comma - start) + "`";
      start = comma + 2;
    }
  } else {
    values = o.values;
  }
  std::string fallback = *o.fallback ? "`" + std::string(o.fallback) + "`" : "—";
  return "| `" + std::string(o.name) + "` | " + values + " | " + fallback + " | " + o.meaning + " |";
}
}  // namespace

TEST_CASE("options: the table's defaults are the parser's, and every name it lists is parsed", "[options][contracts]") {
  Options defaults, o;
  char error[512];
  REQUIRE(parse_options(nullptr, &defaults, error, sizeof error));
  for (const auto *option : hcct::runtime_options::kAll) {
    INFO(option->name);
    CHECK(error_of((std::string(option->name) + "=\x01").c_str()).find("unknown option") == std::string::npos);
    if (!*option->fallback) continue;
    std::string text = std::string(option->name) + "=" + option->fallback;
    REQUIRE(parse_options(text.c_str(), &o, error, sizeof error));
    CHECK(same(o, defaults));
  }
  // The unknown-option message lists every name.
  std::string unknown = error_of("colour=red");
  for (const auto *option : hcct::runtime_options::kAll) CHECK(unknown.find(option->name) != std::string::npos);
}

// Every value a choice lists is accepted (the README and --help show these lists).
TEST_CASE("options: every listed value of a choice parses", "[options][contracts]") {
  Options o;
  char error[512];
  for (const auto *option : hcct::runtime_options::kAll) {
    if (!option->choice) continue;
    std::string list = option->values;
    for (size_t start = 0; start <= list.size();) {
      size_t comma = std::min(list.find(", ", start), list.size());
      std::string text = std::string(option->name) + "=" + list.substr(start, comma - start);
      INFO(text);
      CHECK(parse_options(text.c_str(), &o, error, sizeof error));
      start = comma + 2;
    }
  }
  REQUIRE(parse_options("mode=cct:time=wall", &o, error, sizeof error));
  CHECK(o.time == hcct::rt::TimeMetric::kWall);
  CHECK(samples_time(o));
}

TEST_CASE("options: README's option table is the table in hcct/runtime_options.h", "[options][contracts]") {
  std::ifstream in(std::string(HCCT_SOURCE_DIR) + "/README.md");
  REQUIRE(in);
  std::vector<std::string> rows;
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| option | values | default | meaning |", 0) == 0) in_table = true;
    else if (in_table && line.rfind("| `", 0) == 0) rows.push_back(line);
    else if (in_table && line.rfind("|---", 0) != 0) break;
  }
  std::vector<std::string> expected;
  for (const auto *option : hcct::runtime_options::kAll) expected.push_back(readme_row(*option));
  CHECK(rows == expected);
}

// The event clock of path bursts (docs/KPATH.md, "The event clock"): one of path_burst_starts and
// path_burst_interval given alone sets the other at 1:100; a burst longer than its interval is one
// clear message.
TEST_CASE("options: path_burst_starts and path_burst_interval", "[options]") {
  Options o;
  char error[512];
  REQUIRE(parse_options("path_burst_starts=2000", &o, error, sizeof error));
  CHECK(o.path_burst_starts == 2000);
  CHECK(o.path_burst_interval == 200000);
  Options p;
  REQUIRE(parse_options("path_burst_interval=300", &p, error, sizeof error));
  CHECK(p.path_burst_starts == 3);
  CHECK(p.path_burst_interval == 300);
  Options q;
  REQUIRE(parse_options("path_burst_interval=7", &q, error, sizeof error));
  CHECK(q.path_burst_starts == 1);
  CHECK(error_of("path_burst_starts=5:path_burst_interval=4").find("path_burst_starts (5) must not exceed path_burst_interval (4)") !=
        std::string::npos);
  CHECK_FALSE(error_of("path_burst_starts=0").empty());
}
