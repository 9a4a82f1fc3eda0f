// The Ball-Larus DAG of one function and its path numbering (thesis §3.2.2, Algorithm 3).
//
// Header-only and free of LLVM so that the pass (numbering), the offline decoder (analysis/) and the
// property tests share one implementation. Node 0 is the function entry; node `exit()` is a virtual
// exit that every returning, unwinding or dead-end block reaches through an edge of kind kExit.
// Back edges are not edges of this graph: each is replaced by two dummy edges, entry→header (kStart)
// and latch→exit (kBreak), which preserves the number of acyclic paths and is reversible.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace hcct::kpath {

enum class EdgeKind : uint8_t {
  kBranch = 0,  // a CFG edge that is not a back edge
  kStart = 1,   // dummy entry→header: a path that starts after a back edge into `to`
  kBreak = 2,   // dummy latch→exit: a path that ends by taking a back edge out of `from`
  kExit = 3,    // block→virtual exit: return, resume, noreturn call or unreachable
};
inline constexpr uint8_t kMaxEdgeKind = 3;

struct DagEdge {
  uint32_t from = 0;
  uint32_t to = 0;
  EdgeKind kind = EdgeKind::kBranch;
  uint64_t val = 0;  // Ball-Larus increment, set by number()
};

class PathGraph {
 public:
  // `blocks` CFG nodes (0 = entry) plus the virtual exit.
  explicit PathGraph(uint32_t blocks = 1) : blocks_(blocks), out_(blocks + 1) {}

  uint32_t blocks() const { return blocks_; }
  uint32_t exit() const { return blocks_; }
  const std::vector<DagEdge> &edges() const { return edges_; }
  // Outgoing edges of `node` in numbering order (the order they were added).
  const std::vector<uint32_t> &out(uint32_t node) const { return out_[node]; }

  uint32_t add_edge(uint32_t from, uint32_t to, EdgeKind kind) {
    edges_.push_back({from, to, kind, 0});
    out_[from].push_back(uint32_t(edges_.size() - 1));
    return uint32_t(edges_.size() - 1);
  }

  // Nodes in topological order (entry-reachable ones only), or nullopt if the graph has a cycle.
  std::optional<std::vector<uint32_t>> topological_order() const {
    std::vector<uint32_t> order;
    std::vector<uint8_t> state(blocks_ + 1, 0);  // 0 new, 1 on stack, 2 done
    std::vector<std::pair<uint32_t, size_t>> stack{{0u, size_t(0)}};
    state[0] = 1;
    while (!stack.empty()) {
      auto &[node, next] = stack.back();
      if (next < out_[node].size()) {
        uint32_t to = edges_[out_[node][next++]].to;
        if (state[to] == 1) return std::nullopt;
        if (state[to] == 0) {
          state[to] = 1;
          stack.push_back({to, 0});
        }
      } else {
        state[node] = 2;
        order.push_back(node);
        stack.pop_back();
      }
    }
    return std::vector<uint32_t>(order.rbegin(), order.rend());
  }

  // Algorithm 3: in reverse topological order, numPaths(exit) = 1 and each edge's value is the
  // number of paths through the edges before it. Fails (leaving values unspecified) if the graph is
  // cyclic or the number of entry-to-exit paths exceeds `limit` — never a wrapped-around ID.
  bool number(uint64_t limit = std::numeric_limits<uint64_t>::max()) {
    auto order = topological_order();
    if (!order) return false;
    paths_from_.assign(blocks_ + 1, 0);
    for (auto it = order->rbegin(); it != order->rend(); ++it) {
      uint32_t v = *it;
      if (v == exit()) {
        paths_from_[v] = 1;
        continue;
      }
      uint64_t n = 0;
      for (uint32_t e : out_[v]) {
        edges_[e].val = n;
        uint64_t w = paths_from_[edges_[e].to];
        if (w > limit - n) return false;
        n += w;
      }
      paths_from_[v] = n;
    }
    num_paths_ = paths_from_[0];
    return num_paths_ >= 1;
  }

  uint64_t num_paths() const { return num_paths_; }
  // numPaths(v) after number(): paths from v to the exit.
  uint64_t paths_from(uint32_t v) const { return paths_from_[v]; }

  // The entry-to-exit path whose values sum to `id`, as edge indices; nullopt if id >= num_paths().
  // At each node the path takes the last edge whose value does not exceed what is left of the ID.
  std::optional<std::vector<uint32_t>> decode(uint64_t id) const {
    if (id >= num_paths_) return std::nullopt;
    std::vector<uint32_t> path;
    uint32_t v = 0;
    while (v != exit()) {
      const std::vector<uint32_t> &out = out_[v];
      if (out.empty()) return std::nullopt;
      uint32_t chosen = out[0];
      for (uint32_t e : out)
        if (edges_[e].val <= id) chosen = e;
      id -= edges_[chosen].val;
      path.push_back(chosen);
      v = edges_[chosen].to;
      if (path.size() > edges_.size()) return std::nullopt;  // corrupt values
    }
    if (id != 0) return std::nullopt;
    return path;
  }

