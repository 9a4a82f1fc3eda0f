// Fuzz harness: the oracle's threshold list, HCCT_ORACLE / hcct_oracle_configure ("key=T,key=T";
// libhcct/oracle_input.cc, hcct/oracle.h). Compiles oracle_input.cc into itself and links the rest
// of the oracle, to read the thresholds back through the runtime's own lookup.
//
// Invariants beyond "no crash": hcct_oracle_configure accepts exactly the specs of the documented
// grammar (non-empty keys without ',' or '=', decimal thresholds up to 2^64-1, no trailing ',', one
// threshold per key, under 8 KiB), checked against an independent reading here; it returns the
// number of entries; a rejected spec leaves the thresholds as they were; after an accepted one,
// every key's threshold is the one the spec gives it.
#include "../../libhcct/oracle_input.cc"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "fuzz_util.h"

using hcct::fuzz::require;
using namespace hcct::rt::oracle;

namespace {

struct Spec {
  std::map<std::string, uint64_t> thresholds;
  int entries = 0;
};

// The documented grammar, read independently of validate_spec.
std::optional<Spec> reference(const std::string &s) {
  if (s.size() >= kSpecBytes) return std::nullopt;
  Spec spec;
  if (s.empty()) return spec;
  size_t start = 0;
  for (;;) {
    size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t eq = item.find('=');
    if (eq == 0 || eq == std::string::npos) return std::nullopt;
    std::string key = item.substr(0, eq), digits = item.substr(eq + 1);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    unsigned __int128 t = 0;
    for (char c : digits) {
      t = t * 10 + unsigned(c - '0');
      if (t > UINT64_MAX) return std::nullopt;
    }
    auto [it, fresh] = spec.thresholds.emplace(key, uint64_t(t));
    if (!fresh && it->second != uint64_t(t)) return std::nullopt;
    ++spec.entries;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return spec;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  text.resize(strlen(text.c_str()));
  // A known state first: one accepted spec.
  require(hcct_oracle_configure("fuzz.c:1=7") == 1, "a plain spec is accepted");
  int n = hcct_oracle_configure(text.c_str());
  std::optional<Spec> expected = reference(text);
  require((n >= 0) == expected.has_value(), "the documented grammar decides acceptance",
          n >= 0 ? "accepted a spec outside it" : "rejected a spec within it");
  uint64_t t = 0;
  if (!expected) {
    require(n == -1, "a rejection returns -1");
    require(spec_lookup(g_spec, "fuzz.c:1", &t) && t == 7, "a rejected spec changes nothing");
    return 0;
  }
  require(n == expected->entries, "the number of entries is returned");
  for (const auto &[key, value] : expected->thresholds)
    require(spec_lookup(g_spec, key.c_str(), &t) && t == value, "every key gets its threshold", key);
  if (!expected->thresholds.count("fuzz.c:1"))
    require(!spec_lookup(g_spec, "fuzz.c:1", &t), "keys not in the spec lose their threshold");
  return 0;
}
