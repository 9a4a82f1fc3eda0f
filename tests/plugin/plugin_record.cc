#include "plugin_record.h"

#include <catch2/catch.hpp>

#include <filesystem>

#include "hcct/analysis/reader.h"
#include "plugin_util.h"

namespace plugintest {

namespace ha = hcct::analysis;

std::string describe(const Tree &tree) {
  std::string s;
  for (const auto &[path, count] : tree) {
    for (const std::string &fn : path) s += fn + " > ";
    s += std::to_string(count) + "\n";
  }
  return s;
}

ha::ThreadProfile record_cct_by_routine(const std::string &exe, const std::string &expected_output) {
  std::string out = exe + ".hcct";
  std::filesystem::remove_all(out);
  RunResult r = run("env HCCT_OPTIONS=" + sh_quote("mode=cct:key=routine:out=" + out) +
                    " LD_PRELOAD=" + sh_quote(HCCT_RUNTIME_SO) + " " + sh_quote(exe));
  INFO(exe << ":\n" << r.output);
  REQUIRE(r.status == 0);
  REQUIRE(r.output == expected_output);
  ha::ProfileSet set = ha::read_profiles(out);
  REQUIRE(set.processes.size() == 1);
  REQUIRE(set.processes[0].threads.size() == 1);
  ha::ThreadProfile t = std::move(set.processes[0].threads[0]);
  REQUIRE(t.meta.mode == ha::Mode::cct);
  REQUIRE(t.meta.key == ha::KeyKind::routine);
  CHECK(t.meta.dropped == 0);
  return t;
}

}  // namespace plugintest
