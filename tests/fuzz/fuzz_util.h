// Helpers shared by the fuzz harnesses (tests/fuzz, docs/FUZZING.md).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "hcct/format.h"
#if __cplusplus >= 202002L
#include <span>
#endif

namespace hcct::fuzz {

// A broken invariant is a finding: say which, then abort so that libFuzzer keeps the input.
[[noreturn]] inline void broken(const char *invariant, const std::string &detail = {}) {
  std::fprintf(stderr, "fuzz invariant broken: %s%s%s\n", invariant, detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

inline void require(bool ok, const char *invariant, const std::string &detail = {}) {
  if (!ok) broken(invariant, detail);
}

// A reader's error must name the file it read: "<name>: <problem>".
inline void require_names_file(const std::exception &e, const std::string &name) {
  std::string what = e.what();
  require(what.rfind(name + ": ", 0) == 0 && what.size() > name.size() + 2, "error message names the file", what);
}

#if __cplusplus >= 202002L  // fuzz_osr_guidance is C++17, as LLVM 14's headers need with clang
// The input with a consistent header: the payload size and FNV-1a hash recomputed, so that
// mutations reach the section parsers instead of stopping at the hash check. Empty if the input is
// shorter than a header.
inline std::vector<unsigned char> resealed(std::span<const unsigned char> bytes) {
  if (bytes.size() < format::kHeaderSize) return {};
  std::vector<unsigned char> out(bytes.begin(), bytes.end());
  auto patch = [&](size_t at, uint64_t v) {
    for (size_t i = 0; i < 8; ++i) out[at + i] = static_cast<unsigned char>(v >> (8 * i));
  };
  patch(16, out.size() - format::kHeaderSize);
  format::Fnv1a64 fnv;
  fnv.update(out.data() + format::kHeaderSize, out.size() - format::kHeaderSize);
  patch(24, fnv.state);
  return out;
}
#endif

}  // namespace hcct::fuzz
