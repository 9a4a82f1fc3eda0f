#include "hcct/analysis/symbolizer.h"
#include "hcct/analysis/text.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <iostream>

namespace hcct::analysis {
namespace {

char *g_debuginfo_path = nullptr;  // libdw's default search path

// Offline reporting: every file is opened on its own, at its link-time addresses (base 0), so a
// lookup takes runtime address − load bias (docs/FORMAT.md, MODS).
const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &g_debuginfo_path,
};


std::string hex_bytes(std::span<const uint8_t> b) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

std::string die_name(Dwarf_Die *die) {
  Dwarf_Attribute attr;
  // The linkage name demangles to the qualified name with parameters; DW_AT_name is only the last
  // component. attr_integrate follows DW_AT_abstract_origin / DW_AT_specification, which is where
  // inlined and out-of-class definitions keep their names.
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name, DW_AT_name}) {
    if (dwarf_attr_integrate(die, at, &attr)) {
      if (const char *s = dwarf_formstring(&attr)) return demangle(s);
    }
  }
  return {};
}

// DW_AT_call_file/line/column of an inlined_subroutine DIE: where it was inlined.
void call_location(Dwarf_Die *die, SourceFrame &loc) {
  Dwarf_Attribute attr;
  Dwarf_Word v;
  loc.file.clear();
  loc.line = loc.column = 0;
  if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &v) == 0) {
    Dwarf_Die cu;
    Dwarf_Files *files;
    size_t nfiles;
    if (dwarf_diecu(die, &cu, nullptr, nullptr) && dwarf_getsrcfiles(&cu, &files, &nfiles) == 0 && v < nfiles) {
      if (const char *f = dwarf_filesrc(files, v, nullptr, nullptr)) loc.file = f;
    }
  }
  if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &v) == 0) loc.line = uint32_t(v);
  if (dwarf_formudata(dwarf_attr(die, DW_AT_call_column, &attr), &v) == 0) loc.column = uint32_t(v);
}

// The concrete scopes containing `addr` (module-relative, as libdw sees it), innermost first.
// dwarf_getscopes continues into the abstract definition after an inlined scope, so only its
// innermost result is used; dwarf_getscopes_die on that gives the concrete chain up through the
// functions the code was inlined into.
std::vector<Dwarf_Die> scope_chain(Dwarf_Die *cu, Dwarf_Addr bias, uint64_t addr) {
  std::vector<Dwarf_Die> chain;
  if (!cu) return chain;
  Dwarf_Die *scopes = nullptr;
  int n = dwarf_getscopes(cu, addr - bias, &scopes);
  if (n <= 0) return chain;
  Dwarf_Die innermost = scopes[0];
  std::free(scopes);
  scopes = nullptr;
  n = dwarf_getscopes_die(&innermost, &scopes);
  if (n <= 0) return chain;
  chain.assign(scopes, scopes + n);
  std::free(scopes);
  return chain;
}

}  // namespace

std::string demangle(const char *name) {
  if (!name) return {};
  if (name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    std::unique_ptr<char, void (*)(void *)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
    if (status == 0 && d) return d.get();
  }
  return name;
}

std::string source_function_name(std::string name) {
  // C++: the demangler writes clone suffixes as " [clone .part.0]".
  for (size_t at; (at = name.rfind(" [clone ")) != std::string::npos && name.back() == ']';) name.resize(at);
  // C (not demangled): "f.part.0", "f.cold", "f.isra.0", "f.constprop.0.isra.0", "f.lto_priv.0".
  static constexpr std::string_view kCloneKinds[] = {"part", "cold", "isra", "constprop", "lto_priv", "localalias"};
  for (;;) {
    size_t dot = name.rfind('.');
    if (dot == std::string::npos || dot == 0) return name;
    std::string_view tail(name.data() + dot + 1, name.size() - dot - 1);
    bool number = !tail.empty() && std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (number) {  // ".N" belongs to the kind before it
      size_t kind_dot = name.rfind('.', dot - 1);
      if (kind_dot == std::string::npos || kind_dot == 0) return name;
      std::string_view kind(name.data() + kind_dot + 1, dot - kind_dot - 1);
      if (std::find(std::begin(kCloneKinds), std::end(kCloneKinds), kind) == std::end(kCloneKinds)) return name;
      name.resize(kind_dot);
    } else if (std::find(std::begin(kCloneKinds), std::end(kCloneKinds), tail) != std::end(kCloneKinds)) {
      name.resize(dot);
    } else {
      return name;
    }
  }
}