  // Sum of the values along `path` (edge indices).
  uint64_t id_of(const std::vector<uint32_t> &path) const {
    uint64_t id = 0;
    for (uint32_t e : path) id += edges_[e].val;
    return id;
  }

  // The blocks a path (edge indices, as from decode) runs through, in order. A path that starts
  // with a kStart dummy begins at the loop header; otherwise at the entry.
  std::vector<uint32_t> blocks_of(const std::vector<uint32_t> &path) const {
    std::vector<uint32_t> out;
    for (uint32_t i = 0; i < path.size(); ++i) {
      const DagEdge &e = edges_[path[i]];
      if (i == 0 && e.kind != EdgeKind::kStart) out.push_back(e.from);
      if (e.to != exit()) out.push_back(e.to);
    }
    return out;
  }

  // Ball-Larus increment placement ("Efficient Path Profiling", 1996, §3.3: event counting on the
  // chords of a spanning tree). Returns one increment per edge such that the increments along any
  // entry-to-exit path sum to its ID (mod 2^64, like the values: IDs are unchanged, so the decoder
  // and every offline tool keep using the values), and every edge of a maximum spanning tree of
  // the undirected graph plus a virtual edge exit→entry has increment 0. With `weight` an estimate
  // of how often each edge runs, the hot edges are tree edges and carry no instruction.
  //
  // Why it is exact: give each node a potential p, p(entry) = p(exit) = 0 (the virtual edge is in
  // the tree) and p(v) = p(u) + val(e) along every tree edge u→v; then inc(e) = val(e) + p(u) − p(v)
  // is 0 on tree edges, and along a path the potentials telescope to p(entry) − p(exit) = 0.
  // Call after number(). Ties keep the lower edge index (deterministic placement).
  std::vector<uint64_t> chord_increments(const std::vector<uint64_t> &weight) const {
    const uint32_t nodes = blocks_ + 1;
    std::vector<uint32_t> parent(nodes);
    for (uint32_t v = 0; v < nodes; ++v) parent[v] = v;
    auto find = [&](uint32_t v) {
      while (parent[v] != v) v = parent[v] = parent[parent[v]];
      return v;
    };
    std::vector<uint32_t> order(edges_.size());
    for (uint32_t e = 0; e < order.size(); ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return weight[a] > weight[b]; });
    parent[exit()] = 0;  // the virtual edge exit→entry, always in the tree
    // Tree adjacency: (neighbour, edge index, whether the edge leaves this node).
    struct TreeArc {
      uint32_t to, edge;
      bool forward;
    };
    std::vector<std::vector<TreeArc>> tree(nodes);
    for (uint32_t e : order) {
      const DagEdge &d = edges_[e];
      uint32_t a = find(d.from), b = find(d.to);
      if (a == b) continue;
      parent[a] = b;
      tree[d.from].push_back({d.to, e, true});
      tree[d.to].push_back({d.from, e, false});
    }
    std::vector<uint64_t> potential(nodes, 0);
    std::vector<uint8_t> done(nodes, 0);
    std::vector<uint32_t> stack;
    for (uint32_t root : {0u, exit()}) {  // both at potential 0: the virtual edge's ends
      if (done[root]) continue;
      done[root] = 1;
      stack.push_back(root);
      while (!stack.empty()) {
        uint32_t v = stack.back();
        stack.pop_back();
        for (const TreeArc &arc : tree[v]) {
          if (done[arc.to]) continue;
          done[arc.to] = 1;
          uint64_t val = edges_[arc.edge].val;
          potential[arc.to] = arc.forward ? potential[v] + val : potential[v] - val;
          stack.push_back(arc.to);
        }
      }
    }
    std::vector<uint64_t> inc(edges_.size());
    for (uint32_t e = 0; e < edges_.size(); ++e)
      inc[e] = edges_[e].val + potential[edges_[e].from] - potential[edges_[e].to];
    return inc;
  }

  // Restores values read from elsewhere (metadata); checked by the caller against number().
  void set_val(uint32_t edge, uint64_t val) { edges_[edge].val = val; }

 private:
  uint32_t blocks_;
  std::vector<std::vector<uint32_t>> out_;
  std::vector<DagEdge> edges_;
  std::vector<uint64_t> paths_from_;
  uint64_t num_paths_ = 0;
};

}  // namespace hcct::kpath
