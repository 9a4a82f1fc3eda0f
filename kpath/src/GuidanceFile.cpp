#include "GuidanceFile.h"

#include <algorithm>
#include <cstring>

#include "hcct/guide_format.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

namespace hcct::kpath {

using namespace llvm;

namespace {

// What LLVM 14's JSON parser gets wrong on hostile input, checked on the raw text first:
//  - it recurses once per nesting level: a file of a million '[' would overflow clang's stack (a
//    guidance file is 5 deep; more than kMaxNesting is rejected);
//  - it reads integers with strtoll without checking ERANGE: any literal of magnitude 2^63 or
//    more comes back as 2^63-1 (or -2^63), so a "threshold" of 2^64 silently became 2^63-1.
//    Integer literals must fit in int64_t.
// Returns the problem, or "" if none.
constexpr size_t kMaxNesting = 256;
std::string raw_problem(StringRef text) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        return "nested deeper than " + std::to_string(kMaxNesting) + " levels (at byte " + std::to_string(i) + ")";
    } else if ((c == ']' || c == '}') && depth) {
      --depth;
    } else if (c >= '0' && c <= '9' && (i == 0 || !strchr("0123456789.eE+-", text[i - 1]) || text[i - 1] == '-')) {
      // The integer part of a number (of a negative one too: JSON's parser reads both alike).
      size_t end = i;
      while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
      bool integer = end == text.size() || !strchr(".eE", text[end]);
      uint64_t value;
      if (integer && (text.substr(i, end - i).getAsInteger(10, value) || value > uint64_t(INT64_MAX)))
        return "integer " + text.substr(i, std::min<size_t>(end - i, 40)).str() + (end - i > 40 ? "..." : "") +
               " at byte " + std::to_string(i) + " is out of range (above 2^63-1)";
      i = end - 1;
    }
  }
  return "";
}

std::string base_name(StringRef path) { return sys::path::filename(path).str(); }

// A JSON integer literal (not 1.0 or 1e3) in [lo, hi].
std::optional<uint64_t> integer_in(const json::Value *v, uint64_t lo, uint64_t hi) {
  if (!v) return std::nullopt;
  std::optional<uint64_t> u;
  if (auto x = v->getAsUINT64()) u = *x;
  if (!u || *u < lo || *u > hi) return std::nullopt;
  return u;
}

// The loop's "unroll" recommendations with the blocks of their path (guidance version 2).
std::string parse_patterns(const json::Object &loop, std::vector<GuidedLoop::Pattern> *out) {
  const json::Array *recs = loop.getArray("recommendations");
  const json::Array *paths = loop.getArray("paths");
  if (!recs || !paths) return "";
  for (const json::Value &r : *recs) {
    const json::Object *rec = r.getAsObject();
    if (!rec || rec->getString("kind") != StringRef("unroll")) continue;
    auto path = integer_in(rec->get("path"), 0, UINT64_MAX);
    auto factor = integer_in(rec->get("factor"), 2, 64);
    if (!path || !factor) return "an \"unroll\" recommendation needs an integer \"path\" and a \"factor\" in [2, 64]";
    for (const json::Value &p : *paths) {
      const json::Object *po = p.getAsObject();
      if (!po || integer_in(po->get("id"), 0, UINT64_MAX) != path) continue;
      const json::Array *blocks = po->getArray("blocks");
      if (!blocks) break;  // version 1: no blocks, nothing to specialise for
      GuidedLoop::Pattern pattern{*path, unsigned(*factor), {}};
      for (const json::Value &b : *blocks) {
        auto index = integer_in(&b, 0, UINT32_MAX);
        if (!index) return "path " + std::to_string(*path) + ": \"blocks\" must be integers in [0, 2^32-1]";
        pattern.blocks.push_back(uint32_t(*index));
      }
      if (pattern.blocks.empty()) return "path " + std::to_string(*path) + ": \"blocks\" is empty";
      out->push_back(std::move(pattern));
      break;
    }
  }
  return "";
}

std::string configuration_name(bool late, int opt_level) {
  return std::string(late ? "the late stage" : "the early stage") + " at " +
         (opt_level < 0 ? "an unrecorded -O level" : "-O" + std::to_string(opt_level));
}

}  // namespace

// Block numbers, and so the guidance's header blocks and paths, describe the CFG of one stage and
// optimisation level: guidance made for another configuration would name other blocks.
std::string configuration_mismatch(const GuidedLoop &l, const BuildConfig &build) {
  bool stage_differs = l.late && *l.late != build.late;
  bool level_differs = l.opt_level && build.opt_level >= 0 && *l.opt_level != build.opt_level;
  if (!stage_differs && !level_differs) return "";
  return "loop " + l.key + " (" + l.function + ") was profiled in a build at " +
         configuration_name(l.late.value_or(build.late), l.opt_level.value_or(-1)) + ", this build is at " +
         configuration_name(build.late, build.opt_level) +
         ": its block numbers differ. Profile this configuration and run `hcct guide` again (or build like the profile: "
         "the same -O level and HCCT_KPATH_STAGE)";
}

