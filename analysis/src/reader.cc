#include "hcct/analysis/reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <system_error>

#include "byte_cursor.h"
#include "hcct/analysis/text.h"
#include "hcct/format.h"
#include "hcct/meta_keys.h"

namespace hcct::analysis {
namespace meta = format::meta;

namespace {

// Smallest encodings, used to bound counts read from the file by the bytes that remain before
// anything is reserved: a module is 8+8+8+2+1 bytes, a node four 1-byte varints and a flag byte.
constexpr size_t kMinModuleBytes = 27;
constexpr size_t kMinNodeBytes = 5;
constexpr size_t kSectionHeaderBytes = 16;

std::string tag_name(uint32_t tag) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    unsigned char c = static_cast<unsigned char>(tag >> (8 * i));
    if (c >= 0x20 && c < 0x7f) {
      s += char(c);
    } else {
      return hex(tag);
    }
  }
  return "'" + s + "'";
}

[[noreturn]] void fail(const std::string &file, const std::string &problem) {
  throw FormatError(file + ": " + problem);
}

// Decimal, no sign, no spaces, fits in 64 bits.
bool parse_u64(std::string_view s, uint64_t &out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 10);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// ---- META

class MetaReader {
 public:
  MetaReader(const std::string &file, std::span<const unsigned char> body) : file_(file) {
    ByteCursor c(body, file, "META");
    while (!c.done()) {
      std::string_view key = c.cstring("key");
      std::string_view value = c.cstring(("value of key '" + std::string(key) + "'").c_str());
      if (key.empty()) c.fail("empty key");
      if (!entries_.emplace(std::string(key), Entry{std::string(value), order_++}).second)
        c.fail("duplicate key '" + std::string(key) + "'");
    }
  }

