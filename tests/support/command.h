// Helpers shared by tests that compile and run programs through the shell.
#ifndef HCCT_TESTS_SUPPORT_COMMAND_H
#define HCCT_TESTS_SUPPORT_COMMAND_H

#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace hcct::test {

struct CommandResult {
  int status = -1;     // exit status, or 128 + signal
  std::string output;  // standard output (redirect stderr in `cmd` to have it here)
};

// Runs `cmd` with /bin/sh (popen), whatever its exit status.
inline CommandResult run_status(const std::string &cmd) {
  CommandResult r;
  FILE *p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int rc = pclose(p);
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
  return r;
}

// Runs `cmd` and returns its standard output; the test fails (showing the command and its output)
// unless it exits with status 0.
inline std::string run_command(const std::string &cmd) {
  CommandResult r = run_status(cmd);
  INFO(cmd << "\n" << r.output);
  REQUIRE(r.status == 0);
  return r.output;
}

// A scratch directory under the build tree (created if missing).
inline std::filesystem::path work_directory(const std::string &relative) {
  std::filesystem::path d = std::filesystem::path(HCCT_BINARY_DIR) / relative;
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace hcct::test

#endif
