// Running the hcct binary (and other programs) as subprocesses, and the fixture profiles, for the CLI
// tests.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "support/skip.h"
#include "hcct/analysis/writer.h"
#include "testutil.h"

namespace clitest {

using namespace hcct::analysis;
using hcct::test::TempDir;
namespace fs = std::filesystem;

inline const fs::path kSymtestDir = fs::path(HCCT_SOURCE_DIR) / "tests/analysis/symtest";

struct Result {
  int status = -1;  // exit status, 128+signal, or -1 on timeout
  std::string out, err;
};

// In a forked child: sets the environment (an empty value unsets), moves to `cwd`, sends stdout and
// stderr to the files `out` and `err`, and execs args[0] (a path).
[[noreturn]] inline void exec_child(const std::vector<std::string> &args,
                                    const std::vector<std::pair<std::string, std::string>> &env,
                                    const fs::path &cwd, const fs::path &out, const fs::path &err) {
  if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
  for (const auto &[k, v] : env) {
    if (v.empty()) unsetenv(k.c_str());
    else setenv(k.c_str(), v.c_str(), 1);
  }
  int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(o, 1);
  dup2(e, 2);
  std::vector<char *> argv;
  for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

// Runs argv[0] (a path) with extra environment, in `cwd`, capturing stdout and stderr. The child
// gets its own process group so that a hang (say, a runtime bug) kills it and its children.
inline Result run(const std::vector<std::string> &args, const std::vector<std::pair<std::string, std::string>> &env = {},
           const fs::path &cwd = {}, int timeout_s = 60) {
  TempDir io;
  const fs::path out = io / "out", err = io / "err";
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setpgid(0, 0);
    exec_child(args, env, cwd, out, err);
  }
  setpgid(pid, pid);
  Result r;
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.status = -1;
      r.out = hcct::test::read_text(out);
      r.err = hcct::test::read_text(err);
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = hcct::test::read_text(out);
  r.err = hcct::test::read_text(err);
  return r;
}

// The hcct binary under test: the one built with these tests, unless HCCT_TEST_EXE names another
// build of it (say, one with sanitizers).
inline std::string hcct_exe() {
  const char *other = std::getenv("HCCT_TEST_EXE");
  return other && *other ? other : HCCT_EXE;
}

inline Result hcct_cmd(std::vector<std::string> args, const std::vector<std::pair<std::string, std::string>> &env = {},
                const fs::path &cwd = {}) {
  args.insert(args.begin(), hcct_exe());
  return run(args, env, cwd);
}

using hcct::test::skip_test;  // support/skip.h: exit 77, which ctest reports as SKIPPED

inline size_t count_lines(const std::string &s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

// Lines of `text` containing `needle`.
inline std::vector<std::string> lines_with(const std::string &text, const std::string &needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

inline const hcct::test::SymtestFixture &fixture() {
  static const auto f = hcct::test::run_symtest_fixture(SYMTEST_PROG, SYMTEST_LIB);
  return f;
}

// A directory with the fixture profile: process 4242 with threads 0 and 1 (same tree), process 5000
// with one thread in hcct mode.
struct ProfileDir {
  TempDir dir;
  ProfileDir() {
    for (uint64_t seq : {0, 1}) {
      ThreadProfile p = hcct::test::symtest_profile(fixture(), Mode::cct, 4242, seq);
      write_profile(dir / profile_file_name(4242, seq), p);
    }
    write_profile(dir / profile_file_name(5000, 0), hcct::test::symtest_profile(fixture(), Mode::hcct, 5000, 0));
  }
  std::string path() const { return dir.path().string(); }
};


}  // namespace clitest
