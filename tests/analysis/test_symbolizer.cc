// Symbolizer on a real PIE and a dlopen()ed C++ library (tests/analysis/symtest), built with -g -O0.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "hcct/analysis/symbolizer.h"
#include "testutil.h"

using namespace hcct::analysis;
using hcct::test::marker_line;

namespace {

const std::filesystem::path kFixtureDir = std::filesystem::path(HCCT_SOURCE_DIR) / "tests/analysis/symtest";

using Fixture = hcct::test::SymtestFixture;

// Runs the fixture once.
const Fixture &fixture() {
  static const Fixture f = hcct::test::run_symtest_fixture(SYMTEST_PROG, SYMTEST_LIB);
  return f;
}

bool ends_with(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string hex(const std::vector<uint8_t> &bytes) {
  std::string s;
  char two[3];
  for (uint8_t b : bytes) {
    std::snprintf(two, sizeof two, "%02x", b);
    s += two;
  }
  return s;
}

}  // namespace

TEST_CASE("fixture really is a PIE with a dlopen()ed library", "[symbolizer]") {
  const Fixture &f = fixture();
  REQUIRE(f.modules.size() >= 2);
  CHECK(ends_with(f.modules[0].path, "hcct_symtest_prog"));
  CHECK(f.modules[0].bias != 0);  // PIE: loaded away from its link-time addresses
  CHECK(std::any_of(f.modules.begin(), f.modules.end(),
                    [](const Module &m) { return ends_with(m.path, "libhcct_symtest_lib.so"); }));
}

TEST_CASE("routines in the PIE and the library", "[symbolizer]") {
  const Fixture &f = fixture();
  std::vector<std::string> warnings;
  Symbolizer sym(f.modules, nullptr, [&](const std::string &w) { warnings.push_back(w); });

  const Symbol &leaf = sym.routine(f.routines.at("leaf"));
  CHECK(leaf.resolved);
  CHECK(leaf.function == "fixture_leaf");
  CHECK(ends_with(leaf.file, "prog.c"));
  CHECK(leaf.line == marker_line(kFixtureDir / "prog.c", "MARK:leaf_def"));
  REQUIRE(leaf.frames.size() == 1);
  CHECK(leaf.frames[0].function == "fixture_leaf");

  const Symbol &main_sym = sym.routine(f.routines.at("main"));
  CHECK(main_sym.function == "main");

  const Symbol &widget = sym.routine(f.routines.at("widget"));
  CHECK(widget.resolved);
  CHECK(widget.function == "symtest::Widget::compute(int)");
  CHECK(ends_with(widget.file, "lib.cc"));
  CHECK(widget.line == marker_line(kFixtureDir / "lib.cc", "MARK:widget_def"));
  REQUIRE(widget.module);
  CHECK(ends_with(widget.module->path, "libhcct_symtest_lib.so"));
  CHECK(warnings.empty());

  // Cached: the same object comes back.
  CHECK(&sym.routine(f.routines.at("leaf")) == &leaf);
}

TEST_CASE("call sites map to the line of the call", "[symbolizer]") {
  const Fixture &f = fixture();
  Symbolizer sym(f.modules);

  const Symbol &direct = sym.call_site(f.sites.at("direct"));
  CHECK(direct.function == "main");
  CHECK(direct.address == f.sites.at("direct"));
  CHECK(ends_with(direct.file, "prog.c"));
  CHECK(direct.line == marker_line(kFixtureDir / "prog.c", "MARK:main_calls_leaf"));
  REQUIRE(direct.frames.size() == 1);

  const Symbol &lib = sym.call_site(f.sites.at("lib"));
  CHECK(lib.function == "symtest_lib_entry");
  CHECK(lib.line == marker_line(kFixtureDir / "lib.cc", "MARK:entry_calls_widget"));
}

TEST_CASE("a call from inlined code reports the inline chain", "[symbolizer]") {
  const Fixture &f = fixture();
  Symbolizer sym(f.modules);
  const Symbol &s = sym.call_site(f.sites.at("inlined"));
  CHECK(s.function == "main");  // the out-of-line function
  CHECK(s.line == marker_line(kFixtureDir / "prog.c", "MARK:helper_calls_leaf"));
  REQUIRE(s.frames.size() == 2);
  CHECK(s.frames[0].function == "fixture_helper");
  CHECK(s.frames[0].line == marker_line(kFixtureDir / "prog.c", "MARK:helper_calls_leaf"));
  CHECK(s.frames[1].function == "main");
  CHECK(ends_with(s.frames[1].file, "prog.c"));
  CHECK(s.frames[1].line == marker_line(kFixtureDir / "prog.c", "MARK:main_calls_helper"));
}

TEST_CASE("clang's DWARF (no .debug_aranges): routines, call sites and inline chains", "[symbolizer]") {
  static const Fixture f = hcct::test::run_symtest_fixture(SYMTEST_PROG_CLANG, SYMTEST_LIB_CLANG);
  Symbolizer sym(f.modules);
  const Symbol &leaf = sym.routine(f.routines.at("leaf"));
  CHECK(leaf.function == "fixture_leaf");
  CHECK(ends_with(leaf.file, "prog.c"));
  CHECK(leaf.line == marker_line(kFixtureDir / "prog.c", "MARK:leaf_def"));

  const Symbol &widget = sym.routine(f.routines.at("widget"));
  CHECK(widget.function == "symtest::Widget::compute(int)");
  CHECK(ends_with(widget.file, "lib.cc"));
  CHECK(widget.line == marker_line(kFixtureDir / "lib.cc", "MARK:widget_def"));

  const Symbol &direct = sym.call_site(f.sites.at("direct"));
  CHECK(direct.function == "main");
  CHECK(ends_with(direct.file, "prog.c"));
  CHECK(direct.line == marker_line(kFixtureDir / "prog.c", "MARK:main_calls_leaf"));

  const Symbol &lib = sym.call_site(f.sites.at("lib"));
  CHECK(lib.line == marker_line(kFixtureDir / "lib.cc", "MARK:entry_calls_widget"));

  const Symbol &inlined = sym.call_site(f.sites.at("inlined"));
  CHECK(inlined.line == marker_line(kFixtureDir / "prog.c", "MARK:helper_calls_leaf"));
  REQUIRE(inlined.frames.size() == 2);
  CHECK(inlined.frames[0].function == "fixture_helper");
  CHECK(inlined.frames[1].function == "main");
  CHECK(inlined.frames[1].line == marker_line(kFixtureDir / "prog.c", "MARK:main_calls_helper"));
}

TEST_CASE("unresolvable addresses get placeholders and one warning per module", "[symbolizer]") {
  const Fixture &f = fixture();
  hcct::test::TempDir dir;
  std::vector<Module> mods = f.modules;
  Module &prog = mods[0];
  const uint64_t leaf = f.routines.at("leaf");

  SECTION("outside every module") {
    Symbolizer sym(mods);
    const Symbol &s = sym.routine(0x10);
    CHECK_FALSE(s.resolved);
    CHECK(s.module == nullptr);
    CHECK(s.function == "0x10");
  }
  SECTION("stale binary: build-id differs") {
    prog.build_id.assign(20, 0xab);
    std::vector<std::string> warnings;
    Symbolizer sym(mods, nullptr, [&](const std::string &w) { warnings.push_back(w); });
    const Symbol &s = sym.routine(leaf);
    CHECK(s.stale);
    CHECK_FALSE(s.resolved);
    char expect[64];
    std::snprintf(expect, sizeof expect, "hcct_symtest_prog+0x%llx", (unsigned long long)(leaf - prog.bias));
    CHECK(s.function == expect);
    sym.call_site(f.sites.at("direct"));
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains("rebuilt"));
  }
  SECTION("missing file") {
    prog.path = (dir / "gone").string();
    std::vector<std::string> warnings;
    Symbolizer sym(mods, nullptr, [&](const std::string &w) { warnings.push_back(w); });
    CHECK(sym.routine(leaf).function.rfind("gone+0x", 0) == 0);
    sym.call_site(f.sites.at("direct"));
    CHECK(warnings.size() == 1);
  }
  SECTION("a FIFO in place of the binary does not block") {
    prog.path = (dir / "fifo").string();
    REQUIRE(mkfifo(prog.path.c_str(), 0600) == 0);
    Symbolizer sym(mods, nullptr, [](const std::string &) {});
    CHECK_FALSE(sym.routine(leaf).resolved);
  }
  SECTION("not an ELF file") {
    prog.path = (dir / "text").string();
    std::ofstream(prog.path) << "hello";
    std::vector<std::string> warnings;
    Symbolizer sym(mods, nullptr, [&](const std::string &w) { warnings.push_back(w); });
    CHECK_FALSE(sym.routine(leaf).resolved);
    CHECK(warnings.size() == 1);
  }
}

