// Fuzz harness: the kpath pass's guidance-file parser (kpath/src/GuidanceFile.cpp
// parse_guidance: llvm::json behind a pre-check of the raw text; docs/GUIDE.md "OSR points"), what
// clang reads from HCCT_GUIDE when it compiles a program with OSR points.
//
// Invariants beyond "no crash": a rejection says why; an accepted file gives loops with a
// non-empty function, a positive threshold and a key; its loops are exactly the thresholded loops of
// the document as nlohmann::json (the analysis/CLI side's parser) reads it, in order, when the text
// is UTF-8.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "GuidanceFile.h"
#include "fuzz_util.h"

using hcct::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  std::vector<hcct::kpath::GuidedLoop> loops;
  std::string error;
  bool accepted = hcct::kpath::parse_guidance(text, &loops, &error);
  if (!accepted) {
    require(!error.empty(), "a rejection says why");
    return 0;
  }
  require(error.empty(), "an acceptance has no error");
  for (const auto &l : loops)
    require(!l.function.empty() && l.threshold >= 1 && !l.key.empty(), "accepted loops are complete");

  nlohmann::json doc = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;  // e.g. not UTF-8 (llvm::json repairs it), or over nlohmann's limits
  std::vector<std::string> functions;
  for (const auto &loop : doc.at("loops"))
    if (!loop.at("threshold").is_null()) functions.push_back(loop.at("function").get<std::string>());
  require(functions.size() == loops.size(), "every thresholded loop is taken");
  for (size_t i = 0; i < loops.size(); ++i)
    require(functions[i] == loops[i].function, "loops keep their functions and order", functions[i]);
  return 0;
}
