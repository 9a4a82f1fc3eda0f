#include "hcct/analysis/merge.h"

#include "hcct/meta_keys.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <map>
#include <string_view>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace hcct::analysis {
namespace meta = format::meta;

namespace {

struct ChildKey {
  uint32_t parent;
  uint64_t routine;
  uint64_t call_site;
  bool operator==(const ChildKey &) const = default;
};

struct ChildKeyHash {
  size_t operator()(const ChildKey &k) const {
    // splitmix64-style mixing: routine addresses share high bits and alignment, so the raw values
    // would cluster in the table.
    uint64_t h = k.routine * 0x9e3779b97f4a7c15ull ^ (k.call_site + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull ^
                 uint64_t(k.parent) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    return size_t(h);
  }
};

uint64_t checked_add(uint64_t a, uint64_t b, const char *what) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw std::invalid_argument(std::string("merge: ") + what + " overflows 64 bits");
  return r;
}

// Module identity across processes: the same file (path and build-id) of the same size.
struct ObjectKey {
  std::string_view path;
  std::span<const uint8_t> build_id;
  uint64_t size;
  bool operator==(const ObjectKey &o) const {
    return path == o.path && size == o.size && std::equal(build_id.begin(), build_id.end(), o.build_id.begin(), o.build_id.end());
  }
};

struct ObjectKeyHash {
  size_t operator()(const ObjectKey &k) const {
    size_t h = std::hash<std::string_view>()(k.path) ^ (k.size * 0x9e3779b97f4a7c15ull);
    for (uint8_t b : k.build_id) h = h * 31 + b;
    return h;
  }
};

ObjectKey object_key(const Module &m) { return {m.path, m.build_id, m.hi - m.lo}; }

// Per input thread: address ranges of its modules and how far each moves into the merged address
// space.
struct Relocation {
  uint64_t lo, hi, delta;
};

class AddressMap {
 public:
  explicit AddressMap(std::vector<Relocation> r) : r_(std::move(r)) {
    std::sort(r_.begin(), r_.end(), [](const Relocation &a, const Relocation &b) { return a.lo < b.lo; });
  }
  uint64_t operator()(uint64_t addr) const {
    if (addr == 0 || r_.empty()) return addr;
    auto it = std::upper_bound(r_.begin(), r_.end(), addr, [](uint64_t a, const Relocation &x) { return a < x.lo; });
    if (it == r_.begin()) return addr;
    --it;
    return addr < it->hi ? addr + it->delta : addr;
  }