TEST_CASE("a module's file is looked for by build-id beyond its recorded path", "[symbolizer]") {
  const Fixture &f = fixture();
  hcct::test::TempDir dir;
  std::vector<Module> mods = f.modules;
  auto lib = std::find_if(mods.begin(), mods.end(),
                          [](const Module &m) { return ends_with(m.path, "libhcct_symtest_lib.so"); });
  REQUIRE(lib != mods.end());
  REQUIRE_FALSE(lib->build_id.empty());
  const uint64_t widget = f.routines.at("widget");
  const std::string original = lib->path;
  lib->path = (dir / "gone" / "libhcct_symtest_lib.so").string();  // recorded where it no longer is
  // The executable's directory is searched too: the build directory holds the library as well.
  mods[0].path = (dir / "bin" / "hcct_symtest_prog").string();
  std::vector<std::string> warnings;
  auto warn = [&](const std::string &w) { warnings.push_back(w); };

  SECTION("found in a search directory, in order, by build-id") {
    std::filesystem::create_directories(dir / "other");
    std::filesystem::create_directories(dir / "right");
    std::filesystem::copy_file(SYMTEST_PROG, dir / "other" / "libhcct_symtest_lib.so");  // same name, other build-id
    std::filesystem::copy_file(original, dir / "right" / "libhcct_symtest_lib.so");
    auto cache = std::make_shared<DebugInfoCache>(
        std::vector<std::string>{(dir / "other").string(), (dir / "right").string()});
    Symbolizer sym(mods, cache, warn);
    CHECK(sym.routine(widget).function == "symtest::Widget::compute(int)");
    CHECK(warnings.empty());
  }
  SECTION("found in the directory of the main executable") {
    mods[0].path = std::filesystem::path(SYMTEST_PROG).string();
    Symbolizer sym(mods, std::make_shared<DebugInfoCache>(std::vector<std::string>{}), warn);
    CHECK(sym.routine(widget).function == "symtest::Widget::compute(int)");
    CHECK(warnings.empty());
  }
  SECTION("not found: one warning naming the build-id") {
    Symbolizer sym(mods, std::make_shared<DebugInfoCache>(std::vector<std::string>{dir.path().string()}), warn);
    CHECK_FALSE(sym.routine(widget).resolved);
    sym.routine(widget + 1);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains("cannot read " + lib->path) &&
                                Catch::Contains(hex(lib->build_id)));
  }
  SECTION("without a recorded build-id, only the recorded path is tried") {
    lib->build_id.clear();
    std::filesystem::copy_file(original, dir / "libhcct_symtest_lib.so");
    Symbolizer sym(mods, std::make_shared<DebugInfoCache>(std::vector<std::string>{dir.path().string()}), warn);
    CHECK_FALSE(sym.routine(widget).resolved);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains("without a build-id"));
  }
}

