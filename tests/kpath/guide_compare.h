// Comparing two `hcct guide --json` loops: the same threshold and the same recommendations (kind,
// path, factor), as the guidance from an exact profile and from a bounded or bursting one must give.
#ifndef HCCT_TESTS_KPATH_GUIDE_COMPARE_H
#define HCCT_TESTS_KPATH_GUIDE_COMPARE_H

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

namespace hcct::test {

inline void check_same_guidance(const nlohmann::json &x, const nlohmann::json &y) {
  CHECK(x["threshold"] == y["threshold"]);
  REQUIRE(x["recommendations"].size() == y["recommendations"].size());
  for (size_t r = 0; r < x["recommendations"].size(); ++r) {
    const auto &a = x["recommendations"][r], &b = y["recommendations"][r];
    INFO(a["text"] << " / " << b["text"]);
    CHECK(a["kind"] == b["kind"]);
    CHECK(a.value("path", uint64_t(0)) == b.value("path", uint64_t(0)));
    CHECK(a.value("factor", 0u) == b.value("factor", 0u));
  }
}

}  // namespace hcct::test

#endif