 private:
  std::vector<Relocation> r_;
};

// Builds the merged module map and each thread's relocation into it. The first occurrence of an
// object keeps its addresses; the same object elsewhere (another process, another run: ASLR) is
// moved onto it; a different object whose range collides with one already placed is moved above
// everything placed so far (by a multiple of 2 MiB, so offsets within pages are kept).
//
// Near-linear in the number of modules: objects are found by hash, and the placed modules, which
// never overlap one another (a module is placed only where it collides with nothing, or above
// everything), are kept sorted by address, so a collision is one ordered lookup.
std::vector<AddressMap> normalise_modules(std::span<const ThreadProfile *const> threads, std::vector<Module> &out) {
  size_t total = 0;
  for (const ThreadProfile *tp : threads) total += tp->modules.size();
  out.reserve(total);  // keys below point into `out`: no reallocation
  std::unordered_map<ObjectKey, size_t, ObjectKeyHash> placed_object;  // -> index in out
  placed_object.reserve(total);
  std::map<uint64_t, uint64_t> placed_ranges;  // lo -> hi of the non-empty placed modules
  uint64_t top = 0;                             // highest hi placed
  auto collides = [&](uint64_t lo, uint64_t hi) {
    if (lo >= hi) return false;  // an empty range holds no address
    auto it = placed_ranges.lower_bound(hi);   // first range starting at or after hi: no overlap
    if (it == placed_ranges.begin()) return false;
    --it;                                       // the last range starting below hi
    return it->second > lo;
  };
  std::vector<AddressMap> maps;
  for (const ThreadProfile *tp : threads) {
    std::vector<Relocation> rel;
    rel.reserve(tp->modules.size());
    for (const Module &m : tp->modules) {
      auto same = placed_object.find(object_key(m));
      if (same != placed_object.end()) {
        rel.push_back({m.lo, m.hi, out[same->second].lo - m.lo});
        continue;
      }
      uint64_t delta = 0;
      if (collides(m.lo, m.hi)) {
        constexpr uint64_t kAlign = uint64_t(1) << 21;
        delta = ((top - m.lo) / kAlign + 1) * kAlign;
        if (m.hi + delta < m.hi) throw std::invalid_argument("merge: no room to place module " + m.path);
      }
      Module placed = m;
      placed.lo += delta;
      placed.hi += delta;
      placed.bias += delta;
      out.push_back(std::move(placed));
      const Module &p = out.back();
      placed_object.emplace(object_key(p), out.size() - 1);
      if (p.lo < p.hi) placed_ranges.emplace(p.lo, p.hi);
      top = std::max(top, p.hi);
      rel.push_back({m.lo, m.hi, delta});
    }
    maps.emplace_back(std::move(rel));
  }
  return maps;
}

ThreadProfile merge_impl(std::span<const ThreadProfile *const> threads, bool across_processes);

// ---- META. Every key the runtime writes has its own rule (merge.h, docs/ANALYSIS.md "Merge").

// A count scaled by 1/fraction, rounded to the nearest integer (fraction 1: unchanged).
uint64_t scaled(uint64_t count, double inverse_fraction) {
  if (inverse_fraction == 1) return count;
  long double v = (long double)count * inverse_fraction + 0.5L;
  if (v >= 18446744073709551615.0L) throw std::invalid_argument("merge: a scaled count overflows 64 bits");
  return uint64_t(v);
}

// Whether the inputs' counts must be scaled before they add: some input was sampled (static
// bursting) and not all inputs were sampled at the same fraction. Then each input's counts are
// multiplied by 1/its own sampled_fraction (unsampled inputs: 1), making them whole-run
// estimates, so that one thread's fraction never scales another's counts.
bool needs_scaling(std::span<const ThreadProfile *const> threads) {
  std::optional<double> first = threads[0]->meta.sampled_fraction();
  bool any = false, same = true;
  for (const ThreadProfile *tp : threads) {
    std::optional<double> f = tp->meta.sampled_fraction();
    any = any || f.has_value();
    same = same && f == first;
  }
  return any && !same;
}

// Per input: 1/sampled_fraction when scaling, else 1.
std::vector<double> count_scales(std::span<const ThreadProfile *const> threads) {
  std::vector<double> out(threads.size(), 1.0);
  if (!needs_scaling(threads)) return out;
  for (size_t i = 0; i < threads.size(); ++i)
    if (std::optional<double> f = threads[i]->meta.sampled_fraction()) out[i] = 1.0 / *f;
  return out;
}

std::string join_command(const ThreadMeta &m) {
  std::string cmd;
  for (size_t i = 0; i < m.cmdline.size(); ++i) {
    if (i) cmd += format::kArgSeparator;
    cmd += m.cmdline[i];
  }
  return cmd;
}

// The thread's own duration, or the sum recorded by an earlier merge.
uint64_t thread_time(const ThreadMeta &m) {
  if (const std::string *t = m.find_extra(meta::kThreadTimeNs.name)) {
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(t->data(), t->data() + t->size(), v);
    if (ec == std::errc() && ptr == t->data() + t->size()) return v;
  }
  return m.end_ns > m.start_ns ? m.end_ns - m.start_ns : 0;
}

std::string format_double(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}

std::vector<const std::string *> values_of(std::span<const ThreadProfile *const> threads, std::string_view key) {
  std::vector<const std::string *> out;
  for (const ThreadProfile *tp : threads) out.push_back(tp->meta.find_extra(key));
  return out;
}

ThreadMeta merge_meta(std::span<const ThreadProfile *const> threads, bool across_processes) {
  const ThreadMeta &first = threads[0]->meta;
  const bool scale = needs_scaling(threads);
  ThreadMeta m = first;
  m.extra.clear();
  m.calls = m.dropped = m.lost = m.unmatched_exits = m.tree_bytes = m.nodes_peak = m.max_depth = m.min_count =
      m.counters = 0;
  m.epsilon = 0;
  // Time: kept when every input has it, at one rate (samples of different periods do not add);
  // samples, samples_lost and time_min_count add up (docs/ANALYSIS.md).
  const bool all_timed = std::all_of(threads.begin(), threads.end(), [](const ThreadProfile *tp) { return tp->meta.timed(); });
  for (const ThreadProfile *tp : threads)
    if (all_timed && (tp->meta.time != first.time || tp->meta.sample_period_ns != first.sample_period_ns))
      throw std::invalid_argument("merge: " + tp->source + " sampled time at another rate or metric than " +
                                  threads[0]->source);
  if (!all_timed) m.time.clear();
  m.samples = m.samples_lost = m.time_min_count = 0;
  m.start_ns = UINT64_MAX;
  m.end_ns = 0;
  uint64_t busy_ns = 0;
  std::string seqs;
  for (const ThreadProfile *tp : threads) {
    const ThreadProfile &t = *tp;
    const ThreadMeta &tm = t.meta;
    // Scaled inputs: calls = (scaled node counts) + (scaled calls the tree does not hold), so that
    // the totals the reader checks (cct: counts sum to calls) still hold exactly.
    double inv = 1;
    if (scale)
      if (std::optional<double> f = tm.sampled_fraction()) inv = 1 / *f;
    uint64_t calls = tm.calls;
    if (inv != 1) {
      uint64_t held = 0, held_scaled = 0;
      for (const Node &n : t.nodes) {
        held = checked_add(held, n.count, "calls");
        held_scaled = checked_add(held_scaled, scaled(n.count, inv), "calls");
      }
      calls = checked_add(held_scaled, scaled(tm.calls - std::min(held, tm.calls), inv), "calls");
    }
    m.calls = checked_add(m.calls, calls, "calls");
    m.lost = checked_add(m.lost, scaled(tm.lost, inv), "lost");
    m.min_count = checked_add(m.min_count, tm.min_count ? scaled(tm.min_count, inv) + (inv != 1) : 0, "min_count");
    m.dropped = checked_add(m.dropped, tm.dropped, "dropped");
    m.unmatched_exits = checked_add(m.unmatched_exits, tm.unmatched_exits, "unmatched_exits");
    m.tree_bytes = checked_add(m.tree_bytes, tm.tree_bytes, "tree_bytes");
    m.nodes_peak = checked_add(m.nodes_peak, tm.nodes_peak, "nodes_peak");
    m.counters = checked_add(m.counters, tm.counters, "counters");
    if (all_timed) {
      m.samples = checked_add(m.samples, tm.samples, "samples");
      m.samples_lost = checked_add(m.samples_lost, tm.samples_lost, "samples_lost");
      m.time_min_count = checked_add(m.time_min_count, tm.time_min_count, "time_min_count");
    }
    m.max_depth = std::max(m.max_depth, tm.max_depth);
    m.epsilon = std::max(m.epsilon, tm.epsilon);
    m.start_ns = std::min(m.start_ns, tm.start_ns);
    m.end_ns = std::max(m.end_ns, tm.end_ns);
    busy_ns = checked_add(busy_ns, thread_time(tm), "thread_time_ns");
    if (tm.status == ThreadStatus::live_at_exit) m.status = ThreadStatus::live_at_exit;
    if (!seqs.empty()) seqs += ',';
    // Inputs that were merges already contribute what they were made of.
    const std::string *from = tm.find_extra(meta::kMergedFrom.name);
    const std::string *inner = tm.find_extra(meta::kMergedThreads.name);
    if (across_processes && from) {
      seqs += *from;
    } else if (across_processes && inner) {
      std::string list = *inner;
      for (size_t start = 0; start <= list.size();) {
        size_t comma = std::min(list.find(',', start), list.size());
        if (start) seqs += ',';
        seqs += std::to_string(tm.pid) + "." + list.substr(start, comma - start);
        start = comma + 1;
      }
    } else if (across_processes) {
      seqs += std::to_string(tm.pid) + "." + std::to_string(tm.thread_seq);
    } else {
      seqs += inner ? *inner : std::to_string(tm.thread_seq);
    }
  }
  if (across_processes) m.thread_seq = 0;
  m.extra.emplace_back(across_processes ? meta::kMergedFrom.name : meta::kMergedThreads.name, seqs);
  m.extra.emplace_back(meta::kThreadTimeNs.name, std::to_string(busy_ns));

  // Commands: the first input's is the profile's; every distinct one is listed (runs of
  // different commands merged), records separated by 0x1E, arguments by 0x1F.
  {
    std::vector<std::string> commands;
    std::set<std::string> seen;
    for (const ThreadProfile *tp : threads) {
      if (const std::string *list = tp->meta.find_extra(meta::kMergedCommands.name)) {
        for (size_t start = 0; start <= list->size();) {
          size_t end = std::min(list->find('\x1e', start), list->size());
          std::string c = list->substr(start, end - start);
          if (seen.insert(c).second) commands.push_back(c);
          start = end + 1;
        }
      } else {
        std::string c = tp->meta.exe + format::kArgSeparator + join_command(tp->meta);
        if (seen.insert(c).second) commands.push_back(c);
      }
    }
    if (commands.size() > 1) {
      std::string list;
      for (const std::string &c : commands) list += (list.empty() ? "" : "\x1e") + c;
      m.extra.emplace_back(meta::kMergedCommands.name, list);
    }
  }

  // The other keys. Burst keys by their meaning; keys unknown to this library are kept when every
  // input has the same value, else named in merged_dropped_keys (never silently one input's).
  std::vector<std::string> keys;  // in first-seen order
  std::set<std::string> key_set;
  for (const ThreadProfile *tp : threads)
    for (const auto &[k, v] : tp->meta.extra)
      if (key_set.insert(k).second) keys.push_back(k);
  std::string dropped_keys;
  for (const std::string &k : keys) {
    const meta::Key *known = meta::find(k.c_str());
    if (known == &meta::kMergedDroppedKeys) {  // an input's own list carries over
      for (const std::string *v : values_of(threads, k))
        if (v) dropped_keys += (dropped_keys.empty() ? "" : ",") + *v;
      continue;
    }
    if (known && known->presence == meta::Presence::kMerged) continue;  // written above or below
    std::vector<const std::string *> values = values_of(threads, k);
    const bool everywhere = std::all_of(values.begin(), values.end(), [](const std::string *v) { return v; });
    const bool same = everywhere && std::all_of(values.begin(), values.end(), [&](const std::string *v) { return *v == *values[0]; });
    // Keys unknown to this library are kept when every input has the same value.
    switch (known ? known->merge : meta::Merge::kSame) {
      case meta::Merge::kSum: {  // counts of events (`events` only if every input has it)
        if (!everywhere) continue;
        uint64_t sum = 0;
        bool ok = true;
        for (const std::string *v : values) {
          uint64_t x = 0;
          auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
          ok = ok && ec == std::errc() && ptr == v->data() + v->size();
          sum = checked_add(sum, x, k.c_str());
        }
        if (ok) m.extra.emplace_back(k, std::to_string(sum));
        else dropped_keys += (dropped_keys.empty() ? "" : ",") + k;
        break;
      }
      case meta::Merge::kMax: {  // burst_time_fraction: per process, the largest (docs/ANALYSIS.md)
        double best = 0;
        for (const std::string *v : values)
          if (v) best = std::max(best, std::strtod(v->c_str(), nullptr));
        m.extra.emplace_back(k, format_double(best));
        break;
      }
      case meta::Merge::kOwnRule:
        if (known == &meta::kSampledFraction) {
          if (!scale && same) m.extra.emplace_back(k, *values[0]);  // one fraction: counts stay sampled
        } else if (known == &meta::kSampledFractionBasis) {
          // With scaling the estimates are as good as the worst basis: "time" over-states fractions.
          bool time = std::any_of(values.begin(), values.end(), [](const std::string *v) { return v && *v == "time"; });
          m.extra.emplace_back(k, time ? "time" : "events");
        }
        break;
      default:
        if (same) m.extra.emplace_back(k, *values[0]);
        else dropped_keys += (dropped_keys.empty() ? "" : ",") + k;
    }
  }
  // Counts are whole-run estimates: scaled here, or by an earlier merge.
  if (scale || std::any_of(threads.begin(), threads.end(), [](const ThreadProfile *tp) { return tp->meta.find_extra(meta::kBurstScaled.name); }))
    m.extra.emplace_back(meta::kBurstScaled.name, "1");
  if (!dropped_keys.empty()) m.extra.emplace_back(meta::kMergedDroppedKeys.name, dropped_keys);
  return m;
}

}  // namespace

