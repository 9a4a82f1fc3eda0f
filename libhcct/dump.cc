#include "dump.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "hcct/format.h"
#include "hcct/meta_keys.h"
#include "messages.h"
#include "spin_lock.h"

namespace hcct::rt {

namespace fmt = hcct::format;

// ---------------------------------------------------------------------------------------------
// ByteBuffer

HCCT_NOINST ByteBuffer::~ByteBuffer() { unmap_pages(data_, capacity_); }

namespace {

HCCT_NOINST bool pwrite_all(int fd, const void *data, size_t n, size_t offset) {
  const char *p = static_cast<const char *>(data);
  while (n) {
    ssize_t w = pwrite(fd, p, n, off_t(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= size_t(w);
    offset += size_t(w);
  }
  return true;
}

}  // namespace

HCCT_NOINST bool ByteBuffer::flush() {
  if (!ok_) return false;
  if (fd_ < 0 || !size_) return true;
  if (!pwrite_all(fd_, data_, size_, base_ + spilled_)) {
    error_ = errno ? errno : EIO;
    return ok_ = false;
  }
  spilled_ += size_;
  size_ = 0;
  return true;
}

HCCT_NOINST bool ByteBuffer::patch(size_t offset, const void *data, size_t n) {
  if (!ok_) return false;
  const auto *bytes = static_cast<const unsigned char *>(data);
  if (offset < spilled_) {  // the part already in the file
    size_t in_file = spilled_ - offset < n ? spilled_ - offset : n;
    if (!pwrite_all(fd_, bytes, in_file, base_ + offset)) {
      error_ = errno ? errno : EIO;
      return ok_ = false;
    }
    offset += in_file;
    bytes += in_file;
    n -= in_file;
  }
  if (n) memcpy(data_ + (offset - spilled_), bytes, n);
  return true;
}

HCCT_NOINST bool ByteBuffer::append(const void *data, size_t n) {
  if (!ok_) return false;
  if (fd_ >= 0 && size_ + n > kSpillBytes && size_ && !flush()) return false;
  if (size_ + n > capacity_) {
    size_t want = capacity_ ? capacity_ : 64 * 1024;
    while (want < size_ + n) want *= 2;
    void *p = data_ ? remap_pages(data_, capacity_, want) : map_pages(want);
    if (!p) return ok_ = false;
    data_ = static_cast<unsigned char *>(p);
    capacity_ = want;
  }
  memcpy(data_ + size_, data, n);
  size_ += n;
  return true;
}

HCCT_NOINST bool ByteBuffer::append_varint(uint64_t v) {
  unsigned char tmp[fmt::kMaxVarintBytes];
  return append(tmp, fmt::encode_varint(v, tmp));
}

HCCT_NOINST bool ByteBuffer::append_pair(const char *key, const char *value) {
  return append(key, strlen(key) + 1) && append(value, strlen(value) + 1);
}

HCCT_NOINST bool ByteBuffer::append_pair(const char *key, uint64_t value) {
  char text[24];
  snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(value));
  return append_pair(key, text);
}

HCCT_NOINST bool ByteBuffer::append_pair_double(const char *key, double value) {
  char text[40];
  snprintf(text, sizeof text, "%.17g", value);
  return append_pair(key, text);
}

// ---------------------------------------------------------------------------------------------
// DumpFile

HCCT_NOINST void DumpFile::begin_section(uint32_t tag) {
  section_start_ = payload_.size();
  payload_.append_u32(tag);
  payload_.append_u32(0);
  payload_.append_u64(0);  // patched by end_section
}

HCCT_NOINST void DumpFile::end_section() {
  if (!payload_.ok()) return;
  uint64_t length = payload_.size() - section_start_ - 16;
  if (payload_.patch(section_start_ + 8, &length, 8)) ++sections_;
}

// The temporary is the writer's own (its tid in the name) and created exclusively: a file or a
// symlink planted under that name is removed, never written through; rename() replaces a planted
// final name itself, never what it points to.
namespace {
constexpr size_t kProfilePathSize = kMaxPath + 64;
HCCT_NOINST void profile_path(char (&path)[kProfilePathSize], const char *dir, int pid, uint32_t seq) {
  snprintf(path, sizeof path, "%s/%d.%u%s", dir, pid, seq, fmt::kFileSuffix);
}
}  // namespace

HCCT_NOINST bool profile_file_exists(const char *dir, int pid, uint32_t seq) {
  char path[kProfilePathSize];
  profile_path(path, dir, pid, seq);
  struct stat st;
  return lstat(path, &st) == 0;
}

HCCT_NOINST int DumpFile::open(const char *dir, int pid, uint32_t seq) {
  profile_path(final_path_, dir, pid, seq);
  snprintf(tmp_path_, sizeof tmp_path_, "%s/.%d.%u%s.%ld.tmp", dir, pid, seq, fmt::kFileSuffix,
           long(syscall(SYS_gettid)));
  constexpr int kCreate = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(tmp_path_, kCreate, 0644);
  if (fd < 0 && errno == EEXIST && unlink(tmp_path_) == 0) fd = ::open(tmp_path_, kCreate, 0644);
  if (fd < 0) return errno ? errno : EIO;
  fd_ = fd;
  payload_.spill_to(fd_, fmt::kHeaderSize);  // the header is written last, by commit
  return 0;
}

HCCT_NOINST DumpFile::~DumpFile() {
  if (fd_ < 0) return;
  close(fd_);
  unlink(tmp_path_);
}

// The payload's hash covers bytes patched after they were spilled: it is computed over the file
// as written, read back through the buffer's own memory.
HCCT_NOINST int DumpFile::commit() {
  if (fd_ < 0) return EBADF;
  if (!payload_.flush()) return failure();
  uint64_t payload_size = payload_.size();
  fmt::Fnv1a64 hash;
  unsigned char *chunk = payload_.data();  // empty after the flush; null if nothing was appended
  for (size_t done = 0; done < payload_size;) {
    size_t left = payload_size - done;
    size_t want = left < payload_.capacity() ? left : payload_.capacity();
    ssize_t r = pread(fd_, chunk, want, off_t(fmt::kHeaderSize + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r < 0 ? errno : EIO;
    hash.update(chunk, size_t(r));
    done += size_t(r);
  }
  unsigned char header[fmt::kHeaderSize];
  memcpy(header, fmt::kMagic, 8);
  uint32_t version = fmt::kVersion;
  memcpy(header + 8, &version, 4);
  memcpy(header + 12, &sections_, 4);
  memcpy(header + 16, &payload_size, 8);
  memcpy(header + 24, &hash.state, 8);
  bool ok = pwrite_all(fd_, header, sizeof header, 0);
  int err = ok ? 0 : errno;
  int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && rename(tmp_path_, final_path_) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) unlink(tmp_path_);
  return ok ? 0 : (err ? err : EIO);
}

namespace {

// Canonical decimal (no sign, no leading zeros); advances `*p` past it.
HCCT_NOINST bool parse_decimal(const char **p, uint64_t *out) {
  const char *s = *p;
  if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9')) return false;
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; ++s) {
    if (v > (~uint64_t(0) - 9) / 10) return false;
    v = v * 10 + uint64_t(*s - '0');
  }
  *out = v;
  *p = s;
  return true;
}

// "<pid>.<seq>.hcct" from `name`; the rest of the name after the suffix in `*rest`.
HCCT_NOINST bool parse_name_core(const char *name, DumpName *out, const char **rest) {
  const char *p = name;
  if (!parse_decimal(&p, &out->pid) || *p++ != '.' || !parse_decimal(&p, &out->seq)) return false;
  size_t suffix = strlen(fmt::kFileSuffix);
  if (strncmp(p, fmt::kFileSuffix, suffix) != 0) return false;
  *rest = p + suffix;
  return true;
}

}  // namespace

HCCT_NOINST bool parse_profile_name(const char *name, DumpName *out) {
  const char *rest = nullptr;
  return parse_name_core(name, out, &rest) && *rest == 0;
}

HCCT_NOINST bool parse_temporary_name(const char *name, DumpName *out) {
  const char *rest = nullptr;
  if (name[0] != '.' || !parse_name_core(name + 1, out, &rest)) return false;
  size_t n = strlen(rest);
  return n >= 4 && strcmp(rest + n - 4, ".tmp") == 0;  // also the older `.<pid>.<seq>.hcct.tmp`
}

// ---------------------------------------------------------------------------------------------
// Module map

namespace meta = format::meta;

namespace {

constexpr size_t kMaxBuildId = 64;

struct Module {
  uint64_t bias, lo, hi;
  uintptr_t tag;  // nonzero once retired: the module is written at its addresses ORed with it
  char path[kMaxPath];
  uint8_t build_id_size;
  unsigned char build_id[kMaxBuildId];
};

// Modules seen before a dlclose, kept for the rest of the run (mmap'd array, grows by remap).
Module *g_unloaded = nullptr;
size_t g_unloaded_count = 0;
size_t g_unloaded_capacity = 0;
SpinLock g_unloaded_lock{};

// Retired ranges. Tags are multiples of 2^47, above every user-space address of x86-64's and
// AArch64's 4-level page tables (the kernel maps above 2^47 only when asked to), so a tagged
// address can never be code's. Entries are written before g_retired_count publishes them and never
// change, so threads read them without the lock. A fixed array (untouched BSS costs nothing): a
// program that unloads more libraries than this is told once that later code at their addresses
// shares their contexts.
constexpr unsigned kTagShift = 47;
constexpr uintptr_t kUserTop = uintptr_t(1) << kTagShift;
constexpr uint32_t kMaxRetired = 16384;
RetiredRange g_retired[kMaxRetired];

HCCT_NOINST void read_build_id(const dl_phdr_info *info, Module *m) {
  m->build_id_size = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char *p = reinterpret_cast<const char *>(info->dlpi_addr + ph.p_vaddr);
    const char *end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto *note = reinterpret_cast<const ElfW(Nhdr) *>(p);
      const char *name = p + sizeof(ElfW(Nhdr));
      const char *desc = name + ((note->n_namesz + 3) & ~3u);
      const char *next = desc + ((note->n_descsz + 3) & ~3u);
      if (next > end || next <= p) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
          note->n_descsz <= kMaxBuildId) {
        memcpy(m->build_id, desc, note->n_descsz);
        m->build_id_size = uint8_t(note->n_descsz);
        return;
      }
      p = next;
    }
  }
}

