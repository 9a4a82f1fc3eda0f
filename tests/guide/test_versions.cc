// Loop versions (docs/GUIDE.md, "Loop versions"): `HCCT_OSR_MODE=version` clones each guided loop
// and transfers to the clone at the threshold. Differential: whatever the threshold, the program
// prints exactly what the unguided build prints.
//   - generated C++ programs (seeded): nested loops, break/continue/return out of loops, calls,
//     exceptions thrown and caught inside the body and thrown out of the loop; every loop of the
//     profile is guided;
//   - thresholds {0, 1, 2, 7, 8, 9, 999, n-1, n, n+1} (n = the generated loops' trip count), at
//     -O0 and -O2, the early stage and the late one (whose loops carry their state in phis);
//   - the same under -fsanitize=address,undefined (skipped, code 77, without the runtime);
//   - refused loops (setjmp, VLA, va_arg, computed goto) get a -Rpass-missed remark naming the
//     reason and the program still prints what the unguided build prints;
//   - the masked convolution example built from its own profile.
#include <catch2/catch.hpp>

#include "guide_programs.h"
#include "support/command.h"
#include "support/skip.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using guide_programs::programs;
using guide_programs::run;
using guide_programs::runtime_link;
fs::path work() { return hcct::test::work_directory("tests/guide/work/versions"); }

// The generated loops' trip count (every `for` of a generated program runs kTrips iterations
// unless it leaves early).
constexpr unsigned kTrips = 12;

// A random loop program: functions f0..fN with nested loops whose bodies mix branches on the loop
// state, break/continue/return, calls, and exceptions (caught in the body or leaving the loop).
// Unsigned arithmetic only: UBSan must have nothing to say about the program itself.
class ProgramGenerator {
 public:
  explicit ProgramGenerator(unsigned seed) : rng_(seed) {}

  std::string program() {
    std::ostringstream o;
    o << "#include <cstdio>\n#include <stdexcept>\n"
         "static unsigned long h = 1469598103934665603ul;\n"
         "static void mix(unsigned long v) { h = (h ^ v) * 1099511628211ul; }\n"
         "__attribute__((noinline)) static unsigned long callee(unsigned long x) { mix(x); return x * 3 + 1; }\n"
         "__attribute__((noinline)) static unsigned long thrower(unsigned long x) {\n"
         "  if (x % 29 == 3) throw std::runtime_error(\"odd\");\n  return x + 5;\n}\n";
    unsigned functions = 3;
    for (unsigned f = 0; f < functions; ++f) {
      o << "__attribute__((noinline)) unsigned long f" << f << "(unsigned long a, unsigned long b) {\n"
        << "  unsigned long s = a, t = b;\n";
      depth_ = 0;
      loop(o, 1);
      if (pick(2)) loop(o, 1);
      o << "  return s ^ (t << 1);\n}\n";
    }
    o << "int main() {\n  for (unsigned long a = 0; a < 40; ++a) {\n";
    for (unsigned f = 0; f < functions; ++f)
      o << "    try { mix(f" << f << "(a, a * 7 + " << f << ")); } catch (const std::exception &) { mix(99); }\n";
    o << "  }\n  std::printf(\"%lx\\n\", h);\n  return 0;\n}\n";
    return o.str();
  }

 private:
  unsigned pick(unsigned n) { return std::uniform_int_distribution<unsigned>(0, n - 1)(rng_); }
  std::string var() { return "i" + std::to_string(depth_); }
  // A branch on the loop state, taken about once in `2..10` times, or (rare) once in 13..24
  // times for the statements that leave the loop, so that entries often run long.
  std::string condition(bool rare = false) {
    static const char *kStates[] = {"s", "t"};
    unsigned modulus = rare ? 13 + pick(12) : 2 + pick(9);
    return "((" + std::string(kStates[pick(2)]) + " ^ " + var() + " * " + std::to_string(1 + pick(9)) + ") % " +
           std::to_string(modulus) + " == " + std::to_string(pick(2)) + ")";
  }

  void loop(std::ostringstream &o, unsigned indent) {
    std::string pad(2 * indent, ' ');
    ++depth_;
    std::string i = var();
    // Signed and unsigned indices (the split trigger bounds both: `i < n` by 1 cannot wrap).
    o << pad << "for (" << (pick(2) ? "long " : "unsigned long ") << i << " = 0; " << i << " < " << kTrips << "; " << i
      << "++) {\n";
    unsigned statements = 2 + pick(4);
    for (unsigned n = 0; n < statements; ++n) statement(o, indent + 1);
    o << pad << "}\n";
    --depth_;
  }

