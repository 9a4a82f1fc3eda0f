#include "hcct/analysis/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
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

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string base_name(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

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
std::vector<Dwarf_Die> scope_chain(Dwfl_Module *mod, uint64_t addr) {
  std::vector<Dwarf_Die> chain;
  Dwarf_Addr bias = 0;
  Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
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
};

struct DebugInfoCache::Entry {
  std::unique_ptr<File> file;
  std::string error;
};

DebugInfoCache::DebugInfoCache() = default;
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

Symbolizer::ModuleState &Symbolizer::state(const Module &m) {
  size_t i = size_t(&m - modules_.data());
  if (!states_[i]) {
    auto s = std::make_unique<ModuleState>();
    std::string error;
    s->file = cache_->open(m.path, error);
    if (!s->file) {
      warn_("cannot read " + (m.path.empty() ? std::string("module #") + std::to_string(i) : m.path) + " (" + error +
            "); its addresses are shown as " + base_name(m.path) + "+offset");
    } else if (!m.build_id.empty() && !s->file->build_id.empty() && m.build_id != s->file->build_id) {
      s->stale = true;
      warn_(m.path + " was rebuilt since the profile was taken (build-id " + hex_bytes(s->file->build_id) +
            ", recorded " + hex_bytes(m.build_id) + "); its addresses are shown as " + base_name(m.path) +
            "+offset (stale binary)");
    }
    states_[i] = std::move(s);
  }
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
    s.function = demangle(name);
    s.resolved = true;
  }
  SourceFrame here;
  if (Dwfl_Line *line = dwfl_module_getsrc(mod, addr)) {
    int lineno = 0, col = 0;
    if (const char *file = dwfl_lineinfo(line, nullptr, &lineno, &col, nullptr, nullptr)) {
      here.file = file;
      here.line = uint32_t(lineno > 0 ? lineno : 0);
      here.column = uint32_t(col > 0 ? col : 0);
    }
  }
  s.file = here.file;
  s.line = here.line;
  s.column = here.column;

  for (Dwarf_Die &die : scope_chain(mod, addr)) {
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
      for (Dwarf_Die &die : scope_chain(st.file->mod, address - s.module->bias)) {
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