// Parses a hexadecimal number at `*p`, advancing past it.
HCCT_NOINST uint64_t parse_hex(const char **p, const char *end) {
  uint64_t v = 0;
  for (; *p < end; ++*p) {
    char c = **p;
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) break;
    v = v * 16 + uint64_t(digit);
  }
  return v;
}

// If the /proc/self/maps line [line, end) maps `addr` from a file, copies its path to `path`.
HCCT_NOINST bool path_of_maps_line(const char *line, const char *end, uint64_t addr, char *path, size_t size) {
  const char *p = line;
  uint64_t lo = parse_hex(&p, end);
  if (p == end || *p != '-') return false;
  ++p;
  uint64_t hi = parse_hex(&p, end);
  if (addr < lo || addr >= hi) return false;
  // Four more fields (perms, offset, dev, inode), then spaces, then the path.
  for (int field = 0; field < 4; ++field) {
    while (p < end && *p == ' ') ++p;
    while (p < end && *p != ' ') ++p;
  }
  while (p < end && *p == ' ') ++p;
  size_t len = size_t(end - p);
  // A file removed since it was mapped: its name then, so that a reader can look for it by name.
  constexpr char kDeleted[] = " (deleted)";
  constexpr size_t kDeletedLen = sizeof kDeleted - 1;
  if (len > kDeletedLen && memcmp(end - kDeletedLen, kDeleted, kDeletedLen) == 0) len -= kDeletedLen;
  if (len == 0 || *p != '/' || len >= size) return false;
  memcpy(path, p, len);
  path[len] = 0;
  return true;
}