bool frame_in_function(const SourceFrame &frame, const std::string &function) {
  return frame.function == function || source_function_name(frame.function) == function;
}

bool call_site_outside(const Symbol &site, const Symbol &parent) {
  if (!parent.resolved || site.frames.empty()) return false;
  return std::none_of(site.frames.begin(), site.frames.end(),
                      [&](const SourceFrame &f) { return frame_in_function(f, parent.function); });
}

std::string address_placeholder(const Module *m, uint64_t address) {
  if (!m) return hex(address);
  return base_name(m->path) + "+" + hex(address - m->bias);
}

// ---- DebugInfoCache

class DebugInfoCache::File {
 public:
  Dwfl *dwfl = nullptr;
  Dwfl_Module *mod = nullptr;
  std::vector<uint8_t> build_id;
  ~File() {
    if (dwfl) dwfl_end(dwfl);
  }

  // The compile unit whose code holds `addr` (module-relative), or null. libdw finds it through
  // .debug_aranges, which clang does not emit by default (neither with DWARF 5 nor 4), and its
  // fallback misses clang's units: then the units' own address ranges are searched.
  Dwarf_Die *unit_of(uint64_t addr, Dwarf_Addr *bias) {
    if (Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, bias)) return cu;
    if (!unit_ranges_built_) build_unit_ranges();
    auto it = std::upper_bound(unit_ranges_.begin(), unit_ranges_.end(), addr,
                               [](uint64_t a, const UnitRange &r) { return a < r.start; });
    if (it == unit_ranges_.begin()) return nullptr;
    --it;
    if (addr >= it->end) return nullptr;
    *bias = it->bias;
    return it->cu;
  }

 private:
  struct UnitRange {
    uint64_t start, end;  // module-relative, as libdw reports the module (base 0)
    Dwarf_Die *cu;
    Dwarf_Addr bias;
  };

  void build_unit_ranges() {
    unit_ranges_built_ = true;
    Dwarf_Addr bias = 0;
    for (Dwarf_Die *cu = nullptr; (cu = dwfl_module_nextcu(mod, cu, &bias));) {
      Dwarf_Addr base = 0, start = 0, end = 0;
      for (ptrdiff_t off = 0; (off = dwarf_ranges(cu, off, &base, &start, &end)) > 0;)
        if (end > start) unit_ranges_.push_back({start + bias, end + bias, cu, bias});
    }
    std::sort(unit_ranges_.begin(), unit_ranges_.end(),
              [](const UnitRange &a, const UnitRange &b) { return a.start < b.start; });
  }

  std::vector<UnitRange> unit_ranges_;
  bool unit_ranges_built_ = false;
};

struct DebugInfoCache::Entry {
  std::unique_ptr<File> file;
  std::string error;
};

std::vector<std::string> module_search_path_from_env() {
  std::vector<std::string> dirs;
  const char *env = std::getenv("HCCT_MODULE_PATH");
  if (!env) return dirs;
  std::string all = env;
  for (size_t start = 0; start <= all.size();) {
    size_t colon = all.find(':', start);
    if (colon == std::string::npos) colon = all.size();
    if (colon > start) dirs.push_back(all.substr(start, colon - start));
    start = colon + 1;
  }
  return dirs;
}

DebugInfoCache::DebugInfoCache(std::vector<std::string> search_dirs) : search_dirs_(std::move(search_dirs)) {}
DebugInfoCache::~DebugInfoCache() = default;

DebugInfoCache::File *DebugInfoCache::open(const std::string &path, std::string &error) {
  auto it = files_.find(path);
  if (it == files_.end()) {
    auto e = std::make_unique<Entry>();
    struct stat st;
    // libdw open()s the path; a FIFO or device named in a hostile MODS section would block or
    // stream forever.
    if (path.empty()) {
      e->error = "no path recorded";
    } else if (::stat(path.c_str(), &st) != 0) {
      e->error = std::strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
      e->error = "not a regular file";
    } else {
      auto f = std::make_unique<File>();
      f->dwfl = dwfl_begin(&kOfflineCallbacks);
      if (!f->dwfl) {
        e->error = dwfl_errmsg(-1);
      } else {
        std::string name = base_name(path);
        f->mod = dwfl_report_elf(f->dwfl, name.c_str(), path.c_str(), -1, 0, false);
        dwfl_report_end(f->dwfl, nullptr, nullptr);
        if (!f->mod) {
          e->error = dwfl_errmsg(-1);
        } else {
          const unsigned char *bits = nullptr;
          GElf_Addr vaddr = 0;
          int len = dwfl_module_build_id(f->mod, &bits, &vaddr);
          if (len > 0) f->build_id.assign(bits, bits + len);
          e->file = std::move(f);
        }
      }
    }
    it = files_.emplace(path, std::move(e)).first;
  }
  error = it->second->error;
  return it->second->file.get();
}

