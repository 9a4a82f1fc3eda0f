// The pass's on/off switches: each is a -mllvm flag and an environment variable (for builds whose
// compiler command line a build system owns, e.g. a Debian package's), the flag first.
#pragma once

#include <cstdlib>

#include "llvm/Support/CommandLine.h"

namespace hcct::kpath {

// `flag` when given (its unset value is -1), else `env` when set (0 = off), else `fallback`.
inline bool switch_setting(const llvm::cl::opt<int> &flag, const char *env, bool fallback) {
  if (flag >= 0) return flag != 0;
  if (const char *value = std::getenv(env)) return std::atoi(value) != 0;
  return fallback;
}

}  // namespace hcct::kpath