// The path of the file mapped at `addr` as the kernel names it: absolute, whatever the working
// directory was when the loader opened it or is now. Reads /proc/self/maps into mmap'd memory
// (never the program's malloc); false if it cannot tell.
HCCT_NOINST bool mapped_file_path(uint64_t addr, char *path, size_t size) {
  constexpr size_t kBufferBytes = 64 * 1024;  // more than a line can hold (a path is < kMaxPath)
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char *buf = static_cast<char *>(map_pages(kBufferBytes));
  bool found = false;
  size_t held = 0;
  while (buf && !found) {
    ssize_t n = read(fd, buf + held, kBufferBytes - held);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    held += size_t(n);
    char *line = buf, *end = buf + held;
    for (char *nl; !found && (nl = static_cast<char *>(memchr(line, '\n', size_t(end - line)))) != nullptr;
         line = nl + 1)
      found = path_of_maps_line(line, nl, addr, path, size);
    held = size_t(end - line);
    if (held == kBufferBytes) break;  // no line is that long
    memmove(buf, line, held);
  }
  if (buf) unmap_pages(buf, kBufferBytes);
  close(fd);
  return found;
}

// An object the loader opened by a relative name (dlopen("./libfoo.so"), a relative
// LD_LIBRARY_PATH entry) keeps that name in dlpi_name; a reader in another directory could not find
// it. Its absolute path: the kernel's name of its mapping, else (no /proc) the working directory
// now joined with the name.
HCCT_NOINST void absolute_module_path(const char *name, uint64_t lo, char *path, size_t size) {
  if (mapped_file_path(lo, path, size)) return;
  while (name[0] == '.' && name[1] == '/') name += 2;
  char cwd[kMaxPath];
  if (getcwd(cwd, sizeof cwd) && snprintf(path, size, "%s/%s", cwd, name) < int(size)) return;
  snprintf(path, size, "%s", name);
}