// ---- Symbolizer

struct Symbolizer::ModuleState {
  DebugInfoCache::File *file = nullptr;  // null: placeholders only
  bool stale = false;
};

Symbolizer::Symbolizer(std::vector<Module> modules, std::shared_ptr<DebugInfoCache> cache, WarningSink warn)
    : modules_(std::move(modules)),
      cache_(cache ? std::move(cache) : std::make_shared<DebugInfoCache>()),
      warn_(warn ? std::move(warn) : [](const std::string &msg) { std::cerr << "hcct: warning: " << msg << "\n"; }) {
  states_.resize(modules_.size());
  module_map_ = ModuleMap(modules_);
}

Symbolizer::~Symbolizer() = default;

const Module *Symbolizer::module_of(uint64_t address) const {
  // Recorded order decides between overlapping ranges (a dlclose'd module and a later one at the
  // same addresses): the format cannot tell which one an address came from.
  int64_t i = module_map_.find(address);
  return i < 0 ? nullptr : &modules_[size_t(i)];
}

namespace {
std::string dir_name(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}
}  // namespace

// Where the file of `m` may be, in the order of the header's list; the recorded path first.
std::vector<std::string> Symbolizer::candidate_paths(const Module &m) const {
  std::vector<std::string> paths{m.path};
  if (m.build_id.empty() || m.path.empty()) return paths;  // nothing to verify another file by
  const std::string name = base_name(m.path);
  auto add = [&](const std::string &p) {
    if (std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(p);
  };
  for (const std::string &dir : cache_->search_dirs()) add(dir + "/" + name);
  if (!modules_.empty() && !modules_[0].path.empty() && modules_[0].path[0] == '/')
    add(dir_name(modules_[0].path) + "/" + name);
  std::string id = hex_bytes(m.build_id);
  if (id.size() > 2) add("/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug");
  return paths;
}

Symbolizer::ModuleState &Symbolizer::state(const Module &m) {
  size_t i = size_t(&m - modules_.data());
  if (states_[i]) return *states_[i];
  auto s = std::make_unique<ModuleState>();
  const std::string shown = m.path.empty() ? std::string("module #") + std::to_string(i) : m.path;
  std::string recorded_error;                      // why the recorded path did not serve
  const std::vector<uint8_t> *other_id = nullptr;  // a different file's build-id at the recorded path
  for (const std::string &path : candidate_paths(m)) {
    std::string error;
    DebugInfoCache::File *file = cache_->open(path, error);
    const bool recorded = path == m.path;
    if (file && (m.build_id.empty() || file->build_id == m.build_id)) {
      s->file = file;
      break;
    }
    if (recorded) {
      recorded_error = file ? "another build-id" : error;
      if (file) other_id = &file->build_id;
    }
  }
  if (!s->file && other_id) {
    s->stale = true;
    warn_(m.path + " was rebuilt or replaced since the profile was taken (build-id " +
          (other_id->empty() ? std::string("none") : hex_bytes(*other_id)) + ", recorded " + hex_bytes(m.build_id) +
          "); it is not used, and no file with the recorded build-id was found (HCCT_MODULE_PATH); its "
          "addresses are shown as " + base_name(m.path) + "+offset (stale binary)");
  } else if (!s->file) {
    std::string hint = m.build_id.empty()
                           ? std::string(" (recorded without a build-id: looked for at that path only)")
                           : "; no file with its build-id " + hex_bytes(m.build_id) +
                                 " in HCCT_MODULE_PATH, the executable's directory or /usr/lib/debug/.build-id";
    warn_("cannot read " + shown + " (" + recorded_error + ")" + hint + "; its addresses are shown as " +
          base_name(m.path) + "+offset");
  }
  states_[i] = std::move(s);
  return *states_[i];
}

Symbol Symbolizer::lookup(uint64_t address, uint64_t probe) {
  Symbol s;
  s.address = address;
  s.module = module_of(probe);
  if (!s.module) {
    s.function = address_placeholder(nullptr, address);
    return s;
  }
  s.offset = address - s.module->bias;
  s.function = address_placeholder(s.module, address);
  ModuleState &st = state(*s.module);
  s.stale = st.stale;
  if (!st.file || st.stale) return s;

  Dwfl_Module *mod = st.file->mod;
  const uint64_t addr = probe - s.module->bias;  // link-time address: the module was reported at base 0

  GElf_Off sym_off = 0;
  GElf_Sym sym;
  if (const char *name = dwfl_module_addrinfo(mod, addr, &sym_off, &sym, nullptr, nullptr, nullptr)) {
    // A piece gcc split off (f.part.0, f.cold, clones) is shown as the function it came from.
    s.function = source_function_name(demangle(name));
    s.resolved = true;
  }
  SourceFrame here;
  Dwarf_Addr bias = 0;
  Dwarf_Die *cu = st.file->unit_of(addr, &bias);
  if (Dwarf_Line *line = cu ? dwarf_getsrc_die(cu, addr - bias) : nullptr) {
    int lineno = 0, col = 0;
    if (const char *file = dwarf_linesrc(line, nullptr, nullptr)) {
      dwarf_lineno(line, &lineno);
      dwarf_linecol(line, &col);
      here.file = file;
      here.line = uint32_t(lineno > 0 ? lineno : 0);
      here.column = uint32_t(col > 0 ? col : 0);
    }
  }
  s.file = here.file;
  s.line = here.line;
  s.column = here.column;

  for (Dwarf_Die &die : scope_chain(cu, bias, addr)) {
    int tag = dwarf_tag(&die);
    if (tag == DW_TAG_inlined_subroutine) {
      s.frames.push_back({die_name(&die), here.file, here.line, here.column});
      call_location(&die, here);
    } else if (tag == DW_TAG_subprogram) {
      s.frames.push_back({die_name(&die), here.file, here.line, here.column});
      break;
    }
  }
  if (s.frames.empty()) {
    if (s.resolved) s.frames.push_back({s.function, here.file, here.line, here.column});
  } else if (s.resolved) {
    // The ELF symbol's demangled name carries the full qualification and parameters.
    s.frames.back().function = s.function;
  } else if (!s.frames.back().function.empty()) {
    s.function = s.frames.back().function;
    s.resolved = true;
  }
  return s;
}

const Symbol &Symbolizer::call_site(uint64_t return_address) {
  auto it = sites_.find(return_address);
  if (it != sites_.end()) return it->second;
  // The return address is the instruction after the call; one byte back lies inside the call.
  uint64_t probe = return_address ? return_address - 1 : 0;
  return sites_.emplace(return_address, lookup(return_address, probe)).first->second;
}

const Symbol &Symbolizer::routine(uint64_t address) {
  auto it = routines_.find(address);
  if (it != routines_.end()) return it->second;
  Symbol s = lookup(address, address);
  // At an entry address the line table may already point into inlined code; the routine's own
  // location is its definition (DW_AT_decl_file/line of the out-of-line subprogram).
  if (s.module && !s.stale) {
    ModuleState &st = state(*s.module);
    if (st.file) {
      uint64_t addr = address - s.module->bias;
      Dwarf_Addr bias = 0;
      for (Dwarf_Die &die : scope_chain(st.file->unit_of(addr, &bias), bias, addr)) {
        if (dwarf_tag(&die) != DW_TAG_subprogram) continue;
        int line = 0;
        const char *file = dwarf_decl_file(&die);
        if (file && dwarf_decl_line(&die, &line) == 0 && line > 0) {
          s.file = file;
          s.line = uint32_t(line);
          s.column = 0;
        }
        break;
      }
    }
  }
  if (!s.frames.empty()) {
    s.frames.erase(s.frames.begin(), s.frames.end() - 1);
    s.frames[0].file = s.file;
    s.frames[0].line = s.line;
    s.frames[0].column = s.column;
  }
  return routines_.emplace(address, std::move(s)).first->second;
}

}  // namespace hcct::analysis