  ThreadMeta take() {
    ThreadMeta m;
    m.runtime = text(meta::kRuntime);
    m.pid = number(meta::kPid);
    m.ppid = number(meta::kPpid);
    m.thread_seq = number(meta::kThreadSeq);
    m.tid = number(meta::kTid);
    {
      std::string s = text(meta::kStatus);
      if (s == "exited") m.status = ThreadStatus::exited;
      else if (s == "live-at-exit") m.status = ThreadStatus::live_at_exit;
      else bad(meta::kStatus.name, s);
    }
    {
      std::string s = text(meta::kMode);
      if (s == "cct") m.mode = Mode::cct;
      else if (s == "hcct") m.mode = Mode::hcct;
      else if (s == "empty") m.mode = Mode::empty;
      else bad(meta::kMode.name, s);
    }
    {
      std::string s = text(meta::kKey);
      if (s == "site") m.key = KeyKind::site;
      else if (s == "routine") m.key = KeyKind::routine;
      else bad(meta::kKey.name, s);
    }
    if (m.mode == Mode::hcct) {
      std::string e = text(meta::kEpsilon);
      double eps = 0;
      auto [ptr, ec] = std::from_chars(e.data(), e.data() + e.size(), eps);
      // The negated comparison also rejects NaN.
      if (e.empty() || ec != std::errc() || ptr != e.data() + e.size() || !(eps > 0 && eps <= 1))
        bad(meta::kEpsilon.name, e);
      m.epsilon = eps;
      m.counters = number(meta::kCounters);
      if (m.counters == 0) bad(meta::kCounters.name, "0");
      m.min_count = number(meta::kMinCount);
    }
    m.calls = number(meta::kCalls);
    m.dropped = number(meta::kDropped);
    m.lost = number(meta::kLost);
    m.unmatched_exits = number(meta::kUnmatchedExits);
    m.max_depth = number(meta::kMaxDepth);
    m.tree_bytes = number(meta::kTreeBytes);
    m.nodes_peak = number(meta::kNodesPeak);
    m.exe = text(meta::kExe);
    {
      std::string cmd = text(meta::kCmdline);
      if (!cmd.empty()) {
        size_t start = 0;
        for (;;) {
          size_t sep = cmd.find(format::kArgSeparator, start);
          m.cmdline.push_back(cmd.substr(start, sep - start));
          if (sep == std::string::npos) break;
          start = sep + 1;
        }
      }
    }
    m.start_ns = number(meta::kStartNs);
    m.end_ns = number(meta::kEndNs);
    if (entries_.count(meta::kTime.name)) {
      m.time = text(meta::kTime);
      if (m.time != "cpu" && m.time != "wall") bad(meta::kTime.name, m.time);
      m.sample_period_ns = number(meta::kSamplePeriodNs);
      if (m.sample_period_ns == 0) bad(meta::kSamplePeriodNs.name, "0");
      m.samples = number(meta::kSamples);
      m.samples_lost = number(meta::kSamplesLost);
      if (m.mode == Mode::hcct) m.time_min_count = number(meta::kTimeMinCount);
    }

    // What is left is unknown to this reader: keep it, in file order, for tools and the writer.
    std::vector<std::pair<size_t, std::pair<std::string, std::string>>> rest;
    for (auto &[k, e] : entries_) rest.push_back({e.order, {k, std::move(e.value)}});
    std::sort(rest.begin(), rest.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    for (auto &r : rest) m.extra.push_back(std::move(r.second));
    return m;
  }

 private:
  struct Entry {
    std::string value;
    size_t order;
  };

  std::string text(const meta::Key &key) { return text(key.name); }
  // A key older runtimes did not write reads as 0.
  uint64_t number(const meta::Key &key) {
    if (key.presence == meta::Presence::kOptional && !entries_.count(key.name)) return 0;
    return number(key.name);
  }
  std::string text(const char *key) {
    auto it = entries_.find(key);
    if (it == entries_.end()) fail(file_, std::string("META: missing key '") + key + "'");
    std::string v = std::move(it->second.value);
    entries_.erase(it);
    return v;
  }
  uint64_t number(const char *key) {
    std::string v = text(key);
    uint64_t n;
    if (!parse_u64(v, n)) bad(key, v);
    return n;
  }
  [[noreturn]] void bad(const char *key, const std::string &value) {
    std::string shown = value.size() > 40 ? value.substr(0, 40) + "..." : value;
    fail(file_, std::string("META: invalid value '") + shown + "' for key '" + key + "'");
  }

  const std::string &file_;
  std::map<std::string, Entry, std::less<>> entries_;
  size_t order_ = 0;
};

// ---- MODS

std::vector<Module> read_modules(const std::string &file, std::span<const unsigned char> body) {
  ByteCursor c(body, file, "MODS");
  uint32_t count = c.fixed<uint32_t>("module count");
  if (count > c.remaining() / kMinModuleBytes)
    c.fail("module count " + std::to_string(count) + " exceeds what the section can hold");
  std::vector<Module> mods(count);
  for (uint32_t i = 0; i < count; ++i) {
    c.set_where("MODS: module " + std::to_string(i));
    Module &m = mods[i];
    m.bias = c.fixed<uint64_t>("load bias");
    m.lo = c.fixed<uint64_t>("low address");
    m.hi = c.fixed<uint64_t>("high address");
    if (m.lo > m.hi) c.fail("address range " + hex(m.lo) + " > " + hex(m.hi));
    uint16_t path_len = c.fixed<uint16_t>("path length");
    auto path = c.bytes(path_len, "path");
    m.path.assign(path.begin(), path.end());
    uint8_t id_len = c.fixed<uint8_t>("build-id length");
    auto id = c.bytes(id_len, "build-id");
    m.build_id.assign(id.begin(), id.end());
  }
  if (!c.done()) c.fail(std::to_string(c.remaining()) + " bytes after the last module");
  return mods;
}

// ---- CCT

// The per-node rules of docs/FORMAT.md ("Validation rules"), shared by the in-memory reader and
// ProfileStream. Nodes are fed in file order; `path_` holds the previous node and its ancestors
// (index and flags), which is all that true preorder and the on-path rule need.
class NodeChecker {
 public:
  explicit NodeChecker(const ThreadMeta &meta) : meta_(meta) {}

