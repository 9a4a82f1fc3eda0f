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

#include "hcct/format.h"

namespace hcct::analysis {
namespace {

// Smallest encodings, used to bound counts read from the file by the bytes that remain before
// anything is reserved: a module is 8+8+8+2+1 bytes, a node four 1-byte varints and a flag byte.
constexpr size_t kMinModuleBytes = 27;
constexpr size_t kMinNodeBytes = 5;
constexpr size_t kSectionHeaderBytes = 16;

std::string hex(uint64_t v) {
  char buf[19];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, 16);
  (void)ec;
  return "0x" + std::string(buf, end);
}

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

// Bounds-checked little-endian reading of one region; every failure names the file and region.
class Cursor {
 public:
  Cursor(std::span<const unsigned char> bytes, const std::string &file, std::string where)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()), file_(file), where_(std::move(where)) {}

  size_t remaining() const { return size_t(end_ - p_); }
  bool done() const { return p_ == end_; }

  [[noreturn]] void fail(const std::string &problem) const {
    throw FormatError(file_ + ": " + where_ + ": " + problem);
  }

  template <class T>
  T fixed(const char *what) {
    if (remaining() < sizeof(T)) fail(std::string("truncated ") + what);
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= T(p_[i]) << (8 * i);
    p_ += sizeof(T);
    return v;
  }

  uint64_t varint(const char *what) {
    uint64_t v;
    size_t n = format::decode_varint(p_, end_, &v);
    if (n == 0) fail(std::string("malformed varint (truncated, over 10 bytes or over 64 bits) for ") + what);
    p_ += n;
    return v;
  }

  std::span<const unsigned char> bytes(size_t n, const char *what) {
    if (remaining() < n) fail(std::string("truncated ") + what);
    std::span<const unsigned char> s(p_, n);
    p_ += n;
    return s;
  }

  // Bytes up to (not including) the next NUL, which is consumed.
  std::string_view cstring(const char *what) {
    const void *nul = std::memchr(p_, 0, remaining());
    if (!nul) fail(std::string("unterminated ") + what);
    std::string_view s(reinterpret_cast<const char *>(p_), size_t(static_cast<const unsigned char *>(nul) - p_));
    p_ += s.size() + 1;
    return s;
  }

  void set_where(std::string where) { where_ = std::move(where); }