HCCT_NOINST bool describe(const dl_phdr_info *info, Module *m) {
  m->bias = info->dlpi_addr;
  m->tag = 0;
  m->lo = ~uint64_t(0);
  m->hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uint64_t lo = info->dlpi_addr + ph.p_vaddr;
    if (lo < m->lo) m->lo = lo;
    if (lo + ph.p_memsz > m->hi) m->hi = lo + ph.p_memsz;
  }
  if (m->lo >= m->hi) return false;
  const char *name = info->dlpi_name;
  if (!name || !*name) {
    // The main program: its real path, so the symbolizer finds it from any directory.
    ssize_t n = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
    m->path[n > 0 ? n : 0] = 0;
  } else if (name[0] != '/' && strchr(name, '/')) {
    absolute_module_path(name, m->lo, m->path, sizeof m->path);
  } else {
    // Absolute already, or a name without a file (the vDSO: "linux-vdso.so.1").
    snprintf(m->path, sizeof m->path, "%s", name);
  }
  read_build_id(info, m);
  return true;
}

// `tag`: the module's retired tag, or 0 to list it where it was loaded.
HCCT_NOINST bool append_module(ByteBuffer &out, const Module &m, uintptr_t tag = 0) {
  size_t len = strlen(m.path);
  // A retired module where its retired addresses are: (a | tag) - (bias + tag) = a - bias.
  return out.append_u64(m.bias + tag) && out.append_u64(m.lo | tag) && out.append_u64(m.hi | tag) &&
         out.append_u16(uint16_t(len)) && out.append(m.path, len) &&
         out.append_u8(m.build_id_size) && out.append(m.build_id, m.build_id_size);
}

