#include <catch2/catch.hpp>

#include <string>

#include "options.h"

using namespace hcct::rt;

namespace {
std::string error_of(const char *text) {
  Options o;
  char error[512] = "";
  return parse_options(text, &o, error, sizeof error) ? std::string() : std::string(error);
}
}  // namespace

TEST_CASE("options: defaults and valid settings", "[options]") {
  Options o;
  char error[256];
  REQUIRE(parse_options(nullptr, &o, error, sizeof error));
  CHECK(o.mode == Mode::kHcct);
  CHECK(o.epsilon == 2e-5);
  REQUIRE(parse_options("mode=cct:key=routine:epsilon=1e-3:out=/tmp/x:max_mb=12:verbose=1", &o, error,
                        sizeof error));
  CHECK(o.mode == Mode::kCct);
  CHECK(o.key == KeyBy::kRoutine);
  CHECK(o.epsilon == 1e-3);
  CHECK(std::string(o.out) == "/tmp/x");
  CHECK(o.max_mb == 12);
  CHECK(o.verbose);
  REQUIRE(parse_options("mode=empty::", &o, error, sizeof error));
  CHECK(o.mode == Mode::kEmpty);
}

TEST_CASE("options: every bad value is named", "[options]") {
  CHECK(error_of("mode=fast") == "mode='fast' is not one of off, empty, cct, hcct");
  CHECK(error_of("epsilon=0") == "epsilon='0' must be a number in [1e-7, 1)");
  CHECK(error_of("epsilon=abc") == "epsilon='abc' must be a number in [1e-7, 1)");
  CHECK(error_of("epsilon=1e-3x") == "epsilon='1e-3x' must be a number in [1e-7, 1)");
  CHECK(error_of("max_mb=-1") == "max_mb='-1' must be a whole number of MiB, at least 1");
  CHECK(error_of("colour=red").find("unknown option 'colour'") == 0);
  CHECK(error_of("mode") == "option 'mode' has no value (expected key=value)");
  CHECK(error_of("out=") == "out='' must be a directory path");
}
