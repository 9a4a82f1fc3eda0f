// Shared main of the Catch2 test programs. Catch exits with the number of failed assertions, which
// could be 77, ctest's SKIP_RETURN_CODE (tests/CMakeLists.txt): any failure is status 1, so only
// hcct::test::skip_test (support/skip.h) ever reports SKIPPED.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int main(int argc, char *argv[]) {
  const int failures = Catch::Session().run(argc, argv);
  return failures == 0 ? 0 : 1;
}