struct ModuleWalk {
  ByteBuffer *out;
  uint32_t count;
  Module scratch;
};

HCCT_NOINST int emit_loaded(dl_phdr_info *info, size_t, void *arg) {
  auto *walk = static_cast<ModuleWalk *>(arg);
  if (describe(info, &walk->scratch) && append_module(*walk->out, walk->scratch)) ++walk->count;
  return 0;
}

HCCT_NOINST int remember_loaded(dl_phdr_info *info, size_t, void *arg) {
  Module *m = static_cast<Module *>(arg);
  if (!describe(info, m)) return 0;
  for (size_t i = 0; i < g_unloaded_count; ++i)
    if (!g_unloaded[i].tag && g_unloaded[i].lo == m->lo && strcmp(g_unloaded[i].path, m->path) == 0)
      return 0;
  if (g_unloaded_count == g_unloaded_capacity) {
    size_t want = g_unloaded_capacity ? 2 * g_unloaded_capacity : 16;
    void *p = g_unloaded ? remap_pages(g_unloaded, g_unloaded_capacity * sizeof(Module),
                                       want * sizeof(Module))
                         : map_pages(want * sizeof(Module));
    if (!p) return 1;
    g_unloaded = static_cast<Module *>(p);
    g_unloaded_capacity = want;
  }
  g_unloaded[g_unloaded_count++] = *m;
  return 0;
}

struct LoadedCheck {
  const Module *m;
  bool found;
  Module scratch;
};

HCCT_NOINST int find_loaded(dl_phdr_info *info, size_t, void *arg) {
  auto *check = static_cast<LoadedCheck *>(arg);
  if (describe(info, &check->scratch) && check->scratch.lo == check->m->lo &&
      strcmp(check->scratch.path, check->m->path) == 0) {
    check->found = true;
    return 1;
  }
  return 0;
}

// Under g_unloaded_lock.
HCCT_NOINST bool is_loaded(const Module &m) {
  LoadedCheck check{&m, false, {}};
  dl_iterate_phdr(find_loaded, &check);
  return check.found;
}

HCCT_NOINST bool write_modules(DumpFile &file, uint32_t retired_seen) {
  ByteBuffer &out = file.body();
  file.begin_section(fmt::kTagModules);
  size_t count_at = out.size();
  out.append_u32(0);
  ModuleWalk walk{&out, 0, {}};
  // Every dl_iterate_phdr of the runtime runs under this lock, which fork's prepare handler takes:
  // glibc's fork does not reset the loader's lock that dl_iterate_phdr holds, so a child forked
  // while another thread was dumping would wait for it for ever at its own dump.
  acquire(&g_unloaded_lock);
  dl_iterate_phdr(emit_loaded, &walk);
  for (size_t i = 0; i < g_unloaded_count; ++i) {
    // A module retired after the tree was last moved (the thread was caught up, then another
    // thread's dlclose retired it while this file was being written) is where the tree has it.
    const Module &m = g_unloaded[i];
    uintptr_t tag = (m.tag >> kTagShift) <= retired_seen ? m.tag : 0;
    if ((tag || !is_loaded(m)) && append_module(out, m, tag)) ++walk.count;
  }
  release(&g_unloaded_lock);
  if (!out.ok()) return false;
  out.patch(count_at, &walk.count, 4);
  file.end_section();
  return true;
}

// ---------------------------------------------------------------------------------------------
// The tree, in preorder. Iterative (trees may be a million levels deep); the preorder index of
// each ancestor on the current branch is kept in an mmap'd array.

