// The names of a tree's addresses for every output (reports, exports, compare keys): symbolized
// through a Symbolizer, or placeholders ("prog+0x1234") when symbols are not wanted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hcct/analysis/symbolizer.h"

namespace hcct::analysis {

class Names {
 public:
  // `warn` hears the symbolizer's warnings (missing or stale binaries).
  Names(const std::vector<Module> &modules, bool symbolize, std::shared_ptr<DebugInfoCache> cache,
        WarningSink warn = nullptr);
  const Symbol &routine(uint64_t address);
  const Symbol &call_site(uint64_t address);
  // Index in the module map the names were made for of a Symbol's `module`.
  size_t module_index(const Module *m) const;

 private:
  const Symbol &placeholder(uint64_t address, std::unordered_map<uint64_t, Symbol> &cache);
  std::optional<Symbolizer> sym_;
  std::vector<Module> modules_;
  ModuleMap module_map_;
  std::unordered_map<uint64_t, Symbol> routines_, sites_;
};

// "main (prog.c:12)" — function plus its location when known; "(stale binary)" if so.
std::string describe_routine(const Symbol &s);
// "prog.c:40", or "prog.c:22 in helper, inlined at prog.c:40" for inlined code; falls back to the
// function name or placeholder when there is no line information.
std::string describe_call_site(const Symbol &s);

}  // namespace hcct::analysis
