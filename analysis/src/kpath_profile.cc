#include "hcct/analysis/kpath_profile.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "byte_cursor.h"
#include "hcct/analysis/reader.h"
#include "hcct/format.h"

namespace hcct::analysis {
namespace {

KsfForest parse_forest(std::span<const unsigned char> body, const std::string &name) {
  ByteCursor c(body, name, "KPTH");
  KsfForest f;
  uint64_t version = c.varint("version");
  if (version < 1 || version > format::kPathsVersion)
    c.fail("unsupported version " + std::to_string(version) + " (this reader knows 1 to " +
           std::to_string(format::kPathsVersion) + ")");
  uint64_t k = c.varint("k");
  if (k < 1 || k > 256) c.fail("k = " + std::to_string(k) + " is outside [1, 256]");
  f.k = uint32_t(k);
  if (version >= 2) {
    uint64_t kind = c.varint("forest kind");
    if (kind != uint64_t(ForestKind::kBlpp) && kind != uint64_t(ForestKind::kSlab) &&
        kind != uint64_t(ForestKind::kWindow))
      c.fail("unknown forest kind " + std::to_string(kind));
    f.kind = ForestKind(kind);
    if ((f.kind == ForestKind::kBlpp) != (k == 1))
      c.fail(std::string("forest kind ") + forest_kind_name(f.kind) + " with k = " + std::to_string(k));
  } else if (k == 1) {
    f.kind = ForestKind::kBlpp;
  }
  // Levels a tree may have: k-SF 2k − 2 (Definition 3.7), kWF k; BLPP 1 (checked below).
  uint32_t max_depth = f.kind == ForestKind::kWindow ? f.k : std::max(2 * f.k - 2, f.k);
  f.paths = c.varint("paths");
  f.enters = c.varint("enters");
  f.lost = c.varint("lost");
  if (version >= 3) {
    uint64_t bits = c.fixed<uint64_t>("epsilon");
    double epsilon;
    std::memcpy(&epsilon, &bits, sizeof epsilon);
    if (!(epsilon == 0 || (epsilon > 0 && epsilon < 1))) c.fail("epsilon " + std::to_string(epsilon) + " is outside [0, 1)");
    f.bound.epsilon = epsilon;
    f.bound.budget = c.varint("budget");
    f.bound.delta = c.varint("delta");
    f.bound.cuts = c.varint("cuts");
    f.bound.sweeps = c.varint("sweeps");
    f.bound.forced_sweeps = c.varint("forced sweeps");
    f.bound.evicted = c.varint("evicted");
    if (epsilon > 0 && f.kind != ForestKind::kWindow)
      c.fail(std::string("a bounded ") + forest_kind_name(f.kind) + " (only a kWF is bounded)");
    if (epsilon == 0 && (f.bound.budget || f.bound.delta || f.bound.cuts || f.bound.sweeps || f.bound.evicted))
      c.fail("eviction accounting in an exact forest");
    if (f.bound.forced_sweeps > f.bound.sweeps) c.fail("more forced sweeps than sweeps");
    // The bound must mean something: at most the stream length (checked against `paths` below).
    if (f.bound.cuts > UINT64_MAX / 1024 || f.bound.delta > UINT64_MAX / 4 || f.lost > UINT64_MAX / 1024)
      c.fail("error accounting overflows");
    if (epsilon > 0) f.bound.lost = f.lost;
  }
  uint64_t count = c.varint("node count");
  // A node takes at least 3 bytes (root: 11): bound the reservation by the bytes present.
  if (count > c.remaining() / 3) c.fail("node count " + std::to_string(count) + " exceeds the section");
  if (count >= kNoParent) c.fail("node count " + std::to_string(count) + " exceeds 2^32-2");
  f.nodes.reserve(count);
  // The root-to-node path of the previous node: a preorder parent is on it, and its size is the
  // level (amortised O(1) per node, whatever the depth bound).
  std::vector<uint32_t> path;
  uint64_t sum = 0;
  for (uint64_t i = 0; i < count; ++i) {
    KsfNode n;
    uint64_t delta = c.varint("parent delta");
    if (delta == 0) {
      n.label.function = c.fixed<uint64_t>("function");
    } else {
      if (delta > i) c.fail("node " + std::to_string(i) + ": parent delta " + std::to_string(delta) + " before the first node");
      n.parent = uint32_t(i - delta);
      if (f.k == 1) c.fail("node " + std::to_string(i) + ": BLPP profile with a non-root node");
      n.label.function = f.nodes[n.parent].label.function;
    }
    n.label.path = c.varint("path id");
    n.count = c.varint("count");
    // Preorder: the parent must be on the current root-to-node path.
    if (n.parent == kNoParent) {
      path.clear();
    } else {
      while (!path.empty() && path.back() != n.parent) path.pop_back();
      if (path.empty()) c.fail("node " + std::to_string(i) + " breaks preorder");
    }
    path.push_back(uint32_t(i));
    size_t d = path.size();
    if (d > max_depth)
      c.fail("node " + std::to_string(i) + " is at level " + std::to_string(d) + ", deeper than a " +
             forest_kind_name(f.kind) + " with k = " + std::to_string(f.k) + " allows (" + std::to_string(max_depth) + ")");
    if (n.count > UINT64_MAX - sum) c.fail("node " + std::to_string(i) + ": the counts overflow 64 bits");
    sum += n.count;
    f.nodes.push_back(n);
  }
  if (!c.done()) c.fail("trailing bytes");
  if (sum != f.paths) c.fail("counters sum to " + std::to_string(sum) + ", not paths = " + std::to_string(f.paths));
  return f;
}

std::vector<TraceRecord> parse_trace(std::span<const unsigned char> body, const std::string &name, uint64_t *lost) {
  ByteCursor c(body, name, "KTRC");
  uint64_t version = c.varint("version");
  if (version != format::kPathTraceVersion) c.fail("unsupported version " + std::to_string(version));
  *lost = c.varint("lost");
  uint64_t count = c.varint("record count");
  if (count > c.remaining() / 10) c.fail("record count exceeds the section");
  std::vector<TraceRecord> out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    TraceRecord r;
    uint8_t kind = c.fixed<uint8_t>("kind");
    if (kind > 1) c.fail("record " + std::to_string(i) + ": kind " + std::to_string(kind));
    r.enter = kind == 0;
    r.frame = c.varint("frame");
    r.label.function = c.fixed<uint64_t>("function");
    if (!r.enter) r.label.path = c.varint("path id");
    out.push_back(r);
  }
  if (!c.done()) c.fail("trailing bytes");
  return out;
}

PathSampling parse_sampling(std::span<const unsigned char> body, const std::string &name) {
  ByteCursor c(body, name, "KPSC");
  uint64_t version = c.varint("version");
  if (version < 1 || version > format::kPathSamplingVersion) c.fail("unsupported version " + std::to_string(version));
  PathSampling s;
  uint64_t flags = c.varint("flags");
  if (flags > (format::kPathSamplingBursting | format::kPathSamplingEventClock))
    c.fail("unknown flags " + std::to_string(flags));
  s.bursting = flags & format::kPathSamplingBursting;
  s.event_clock = flags & format::kPathSamplingEventClock;
  s.interval_ns = c.varint("burst interval");
  s.length_ns = c.varint("burst length");
  if (s.length_ns > s.interval_ns) c.fail("burst length above the interval");
  s.joins = c.varint("joins");
  s.leaves = c.varint("leaves");
  s.dropped_tables = c.varint("dropped tables");
  uint64_t functions = c.varint("function count");
  if (functions > c.remaining() / 10) c.fail("function count " + std::to_string(functions) + " exceeds the section");
  for (uint64_t i = 0; i < functions; ++i) {
    uint64_t function = c.fixed<uint64_t>("function");
    uint64_t function_flags = version >= 2 ? c.varint("function flags") : 0;
    if (function_flags > format::kStartsPerThread)
      c.fail("function " + std::to_string(i) + ": unknown flags " + std::to_string(function_flags));
    if (function_flags & format::kStartsPerThread) s.thread_functions.insert(function);
    uint64_t starts = c.varint("start count");
    if (starts == 0 || starts > c.remaining() / 2) c.fail("function " + std::to_string(i) + ": start count " + std::to_string(starts));
    int64_t previous = -1;
    for (uint64_t j = 0; j < starts; ++j) {
      uint64_t block = c.varint("start block");
      if (block >= UINT32_MAX || int64_t(block) <= previous || (j == 0 && block != 0))
        c.fail("function " + std::to_string(i) + ": start blocks not 0 then ascending");
      previous = int64_t(block);
      uint64_t count = c.varint("start count");
      uint64_t &total = s.starts[{function, uint32_t(block)}];
      if (count > UINT64_MAX - total) c.fail("function " + std::to_string(i) + ": start counts overflow 64 bits");
      total += count;  // (a module loaded twice: both tables count)
    }
  }
  if (!c.done()) c.fail("trailing bytes");
  return s;
}

}  // namespace

