// Recording a plugin-built program with the real runtime, for the end-to-end plugin tests.
#ifndef HCCT_TESTS_PLUGIN_PLUGIN_RECORD_H
#define HCCT_TESTS_PLUGIN_PLUGIN_RECORD_H

#include <string>

#include "hcct/analysis/profile.h"

namespace plugintest {

// Runs `exe` with libhcct preloaded in mode=cct:key=routine, requires exit status 0, exactly
// `expected_output`, one process with one thread and no dropped events, and returns that thread.
hcct::analysis::ThreadProfile record_cct_by_routine(const std::string &exe, const std::string &expected_output);

}  // namespace plugintest

#endif