bool parse_guidance(StringRef text, std::vector<GuidedLoop> *out, std::string *error) {
  if (std::string problem = raw_problem(text); !problem.empty()) {
    *error = "not JSON: " + problem;
    return false;
  }
  Expected<json::Value> doc = json::parse(text);
  if (!doc) {
    *error = "not JSON: " + toString(doc.takeError());
    return false;
  }
  const json::Object *root = doc->getAsObject();
  if (!root || root->getString("format") != StringRef(hcct::guide_format::kGuideFormat)) {
    *error = "not a guidance file (no \"format\": \"hcct-guide\"; write one with `hcct guide`)";
    return false;
  }
  constexpr uint64_t kVersion = hcct::guide_format::kGuideVersion;
  std::optional<uint64_t> version = integer_in(root->get("version"), 1, kVersion);
  if (!version) {
    *error = "unsupported guidance version (this plugin reads versions 1 to " + std::to_string(kVersion) + ")";
    return false;
  }
  const json::Array *loops = root->getArray("loops");
  if (!loops) {
    *error = "no \"loops\" array";
    return false;
  }
  out->clear();
  size_t index = 0;
  for (const json::Value &v : *loops) {
    std::string where = "loops[" + std::to_string(index++) + "]";
    const json::Object *o = v.getAsObject();
    if (!o) {
      *error = where + " is not an object";
      return false;
    }
    GuidedLoop l;
    auto function = o->getString("function");
    const json::Value *threshold = o->get("threshold");
    if (!function || function->empty() || !o->get("line") || !o->get("header_block") || !threshold) {
      *error = where + ": needs \"function\", \"line\", \"header_block\" and \"threshold\"";
      return false;
    }
    // Numbers that do not fit are errors, never truncated (a line 2^32 + 14 is not line 14).
    auto line = integer_in(o->get("line"), 0, UINT32_MAX);
    auto header = integer_in(o->get("header_block"), 0, UINT32_MAX);
    if (!line || !header) {
      *error = where + ": \"line\" and \"header_block\" must be integers in [0, 2^32-1]";
      return false;
    }
    if (threshold->getAsNull()) continue;  // no OSR point recommended
    auto t = integer_in(threshold, 1, UINT64_MAX);
    if (!t) {
      *error = where + ": \"threshold\" must be a positive integer or null";
      return false;
    }
    l.function = function->str();
    l.line = uint32_t(*line);
    l.header_block = uint32_t(*header);
    l.threshold = *t;
    // Optional members: absent is fine, present with the wrong type is an error (a function_id
    // that is silently dropped would skip the check that tells same-named static functions apart).
    for (const char *member : {"rank", "file", "key", "function_id"}) {
      const json::Value *v = o->get(member);
      if (!v) continue;
      bool is_rank = std::string(member) == "rank";
      if (is_rank ? !integer_in(v, 0, UINT32_MAX) : !v->getAsString()) {
        *error = where + ": \"" + member + "\" must be " + (is_rank ? "an integer in [0, 2^32-1]" : "a string");
        return false;
      }
    }
    // Version 2: the profile's configuration (absent or null: not recorded, not checked).
    if (const json::Value *stage = o->get("stage"); stage && !stage->getAsNull()) {
      auto s = stage->getAsString();
      if (!s || (*s != "early" && *s != "late")) {
        *error = where + ": \"stage\" must be \"early\", \"late\" or null";
        return false;
      }
      l.late = *s == "late";
    }
    if (const json::Value *level = o->get("opt_level"); level && !level->getAsNull()) {
      auto n = integer_in(level, 0, 3);
      if (!n) {
        *error = where + ": \"opt_level\" must be an integer in [0, 3] or null";
        return false;
      }
      l.opt_level = int(*n);
    }
    if (std::string why = parse_patterns(*o, &l.patterns); !why.empty()) {
      *error = where + ": " + why;
      return false;
    }
    if (auto rank = o->get("rank")) l.rank = uint32_t(*integer_in(rank, 0, UINT32_MAX));
    if (auto file = o->getString("file")) l.file = file->str();
    if (auto key = o->getString("key")) l.key = key->str();
    else l.key = (l.file.empty() ? std::string("?") : base_name(l.file)) + ":" + std::to_string(l.line);
    if (auto id = o->getString("function_id")) {
      uint64_t value = 0;
      if (id->getAsInteger(0, value)) {
        *error = where + ": \"function_id\" is not a 64-bit number";
        return false;
      }
      l.function_id = value;
      l.has_function_id = true;
    }
    out->push_back(std::move(l));
  }
  return true;
}

}  // namespace hcct::kpath
