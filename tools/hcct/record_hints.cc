#include "record_hints.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>

namespace hcct::cli {
namespace {

// An open file descriptor and the libelf handle on it.
class ElfFile {
 public:
  explicit ElfFile(const std::string &path) {
    fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0 || elf_version(EV_CURRENT) == EV_NONE) return;
    elf_ = elf_begin(fd_, ELF_C_READ, nullptr);
    if (elf_ && elf_kind(elf_) != ELF_K_ELF) {
      elf_end(elf_);
      elf_ = nullptr;
    }
  }
  ~ElfFile() {
    if (elf_) elf_end(elf_);
    if (fd_ >= 0) close(fd_);
  }
  ElfFile(const ElfFile &) = delete;
  ElfFile &operator=(const ElfFile &) = delete;
  Elf *get() const { return elf_; }

 private:
  int fd_ = -1;
  Elf *elf_ = nullptr;
};

// What the program's file tells about how the runtime can reach it.
struct ProgramFacts {
  bool elf = false;
  bool has_interpreter = false;  // PT_INTERP: the dynamic loader runs it, and honours LD_PRELOAD
  bool calls_cyg_probes = false;   // references __cyg_profile_func_enter (-finstrument-functions)
  bool defines_cyg_probes = false;  // and defines it itself
  bool calls_plugin_probes = false;  // references __hcct_enter* (the GCC plugin)
};

ProgramFacts inspect(const std::string &path) {
  ProgramFacts facts;
  ElfFile file(path);
  Elf *elf = file.get();
  if (!elf) return facts;
  facts.elf = true;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) == 0) {
    for (size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, int(i), &ph) && ph.p_type == PT_INTERP) facts.has_interpreter = true;
    }
  }
  for (Elf_Scn *scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize) continue;
    Elf_Data *data = elf_getdata(scn, nullptr);
    if (!data) continue;
    size_t count = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, int(i), &sym)) break;
      const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (!name) continue;
      if (std::strcmp(name, "__cyg_profile_func_enter") == 0) {
        facts.calls_cyg_probes = true;
        if (sym.st_shndx != SHN_UNDEF) facts.defines_cyg_probes = true;
      } else if (std::strncmp(name, "__hcct_enter", 12) == 0) {
        facts.calls_plugin_probes = true;
      }
    }
  }
  return facts;
}

// PROG as execvp finds it: a name with a '/' as it is, else the first executable file in PATH.
std::optional<std::string> locate(const std::string &program) {
  if (program.find('/') != std::string::npos) return program;
  const char *env = std::getenv("PATH");
  std::string path = env ? env : "/bin:/usr/bin";
  for (size_t start = 0; start <= path.size();) {
    size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = colon > start ? path.substr(start, colon - start) : ".";
    std::string candidate = dir + "/" + program;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = colon + 1;
  }
  return std::nullopt;
}

// The kernel runs the program in secure-execution mode (AT_SECURE), where the loader ignores
// LD_PRELOAD (but for libraries in the standard directories marked set-user-ID): set-user-ID or
// set-group-ID to someone else, or with file capabilities, on a file system that honours them.
std::string secure_execution_reason(const std::string &path) {
  struct stat st;
  struct statvfs fs;
  if (stat(path.c_str(), &st) != 0) return {};
  if (statvfs(path.c_str(), &fs) == 0 && (fs.f_flag & ST_NOSUID)) return {};
  if ((st.st_mode & S_ISUID) && st.st_uid != getuid()) return "set-user-ID";
  if ((st.st_mode & S_ISGID) && st.st_gid != getgid()) return "set-group-ID";
  if (getxattr(path.c_str(), "security.capability", nullptr, 0) > 0) return "given file capabilities";
  return {};
}

bool is_script(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char magic[2] = {};
  return in.read(magic, 2) && magic[0] == '#' && magic[1] == '!';
}

}  // namespace

std::string explain_missing_profile(const std::string &program, int wait_status) {
  std::string killed;
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    killed = program + " was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) +
             ") before the runtime could write (profiles are written when threads and the process end "
             "normally; abort and fatal signals write nothing)";
  }
  std::optional<std::string> path = locate(program);
  if (!path) return killed.empty() ? "cannot tell why: " + program + " was not found to inspect" : killed;
  if (is_script(*path))
    return killed.empty() ? program + " is a script: none of the programs it ran wrote a profile (are they "
                                      "instrumented with -finstrument-functions or the hcct GCC plugin?)"
                          : killed;
  ProgramFacts facts = inspect(*path);
  if (!facts.elf) return killed.empty() ? "cannot tell why: " + program + " is not an ELF file" : killed;
  if (!facts.has_interpreter)
    return program + " is statically linked: LD_PRELOAD cannot load the runtime into it (link it with "
                     "libhcct.a instead, docs/RUNTIME.md)";
  if (std::string why = secure_execution_reason(*path); !why.empty())
    return program + " is " + why + ": the loader ignores LD_PRELOAD for it, so the runtime was not loaded";
  if (facts.defines_cyg_probes)
    return program + " defines __cyg_profile_func_enter itself: its calls go to its own hooks, not to the "
                     "runtime's";
  if (!facts.calls_cyg_probes && !facts.calls_plugin_probes)
    return program + " is not instrumented: it references neither __cyg_profile_func_enter "
                     "(-finstrument-functions) nor __hcct_enter (the hcct GCC plugin); programs it runs are "
                     "profiled only if they are";
  if (!killed.empty()) return killed;
  return program + " is instrumented but wrote no profile: see the runtime's message above, if any (a bad "
                   "option or an unwritable directory); a process that ends with _exit or exec writes nothing";
}

}  // namespace hcct::cli