TEST_CASE("HCCT_MODULE_PATH is a colon-separated list", "[symbolizer]") {
  const char *old = std::getenv("HCCT_MODULE_PATH");
  std::string saved = old ? old : "";
  setenv("HCCT_MODULE_PATH", "/a::/b/c:", 1);
  CHECK(module_search_path_from_env() == std::vector<std::string>{"/a", "/b/c"});
  unsetenv("HCCT_MODULE_PATH");
  CHECK(module_search_path_from_env().empty());
  if (old) setenv("HCCT_MODULE_PATH", saved.c_str(), 1);
}

TEST_CASE("a shared cache serves several symbolizers", "[symbolizer]") {
  const Fixture &f = fixture();
  auto cache = std::make_shared<DebugInfoCache>();
  Symbolizer a(f.modules, cache), b(f.modules, cache);
  CHECK(a.routine(f.routines.at("leaf")).function == b.routine(f.routines.at("leaf")).function);
}

TEST_CASE("pieces gcc splits off are named after their source function", "[symbolizer]") {
  CHECK(source_function_name("luaV_concat.part.0") == "luaV_concat");
  CHECK(source_function_name("f.cold") == "f");
  CHECK(source_function_name("f.constprop.0.isra.0") == "f");
  CHECK(source_function_name("f.lto_priv.0") == "f");
  CHECK(source_function_name(demangle("_ZN2ns1fEi.part.0")) == "ns::f(int)");
  CHECK(source_function_name(demangle("_ZN2ns1fEi.cold")) == "ns::f(int)");
  CHECK(source_function_name("x.y") == "x.y");
  CHECK(source_function_name("ver.2") == "ver.2");
  CHECK(source_function_name(".part.0") == ".part.0");
  CHECK(source_function_name("main") == "main");
}

TEST_CASE("demangle", "[symbolizer]") {
  CHECK(demangle("_ZN7symtest6Widget7computeEi") == "symtest::Widget::compute(int)");
  CHECK(demangle("main") == "main");
  // C names that happen to be Itanium builtin-type codes stay names ("g" is __float128 there).
  CHECK(demangle("g") == "g");
  CHECK(demangle("h") == "h");
  CHECK(demangle("_Zgarbage") == "_Zgarbage");
  CHECK(demangle(nullptr).empty());
}
