// Reporting a test case SKIPPED through ctest when a tool outside hcct that it needs is missing: a
// check that cannot run must not pass (DEVELOPERS.md, "Tests that matter").
#ifndef HCCT_TESTS_SUPPORT_SKIP_H
#define HCCT_TESTS_SUPPORT_SKIP_H

#include <cstdio>
#include <cstdlib>
#include <string>

namespace hcct::test {

// Ctest's SKIP_RETURN_CODE of every test hcct_discover_tests registers (tests/CMakeLists.txt).
inline constexpr int kSkipExitStatus = 77;

// Says why on stderr and ends the test program with status 77, which ctest reports as SKIPPED.
// Call it before the test case's first check: each ctest test runs one test case in a process of
// its own, and what was checked before in that process would not be reported. (Run by hand with
// several test cases, the program stops at the first skip; name the test cases to run.)
[[noreturn]] inline void skip_test(const std::string &why) {
  std::fprintf(stderr, "SKIPPED: %s\n", why.c_str());
  std::exit(kSkipExitStatus);
}

}  // namespace hcct::test

#endif