ThreadProfile merge_profiles(std::span<const ThreadProfile *const> threads) { return merge_impl(threads, true); }

ThreadProfile scale_sampled(const ThreadProfile &profile) {
  ThreadProfile out = profile;
  std::optional<double> f = profile.meta.sampled_fraction();
  if (!f) return out;
  const double inv = 1 / *f;
  // As merge_meta scales an input: calls = scaled node counts + the scaled calls the tree does not
  // hold, so the reader's totals still hold.
  uint64_t held = 0, held_scaled = 0;
  for (Node &n : out.nodes) {
    held = checked_add(held, n.count, "calls");
    n.count = scaled(n.count, inv);
    held_scaled = checked_add(held_scaled, n.count, "calls");
  }
  ThreadMeta &m = out.meta;
  m.calls = checked_add(held_scaled, scaled(m.calls - std::min(held, m.calls), inv), "calls");
  m.lost = scaled(m.lost, inv);
  if (m.min_count) m.min_count = scaled(m.min_count, inv) + 1;
  std::erase_if(m.extra, [](const auto &kv) { return kv.first == meta::kSampledFraction.name; });
  m.extra.emplace_back(meta::kBurstScaled.name, "1");
  return out;
}

ThreadProfile merge_threads(std::span<const ThreadProfile> threads) {
  std::vector<const ThreadProfile *> ptrs;
  for (const ThreadProfile &t : threads) ptrs.push_back(&t);
  return merge_threads(std::span<const ThreadProfile *const>(ptrs));
}