const char *forest_kind_name(ForestKind kind) {
  return kind == ForestKind::kUnknown ? "forest" : format::title(kind);
}

std::optional<ThreadPaths> parse_thread_paths(std::span<const unsigned char> bytes, const std::string &name) {
  ThreadPaths t;
  t.profile = parse_profile(bytes, name);  // validates header, hash and section bounds
  std::optional<std::span<const unsigned char>> forest, trace, sampling;
  size_t at = format::kHeaderSize;
  while (at + 16 <= bytes.size()) {
    ByteCursor h(bytes.subspan(at, 16), name, "section header");
    uint32_t tag = h.fixed<uint32_t>("tag");
    h.fixed<uint32_t>("reserved");
    uint64_t len = h.fixed<uint64_t>("length");
    auto body = bytes.subspan(at + 16, len);  // in bounds: parse_profile checked
    if (tag == format::kTagPaths) {
      if (forest) throw FormatError(name + ": duplicate KPTH section");
      forest = body;
    } else if (tag == format::kTagPathTrace) {
      if (trace) throw FormatError(name + ": duplicate KTRC section");
      trace = body;
    } else if (tag == format::kTagPathSampling) {
      if (sampling) throw FormatError(name + ": duplicate KPSC section");
      sampling = body;
    }
    at += 16 + len;
  }
  if (!forest) return std::nullopt;
  t.forest = parse_forest(*forest, name);
  if (trace) t.trace = parse_trace(*trace, name, &t.trace_lost);
  if (sampling) t.sampling = parse_sampling(*sampling, name);
  return t;
}

