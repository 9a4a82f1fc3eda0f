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

}  // namespace

ThreadProfile merge_threads(std::span<const ThreadProfile> threads) {
  std::vector<const ThreadProfile *> ptrs;
  for (const ThreadProfile &t : threads) ptrs.push_back(&t);
  return merge_threads(std::span<const ThreadProfile *const>(ptrs));
}

ThreadProfile merge_threads(std::span<const ThreadProfile *const> threads) {
  if (threads.empty()) throw std::invalid_argument("merge: no threads");
  const ThreadMeta &first = threads[0]->meta;
  for (const ThreadProfile *tp : threads) {
    const ThreadProfile &t = *tp;
    const std::string who = t.source.empty() ? "thread " + std::to_string(t.meta.thread_seq) : t.source;
    if (t.meta.pid != first.pid) throw std::invalid_argument("merge: " + who + " belongs to another process");
    if (t.meta.mode != first.mode)
      throw std::invalid_argument("merge: " + who + " is in " + std::string(to_string(t.meta.mode)) + " mode, not " +
                                  std::string(to_string(first.mode)));
    if (t.meta.key != first.key) throw std::invalid_argument("merge: " + who + " uses another node key");
  }

  ThreadProfile out;
  out.meta = first;
  out.meta.extra.erase(std::remove_if(out.meta.extra.begin(), out.meta.extra.end(),
                                      [](const auto &kv) { return kv.first == "merged_threads"; }),
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
    seqs += std::to_string(tm.thread_seq);
    total_nodes += t.nodes.size();
    for (const Module &mod : t.modules)
      if (std::find(out.modules.begin(), out.modules.end(), mod) == out.modules.end()) out.modules.push_back(mod);
  }
  m.extra.emplace_back("merged_threads", seqs);

  // Union of the trees, nodes numbered in creation order (a parent is always created before its
  // children, but the order is not preorder once a later thread adds children to earlier nodes).
  std::vector<Node> merged(1);  // the root
  std::unordered_map<ChildKey, uint32_t, ChildKeyHash> index;
  index.reserve(std::min<size_t>(total_nodes, size_t(1) << 26));
  std::vector<uint32_t> to_merged;
  for (const ThreadProfile *tp : threads) {
    const ThreadProfile &t = *tp;
    to_merged.assign(t.nodes.size(), 0);
    merged[kRoot].flags |= t.nodes[kRoot].flags;
    for (uint32_t i = 1; i < t.nodes.size(); ++i) {
      const Node &n = t.nodes[i];
      ChildKey key{to_merged[n.parent], n.routine, n.call_site};
      auto [it, inserted] = index.try_emplace(key, uint32_t(merged.size()));
      if (inserted) {
        if (merged.size() >= UINT32_MAX) throw std::invalid_argument("merge: more than 2^32-1 nodes");
        Node fresh = n;
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

}  // namespace hcct::analysis
