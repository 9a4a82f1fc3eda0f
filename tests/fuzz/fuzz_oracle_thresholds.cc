// Fuzz harness: the oracle's thresholds file, HCCT_ORACLE_GUIDE (libhcct/oracle_input.cc
// parse_thresholds; the format is hcct/guide_format.h's, docs/GUIDE.md "Online hotness oracle").
//
// The parser is file-local, so this harness compiles oracle_input.cc into itself (#include below)
// instead of linking libhcct: the runtime's code exactly, and no test hook in the runtime.
//
// Invariants beyond "no crash":
//  - a rejection's byte offset lies within the text (or at its end), and nothing is kept;
//  - the thresholds taken are exactly the (key, threshold) pairs an independent reading of the
//    documented grammar gives, in order, and a file that grammar accepts (within the 64 KiB
//    limit) is accepted; the records kept are well formed.
#include "../../libhcct/oracle_input.cc"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_util.h"

using hcct::fuzz::require;
using Records = std::vector<std::pair<std::string, uint64_t>>;
using namespace hcct::rt::oracle;

namespace {

// What the oracle kept: g_guide's `key NUL u64` records.
Records oracle_records() {
  Records out;
  for (size_t at = 0; at < g_guide_used;) {
    const char *key = g_guide + at;
    const void *nul = memchr(key, 0, g_guide_used - at);
    require(nul != nullptr, "a record's key is terminated");
    size_t n = size_t(static_cast<const char *>(nul) - key);
    require(n > 0 && n <= hcct::guide_format::kMaxKeyBytes, "a record's key is non-empty and within the limit");
    require(g_guide_used - at >= n + 1 + sizeof(uint64_t), "a record has its threshold");
    uint64_t t;
    memcpy(&t, key + n + 1, sizeof t);
    out.emplace_back(std::string(key, n), t);
    at += n + 1 + sizeof t;
  }
  return out;
}

// The documented grammar, read independently: the header line, then lines that are empty,
// comments ('#'), or KEY=T with T after the last '=' (decimal, at most 2^64-1) and 1..4095 key
// bytes; a last line "# end"; every line ends with '\n'; no NUL byte anywhere. `bytes` is what the
// records would take (the oracle keeps at most 64 KiB).
std::optional<Records> reference(std::string_view text, size_t *bytes) {
  *bytes = 0;
  if (text.find('\0') != std::string_view::npos) return std::nullopt;
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) return std::nullopt;
    lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  if (lines.size() < 2 || lines.front() != "# hcct-thresholds 1" || lines.back() != "# end") return std::nullopt;
  Records out;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.empty() || line[0] == '#') {
      if (line == "# end") return std::nullopt;  // only the last line may end the file
      continue;
    }
    size_t eq = line.rfind('=');
    if (eq == std::string_view::npos || eq == 0 || eq > 4095 || eq + 1 == line.size()) return std::nullopt;
    unsigned __int128 t = 0;
    for (char c : line.substr(eq + 1)) {
      if (c < '0' || c > '9') return std::nullopt;
      t = t * 10 + unsigned(c - '0');
      if (t > UINT64_MAX) return std::nullopt;
    }
    out.emplace_back(std::string(line.substr(0, eq)), uint64_t(t));
    *bytes += eq + 1 + sizeof(uint64_t);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = reinterpret_cast<const char *>(data);
  size_t at = size + 1;
  g_guide_used = 0;
  const char *error = parse_thresholds(text, size, &at);
  bool accepted = error == nullptr;
  if (!accepted) {
    require(at <= size, "a rejection's offset lies within the text");
    require(g_guide_used == 0, "a rejected file leaves no threshold");
  }
  Records taken = accepted ? oracle_records() : Records{};
  size_t bytes = 0;
  std::optional<Records> expected = reference(std::string_view(text, size), &bytes);
  if (accepted) {
    require(expected.has_value(), "what the oracle accepts follows the grammar");
    require(taken == *expected, "the oracle takes the file's thresholds");
  } else if (expected && bytes <= kGuideBytes) {
    hcct::fuzz::broken("a well-formed thresholds file is accepted", error);
  }
  return 0;
}
