// Runtime addresses -> function names and source lines, with libdw (elfutils).
//
// Per module of the MODS section: address a with lo ≤ a < hi -> link-time address a − bias -> ELF
// symbol (demangled) and DWARF line table / inline scopes of the file at `path`. Separate debug info
// is found the standard way (build-id under /usr/lib/debug, .gnu_debuglink).
//
// A module's file is the first of these whose build-id is the recorded one (any file opened is
// checked; a module recorded without a build-id is only looked for at its recorded path):
//   1. the recorded path (absolute: the runtime records where the loader mapped it);
//   2. <dir>/<file name> for each directory of the cache's search list (HCCT_MODULE_PATH);
//   3. <file name> in the directory of the profile's main executable (the first module);
//   4. /usr/lib/debug/.build-id/<xx>/<rest>.debug (separate debug info has the symbols too).
//
// Unresolvable addresses get a readable placeholder instead of an error:
//   - in no module:               "0x7f0012345678"
//   - module file unreadable, or no symbol covers the address: "libfoo.so+0x1234"
//   - stale binary (the file at the recorded path has another build-id, and no file with the
//     recorded one was found elsewhere): "prog+0x1234" with Symbol::stale set. We refuse to use a
//     rebuilt binary's symbols because they would be silently wrong; a warning names the file once.
// Each of these problems is reported once per module through the warning callback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "hcct/analysis/profile.h"

namespace hcct::analysis {

// One function level of a source location. For a call site inside code that the compiler inlined,
// a Symbol has several frames.
struct SourceFrame {
  std::string function;  // demangled; empty if unknown
  std::string file;      // empty if unknown
  uint32_t line = 0;     // 0 if unknown
  uint32_t column = 0;
};

struct Symbol {
  uint64_t address = 0;     // the runtime address that was looked up (for call sites: the return address)
  const Module *module = nullptr;  // containing module, or null
  uint64_t offset = 0;      // link-time address (address − bias) when module is set
  bool resolved = false;    // a symbol or debug info named the function
  bool stale = false;       // module file's build-id differs from the recorded one
  // The out-of-line function containing the address, demangled, or the placeholder above.
  std::string function;
  // Source location of the address itself (for a call site: of the call instruction), i.e. in the
  // innermost inlined function if any. Empty file / line 0 when there is no line information.
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
  // Inline chain, innermost first; the last frame is the out-of-line function. frames[k].file/line
  // is where execution is inside frames[k].function, so frames[k+1].file/line is the call site of
  // the inlined frames[k]. Holds one frame when nothing is inlined; empty when unresolved.
  std::vector<SourceFrame> frames;
};

using WarningSink = std::function<void(const std::string &)>;

// The directories named by HCCT_MODULE_PATH (colon-separated; empty entries skipped), where a
// module's file is looked for by name when it is not at its recorded path.
std::vector<std::string> module_search_path_from_env();

// Opened ELF/DWARF files, shared by the symbolizers of several processes. Not thread-safe.
class DebugInfoCache {
 public:
  // `search_dirs`: where the symbolizers look for a module that moved (see Symbolizer).
  explicit DebugInfoCache(std::vector<std::string> search_dirs = module_search_path_from_env());
  ~DebugInfoCache();
  DebugInfoCache(const DebugInfoCache &) = delete;
  DebugInfoCache &operator=(const DebugInfoCache &) = delete;

  class File;  // one libdw session for one ELF file (opaque)
  // Null if the file cannot be opened as ELF; `error` then says why.
  File *open(const std::string &path, std::string &error);
  const std::vector<std::string> &search_dirs() const { return search_dirs_; }

 private:
  struct Entry;
  std::vector<std::string> search_dirs_;
  std::unordered_map<std::string, std::unique_ptr<Entry>> files_;
};

// Symbolizes the addresses of one process (one module map). Results are cached per address; the
// returned references stay valid for the Symbolizer's lifetime.
class Symbolizer {
 public:
  // `cache` may be shared by several Symbolizers; if null, a private one is made. `warn` gets each
  // problem once (default: "hcct: warning: ..." on stderr).
  explicit Symbolizer(std::vector<Module> modules, std::shared_ptr<DebugInfoCache> cache = nullptr,
                      WarningSink warn = nullptr);
  ~Symbolizer();
  Symbolizer(const Symbolizer &) = delete;
  Symbolizer &operator=(const Symbolizer &) = delete;

  // A function's entry address: its name and the source line of its entry.
  const Symbol &routine(uint64_t address);
  // A return address: looks up address − 1 (the call instruction) for the function, line and inline
  // chain; Symbol::address stays the return address.
  const Symbol &call_site(uint64_t return_address);

  const Module *module_of(uint64_t address) const;
  const std::vector<Module> &modules() const { return modules_; }

 private:
  struct ModuleState;
  Symbol lookup(uint64_t address, uint64_t probe);
  ModuleState &state(const Module &m);
  std::vector<std::string> candidate_paths(const Module &m) const;

  std::vector<Module> modules_;
  ModuleMap module_map_;
  std::shared_ptr<DebugInfoCache> cache_;
  WarningSink warn_;
  std::vector<std::unique_ptr<ModuleState>> states_;  // parallel to modules_, created lazily
  std::unordered_map<uint64_t, Symbol> routines_, sites_;
};

// "libfoo.so+0x1a2b" / "0x7f001234": the placeholder used for unresolved addresses.
std::string address_placeholder(const Module *module, uint64_t address);

// abi::__cxa_demangle with the input returned unchanged for names that are not mangled.
std::string demangle(const char *name);

// The source function of a piece gcc split off or cloned: "f.part.0", "f.cold", "f.isra.0",
// "f.constprop.0" → "f"; "g(int) [clone .cold]" → "g(int)". Other names unchanged.
std::string source_function_name(std::string name);

// Whether a call site's inline frame is in the function named `function` (a routine's name: its
// ELF symbol with gcc's clone suffixes taken off, which inner frames, named from DWARF, lack).
bool frame_in_function(const SourceFrame &frame, const std::string &function);

// Whether a call site lies outside the function of its context's parent (`parent`, a resolved
// routine): the callee was inlined into the parent together with its probe (gcc
// -finstrument-functions, the plugin's early stage), and the probe reported the parent's own
// return address, a site in the parent's caller. Such a site says nothing about where in the parent
// the call was. False when unknown (no inline chain, parent unresolved).
bool call_site_outside(const Symbol &site, const Symbol &parent);

}  // namespace hcct::analysis
