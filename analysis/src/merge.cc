#include "hcct/analysis/merge.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace hcct::analysis {
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
bool same_object(const Module &a, const Module &b) {
  return a.path == b.path && a.build_id == b.build_id && a.hi - a.lo == b.hi - b.lo;
}

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
std::vector<AddressMap> normalise_modules(std::span<const ThreadProfile *const> threads, std::vector<Module> &out) {
  std::vector<AddressMap> maps;
  for (const ThreadProfile *tp : threads) {
    std::vector<Relocation> rel;
    for (const Module &m : tp->modules) {
      auto same = std::find_if(out.begin(), out.end(), [&](const Module &c) { return same_object(c, m); });
      if (same != out.end()) {
        rel.push_back({m.lo, m.hi, same->lo - m.lo});
        continue;
      }
      bool collides = std::any_of(out.begin(), out.end(), [&](const Module &c) { return m.lo < c.hi && c.lo < m.hi; });
      uint64_t delta = 0;
      if (collides) {
        uint64_t top = 0;
        for (const Module &c : out) top = std::max(top, c.hi);
        constexpr uint64_t kAlign = uint64_t(1) << 21;
        delta = ((top - m.lo) / kAlign + 1) * kAlign;
        if (m.hi + delta < m.hi) throw std::invalid_argument("merge: no room to place module " + m.path);
      }
      Module placed = m;
      placed.lo += delta;
      placed.hi += delta;
      placed.bias += delta;
      out.push_back(placed);
      rel.push_back({m.lo, m.hi, delta});
    }
    maps.emplace_back(std::move(rel));
  }
  return maps;
}

ThreadProfile merge_impl(std::span<const ThreadProfile *const> threads, bool across_processes);

}  // namespace

ThreadProfile merge_profiles(std::span<const ThreadProfile *const> threads) { return merge_impl(threads, true); }

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
  out.meta = first;
  out.meta.extra.erase(std::remove_if(out.meta.extra.begin(), out.meta.extra.end(),
                                      [](const auto &kv) { return kv.first == "merged_threads" || kv.first == "merged_from"; }),
                       out.meta.extra.end());
  ThreadMeta &m = out.meta;
  m.calls = m.dropped = m.tree_bytes = m.nodes_peak = m.max_depth = m.min_count = m.counters = 0;
  m.epsilon = 0;
  m.start_ns = UINT64_MAX;
  m.end_ns = 0;
  std::string seqs;
  size_t total_nodes = 0;
  for (const ThreadProfile *tp : threads) {
    const ThreadProfile &t = *tp;
    const ThreadMeta &tm = t.meta;
    m.calls = checked_add(m.calls, tm.calls, "calls");
    m.dropped = checked_add(m.dropped, tm.dropped, "dropped");
    m.tree_bytes = checked_add(m.tree_bytes, tm.tree_bytes, "tree_bytes");
    m.nodes_peak = checked_add(m.nodes_peak, tm.nodes_peak, "nodes_peak");
    m.min_count = checked_add(m.min_count, tm.min_count, "min_count");
    m.counters = checked_add(m.counters, tm.counters, "counters");
    m.max_depth = std::max(m.max_depth, tm.max_depth);
    m.epsilon = std::max(m.epsilon, tm.epsilon);
    m.start_ns = std::min(m.start_ns, tm.start_ns);
    m.end_ns = std::max(m.end_ns, tm.end_ns);
    if (tm.status == ThreadStatus::live_at_exit) m.status = ThreadStatus::live_at_exit;
    if (!seqs.empty()) seqs += ',';
    // Inputs that were merges already contribute what they were made of.
    const std::string *from = tm.find_extra("merged_from");
    const std::string *inner = tm.find_extra("merged_threads");
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
    total_nodes += t.nodes.size();
  }
  m.extra.emplace_back(across_processes ? "merged_from" : "merged_threads", seqs);
  if (across_processes) m.thread_seq = 0;
  std::vector<AddressMap> relocate = normalise_modules(threads, out.modules);

  // Union of the trees, nodes numbered in creation order (a parent is always created before its
  // children, but the order is not preorder once a later thread adds children to earlier nodes).
  std::vector<Node> merged(1);  // the root
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
      }
      Node &dst = merged[it->second];
      dst.count = checked_add(dst.count, n.count, "a node count");
      dst.flags |= n.flags;
      to_merged[i] = it->second;
    }
  }
  index = {};

  // Renumber into preorder with an explicit stack (trees can be deeper than the C++ stack).
  ChildIndex children = child_index(merged);
  out.nodes.reserve(merged.size());
  std::vector<uint32_t> new_index(merged.size());
  std::vector<uint32_t> stack{kRoot};
  while (!stack.empty()) {
    uint32_t v = stack.back();
    stack.pop_back();
    Node n = merged[v];
    new_index[v] = uint32_t(out.nodes.size());
    if (v != kRoot) n.parent = new_index[n.parent];
    out.nodes.push_back(n);
    auto kids = children.of(v);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back(*it);
  }
  return out;
}

}  // namespace

}  // namespace hcct::analysis