class IndexStack {
 public:
  ~IndexStack() { unmap_pages(data_, capacity_ * sizeof(uint64_t)); }
  HCCT_NOINST bool set(size_t depth, uint64_t value) {
    if (depth >= capacity_) {
      size_t want = capacity_ ? 2 * capacity_ : 1024;
      while (want <= depth) want *= 2;
      void *p = data_ ? remap_pages(data_, capacity_ * sizeof(uint64_t), want * sizeof(uint64_t))
                      : map_pages(want * sizeof(uint64_t));
      if (!p) return false;
      data_ = static_cast<uint64_t *>(p);
      capacity_ = want;
    }
    data_[depth] = value;
    return true;
  }
  uint64_t get(size_t depth) const { return data_[depth]; }

 private:
  uint64_t *data_ = nullptr;
  size_t capacity_ = 0;
};

constexpr uint32_t kOnPathMark = 2;  // spare low bit of Node::parent_bits, set only while dumping

// From the deepest node up: on a coroutine's stack the path goes on above the stack's own frames.
HCCT_NOINST void mark_path(const ThreadProfile &profile, bool on) {
  for (Node *n = profile.path_leaf(); n->parent(); n = n->parent())
    n->parent_bits = on ? (n->parent_bits | kOnPathMark) : (n->parent_bits & ~kOnPathMark);
}

// The nodes reachable from the root (the root included), counted by the same walk as write_tree.
HCCT_NOINST uint64_t count_reachable(const Node *root) {
  uint64_t n = 1;
  const Node *node = root;
  for (;;) {
    if (node->first_child()) {
      node = node->first_child();
    } else {
      while (node != root && !node->next_sibling()) node = node->parent();
      if (node == root) return n;
      node = node->next_sibling();
    }
    ++n;
  }
}

// `interrupted`: an event of the thread was cut short by the signal handler that is writing this,
// so the node count may be mid-update; the walk counts what is linked.
HCCT_NOINST bool write_tree(DumpFile &file, const ThreadProfile &profile, bool interrupted,
                            uint64_t *nodes, uint64_t *max_depth) {
  ByteBuffer &out = file.body();
  file.begin_section(fmt::kTagTree);
  uint64_t expected = interrupted ? count_reachable(profile.root()) - 1 : profile.live_nodes();
  out.append_varint(expected + 1);
  const Node *root = profile.root();
  IndexStack path;
  uint64_t index = 0;
  size_t depth = 0, deepest = 0;
  // Root: delta 0, routine 0, site 0, count 0, flags: on the path (the root always is).
  out.append_varint(0);
  out.append_varint(0);
  out.append_varint(0);
  out.append_varint(0);
  out.append_u8(fmt::kNodeOnPath);
  if (!path.set(0, 0)) return false;
  const Node *node = root;
  for (;;) {
    if (node->first_child()) {
      node = node->first_child();
      ++depth;
    } else {
      while (node != root && !node->next_sibling()) {
        node = node->parent();
        --depth;
      }
      if (node == root) break;
      node = node->next_sibling();
    }
    ++index;
    if (depth > deepest) deepest = depth;
    if (!path.set(depth, index)) return false;
    uint8_t flags = 0;
    if (profile.mode() == Mode::kHcct && node->monitored()) flags |= fmt::kNodeMonitored;
    if (node->parent_bits & kOnPathMark) flags |= fmt::kNodeOnPath;
    out.append_varint(index - path.get(depth - 1));
    out.append_varint(node->routine);
    out.append_varint(node->call_site);
    out.append_varint(profile.mode() == Mode::kHcct && !node->monitored() ? 0 : profile.count_of(node));
    out.append_u8(flags);
  }
  if (!out.ok() || index != expected) return false;
  file.end_section();
  *nodes = index + 1;
  *max_depth = deepest;
  return true;
}

// The TIME section: (preorder index delta, samples) of every node with samples, in the order of
// write_tree's walk (the same walk, so the indexes are the CCT section's).
template <typename Visit>
HCCT_NOINST void walk_samples(const ThreadProfile &profile, Visit &&visit) {
  const Node *root = profile.root();
  const Node *node = root;
  uint64_t index = 0;
  if (uint64_t n = profile.node_samples(root)) visit(index, n);
  for (;;) {
    if (node->first_child()) {
      node = node->first_child();
    } else {
      while (node != root && !node->next_sibling()) node = node->parent();
      if (node == root) return;
      node = node->next_sibling();
    }
    ++index;
    if (uint64_t n = profile.node_samples(node)) visit(index, n);
  }
}