  // Checks node `i` (routine, call site, count and flags filled in), sets its parent. `fail` takes
  // the problem text and does not return.
  template <class Fail>
  void check(uint64_t i, uint64_t delta, Node &n, Fail &&fail) {
    // Messages are built only on failure: this runs for every node of 10^7-node trees.
    auto node_fail = [&](const std::string &problem) { fail("node " + std::to_string(i) + ": " + problem); };
    if (n.flags & ~format::kNodeKnownFlags) node_fail("unknown flag bits " + hex(n.flags & ~format::kNodeKnownFlags));
    if (i == 0) {
      if (delta != 0) node_fail("the root has parent delta " + std::to_string(delta) + ", not 0");
      if (n.routine || n.call_site || n.count) node_fail("the root must have routine, call site and count 0");
      if (n.monitored()) node_fail("the root is marked monitored");
      n.parent = 0;
      path_.push_back({0, n.flags});
      return;
    }
    if (delta == 0) node_fail("a second root (parent delta 0)");
    if (delta > i) node_fail("parent delta " + std::to_string(delta) + " points before the root");
    n.parent = uint32_t(i - delta);
    // Preorder: the parent is the previous node or one of its ancestors.
    while (!path_.empty() && path_.back().index != n.parent) path_.pop_back();
    if (path_.empty())
      node_fail("parent " + std::to_string(n.parent) + " is not on the path of the previous node (not preorder)");
    if (meta_.key == KeyKind::routine && n.call_site != 0)
      node_fail("call site " + hex(n.call_site) + " in a key=routine tree");
    if (n.monitored()) {
      if (meta_.mode != Mode::hcct) node_fail("monitored flag outside hcct mode");
      ++monitored_;
    } else if (meta_.mode == Mode::hcct && n.count != 0) {
      node_fail("unmonitored node with nonzero count " + std::to_string(n.count));
    }
    if (n.on_path() && n.parent != kRoot && !(path_.back().flags & format::kNodeOnPath))
      node_fail("on the calling path but its parent is not");
    if (__builtin_add_overflow(sum_, n.count, &sum_)) node_fail("counts overflow 64 bits");
    path_.push_back({uint32_t(i), n.flags});
  }

  // The totals, once every node was checked.
  void finish(const std::string &file) const {
    if (meta_.mode == Mode::cct && sum_ != meta_.calls)
      fail(file, "cct mode: node counts sum to " + std::to_string(sum_) + ", but calls is " + std::to_string(meta_.calls));
    if (meta_.mode == Mode::hcct) {
      if (monitored_ > meta_.counters)
        fail(file, "hcct mode: " + std::to_string(monitored_) + " monitored nodes, but only " +
                       std::to_string(meta_.counters) + " counters");
      // Space-Saving's counters always sum to the stream length once they are all in use.
      if (sum_ > meta_.calls || (monitored_ == meta_.counters && sum_ != meta_.calls))
        fail(file, "hcct mode: monitored counts sum to " + std::to_string(sum_) + ", but calls is " +
                       std::to_string(meta_.calls));
    }
  }

 private:
  struct PathEntry {
    uint32_t index;
    uint8_t flags;
  };
  const ThreadMeta &meta_;
  std::vector<PathEntry> path_;
  uint64_t sum_ = 0;
  uint64_t monitored_ = 0;
};

std::vector<Node> read_tree(const std::string &file, std::span<const unsigned char> body, const ThreadMeta &meta) {
  ByteCursor c(body, file, "CCT");
  uint64_t count = c.varint("node count");
  if (count == 0) c.fail("no nodes (the root is required)");
  if (count > c.remaining() / kMinNodeBytes)
    c.fail("node count " + std::to_string(count) + " exceeds what the section's " +
           std::to_string(c.remaining()) + " bytes can hold");
  if (count > UINT32_MAX) c.fail("node count " + std::to_string(count) + " exceeds 2^32-1");

  std::vector<Node> nodes(count);
  NodeChecker checker(meta);
  auto fail_here = [&](const std::string &problem) { c.fail(problem); };
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t delta = c.varint("parent delta");
    Node &n = nodes[i];
    n.routine = c.varint("routine");
    n.call_site = c.varint("call site");
    n.count = c.varint("count");
    n.flags = c.fixed<uint8_t>("flags");
    checker.check(i, delta, n, fail_here);
  }
  if (!c.done()) c.fail(std::to_string(c.remaining()) + " bytes after the last node");
  checker.finish(file);
  return nodes;
}