  void statement(std::ostringstream &o, unsigned indent) {
    std::string pad(2 * indent, ' ');
    std::string i = var();
    switch (pick(depth_ < 2 ? 9 : 8)) {
      case 0: o << pad << "if " << condition() << " s += " << i << " * 3; else t ^= s >> 3;\n"; break;
      case 1: o << pad << "if " << condition(true) << " break;\n"; break;
      case 2: o << pad << "if " << condition() << " continue;\n"; break;
      case 3: o << pad << "if " << condition(true) << " { mix(s); return t + " << i << "; }\n"; break;
      case 4: o << pad << "s = callee(s + " << i << ");\n"; break;
      case 5: o << pad << "try { t += thrower(t + " << i << "); } catch (const std::exception &) { s ^= 0x55; }\n"; break;
      case 6: o << pad << "t += thrower(s ^ " << i << ");  // may leave the loop and the function\n"; break;
      case 7: o << pad << "s = s * 31 + t; t = t + (s & 15);\n"; break;
      default: loop(o, indent); break;
    }
  }

  std::mt19937 rng_;
  unsigned depth_ = 0;
};

struct Build {
  std::string compiler;  // HCCT_CLANG or HCCT_CLANGXX
  std::string flags;     // -O0 / -O2, sanitizers
  std::string stage;     // early / late
};

std::string compile(const Build &b, const std::string &env, const fs::path &src, const fs::path &exe,
                    const std::string &extra = "") {
  return run("HCCT_KPATH_STAGE=" + b.stage + " " + env + " " + b.compiler + " -g " + b.flags + " -fpass-plugin=" +
             HCCT_KPATH_PLUGIN + " " + src.string() + " -o " + exe.string() + " " + extra + " 2>&1");
}

// Profiles `src` at k = 4 and writes a guidance file in which every loop has a threshold.
fs::path guide_every_loop(const Build &b, const fs::path &src, const std::string &name) {
  fs::path exe = work() / (name + "_profile");
  compile(b, "", src, exe, runtime_link());
  fs::path data = exe.string() + ".data";
  fs::remove_all(data);
  run("HCCT_OPTIONS='k=4:out=" + data.string() + "' " + exe.string() + " >/dev/null");
  fs::path g = work() / (name + ".guide.json");
  run(std::string(HCCT_TOOL) + " guide " + data.string() + " --min-share 0 -o " + g.string() + " >/dev/null");
  std::ifstream in(g);
  json j = json::parse(in);
  REQUIRE(!j["loops"].empty());
  // Some loop runs more than 9 header executions per entry on average: the thresholds below n
  // do switch in mid-loop.
  bool long_entries = false;
  for (const json &l : j["loops"]) long_entries |= l["iterations"].get<double>() > 9.0 * l["entries"].get<double>();
  CHECK(long_entries);
  for (json &l : j["loops"]) l["threshold"] = 1;  // replaced by HCCT_OSR_THRESHOLD below
  std::ofstream(g) << j.dump(1);
  return g;
}

// Which triggers the builds used: bit 0 the counter, bit 1 the split (checked by the generated test).
unsigned triggers_seen = 0;

