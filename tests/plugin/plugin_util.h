// Helpers shared by the GCC plugin tests: running compilers and programs, reading the plugin's
// instrumented-function list and the trace runtime's report, and mapping addresses to symbols.
#ifndef HCCT_TESTS_PLUGIN_PLUGIN_UTIL_H
#define HCCT_TESTS_PLUGIN_PLUGIN_UTIL_H

#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/command.h"

namespace plugintest {

using RunResult = hcct::test::CommandResult;  // stdout and stderr, interleaved

// Runs `cmd` with /bin/sh, capturing its output.
RunResult run(const std::string &cmd);

// Quotes `s` for /bin/sh.
std::string sh_quote(const std::string &s);

// A fresh, empty directory for one test (under the build tree), named after `name`.
std::string work_dir(const std::string &name);

std::string read_file(const std::string &path);
// Writes `text` to `path`; fails the current test if it cannot.
void write_file(const std::string &path, const std::string &text);
std::vector<std::string> split_lines(const std::string &text);

// `-fplugin=<hcct_plugin.so>` followed by `-fplugin-arg-hcct_plugin-K=V` for each argument, and
// `stage=early` unless an argument names the stage: most of these tests were written for the
// early stage (inlined functions probed), which is no longer the default.
std::string plugin_flags(const std::vector<std::string> &args = {});
// The same with nothing added: what a user gets who names no stage.
std::string plugin_flags_as_given(const std::vector<std::string> &args = {});

// Paths of the example sources.
std::string example(const std::string &file);

// One line of a list=FILE output: name<TAB>file:line<TAB>symbol.
struct ListEntry {
  std::string name, file, symbol;
  int line = 0;
};
std::vector<ListEntry> read_list(const std::string &path);
std::set<std::string> list_names(const std::vector<ListEntry> &entries);

// Compiles the selection example to an object with the given plugin arguments and returns the
// names the plugin listed. Fails the current test if the compile fails.
std::set<std::string> selected_names(const std::string &dir, const std::vector<std::string> &args,
                                     const std::string &opt = "-O0");

// The end-to-end examples built into `dir`: cct_lib.c as a -fPIC shared library, cct_main.c and
// cct_main.cc as (PIE) executables using it, all at `opt` with `instrument` (plugin_flags(...) or
// -finstrument-functions), -g, -fchecking and -Wall -Werror. Fails the current test if a build fails
// or prints anything.
struct Built {
  std::string dir, lib, c_exe, cxx_exe;
};
Built build_examples(const std::string &name, const std::string &opt, const std::string &instrument);

// What the examples print.
inline constexpr const char *kCOutput = "4394\n";
inline constexpr const char *kCxxOutput = "287.0 637 16\n";

// The trace runtime's report (tests/plugin/trace_runtime.c).
struct Trace {
  std::map<std::string, unsigned long> totals;  // enters, exits, mismatches, bad_sites, open
  std::map<std::string, unsigned long> calls;   // entries per function symbol name
};
// Reads a report, naming functions through `nm` on each module.
Trace read_trace(const std::string &path);

} // namespace plugintest

#endif