// Reads a regular file completely. read() rather than mmap: a file truncated by someone else while
// we read it then yields a short buffer (caught by the size check) instead of SIGBUS.
std::vector<unsigned char> slurp(const std::filesystem::path &path) {
  const std::string name = path.string();
  int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw IoError(name + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) throw IoError(name + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw IoError(name + ": not a regular file");
  // One spare byte tells a file that grew since fstat from one that did not.
  std::vector<unsigned char> buf(size_t(st.st_size) + 1);
  size_t have = 0;
  while (have < buf.size()) {
    ssize_t n = ::read(fd, buf.data() + have, buf.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(name + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    have += size_t(n);
  }
  if (have == buf.size()) throw IoError(name + ": file grew while being read");
  buf.resize(have);
  return buf;
}

}  // namespace

namespace {

struct HeaderInfo {
  uint32_t version;
  uint32_t nsections;
  uint64_t payload_size;
  uint64_t hash;
};

// The 32-byte header of a file of `file_size` bytes (at least 32).
HeaderInfo check_header(std::span<const unsigned char> header, uint64_t file_size, const std::string &name) {
  ByteCursor h(header.first(format::kHeaderSize), name, "header");
  auto magic = h.bytes(8, "magic");
  if (!std::equal(magic.begin(), magic.end(), format::kMagic)) fail(name, "not an hcct dump (bad magic)");
  uint32_t version = h.fixed<uint32_t>("version");
  if (version < format::kOldestVersion || version > format::kVersion)
    fail(name, "unsupported format version " + std::to_string(version) + " (this reader knows " +
                   std::to_string(format::kOldestVersion) + " to " + std::to_string(format::kVersion) + ")");
  HeaderInfo info;
  info.version = version;
  info.nsections = h.fixed<uint32_t>("section count");
  info.payload_size = h.fixed<uint64_t>("payload size");
  info.hash = h.fixed<uint64_t>("hash");
  const uint64_t actual = file_size - format::kHeaderSize;
  if (info.payload_size != actual)
    fail(name, "header says " + std::to_string(info.payload_size) + " payload bytes, the file has " +
                   std::to_string(actual) + (info.payload_size > actual ? " (truncated)" : " (trailing garbage)"));
  return info;
}

// Where the known sections' bodies lie, as offsets into the payload.
struct Layout {
  uint64_t meta_off = 0, meta_len = 0, mods_off = 0, mods_len = 0, tree_off = 0, tree_len = 0;
  bool have_time = false;
  uint64_t time_off = 0, time_len = 0;
};

// Walks the section headers. `read_header(offset, out16)` copies the 16 header bytes at a payload
// offset (the caller has checked that they lie inside the payload).
template <class ReadHeader>
Layout walk_sections(const HeaderInfo &info, const std::string &name, ReadHeader &&read_header) {
  Layout l;
  bool have_meta = false, have_mods = false, have_tree = false;
  uint64_t pos = 0;
  for (uint32_t s = 0; s < info.nsections; ++s) {
    const std::string where = "section " + std::to_string(s);
    if (info.payload_size - pos < kSectionHeaderBytes)
      fail(name, where + ": truncated section header (payload ends early)");
    unsigned char raw[kSectionHeaderBytes];
    read_header(pos, raw);
    ByteCursor c(std::span<const unsigned char>(raw, kSectionHeaderBytes), name, where);
    uint32_t tag = c.fixed<uint32_t>("tag");
    uint32_t reserved = c.fixed<uint32_t>("reserved");
    uint64_t len = c.fixed<uint64_t>("length");
    pos += kSectionHeaderBytes;
    if (reserved != 0) c.fail(tag_name(tag) + ": reserved field is " + std::to_string(reserved) + ", not 0");
    if (len > info.payload_size - pos)
      c.fail(tag_name(tag) + ": length " + std::to_string(len) + " runs past the payload end");
    auto take = [&](bool &have, uint64_t &off, uint64_t &length) {
      if (have) c.fail("duplicate " + tag_name(tag) + " section");
      have = true;
      off = pos;
      length = len;
    };
    if (tag == format::kTagMeta) take(have_meta, l.meta_off, l.meta_len);
    else if (tag == format::kTagModules) take(have_mods, l.mods_off, l.mods_len);
    else if (tag == format::kTagTree) take(have_tree, l.tree_off, l.tree_len);
    else if (tag == format::kTagTime && info.version >= 2) take(l.have_time, l.time_off, l.time_len);
    // Other tags are later additions that do not change the known sections: skipped.
    pos += len;
  }
  if (pos != info.payload_size)
    fail(name, std::to_string(info.payload_size - pos) + " payload bytes after the " +
                   std::to_string(info.nsections) + " sections the header announces");
  if (!have_meta) fail(name, "missing META section");
  if (!have_mods) fail(name, "missing MODS section");
  if (!have_tree) fail(name, "missing 'CCT ' section");
  return l;
}

// The TIME section (docs/FORMAT.md): (index delta, samples) pairs, indexes strictly increasing
// below the node count, every value at least 1, their sum META `samples`.
std::vector<std::pair<uint32_t, uint64_t>> read_time(const std::string &name, bool have,
                                                     std::span<const unsigned char> body, const ThreadMeta &m,
                                                     uint64_t node_count) {
  if (!have) fail(name, "META has a time metric but there is no TIME section");
  if (!m.timed()) fail(name, "TIME section without META 'time'");
  ByteCursor c(body, name, "TIME");
  uint64_t entries = c.varint("entry count");
  if (entries > node_count) c.fail("entry count " + std::to_string(entries) + " exceeds the node count");
  if (entries > body.size() / 2) c.fail("entry count " + std::to_string(entries) + " exceeds what the section can hold");
  std::vector<std::pair<uint32_t, uint64_t>> out;
  out.reserve(size_t(entries));
  uint64_t index = 0, sum = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    uint64_t delta = c.varint("index delta");
    if (e > 0 && delta == 0) c.fail("entry " + std::to_string(e) + ": index does not increase");
    if (delta >= node_count - index) c.fail("entry " + std::to_string(e) + ": node index out of range");
    index += delta;
    uint64_t n = c.varint("samples");
    if (n == 0) c.fail("entry " + std::to_string(e) + ": zero samples");
    if (sum + n < sum) c.fail("samples overflow");
    sum += n;
    out.emplace_back(uint32_t(index), n);
  }
  if (c.remaining() != 0) c.fail("bytes after the last entry");
  if (sum != m.samples)
    c.fail("samples sum to " + std::to_string(sum) + ", META 'samples' says " + std::to_string(m.samples));
  return out;
}

}  // namespace

ThreadProfile parse_profile(std::span<const unsigned char> bytes, const std::string &name) {
  if (bytes.size() < format::kHeaderSize)
    fail(name, "file is " + std::to_string(bytes.size()) + " bytes, shorter than the 32-byte header");
  HeaderInfo info = check_header(bytes, bytes.size(), name);
  auto payload = bytes.subspan(format::kHeaderSize);
  format::Fnv1a64 fnv;
  fnv.update(payload.data(), payload.size());
  if (fnv.state != info.hash) fail(name, "payload hash mismatch (corrupt file)");
  Layout l = walk_sections(info, name, [&](uint64_t off, unsigned char *out) {
    std::memcpy(out, payload.data() + off, kSectionHeaderBytes);
  });
  ThreadProfile p;
  p.source = name;
  p.meta = MetaReader(name, payload.subspan(l.meta_off, l.meta_len)).take();
  p.modules = read_modules(name, payload.subspan(l.mods_off, l.mods_len));
  p.nodes = read_tree(name, payload.subspan(l.tree_off, l.tree_len), p.meta);
  if (p.meta.timed() || l.have_time) {
    p.samples.assign(p.nodes.size(), 0);
    for (const auto &[index, n] : read_time(name, l.have_time, payload.subspan(l.time_off, l.time_len), p.meta,
                                            p.nodes.size()))
      p.samples[index] = n;
  }
  return p;
}

ThreadProfile read_profile(const std::filesystem::path &file) {
  std::vector<unsigned char> bytes = slurp(file);
  return parse_profile(bytes, file.string());
}

// ---- ProfileStream

struct ProfileStream::Impl {
  std::string name;
  int fd = -1;
  uint64_t file_size = 0;
  HeaderInfo info{};
  Layout layout;
  ThreadMeta meta;
  std::vector<Module> modules;
  std::vector<std::pair<uint32_t, uint64_t>> time;
  std::unique_ptr<NodeChecker> checker;
  format::Fnv1a64 fnv;
  // Sequential read of the payload: every byte is hashed exactly once, when it enters the buffer.
  std::vector<unsigned char> buf;
  size_t head = 0, tail = 0;  // unconsumed bytes [head, tail) of buf
  uint64_t read_off = 0;      // payload bytes read (and hashed) so far
  uint64_t body_left = 0;     // CCT body bytes not yet consumed
  uint64_t count = 0, index = 0;
  bool finished = false;

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }

  void pread_exact(uint64_t payload_off, unsigned char *out, size_t n) {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd, out + done, n - done, off_t(format::kHeaderSize + payload_off + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw IoError(name + ": " + std::strerror(errno));
      }
      if (r == 0) throw IoError(name + ": file shrank while being read");
      done += size_t(r);
    }
  }

  // Reads more payload into the buffer (keeping the unconsumed bytes); false at the payload end.
  bool refill() {
    if (read_off == info.payload_size) return false;
    if (head > 0) {
      std::memmove(buf.data(), buf.data() + head, tail - head);
      tail -= head;
      head = 0;
    }
    size_t want = size_t(std::min<uint64_t>(buf.size() - tail, info.payload_size - read_off));
    size_t got = 0;
    while (got < want) {
      ssize_t r = ::pread(fd, buf.data() + tail + got, want - got, off_t(format::kHeaderSize + read_off + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw IoError(name + ": " + std::strerror(errno));
      }
      if (r == 0) throw IoError(name + ": file shrank while being read");
      got += size_t(r);
    }
    fnv.update(buf.data() + tail, got);
    tail += got;
    read_off += got;
    return true;
  }

  // Consumes (hashing) everything up to payload offset `target`.
  void skip_to(uint64_t target) {
    for (;;) {
      uint64_t at = read_off - (tail - head);  // payload offset of buf[head]
      if (at + (tail - head) >= target) {
        head += size_t(target - at);
        return;
      }
      head = tail;
      if (!refill()) return;
    }
  }

  // At least `n` unconsumed bytes, unless the payload ends first.
  void ensure(size_t n) {
    while (tail - head < n && refill()) {
    }
  }

  [[noreturn]] void tree_fail(const std::string &problem) const { throw FormatError(name + ": CCT: " + problem); }

  uint64_t varint(const unsigned char *&p, const unsigned char *end, const char *what) const {
    uint64_t v;
    size_t n = format::decode_varint(p, end, &v);
    if (n == 0) tree_fail(std::string("malformed varint (truncated, over 10 bytes or over 64 bits) for ") + what);
    p += n;
    return v;
  }

  void finish() {
    if (body_left) tree_fail(std::to_string(body_left) + " bytes after the last node");
    head = tail;
    while (refill()) head = tail;
    if (fnv.state != info.hash) fail(name, "payload hash mismatch (corrupt file)");
    checker->finish(name);
    finished = true;
  }
};

