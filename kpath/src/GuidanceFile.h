// The guidance file that `hcct guide` writes and the pass reads (format "hcct-guide", versions 1
// and 2; docs/GUIDE.md, "OSR points"): which loops get an OSR point or a loop version, at what
// threshold, and the configuration their profile was recorded in. The parser depends on LLVM's
// Support library only, so the fuzz harness (tests/fuzz/fuzz_osr_guidance.cc) links it alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"

namespace hcct::kpath {

struct GuidedLoop {
  std::string function;
  uint64_t function_id = 0;  // 0: not given
  bool has_function_id = false;
  std::string file;          // the function's source file
  std::string key;           // "file:line"
  uint32_t line = 0;
  uint32_t header_block = 0;
  uint32_t rank = 0;
  uint64_t threshold = 0;
  // The configuration the profile was recorded in (guidance version 2; absent in version 1).
  std::optional<bool> late;       // "stage": "early" / "late"
  std::optional<int> opt_level;   // "opt_level": 0..3 (null: unknown)
  // Version 2: the "unroll" recommendations whose path records its "blocks" — what a loop
  // version is specialised for, in the guidance's order.
  struct Pattern {
    uint64_t path = 0;
    unsigned factor = 0;
    std::vector<uint32_t> blocks;
  };
  std::vector<Pattern> patterns;
};

// The configuration of the build the pass runs in, to check against the guidance's.
struct BuildConfig {
  bool late = false;
  int opt_level = -1;  // -1: unknown
};

// Parses a guidance file (format "hcct-guide", version 1 or 2); loops without a threshold are left out.
// Throws nothing: on error returns false with a message.
bool parse_guidance(llvm::StringRef text, std::vector<GuidedLoop> *out, std::string *error);

// Why guidance for loop `l` does not fit a build of configuration `build` ("" if it does).
std::string configuration_mismatch(const GuidedLoop &l, const BuildConfig &build);

}  // namespace hcct::kpath
