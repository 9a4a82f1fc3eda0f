#include "hcct/analysis/writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <stdexcept>
#include <system_error>

#include "hcct/format.h"
#include "hcct/meta_keys.h"

namespace hcct::analysis {
namespace meta = format::meta;

namespace {

template <class T>
void put(Bytes &out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<unsigned char>(uint64_t(v) >> (8 * i)));
}

void put_varint(Bytes &out, uint64_t v) {
  unsigned char buf[format::kMaxVarintBytes];
  size_t n = format::encode_varint(v, buf);
  out.insert(out.end(), buf, buf + n);
}

template <class T>
void patch(Bytes &out, size_t at, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out[at + i] = static_cast<unsigned char>(uint64_t(v) >> (8 * i));
}

std::string shortest(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  (void)ec;
  return std::string(buf, end);
}

}  // namespace

Bytes encode_file(std::span<const Section> sections, uint32_t version) {
  Bytes out(format::kMagic, format::kMagic + 8);
  put<uint32_t>(out, version);
  put<uint32_t>(out, uint32_t(sections.size()));
  put<uint64_t>(out, 0);  // payload size, patched below
  put<uint64_t>(out, 0);  // hash, patched by reseal
  for (const Section &s : sections) {
    put<uint32_t>(out, s.tag);
    put<uint32_t>(out, s.reserved);
    put<uint64_t>(out, s.body.size());
    out.insert(out.end(), s.body.begin(), s.body.end());
  }
  patch<uint64_t>(out, 16, out.size() - format::kHeaderSize);
  reseal(out);
  return out;
}

void reseal(Bytes &file) {
  if (file.size() < format::kHeaderSize) throw std::invalid_argument("reseal: shorter than a header");
  format::Fnv1a64 fnv;
  fnv.update(file.data() + format::kHeaderSize, file.size() - format::kHeaderSize);
  patch<uint64_t>(file, 24, fnv.state);
}