ProfileStream::ProfileStream(const std::filesystem::path &file, size_t buffer_bytes) : d_(std::make_unique<Impl>()) {
  Impl &d = *d_;
  d.name = file.string();
  d.fd = ::open(d.name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (d.fd < 0) throw IoError(d.name + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(d.fd, &st) != 0) throw IoError(d.name + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw IoError(d.name + ": not a regular file");
  d.file_size = uint64_t(st.st_size);
  if (d.file_size < format::kHeaderSize)
    fail(d.name, "file is " + std::to_string(d.file_size) + " bytes, shorter than the 32-byte header");
  unsigned char header[format::kHeaderSize];
  ssize_t r;
  do r = ::pread(d.fd, header, sizeof header, 0);
  while (r < 0 && errno == EINTR);
  if (r != ssize_t(sizeof header)) throw IoError(d.name + ": cannot read the header");
  d.info = check_header(header, d.file_size, d.name);
  d.layout = walk_sections(d.info, d.name, [&](uint64_t off, unsigned char *out) { d.pread_exact(off, out, kSectionHeaderBytes); });
  // META and MODS are small; they are read (and structurally checked) before the nodes. The hash
  // over everything is compared when the last node has been read.
  std::vector<unsigned char> meta(d.layout.meta_len), mods(d.layout.mods_len);
  d.pread_exact(d.layout.meta_off, meta.data(), meta.size());
  d.pread_exact(d.layout.mods_off, mods.data(), mods.size());
  d.meta = MetaReader(d.name, meta).take();
  d.modules = read_modules(d.name, mods);
  if (d.meta.timed() || d.layout.have_time) {
    // Small (one entry per sampled context): read before the nodes, like META. The node count is
    // not known yet; indexes are checked against it once it is.
    std::vector<unsigned char> time(d.layout.time_len);
    d.pread_exact(d.layout.time_off, time.data(), time.size());
    d.time = read_time(d.name, d.layout.have_time, time, d.meta, UINT32_MAX);
  }
  d.checker = std::make_unique<NodeChecker>(d.meta);

  d.buf.resize(std::max<size_t>(buffer_bytes, 4 * format::kMaxVarintBytes + 1));
  d.skip_to(d.layout.tree_off);
  d.body_left = d.layout.tree_len;
  d.ensure(format::kMaxVarintBytes);
  const unsigned char *p = d.buf.data() + d.head;
  const unsigned char *end = p + std::min<uint64_t>(d.tail - d.head, d.body_left);
  d.count = d.varint(p, end, "node count");
  size_t used = size_t(p - (d.buf.data() + d.head));
  d.head += used;
  d.body_left -= used;
  if (d.count == 0) d.tree_fail("no nodes (the root is required)");
  if (d.count > d.body_left / kMinNodeBytes)
    d.tree_fail("node count " + std::to_string(d.count) + " exceeds what the section's " +
                std::to_string(d.body_left) + " bytes can hold");
  if (d.count > UINT32_MAX) d.tree_fail("node count " + std::to_string(d.count) + " exceeds 2^32-1");
  if (!d.time.empty() && d.time.back().first >= d.count)
    fail(d.name, "TIME: node index " + std::to_string(d.time.back().first) + " out of range");
}

ProfileStream::~ProfileStream() = default;

const std::string &ProfileStream::source() const { return d_->name; }
const ThreadMeta &ProfileStream::meta() const { return d_->meta; }
const std::vector<Module> &ProfileStream::modules() const { return d_->modules; }
uint64_t ProfileStream::node_count() const { return d_->count; }
const std::vector<std::pair<uint32_t, uint64_t>> &ProfileStream::time_samples() const { return d_->time; }
uint64_t ProfileStream::nodes_read() const { return d_->index; }
uint64_t ProfileStream::file_size() const { return d_->file_size; }
uint64_t ProfileStream::bytes_read() const { return format::kHeaderSize + d_->read_off; }

bool ProfileStream::next(Node &n) {
  Impl &d = *d_;
  if (d.index == d.count) {
    if (!d.finished) d.finish();
    return false;
  }
  d.ensure(4 * format::kMaxVarintBytes + 1);
  const unsigned char *start = d.buf.data() + d.head;
  const unsigned char *p = start;
  const unsigned char *end = p + std::min<uint64_t>(d.tail - d.head, d.body_left);
  uint64_t delta = d.varint(p, end, "parent delta");
  n.routine = d.varint(p, end, "routine");
  n.call_site = d.varint(p, end, "call site");
  n.count = d.varint(p, end, "count");
  if (p == end) d.tree_fail("truncated flags");
  n.flags = *p++;
  n.parent = 0;
  d.head += size_t(p - start);
  d.body_left -= uint64_t(p - start);
  d.checker->check(d.index, delta, n, [&](const std::string &problem) { d.tree_fail(problem); });
  ++d.index;
  return true;
}

std::optional<ProfileFileName> parse_profile_file_name(std::string_view name) {
  constexpr std::string_view suffix = format::kFileSuffix;
  if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) return std::nullopt;
  name.remove_suffix(suffix.size());
  size_t dot = name.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view pid = name.substr(0, dot), seq = name.substr(dot + 1);
  // Canonical decimal only (no leading zeros), so that two names never denote one thread.
  auto canonical = [](std::string_view s, uint64_t &v) {
    if (s.empty() || (s.size() > 1 && s[0] == '0')) return false;
    if (!std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) return false;
    return parse_u64(s, v);
  };
  ProfileFileName r{};
  if (!canonical(pid, r.pid) || !canonical(seq, r.seq)) return std::nullopt;
  return r;
}

std::vector<ProfileFile> list_profiles(const std::filesystem::path &where) {
  namespace fs = std::filesystem;
  const std::string location = where.string();
  std::error_code ec;
  fs::file_status st = fs::status(where, ec);
  if (ec) throw IoError(location + ": " + ec.message());
  std::vector<ProfileFile> found;
  if (!fs::is_directory(st)) {
    ProfileFile f;
    f.path = where;
    if (auto id = parse_profile_file_name(where.filename().string())) {
      f.pid = id->pid;
      f.seq = id->seq;
    } else {
      ProfileStream s(where);
      f.pid = s.meta().pid;
      f.seq = s.meta().thread_seq;
    }
    found.push_back(std::move(f));
    return found;
  }
  fs::directory_iterator it(where, ec);
  if (ec) throw IoError(location + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw IoError(location + ": " + ec.message());
    std::string fname = it->path().filename().string();
    if (fname.empty() || fname[0] == '.') continue;  // temporaries of writers in progress
    if (auto id = parse_profile_file_name(fname)) found.push_back({id->pid, id->seq, it->path()});
  }
  if (ec) throw IoError(location + ": " + ec.message());
  if (found.empty()) throw IoError(location + ": no profile files (<pid>.<thread>.hcct) in this directory");
  std::sort(found.begin(), found.end(), [](const ProfileFile &a, const ProfileFile &b) {
    return std::pair(a.pid, a.seq) < std::pair(b.pid, b.seq);
  });
  return found;
}

ProfileSet read_profiles(const std::filesystem::path &where) {
  namespace fs = std::filesystem;
  ProfileSet set;
  set.location = where.string();
  std::error_code ec;
  fs::file_status st = fs::status(where, ec);
  if (ec) throw IoError(set.location + ": " + ec.message());

  if (!fs::is_directory(st)) {
    ThreadProfile t = read_profile(where);
    Process p;
    p.pid = t.meta.pid;
    p.threads.push_back(std::move(t));
    set.processes.push_back(std::move(p));
    return set;
  }

  for (const ProfileFile &f : list_profiles(where)) {
    ThreadProfile t = read_profile(f.path);
    if (t.meta.pid != f.pid || t.meta.thread_seq != f.seq)
      fail(t.source, "META says pid " + std::to_string(t.meta.pid) + " thread_seq " +
                         std::to_string(t.meta.thread_seq) + ", the file name says otherwise");
    if (set.processes.empty() || set.processes.back().pid != f.pid) {
      set.processes.emplace_back();
      set.processes.back().pid = f.pid;
    }
    set.processes.back().threads.push_back(std::move(t));
  }
  return set;
}

}  // namespace hcct::analysis