HCCT_NOINST bool write_time(DumpFile &file, const ThreadProfile &profile) {
  ByteBuffer &out = file.body();
  file.begin_section(fmt::kTagTime);
  uint64_t entries = 0;
  walk_samples(profile, [&](uint64_t, uint64_t) { ++entries; });
  out.append_varint(entries);
  uint64_t previous = 0;
  walk_samples(profile, [&](uint64_t index, uint64_t n) {
    out.append_varint(index - previous);
    out.append_varint(n);
    previous = index;
  });
  file.end_section();
  return out.ok();
}

// The command line as it was at start-up (a program may rewrite its argv, setproctitle-style).
char g_command[8192];

HCCT_NOINST void append_cmdline(ByteBuffer &out) {
  if (!g_command[0]) remember_command();
  out.append_pair(meta::kCmdline.name, g_command);
}

}  // namespace

HCCT_NOINST void lock_module_list() { acquire(&g_unloaded_lock); }
HCCT_NOINST void unlock_module_list() { release(&g_unloaded_lock); }

HCCT_NOINST void remember_modules_before_unload() {
  Module scratch;
  acquire(&g_unloaded_lock);
  dl_iterate_phdr(remember_loaded, &scratch);
  release(&g_unloaded_lock);
}

uint32_t g_retired_count = 0;

HCCT_NOINST bool retire_unloaded_modules() {
  static bool said_full = false;
  bool retired = false;
  acquire(&g_unloaded_lock);
  uint32_t count = g_retired_count;
  for (size_t i = 0; i < g_unloaded_count; ++i) {
    Module &m = g_unloaded[i];
    if (m.tag || m.hi > kUserTop || is_loaded(m)) continue;
    if (count == kMaxRetired) {
      if (!said_full)
        say("hcct: more than %u libraries were unloaded: code loaded later at their addresses "
            "shares their contexts\n", kMaxRetired);
      said_full = true;
      break;
    }
    m.tag = uintptr_t(count + 1) << kTagShift;
    g_retired[count++] = RetiredRange{m.lo, m.hi, m.tag};
    retired = true;
  }
  // Sequentially consistent: a thread that sees its epochs reset by the caller's kick then sees the
  // new count (runtime.cc, kick_threads).
  __atomic_store_n(&g_retired_count, count, __ATOMIC_SEQ_CST);
  release(&g_unloaded_lock);
  return retired;
}

HCCT_NOINST const RetiredRange &retired_range(uint32_t i) { return g_retired[i]; }

HCCT_NOINST bool retired_since(uintptr_t address, uint32_t since) {
  for (uint32_t i = since, n = retired_count(); i < n; ++i)
    if (g_retired[i].lo <= address && address < g_retired[i].hi) return true;
  return false;
}

HCCT_NOINST void remember_command() {
  char *buf = g_command;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof g_command - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) n = 0;
  while (n > 0 && buf[n - 1] == 0) --n;
  for (ssize_t i = 0; i < n; ++i)
    if (buf[i] == 0) buf[i] = fmt::kArgSeparator;
  buf[n] = 0;
}

HCCT_NOINST uint64_t wall_clock_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

