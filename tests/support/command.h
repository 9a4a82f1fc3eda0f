// Helpers shared by tests that compile and run programs through the shell.
#ifndef HCCT_TESTS_SUPPORT_COMMAND_H
#define HCCT_TESTS_SUPPORT_COMMAND_H

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

namespace hcct::test {

// Runs `cmd` with popen and returns its standard output; the test fails (showing the command and
// its output) unless it exits with status 0.
inline std::string run_command(const std::string &cmd) {
  std::string out;
  FILE *p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  INFO(cmd << "\n" << out);
  REQUIRE(rc == 0);
  return out;
}

// A scratch directory under the build tree (created if missing).
inline std::filesystem::path work_directory(const std::string &relative) {
  std::filesystem::path d = std::filesystem::path(HCCT_BINARY_DIR) / relative;
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace hcct::test

#endif
