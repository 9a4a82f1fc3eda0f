// Recording a plugin-built program with the real runtime, for the end-to-end plugin tests.
#ifndef HCCT_TESTS_PLUGIN_PLUGIN_RECORD_H
#define HCCT_TESTS_PLUGIN_PLUGIN_RECORD_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hcct/analysis/profile.h"

namespace plugintest {

// A calling-context tree keyed by the names of the functions on the path from the root.
using Path = std::vector<std::string>;
using Tree = std::map<Path, uint64_t>;

// One line per context: "main > f > g > count".
std::string describe(const Tree &tree);

// Runs `exe` with libhcct preloaded in mode=cct:key=routine, requires exit status 0, exactly
// `expected_output`, one process with one thread and no dropped events, and returns that thread.
hcct::analysis::ThreadProfile record_cct_by_routine(const std::string &exe, const std::string &expected_output);

}  // namespace plugintest

#endif