size_t count_of(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Builds `src` guided at every threshold and checks the output against the unguided build's.
// Returns the remarks of the last build.
std::string check_versions(const Build &b, const fs::path &src, const std::string &name, const std::vector<uint64_t> &thresholds,
                           const std::string &run_args = "") {
  fs::path plain = work() / (name + "_plain");
  run(b.compiler + " -g " + b.flags + " " + src.string() + " -o " + plain.string() + " 2>&1");
  std::string want = run(plain.string() + " " + run_args);
  std::string remarks;
  fs::path g = guide_every_loop(b, src, name);
  for (uint64_t t : thresholds) {
    INFO(src.filename().string() << " " << b.flags << " stage " << b.stage << ", threshold " << t);
    fs::path exe = work() / (name + "_t" + std::to_string(t));
    remarks = compile(b, "HCCT_GUIDE=" + g.string() + " HCCT_KPATH_PROFILE=0 HCCT_OSR_MODE=version HCCT_OSR_THRESHOLD=" +
                             std::to_string(t),
                      src, exe, "-Rpass=hcct-osr -Rpass-missed=hcct-osr");
    // Every guided loop of these programs can be versioned.
    CHECK(count_of(remarks, "versioned: the base loop transfers") > 0);
    triggers_seen |= count_of(remarks, "(counter)") > 0 ? 1 : 0;
    triggers_seen |= count_of(remarks, "(iteration space split at the threshold)") > 0 ? 2 : 0;
    CHECK(count_of(remarks, "not versioned") == 0);
    CHECK(remarks.find("warning: guided loop") == std::string::npos);
    CHECK(run(exe.string() + " " + run_args + " 2>&1") == want);
  }
  return remarks;
}

// The remark line of the loop in `function` (empty if none).
std::string remark_of(const std::string &remarks, const std::string &function) {
  size_t at = remarks.find("(" + function + ", header block");
  if (at == std::string::npos) return "";
  size_t end = remarks.find('\n', at);
  return remarks.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

std::vector<uint64_t> all_thresholds() { return {0, 1, 2, 7, 8, 9, 999, kTrips - 1, kTrips, kTrips + 1}; }

fs::path generated(unsigned seed) {
  fs::path src = work() / ("gen" + std::to_string(seed) + ".cc");
  std::ofstream(src) << ProgramGenerator(seed).program();
  return src;
}

bool sanitizers_available() {
  fs::path src = work() / "san_probe.c", exe = work() / "san_probe";
  std::ofstream(src) << "int main(void) { return 0; }\n";
  return hcct::test::run_status(std::string(HCCT_CLANG) + " -fsanitize=address,undefined " + src.string() + " -o " +
                                exe.string() + " 2>&1 && " + exe.string())
             .status == 0;
}

}  // namespace

TEST_CASE("loop versions: generated loop programs print what the unguided build prints at every threshold") {
  triggers_seen = 0;
  for (unsigned seed : {1u, 2u, 3u, 4u}) {
    fs::path src = generated(seed);
    for (const char *flags : {"-O0", "-O2"})
      check_versions({HCCT_CLANGXX, flags, "early"}, src, "gen" + std::to_string(seed) + flags, all_thresholds());
    check_versions({HCCT_CLANGXX, "-O2", "late"}, src, "gen" + std::to_string(seed) + "-late", all_thresholds());
  }
  CHECK((triggers_seen & 3) == 3);  // both triggers were exercised
}

TEST_CASE("loop versions: under AddressSanitizer and UndefinedBehaviorSanitizer") {
  if (!sanitizers_available()) hcct::test::skip_test("clang's sanitizer runtime (-fsanitize=address,undefined) is missing");
  std::string flags = "-fsanitize=address,undefined -fno-sanitize-recover=all";
  for (unsigned seed : {1u, 2u}) {
    fs::path src = generated(seed);
    for (const char *o : {"-O0", "-O2"})
      check_versions({HCCT_CLANGXX, std::string(o) + " " + flags, "early"}, src,
                     "san" + std::to_string(seed) + o, {0, 1, 8, kTrips, kTrips + 1});
  }
}

TEST_CASE("loop versions: refused loops get a remark naming the reason and keep their behaviour") {
  Build b{HCCT_CLANG, "-O2", "early"};
  fs::path src = programs() + "osr_refused.c";
  fs::path plain = work() / "refused_plain";
  run(b.compiler + " -g -O2 " + src.string() + " -o " + plain.string());
  std::string want = run(plain.string());
  fs::path g = guide_every_loop(b, src, "refused");
  fs::path exe = work() / "refused_t3";
  std::string remarks = compile(b, "HCCT_GUIDE=" + g.string() + " HCCT_KPATH_PROFILE=0 HCCT_OSR_MODE=version HCCT_OSR_THRESHOLD=3",
                                src, exe, "-Rpass=hcct-osr -Rpass-missed=hcct-osr");
  INFO(remarks);
  CHECK(remarks.find("(with_setjmp, header block 3, line 12) not versioned: the function calls setjmp") != std::string::npos);
  CHECK(remarks.find("(with_vla, header block 1, line 19) not versioned: a variable-length array") != std::string::npos);
  CHECK(remarks.find("(with_computed_goto, header block 1, line 40) not versioned: an indirect branch") != std::string::npos);
  // The VLA loop's inner loop allocates nothing; clang lowers x86-64's va_arg into plain loads of
  // the va_list (no `va_arg` instruction), so that loop is an ordinary one.
  CHECK(remarks.find("(with_vla, header block 4, line 21) versioned") != std::string::npos);
  CHECK(remarks.find("(with_va_arg, header block 1, line 31) versioned") != std::string::npos);
  CHECK(count_of(remarks, "not versioned") == 3);
  CHECK(run(exe.string()) == want);
  // Without -Rpass nothing is printed.
  CHECK(compile(b, "HCCT_GUIDE=" + g.string() + " HCCT_KPATH_PROFILE=0 HCCT_OSR_MODE=version", src, exe).empty());
}

TEST_CASE("loop versions: a loop in a coroutine is refused with a remark, the program's output is kept") {
  Build b{HCCT_CLANGXX, "-std=c++20 -O2", "early"};
  fs::path src = programs() + "osr_coroutine.cc";
  fs::path plain = work() / "coroutine_plain";
  run(b.compiler + " -std=c++20 -g -O2 " + src.string() + " -o " + plain.string());
  fs::path g = guide_every_loop(b, src, "coroutine");
  fs::path exe = work() / "coroutine_t5";
  std::string remarks = compile(b, "HCCT_GUIDE=" + g.string() + " HCCT_KPATH_PROFILE=0 HCCT_OSR_MODE=version HCCT_OSR_THRESHOLD=5",
                                src, exe, "-Rpass=hcct-osr -Rpass-missed=hcct-osr");
  INFO(remarks);
  CHECK(remarks.find("(_Z7squaresl, header block 10, line 18) not versioned: the function is a coroutine") != std::string::npos);
  CHECK(count_of(remarks, "versioned: the base loop transfers") == 2);  // main's two loops
  CHECK(run(exe.string()) == run(plain.string()));
}

TEST_CASE("loop versions: a bad mode or threshold is one clear compile error") {
  fs::path src = programs() + "osr_refused.c", exe = work() / "bad_option";
  for (auto [env, message] : std::vector<std::pair<std::string, std::string>>{
           {"HCCT_OSR_MODE=clone", "error: hcct osr: mode 'clone' (-hcct-osr-mode or HCCT_OSR_MODE) is not 'point' or 'version'"},
           {"HCCT_OSR_THRESHOLD=-1", "error: hcct osr: HCCT_OSR_THRESHOLD='-1' is not a decimal integer in [0, 2^64-1]"},
           {"HCCT_OSR_THRESHOLD=18446744073709551616", "HCCT_OSR_THRESHOLD='18446744073709551616' is not a decimal integer"},
           {"HCCT_OSR_THRESHOLD=1e3", "HCCT_OSR_THRESHOLD='1e3' is not a decimal integer"}}) {
    INFO(env);
    hcct::test::CommandResult r = hcct::test::run_status(env + " " + HCCT_CLANG + " -O2 -fpass-plugin=" + HCCT_KPATH_PLUGIN +
                                                         " " + src.string() + " -o " + exe.string() + " 2>&1");
    CHECK(r.status == 1);
    CHECK(r.output.find(message) != std::string::npos);
    CHECK(r.output.find("PLEASE submit a bug report") == std::string::npos);
  }
}

TEST_CASE("loop versions: the masked convolution built from its profile prints the baseline's checksum") {
  Build b{HCCT_CLANG, "-O2", "early"};
  fs::path src = std::string(HCCT_SOURCE_DIR) + "/examples/kpath/masked_conv.c";
  fs::path plain = work() / "mc_plain";
  run(b.compiler + " -g -O2 " + src.string() + " -o " + plain.string());
  fs::path profile = work() / "mc_profile";
  compile(b, "", src, profile, runtime_link());
  fs::path data = profile.string() + ".data";
  fs::remove_all(data);
  run("HCCT_OPTIONS='k=10:out=" + data.string() + "' " + profile.string() + " 300 400 1 >/dev/null");
  fs::path g = work() / "mc.guide.json";
  run(std::string(HCCT_TOOL) + " guide " + data.string() + " -o " + g.string() + " >/dev/null");
  for (std::string t : {"", "0", "1", "1000", "119999", "120000", "120001", "480001"}) {
    INFO("threshold " << (t.empty() ? "from the guidance" : t));
    fs::path exe = work() / ("mc_version" + t);
    std::string remarks = compile(b, "HCCT_GUIDE=" + g.string() + " HCCT_KPATH_PROFILE=0 HCCT_OSR_MODE=version" +
                                         (t.empty() ? "" : " HCCT_OSR_THRESHOLD=" + t),
                                  src, exe, "'-Rpass=hcct-osr|loop-vectorize'");
    CHECK(remarks.find("loop masked_conv.c:51 (filter_conv, header block 1, line 51) versioned") != std::string::npos);
    // Both hot paths get a fast loop: the copy, and the convolution, whose clamp (branches on the
    // convolution's result, which no guard can compute in advance) stays in its fast loop.
    std::string conv = remark_of(remarks, "filter_conv");
    CHECK(conv.find("the clone is specialised for path 5 x8 (one guard checks its branches for 8 iterations)") != std::string::npos);
    CHECK(conv.find("the clone is specialised for path 8 x8 (one guard checks its branches for 8 iterations; 2 branches "
                    "on the iteration's own values stay in the fast loop)") != std::string::npos);
    // ... and LLVM's loop vectoriser takes both fast loops, 8 wide.
    CHECK(count_of(remarks, "masked_conv.c:51:3: remark: vectorized loop (vectorization width: 8") == 2);
    CHECK(remarks.find("warning:") == std::string::npos);
    for (std::string size : {"300 400 1", "600 800 2"}) CHECK(run(exe.string() + " " + size) == run(plain.string() + " " + size));
  }
}

TEST_CASE("loop versions: guidance records the profile's stage and -O level, and the pass refuses it in another configuration") {
  fs::path src = programs() + "osr_refused.c";
  fs::path g = guide_every_loop({HCCT_CLANG, "-O2", "early"}, src, "config");
  std::ifstream in(g);
  json j = json::parse(in);
  CHECK(j["version"] == 2);
  CHECK(j["k"] == 4);
  for (const json &l : j["loops"]) {
    CHECK(l["stage"] == "early");
    CHECK(l["opt_level"] == 2);
  }
  fs::path exe = work() / "config_other";
  for (auto [build, message] : std::vector<std::pair<std::string, std::string>>{
           {"HCCT_KPATH_STAGE=early " + std::string(HCCT_CLANG) + " -O0",
            "was profiled in a build at the early stage at -O2, this build is at the early stage at -O0"},
           {"HCCT_KPATH_STAGE=late " + std::string(HCCT_CLANG) + " -O2",
            "was profiled in a build at the early stage at -O2, this build is at the late stage at -O2"}}) {
    for (std::string mode : {"point", "version"}) {
      INFO(build << ", mode " << mode);
      hcct::test::CommandResult r = hcct::test::run_status(
          "HCCT_GUIDE=" + g.string() + " HCCT_KPATH_PROFILE=0 HCCT_OSR_MODE=" + mode + " " + build + " -g -fpass-plugin=" +
          HCCT_KPATH_PLUGIN + " " + src.string() + " -o " + exe.string() + " 2>&1");
      CHECK(r.status == 1);
      CHECK(r.output.find("error: hcct osr: guidance file '" + g.string() + "': loop osr_refused.c:") != std::string::npos);
      CHECK(r.output.find(message) != std::string::npos);
    }
  }
  // Version 1 files (no configuration recorded) are still read, unchecked.
  j["version"] = 1;
  for (json &l : j["loops"]) l.erase("stage"), l.erase("opt_level");
  std::ofstream(g) << j.dump(1);
  CHECK(hcct::test::run_status("HCCT_GUIDE=" + g.string() + " HCCT_KPATH_PROFILE=0 HCCT_OSR_MODE=version " + HCCT_CLANG +
                               " -O0 -g -fpass-plugin=" + HCCT_KPATH_PLUGIN + " " + src.string() + " -o " + exe.string() +
                               " 2>&1")
            .status == 0);
}

TEST_CASE("specialised loop versions: a loop of F iterations of the hot path behind one guard, same output at every threshold") {
  fs::path src = programs() + "osr_runs.c";
  for (const char *flags : {"-O0", "-O2"}) {
    // Profiled without the calls that overwrite what the guard reads, run with them ("all").
    std::string remarks = check_versions({HCCT_CLANG, flags, "early"}, src, std::string("runs") + flags,
                                         {0, 1, 2, 7, 8, 9, 36, 37, 38, 999, 5003, 5004}, "all");
    INFO(flags << "\n" << remarks);
    // `i < n` with a non-wrapping i, `p < end` (a pointer): split at the threshold.
    CHECK(remarks.find("(masked, header block 1, line 19) versioned: the base loop transfers to its clone at header "
                       "execution 5004 of each entry (iteration space split at the threshold); the clone is specialised "
                       "for path ") != std::string::npos);
    CHECK(remarks.find("(ahead, header block 1, line 37) versioned: the base loop transfers to its clone at header "
                       "execution 5004 of each entry (iteration space split at the threshold)") != std::string::npos);
    CHECK(remarks.find("(by_index, header block 1, line 27) versioned") != std::string::npos);
    CHECK(count_of(remarks, "the clone is specialised for path") >= 3);
    size_t search = remarks.find("(search, header block 1, line 54) versioned: the base loop transfers to its clone at header "
                                 "execution 5004 of each entry (iteration space split at the threshold); not specialised for path 4 x");
    REQUIRE(search != std::string::npos);
    CHECK(remarks.find("the loop's exit depends on memory, so the guard's loads would be speculative", search) != std::string::npos);
  }
  check_versions({HCCT_CLANG, "-O2", "late"}, src, "runs-late", {1, 8, 37, 5004}, "all");
  // (The sanitizer runs of the generated programs are their own test case, skipped with code 77.)
  if (sanitizers_available())
    check_versions({HCCT_CLANG, "-O2 -fsanitize=address,undefined -fno-sanitize-recover=all", "early"}, src, "runs-san",
                   {1, 8, 37}, "all");
  else
    WARN("osr_runs.c under ASan/UBSan not run: clang's sanitizer runtime is missing");
}

TEST_CASE("loop versions: the split trigger bounds <, <=, != and downward loops, signed, unsigned and pointers, at every threshold") {
  fs::path src = programs() + "osr_exit_tests.c";
  const std::vector<uint64_t> thresholds{0, 1, 2, 3, 7, 13, 14, 15, 20, 39, 40, 41, 42, 43, 999};
  for (const char *flags : {"-O0", "-O2"}) {
    std::string remarks = check_versions({HCCT_CLANG, flags, "early"}, src, std::string("exits") + flags, thresholds, "40");
    INFO(flags << "\n" << remarks);
    for (const char *function : {"up_less", "up_less_equal", "up_not_equal", "up_unsigned_less", "up_by_three",
                                 "down_greater", "down_greater_equal", "down_not_equal", "down_by_two", "up_pointer",
                                 "up_pointer_not_equal", "down_pointer", "up_not_equal_by_two"}) {
      INFO(function);
      CHECK(remark_of(remarks, function).find("(iteration space split at the threshold)") != std::string::npos);
    }
    // `!=` with a step of 2 that might jump over its bound; an unsigned `<=` may wrap: the counter.
    CHECK(remark_of(remarks, "up_not_equal_unproven").find("(counter)") != std::string::npos);
    CHECK(remark_of(remarks, "up_unsigned_less_equal").find("(counter)") != std::string::npos);
  }
  check_versions({HCCT_CLANG, "-O2", "late"}, src, "exits-late", thresholds, "40");
}

TEST_CASE("specialised loop versions: fast loops keep branches the guard cannot decide, same output, no compiler warning") {
  fs::path src = programs() + "osr_fast_loops.c";
  for (const char *flags : {"-O0", "-O2"}) {
    std::string remarks = check_versions({HCCT_CLANG, flags, "early"}, src, std::string("fast") + flags,
                                         {0, 1, 2, 8, 9, 39, 40, 41, 4095, 4096, 4097});
    INFO(flags << "\n" << remarks);
    CHECK(remark_of(remarks, "clamp").find("; 2 branches on the iteration's own values stay in the fast loop)") != std::string::npos);
    CHECK(remark_of(remarks, "kept_load").find("; 1 branch on the iteration's own values stays in the fast loop)") !=
          std::string::npos);
    // A call, a carried value that is no reduction, a load under a kept branch: no vectoriser hint,
    // so nothing the user did not ask for is reported.
    CHECK(remarks.find("warning:") == std::string::npos);
  }
}

TEST_CASE("loop versions: the collatz and lexer examples print what their unguided builds print at every threshold") {
  // Every loop of their profile guided (counter and split triggers; collatz's main loop is refused
  // specialisation: its branch depends on a call).
  std::string examples = std::string(HCCT_SOURCE_DIR) + "/examples/kpath/";
  for (const char *flags : {"-O0", "-O2"}) {
    check_versions({HCCT_CLANG, flags, "early"}, examples + "collatz.c", std::string("collatz") + flags,
                   {0, 1, 2, 7, 8, 9, 999, 2999, 3000, 3001}, "3000");
    check_versions({HCCT_CLANG, flags, "early"}, examples + "lexer.c", std::string("lexer") + flags,
                   {0, 1, 2, 7, 8, 9, 999, 19999, 20000, 20001}, "20000 1");
  }
}