Bytes encode_meta(std::span<const std::pair<std::string, std::string>> entries) {
  Bytes out;
  for (const auto &[k, v] : entries) {
    out.insert(out.end(), k.begin(), k.end());
    out.push_back(0);
    out.insert(out.end(), v.begin(), v.end());
    out.push_back(0);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> meta_entries(const ThreadMeta &m) {
  std::vector<std::pair<std::string, std::string>> e;
  auto num = [&](const meta::Key &k, uint64_t v) { e.emplace_back(k.name, std::to_string(v)); };
  e.emplace_back(meta::kRuntime.name, m.runtime);
  num(meta::kPid, m.pid);
  num(meta::kPpid, m.ppid);
  num(meta::kThreadSeq, m.thread_seq);
  num(meta::kTid, m.tid);
  e.emplace_back(meta::kStatus.name, std::string(to_string(m.status)));
  e.emplace_back(meta::kMode.name, std::string(to_string(m.mode)));
  e.emplace_back(meta::kKey.name, std::string(to_string(m.key)));
  if (m.mode == Mode::hcct) {
    e.emplace_back(meta::kEpsilon.name, shortest(m.epsilon));
    num(meta::kCounters, m.counters);
    num(meta::kMinCount, m.min_count);
  }
  num(meta::kCalls, m.calls);
  num(meta::kDropped, m.dropped);
  num(meta::kLost, m.lost);
  num(meta::kUnmatchedExits, m.unmatched_exits);
  num(meta::kMaxDepth, m.max_depth);
  num(meta::kTreeBytes, m.tree_bytes);
  num(meta::kNodesPeak, m.nodes_peak);
  e.emplace_back(meta::kExe.name, m.exe);
  std::string cmd;
  for (size_t i = 0; i < m.cmdline.size(); ++i) {
    if (i) cmd += format::kArgSeparator;
    cmd += m.cmdline[i];
  }
  e.emplace_back(meta::kCmdline.name, cmd);
  num(meta::kStartNs, m.start_ns);
  num(meta::kEndNs, m.end_ns);
  if (m.timed()) {
    e.emplace_back(meta::kTime.name, m.time);
    num(meta::kSamplePeriodNs, m.sample_period_ns);
    num(meta::kSamples, m.samples);
    num(meta::kSamplesLost, m.samples_lost);
    if (m.mode == Mode::hcct) num(meta::kTimeMinCount, m.time_min_count);
  }
  e.insert(e.end(), m.extra.begin(), m.extra.end());
  return e;
}

Bytes encode_modules(std::span<const Module> modules) {
  if (modules.size() > UINT32_MAX) throw std::invalid_argument("too many modules");
  Bytes out;
  put<uint32_t>(out, uint32_t(modules.size()));
  for (const Module &m : modules) {
    if (m.path.size() > UINT16_MAX) throw std::invalid_argument("module path longer than 65535 bytes: " + m.path.substr(0, 80));
    if (m.build_id.size() > UINT8_MAX) throw std::invalid_argument("build-id longer than 255 bytes: " + m.path);
    put<uint64_t>(out, m.bias);
    put<uint64_t>(out, m.lo);
    put<uint64_t>(out, m.hi);
    put<uint16_t>(out, uint16_t(m.path.size()));
    out.insert(out.end(), m.path.begin(), m.path.end());
    put<uint8_t>(out, uint8_t(m.build_id.size()));
    out.insert(out.end(), m.build_id.begin(), m.build_id.end());
  }
  return out;
}

Bytes encode_tree(std::span<const Node> nodes) {
  if (nodes.empty()) throw std::invalid_argument("a tree needs at least the root");
  if (nodes.size() > UINT32_MAX) throw std::invalid_argument("too many nodes");
  Bytes out;
  out.reserve(nodes.size() * 12 + format::kMaxVarintBytes);
  put_varint(out, nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node &n = nodes[i];
    if (i > 0 && n.parent >= i)
      throw std::invalid_argument("node " + std::to_string(i) + ": parent " + std::to_string(n.parent) +
                                  " does not precede it (not preorder)");
    put_varint(out, i == 0 ? 0 : i - n.parent);
    put_varint(out, n.routine);
    put_varint(out, n.call_site);
    put_varint(out, n.count);
    out.push_back(n.flags);
  }
  return out;
}

Bytes encode_time(std::span<const uint64_t> samples) {
  Bytes out;
  uint64_t entries = 0;
  for (uint64_t n : samples) entries += n != 0;
  put_varint(out, entries);
  uint64_t previous = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (!samples[i]) continue;
    put_varint(out, i - previous);
    put_varint(out, samples[i]);
    previous = i;
  }
  return out;
}

Bytes encode_profile(const ThreadProfile &p) {
  auto entries = meta_entries(p.meta);
  std::vector<Section> sections = {
      {format::kTagMeta, 0, encode_meta(entries)},
      {format::kTagModules, 0, encode_modules(p.modules)},
      {format::kTagTree, 0, encode_tree(p.nodes)},
  };
  if (p.meta.timed()) {
    if (p.samples.size() != p.nodes.size())
      throw std::invalid_argument("a timed profile needs one samples value per node");
    sections.push_back({format::kTagTime, 0, encode_time(p.samples)});
  }
  return encode_file(sections);
}

std::string profile_file_name(uint64_t pid, uint64_t thread_seq) {
  return std::to_string(pid) + "." + std::to_string(thread_seq) + format::kFileSuffix;
}

void write_profile(const std::filesystem::path &file, const ThreadProfile &profile) {
  Bytes bytes = encode_profile(profile);
  // The temporary is a dotfile in the target directory: readers skip it, and rename() within one
  // file system is atomic, so nobody ever sees a partial file under the final name.
  std::filesystem::path tmp =
      file.parent_path() / ("." + file.filename().string() + ".tmp." + std::to_string(::getpid()));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), tmp.string());
  auto fail = [&](const std::string &what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), what);
  };
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(tmp.string());
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0) fail(tmp.string());
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), tmp.string());
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), file.string());
  }
}

}  // namespace hcct::analysis
