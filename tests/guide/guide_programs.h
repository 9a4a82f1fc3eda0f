// What the OSR tests (test_osr.cc, test_versions.cc) share to build tests/guide/programs against the
// runtime: the build's compile definitions (HCCT_SOURCE_DIR, HCCT_RUNTIME) name the places.
#ifndef HCCT_TESTS_GUIDE_PROGRAMS_H
#define HCCT_TESTS_GUIDE_PROGRAMS_H

#include <filesystem>
#include <string>

#include "support/command.h"

namespace guide_programs {

inline std::string run(const std::string &cmd) { return hcct::test::run_command(cmd); }
inline std::string programs() { return std::string(HCCT_SOURCE_DIR) + "/tests/guide/programs/"; }
// Links a program with the runtime, found at run time where the build put it.
inline std::string runtime_link() {
  return std::string(HCCT_RUNTIME) + " -Wl,-rpath," + std::filesystem::path(HCCT_RUNTIME).parent_path().string();
}

}  // namespace guide_programs

#endif