ThreadProfile merge_threads(std::span<const ThreadProfile *const> threads) { return merge_impl(threads, false); }

namespace {
ThreadProfile merge_impl(std::span<const ThreadProfile *const> threads, bool across_processes) {
  if (threads.empty()) throw std::invalid_argument("merge: no threads");
  const ThreadMeta &first = threads[0]->meta;
  for (const ThreadProfile *tp : threads) {
    const ThreadProfile &t = *tp;
    const std::string who = t.source.empty() ? "thread " + std::to_string(t.meta.thread_seq) : t.source;
    if (!across_processes && t.meta.pid != first.pid) throw std::invalid_argument("merge: " + who + " belongs to another process");
    if (t.meta.mode != first.mode)
      throw std::invalid_argument("merge: " + who + " is in " + std::string(to_string(t.meta.mode)) + " mode, not " +
                                  std::string(to_string(first.mode)));
    if (t.meta.key != first.key) throw std::invalid_argument("merge: " + who + " uses another node key");
  }

  ThreadProfile out;
  out.meta = merge_meta(threads, across_processes);
  const std::vector<double> scale = count_scales(threads);
  size_t total_nodes = 0;
  for (const ThreadProfile *tp : threads) total_nodes += tp->nodes.size();
  std::vector<AddressMap> relocate = normalise_modules(threads, out.modules);

  // Union of the trees, nodes numbered in creation order (a parent is always created before its
  // children, but the order is not preorder once a later thread adds children to earlier nodes).
  std::vector<Node> merged(1);  // the root
  std::vector<uint64_t> merged_samples(out.meta.timed() ? 1 : 0);
  if (out.meta.timed())
    for (const ThreadProfile *tp : threads) merged_samples[kRoot] = checked_add(merged_samples[kRoot], tp->self_samples(kRoot), "samples");
  std::unordered_map<ChildKey, uint32_t, ChildKeyHash> index;
  index.reserve(std::min<size_t>(total_nodes, size_t(1) << 26));
  std::vector<uint32_t> to_merged;
  for (size_t ti = 0; ti < threads.size(); ++ti) {
    const ThreadProfile &t = *threads[ti];
    const AddressMap &move = relocate[ti];
    to_merged.assign(t.nodes.size(), 0);
    merged[kRoot].flags |= t.nodes[kRoot].flags;
    for (uint32_t i = 1; i < t.nodes.size(); ++i) {
      const Node &n = t.nodes[i];
      ChildKey key{to_merged[n.parent], move(n.routine), move(n.call_site)};
      auto [it, inserted] = index.try_emplace(key, uint32_t(merged.size()));
      if (inserted) {
        if (merged.size() >= UINT32_MAX) throw std::invalid_argument("merge: more than 2^32-1 nodes");
        Node fresh = n;
        fresh.routine = key.routine;
        fresh.call_site = key.call_site;
        fresh.parent = key.parent;
        fresh.count = 0;
        fresh.flags = 0;
        merged.push_back(fresh);
        if (out.meta.timed()) merged_samples.push_back(0);
      }
      if (out.meta.timed())
        merged_samples[it->second] = checked_add(merged_samples[it->second], t.self_samples(i), "samples");
      Node &dst = merged[it->second];
      dst.count = checked_add(dst.count, scaled(n.count, scale[ti]), "a node count");
      dst.flags |= n.flags;
      to_merged[i] = it->second;
    }
  }
  index = {};

  // Renumber into preorder with an explicit stack (trees can be deeper than the C++ stack).
  ChildIndex children = child_index(merged);
  out.nodes.reserve(merged.size());
  if (out.meta.timed()) out.samples.reserve(merged.size());
  std::vector<uint32_t> new_index(merged.size());
  std::vector<uint32_t> stack{kRoot};
  while (!stack.empty()) {
    uint32_t v = stack.back();
    stack.pop_back();
    Node n = merged[v];
    new_index[v] = uint32_t(out.nodes.size());
    if (v != kRoot) n.parent = new_index[n.parent];
    out.nodes.push_back(n);
    if (out.meta.timed()) out.samples.push_back(merged_samples[v]);
    auto kids = children.of(v);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back(*it);
  }
  return out;
}

}  // namespace

}  // namespace hcct::analysis
