// Fuzz harness: the oracle's guidance-file reader, HCCT_ORACLE_GUIDE (libhcct/oracle.cc
// parse_guide, a hand-written JSON parser that must not allocate from the program's heap;
// docs/GUIDE.md "Online hotness oracle").
//
// The parser is file-local, so this harness compiles oracle.cc into itself (#include below) instead
// of linking libhcct: the runtime's code exactly, and no test hook in the runtime.
//
// Invariants beyond "no crash":
//  - a rejection's byte offset lies within the text;
//  - an accepted file is JSON that nlohmann::json (the analysis/CLI side's parser) also accepts, and
//    the thresholds the oracle took are exactly the (key, threshold) pairs of its "loops" in order,
//    as nlohmann reads them; the records the oracle keeps are well formed;
//  - conversely, a well-formed guidance document (nlohmann's reading, within the oracle's documented
//    limits) is accepted.
// Raw bytes that are not UTF-8 are outside the comparison (the oracle keeps key bytes as they are;
// nlohmann rejects them).
#include "../../libhcct/oracle.cc"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_util.h"

using hcct::fuzz::require;
using Records = std::vector<std::pair<std::string, uint64_t>>;

namespace {

// What the oracle kept: g_guide's `key NUL u64` records.
Records oracle_records() {
  Records out;
  for (size_t at = 0; at < g_guide_used;) {
    const char *key = g_guide + at;
    const void *nul = memchr(key, 0, g_guide_used - at);
    require(nul != nullptr, "a record's key is terminated");
    size_t n = size_t(static_cast<const char *>(nul) - key);
    require(n > 0 && n < kKeyBytes, "a record's key is non-empty and within kKeyBytes");
    require(g_guide_used - at >= n + 1 + sizeof(uint64_t), "a record has its threshold");
    uint64_t t;
    memcpy(&t, key + n + 1, sizeof t);
    out.emplace_back(std::string(key, n), t);
    at += n + 1 + sizeof t;
  }
  return out;
}

size_t depth(const nlohmann::json &v) {
  size_t d = 0;
  if (v.is_structured())
    for (const auto &e : v) d = std::max(d, depth(e));
  return v.is_structured() ? d + 1 : 0;
}

// What a guidance document means, read by nlohmann; nullopt if it is not one. `within_limits`
// tells whether the oracle's documented limits (keys < 4096 bytes without NUL, 64 KiB of records,
// nesting < 64) hold.
std::optional<Records> reference(const nlohmann::json &doc, bool *within_limits) {
  *within_limits = depth(doc) < 60;
  if (!doc.is_object()) return std::nullopt;
  auto format = doc.find("format");
  auto version = doc.find("version");
  if (format == doc.end() || !format->is_string() || *format != "hcct-guide") return std::nullopt;
  if (version == doc.end() || !version->is_number_unsigned() || *version != 1) return std::nullopt;
  Records out;
  size_t bytes = 0;
  auto loops = doc.find("loops");
  if (loops == doc.end()) return out;
  if (!loops->is_array()) return std::nullopt;
  for (const auto &loop : *loops) {
    if (!loop.is_object()) return std::nullopt;
    std::string key;
    auto k = loop.find("key");
    if (k != loop.end()) {
      if (!k->is_string()) return std::nullopt;
      key = k->get<std::string>();
      if (key.size() >= kKeyBytes || key.find('\0') != std::string::npos) *within_limits = false;
    }
    std::optional<uint64_t> threshold;
    auto t = loop.find("threshold");
    if (t != loop.end()) {
      if (t->is_number_unsigned()) threshold = t->get<uint64_t>();
      else if (!t->is_null()) return std::nullopt;
    }
    if (!key.empty() && threshold) {
      out.emplace_back(key, *threshold);
      bytes += key.size() + 1 + sizeof(uint64_t);
    }
  }
  if (bytes > kGuideBytes) *within_limits = false;
  return out;
}

bool valid_utf8(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n;) {
    uint8_t c = p[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || i + len > n) return false;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t j = 1; j < len; ++j) {
      if ((p[i + j] & 0xc0) != 0x80) return false;
      cp = cp << 6 | (p[i + j] & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return false;
    i += len;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = reinterpret_cast<const char *>(data);
  size_t at = size + 1;
  g_guide_used = 0;
  const char *error = parse_guide(text, size, &at);
  bool accepted = error == nullptr;
  if (!accepted) require(at <= size, "a rejection's offset lies within the text");
  Records taken = accepted ? oracle_records() : Records{};

  if (!valid_utf8(data, size)) return 0;
  // nlohmann reads a NUL byte as the end of its input (a document followed by "\0]}" parses);
  // the runtime rightly refuses the bytes after the object. Outside the comparison.
  if (std::memchr(data, 0, size)) return 0;
  // Top-level "loops" members: the oracle refuses a second one (which a JSON reader would pick
  // silently), so a document with two is outside the "accepted" direction of the comparison.
  // Any other repeated member name (`"version": 0, ..., "version": 1`) is ambiguous too: JSON
  // leaves the choice open (nlohmann takes the last, the oracle the first), so such a document is
  // outside the comparison unless the oracle refuses it.
  int loops_members = 0;
  bool repeated_name = false;
  std::vector<std::vector<std::string>> names;  // member names of each open object
  auto count_loops = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json &parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) names.emplace_back();
    if (event == Event::object_end && !names.empty()) names.pop_back();
    if (event == Event::key) {
      if (depth == 1 && parsed == "loops") ++loops_members;
      if (!names.empty() && parsed.is_string()) {
        auto &open = names.back();
        const std::string &name = parsed.get_ref<const std::string &>();
        if (std::find(open.begin(), open.end(), name) != open.end()) repeated_name = true;
        open.push_back(name);
      }
    }
    return true;
  };
  nlohmann::json doc = nlohmann::json::parse(text, text + size, count_loops, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // A number beyond a double's range ("0.02E091204455790208") is JSON by the grammar, but
    // nlohmann refuses it (out_of_range 406); the oracle skips numbers it does not use.
    bool number_overflow = false;
    try {
      (void)nlohmann::json::parse(text, text + size);
    } catch (const nlohmann::json::out_of_range &) {
      number_overflow = true;
    } catch (const nlohmann::json::exception &) {
    }
    if (!number_overflow) require(!accepted, "what the oracle accepts is JSON", "nlohmann rejects it");
    return 0;
  }
  bool within_limits = false;
  std::optional<Records> expected = reference(doc, &within_limits);
  if (loops_members > 1) {
    require(!accepted, "a second \"loops\" is refused");
    return 0;
  }
  if (repeated_name && !accepted) return 0;
  if (accepted) {
    require(expected.has_value(), "what the oracle accepts is a guidance document");
    require(taken == *expected, "the oracle takes the document's thresholds");
  } else if (expected && within_limits) {
    hcct::fuzz::broken("a well-formed guidance document is accepted", error);
  }
  return 0;
}