HCCT_NOINST bool write_profile_sections(DumpFile &file, const ThreadProfile &profile,
                                        const ThreadMeta &meta, const BurstMeta *burst) {
  uint64_t nodes = 0, max_depth = 0;
  mark_path(profile, true);
  bool tree_ok = write_tree(file, profile, meta.interrupted, &nodes, &max_depth) &&
                 (!profile.timed() || write_time(file, profile));
  mark_path(profile, false);
  if (!tree_ok) return false;

  ByteBuffer &out = file.body();
  file.begin_section(fmt::kTagMeta);
  out.append_pair(meta::kRuntime.name, "hcct " HCCT_VERSION);
  out.append_pair(meta::kPid.name, uint64_t(meta.pid));
  out.append_pair(meta::kPpid.name, uint64_t(meta.ppid));
  out.append_pair(meta::kThreadSeq.name, meta.seq);
  out.append_pair(meta::kTid.name, uint64_t(meta.tid));
  out.append_pair(meta::kStatus.name, meta.live_at_exit ? "live-at-exit" : "exited");
  out.append_pair(meta::kMode.name, mode_name(profile.mode()));
  out.append_pair(meta::kKey.name, profile.key() == KeyBy::kSite ? "site" : "routine");
  if (profile.mode() == Mode::kHcct) {
    out.append_pair_double(meta::kEpsilon.name, profile.epsilon());
    out.append_pair(meta::kCounters.name, profile.counters());
    out.append_pair(meta::kMinCount.name, profile.min_count());
  }
  out.append_pair(meta::kCalls.name, profile.calls());
  out.append_pair(meta::kDropped.name, meta.dropped);
  out.append_pair(meta::kLost.name, profile.lost_events());
  out.append_pair(meta::kUnmatchedExits.name, profile.unmatched_exits());
  out.append_pair(meta::kMaxDepth.name, max_depth);
  out.append_pair(meta::kTreeBytes.name, profile.tree_bytes());
  out.append_pair(meta::kNodesPeak.name, profile.peak_nodes() + 1);
  char exe[kMaxPath];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  out.append_pair(meta::kExe.name, exe);
  append_cmdline(out);
  out.append_pair(meta::kStartNs.name, meta.start_ns);
  out.append_pair(meta::kEndNs.name, wall_clock_ns());
  if (profile.timed()) {
    out.append_pair(meta::kTime.name, meta.time_clock);
    out.append_pair(meta::kSamplePeriodNs.name, meta.sample_period_ns);
    out.append_pair(meta::kSamples.name, profile.samples());
    out.append_pair(meta::kSamplesLost.name, meta.samples_lost + profile.samples_in_sink());
    if (profile.mode() == Mode::kHcct) out.append_pair(meta::kTimeMinCount.name, profile.min_samples());
  }
  if (burst) {
    // The profile saw the events of bursts only; sampled_fraction = calls / events (or, when not
    // every event reached the runtime, the fraction of time in bursts). Readers scale counts by
    // 1 / sampled_fraction.
    out.append_pair(meta::kBurst.name, burst->kind);
    out.append_pair(meta::kBurstSync.name, burst->sync);
    out.append_pair(meta::kBurstClock.name, burst->clock);
    out.append_pair(meta::kBurstIntervalNs.name, burst->interval_ns);
    out.append_pair(meta::kBurstLengthNs.name, burst->length_ns);
    out.append_pair(meta::kBursts.name, burst->bursts);
    out.append_pair_double(meta::kBurstTimeFraction.name, burst->time_fraction);
    out.append_pair(meta::kUnwindFrames.name, burst->unwind_frames);
    out.append_pair(meta::kUnwindFramesReused.name, burst->unwind_frames_reused);
    out.append_pair(meta::kUnwindFramesByRules.name, burst->unwind_frames_by_rules);
    uint64_t sampled = profile.calls() + profile.lost_events();
    if (burst->events_known) {
      out.append_pair(meta::kEvents.name, burst->events);
      out.append_pair_double(meta::kSampledFraction.name,
                             burst->events ? double(sampled) / double(burst->events) : 1.0);
      out.append_pair(meta::kSampledFractionBasis.name, "events");
    } else {
      out.append_pair_double(meta::kSampledFraction.name, burst->time_fraction);
      out.append_pair(meta::kSampledFractionBasis.name, "time");
    }
  }
  file.end_section();

  return write_modules(file, meta.retired_seen) && out.ok();
}

}  // namespace hcct::rt