std::vector<ThreadPaths> read_thread_paths(const std::filesystem::path &where) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(where)) {
    for (const auto &e : std::filesystem::directory_iterator(where))
      if (e.is_regular_file() && parse_profile_file_name(e.path().filename().string())) files.push_back(e.path());
  } else {
    files.push_back(where);
  }
  std::vector<ThreadPaths> out;
  // A versioned function's start counters are per thread or process-wide for a whole process (its
  // module's table says which): files of one process that disagree cannot be scaled right.
  std::map<std::pair<uint64_t, uint64_t>, std::pair<bool, std::string>> counter_kind;  // (pid, function) -> (per thread, file)
  for (const auto &f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw IoError(f.string() + ": cannot read");
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto t = parse_thread_paths(bytes, f.string());
    if (!t) continue;
    if (t->sampling)
      for (const auto &[start, count] : t->sampling->starts) {
        bool own = t->sampling->thread_functions.count(start.first) != 0;
        auto [it, fresh] = counter_kind.try_emplace({t->profile.meta.pid, start.first}, own, f.string());
        if (!fresh && it->second.first != own)
          throw FormatError(f.string() + ": KPSC: function " + std::to_string(start.first) + " has " +
                            (own ? "per-thread" : "process-wide") + " start counters here and " +
                            (own ? "process-wide" : "per-thread") + " ones in " + it->second.second +
                            " (files of one process)");
      }
    out.push_back(std::move(*t));
  }
  std::sort(out.begin(), out.end(), [](const ThreadPaths &a, const ThreadPaths &b) {
    return std::pair(a.profile.meta.pid, a.profile.meta.thread_seq) < std::pair(b.profile.meta.pid, b.profile.meta.thread_seq);
  });
  return out;
}

std::vector<std::vector<PathLabel>> activation_streams(const std::vector<TraceRecord> &trace) {
  std::vector<std::vector<PathLabel>> streams;
  std::map<uint64_t, size_t> live;  // frame -> its activation's stream
  for (const TraceRecord &r : trace) {
    if (r.enter) {
      live[r.frame] = streams.size();
      streams.emplace_back();
    } else {
      auto it = live.find(r.frame);
      if (it == live.end()) {  // entered while events were ignored: a stream of its own
        it = live.emplace(r.frame, streams.size()).first;
        streams.emplace_back();
      }
      streams[it->second].push_back(r.label);
    }
  }
  return streams;
}

}  // namespace hcct::analysis