 private:
  const unsigned char *p_;
  const unsigned char *end_;
  const std::string &file_;
  std::string where_;
};

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
    Cursor c(body, file, "META");
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
    m.runtime = text("runtime");
    m.pid = number("pid");
    m.ppid = number("ppid");
    m.thread_seq = number("thread_seq");
    m.tid = number("tid");
    {
      std::string s = text("status");
      if (s == "exited") m.status = ThreadStatus::exited;
      else if (s == "live-at-exit") m.status = ThreadStatus::live_at_exit;
      else bad("status", s);
    }
    {
      std::string s = text("mode");
      if (s == "cct") m.mode = Mode::cct;
      else if (s == "hcct") m.mode = Mode::hcct;
      else if (s == "empty") m.mode = Mode::empty;
      else bad("mode", s);
    }
    {
      std::string s = text("key");
      if (s == "site") m.key = KeyKind::site;
      else if (s == "routine") m.key = KeyKind::routine;
      else bad("key", s);
    }
    if (m.mode == Mode::hcct) {
      std::string e = text("epsilon");
      double eps = 0;
      auto [ptr, ec] = std::from_chars(e.data(), e.data() + e.size(), eps);
      // The negated comparison also rejects NaN.
      if (e.empty() || ec != std::errc() || ptr != e.data() + e.size() || !(eps > 0 && eps <= 1))
        bad("epsilon", e);
      m.epsilon = eps;
      m.counters = number("counters");
      if (m.counters == 0) bad("counters", "0");
      m.min_count = number("min_count");
    }
    m.calls = number("calls");
    m.dropped = number("dropped");
    m.max_depth = number("max_depth");
    m.tree_bytes = number("tree_bytes");
    m.nodes_peak = number("nodes_peak");
    m.exe = text("exe");
    {
      std::string cmd = text("cmdline");
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
    m.start_ns = number("start_ns");
    m.end_ns = number("end_ns");

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
  Cursor c(body, file, "MODS");
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

std::vector<Node> read_tree(const std::string &file, std::span<const unsigned char> body, const ThreadMeta &meta) {
  Cursor c(body, file, "CCT");
  uint64_t count = c.varint("node count");
  if (count == 0) c.fail("no nodes (the root is required)");
  if (count > c.remaining() / kMinNodeBytes)
    c.fail("node count " + std::to_string(count) + " exceeds what the section's " +
           std::to_string(c.remaining()) + " bytes can hold");
  if (count > UINT32_MAX) c.fail("node count " + std::to_string(count) + " exceeds 2^32-1");

  std::vector<Node> nodes(count);
  uint64_t sum = 0;
  uint64_t monitored = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t delta = c.varint("parent delta");
    Node &n = nodes[i];
    n.routine = c.varint("routine");
    n.call_site = c.varint("call site");
    n.count = c.varint("count");
    n.flags = c.fixed<uint8_t>("flags");
    // Messages for node errors are built only on failure: this loop must stay fast for 10^7 nodes.
    auto node_fail = [&](const std::string &problem) { c.fail("node " + std::to_string(i) + ": " + problem); };
    if (n.flags & ~format::kNodeKnownFlags) node_fail("unknown flag bits " + hex(n.flags & ~format::kNodeKnownFlags));
    if (i == 0) {
      if (delta != 0) node_fail("the root has parent delta " + std::to_string(delta) + ", not 0");
      if (n.routine || n.call_site || n.count) node_fail("the root must have routine, call site and count 0");
      if (n.monitored()) node_fail("the root is marked monitored");
      continue;
    }
    if (delta == 0) node_fail("a second root (parent delta 0)");
    if (delta > i) node_fail("parent delta " + std::to_string(delta) + " points before the root");
    n.parent = uint32_t(i - delta);
    if (meta.key == KeyKind::routine && n.call_site != 0)
      node_fail("call site " + hex(n.call_site) + " in a key=routine tree");
    if (n.monitored()) {
      if (meta.mode != Mode::hcct) node_fail("monitored flag outside hcct mode");
      ++monitored;
    } else if (meta.mode == Mode::hcct && n.count != 0) {
      node_fail("unmonitored node with nonzero count " + std::to_string(n.count));
    }
    if (n.on_path() && n.parent != kRoot && !nodes[n.parent].on_path())
      node_fail("on the calling path but its parent is not");
    if (__builtin_add_overflow(sum, n.count, &sum)) node_fail("counts overflow 64 bits");
  }
  if (!c.done()) c.fail(std::to_string(c.remaining()) + " bytes after the last node");

  if (meta.mode == Mode::cct && sum != meta.calls)
    fail(file, "cct mode: node counts sum to " + std::to_string(sum) + ", but calls is " + std::to_string(meta.calls));
  if (meta.mode == Mode::hcct) {
    if (monitored > meta.counters)
      fail(file, "hcct mode: " + std::to_string(monitored) + " monitored nodes, but only " +
                     std::to_string(meta.counters) + " counters");
    // Space-Saving's counters always sum to the stream length once they are all in use.
    if (sum > meta.calls || (monitored == meta.counters && sum != meta.calls))
      fail(file, "hcct mode: monitored counts sum to " + std::to_string(sum) + ", but calls is " +
                     std::to_string(meta.calls));
  }
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

ThreadProfile parse_profile(std::span<const unsigned char> bytes, const std::string &name) {
  if (bytes.size() < format::kHeaderSize)
    fail(name, "file is " + std::to_string(bytes.size()) + " bytes, shorter than the 32-byte header");
  Cursor h(bytes.first(format::kHeaderSize), name, "header");
  auto magic = h.bytes(8, "magic");
  if (!std::equal(magic.begin(), magic.end(), format::kMagic)) fail(name, "not an hcct dump (bad magic)");
  uint32_t version = h.fixed<uint32_t>("version");
  if (version != format::kVersion)
    fail(name, "unsupported format version " + std::to_string(version) + " (this reader knows " +
                   std::to_string(format::kVersion) + ")");
  uint32_t nsections = h.fixed<uint32_t>("section count");
  uint64_t payload_size = h.fixed<uint64_t>("payload size");
  uint64_t hash = h.fixed<uint64_t>("hash");
  const uint64_t actual = bytes.size() - format::kHeaderSize;
  if (payload_size != actual)
    fail(name, "header says " + std::to_string(payload_size) + " payload bytes, the file has " + std::to_string(actual) +
                   (payload_size > actual ? " (truncated)" : " (trailing garbage)"));
  auto payload = bytes.subspan(format::kHeaderSize);
  format::Fnv1a64 fnv;
  fnv.update(payload.data(), payload.size());
  if (fnv.state != hash) fail(name, "payload hash mismatch (corrupt file)");

  std::span<const unsigned char> meta_body, mods_body, tree_body;
  bool have_meta = false, have_mods = false, have_tree = false;
  Cursor c(payload, name, "sections");
  for (uint32_t s = 0; s < nsections; ++s) {
    c.set_where("section " + std::to_string(s));
    if (c.remaining() < kSectionHeaderBytes) c.fail("truncated section header (payload ends early)");
    uint32_t tag = c.fixed<uint32_t>("tag");
    uint32_t reserved = c.fixed<uint32_t>("reserved");
    uint64_t len = c.fixed<uint64_t>("length");
    if (reserved != 0) c.fail(tag_name(tag) + ": reserved field is " + std::to_string(reserved) + ", not 0");
    if (len > c.remaining())
      c.fail(tag_name(tag) + ": length " + std::to_string(len) + " runs past the payload end");
    auto body = c.bytes(size_t(len), "body");
    auto take = [&](bool &have, std::span<const unsigned char> &dst) {
      if (have) c.fail("duplicate " + tag_name(tag) + " section");
      have = true;
      dst = body;
    };
    if (tag == format::kTagMeta) take(have_meta, meta_body);
    else if (tag == format::kTagModules) take(have_mods, mods_body);
    else if (tag == format::kTagTree) take(have_tree, tree_body);
    // Other tags are later additions that do not change the known sections: skipped.
  }
  if (!c.done())
    fail(name, std::to_string(c.remaining()) + " payload bytes after the " + std::to_string(nsections) +
                   " sections the header announces");
  if (!have_meta) fail(name, "missing META section");
  if (!have_mods) fail(name, "missing MODS section");
  if (!have_tree) fail(name, "missing 'CCT ' section");

  ThreadProfile p;
  p.source = name;
  p.meta = MetaReader(name, meta_body).take();
  p.modules = read_modules(name, mods_body);
  p.nodes = read_tree(name, tree_body, p.meta);
  return p;
}

ThreadProfile read_profile(const std::filesystem::path &file) {
  std::vector<unsigned char> bytes = slurp(file);
  return parse_profile(bytes, file.string());
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

  struct Found {
    ProfileFileName id;
    fs::path path;
  };
  std::vector<Found> found;
  fs::directory_iterator it(where, ec);
  if (ec) throw IoError(set.location + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw IoError(set.location + ": " + ec.message());
    std::string fname = it->path().filename().string();
    if (fname.empty() || fname[0] == '.') continue;  // temporaries of writers in progress
    if (auto id = parse_profile_file_name(fname)) found.push_back({*id, it->path()});
  }
  if (ec) throw IoError(set.location + ": " + ec.message());
  if (found.empty()) throw IoError(set.location + ": no profile files (<pid>.<thread>.hcct) in this directory");
  std::sort(found.begin(), found.end(), [](const Found &a, const Found &b) {
    return std::pair(a.id.pid, a.id.seq) < std::pair(b.id.pid, b.id.seq);
  });

  for (Found &f : found) {
    ThreadProfile t = read_profile(f.path);
    if (t.meta.pid != f.id.pid || t.meta.thread_seq != f.id.seq)
      fail(t.source, "META says pid " + std::to_string(t.meta.pid) + " thread_seq " +
                         std::to_string(t.meta.thread_seq) + ", the file name says otherwise");
    if (set.processes.empty() || set.processes.back().pid != f.id.pid) {
      set.processes.emplace_back();
      set.processes.back().pid = f.id.pid;
    }
    set.processes.back().threads.push_back(std::move(t));
  }
  return set;
}

}  // namespace hcct::analysis
