#include "hcct/analysis/view.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "hcct/analysis/hot.h"

namespace hcct::analysis {

bool metric_known(const ThreadMeta &meta, const Node &node, uint64_t samples, Metric metric) {
  if (meta.mode != Mode::hcct) return true;
  return metric == Metric::time ? samples > 0 : node.monitored();
}

uint64_t metric_value(const ThreadMeta &meta, const Node &node, uint64_t samples, Metric metric) {
  if (!metric_known(meta, node, samples, metric)) return 0;
  return metric == Metric::time ? samples : node.count;
}

uint64_t metric_whole(const ThreadMeta &meta, Metric metric) {
  return metric == Metric::time ? meta.samples + meta.samples_lost : meta.all_calls();
}

namespace {

constexpr uint32_t kNone = UINT32_MAX;

// (parent view node, routine, call site) -> view node: open addressing with linear probing over the
// view's own nodes, at most half full (4 bytes per slot: a 10^7-node view costs 80 MB of index).
class ChildTable {
 public:
  explicit ChildTable(const std::vector<ViewNode> &nodes) : nodes_(nodes), slots_(1024, kNone) {}

  uint32_t find(uint32_t parent, uint64_t routine, uint64_t call_site) const {
    for (size_t i = hash(parent, routine, call_site) & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      uint32_t id = slots_[i];
      if (id == kNone) return kNone;
      const ViewNode &n = nodes_[id];
      if (n.parent == parent && n.routine == routine && n.call_site == call_site) return id;
    }
  }
  void insert(uint32_t id) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(id);
    ++size_;
  }

 private:
  // splitmix64's finalizer over each part: sequential parents and 16-byte-aligned addresses must
  // still spread over the low bits the table indexes by.
  static uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  static size_t hash(uint32_t parent, uint64_t routine, uint64_t call_site) {
    return size_t(mix(mix(mix(parent) ^ routine) ^ call_site));
  }
  void place(uint32_t id) {
    const ViewNode &n = nodes_[id];
    size_t i = hash(n.parent, n.routine, n.call_site) & (slots_.size() - 1);
    while (slots_[i] != kNone) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = id;
  }
  void grow() {
    std::vector<uint32_t> old(slots_.size() * 2, kNone);
    old.swap(slots_);
    for (uint32_t id : old)
      if (id != kNone) place(id);
  }

  const std::vector<ViewNode> &nodes_;
  std::vector<uint32_t> slots_;
  size_t size_ = 0;
};

struct Frame {
  uint64_t index = 0;      // in the source
  uint64_t routine = 0;
  uint32_t depth = 0;
  uint32_t view = kNone;   // view node, or kNone outside the view (ignored, or outside a focus)
  uint32_t routine_id = 0;     // dense id of `routine` (fold_recursion only)
  size_t previous = SIZE_MAX;  // the frame that was nearest for `routine` before this one
  bool registered = false;     // this frame is in the fold map
  bool ignored = false;        // it or a caller matches ViewOptions::ignore
  int64_t focus = -1;          // a focus match: index into ContextView::callers
  int64_t chain = -1;          // ... and its caller chain there
  uint64_t value = 0;          // its own value (for caller-chain totals)
  uint64_t below = 0;          // values of its in-view descendants (for caller-chain totals)
};

// The callers of a focused function, as the view folds them: a function seen again is cut back to
// its first occurrence (a recursion appears once); at most kMaxCallerDepth innermost callers kept.
std::vector<uint64_t> caller_chain(const std::vector<Frame> &stack, bool &cut) {
  constexpr size_t kLook = 4096;  // frames looked at: bounded work per match however deep
  size_t first = stack.size() > kLook ? stack.size() - kLook : 1;
  std::vector<uint64_t> chain;
  for (size_t k = first; k < stack.size(); ++k) {
    auto seen = std::find(chain.begin(), chain.end(), stack[k].routine);
    if (seen != chain.end()) chain.erase(seen + 1, chain.end());
    else chain.push_back(stack[k].routine);
  }
  cut = first > 1;
  if (chain.size() > kMaxCallerDepth) {
    chain.erase(chain.begin(), chain.end() - kMaxCallerDepth);
    cut = true;
  }
  return chain;
}

// The one preorder walk behind the view and the flat profile. The path from the root is a stack of
// frames: `enter(node, index, parent_frame)` makes a node's frame (the walk sets its `index`), `leave()`
// pops the top frame once its subtree is complete. Returns the number of nodes read.
template <class Frame, class Enter, class Leave>
uint64_t walk_preorder(NodeSource &source, std::vector<Frame> &stack, const Frame &root, const char *who,
                       const std::function<void(uint64_t)> &progress, Enter enter, Leave leave) {
  Node n;
  uint64_t index = 0;
  while (source.next(n)) {
    if (progress && (index & 0xffff) == 0) progress(index);
    if (index == 0) {
      stack.push_back(root);
      ++index;
      continue;
    }
    while (!stack.empty() && stack.back().index != n.parent) leave();
    if (stack.empty()) throw std::logic_error(std::string(who) + ": source not in preorder");
    Frame f = enter(n, index, stack.back());
    f.index = index++;
    stack.push_back(f);
  }
  if (progress) progress(index);
  return index;
}

}  // namespace

ContextView build_view(NodeSource &source, const ViewOptions &o, const std::function<void(uint64_t)> &progress) {
  if (!(o.phi >= 0 && o.phi <= 1)) throw std::invalid_argument("phi must be in [0, 1]");
  const ThreadMeta &meta = source.meta();
  ContextView v;
  v.metric = o.metric;
  v.whole = metric_whole(meta, o.metric);
  v.threshold = hot_threshold(o.phi, metric_whole(meta, o.metric));
  v.nodes.reserve(std::min<uint64_t>(source.node_count(), uint64_t(1) << 20));
  v.nodes.emplace_back();  // the root
  ChildTable children(v.nodes);
  // Routine -> the nearest in-view frame running it (SIZE_MAX: none). Routines get dense ids once,
  // so that entering and leaving a frame costs no allocation (10^7 frames).
  std::unordered_map<uint64_t, uint32_t> routine_id;
  std::vector<size_t> nearest;
  auto dense = [&](uint64_t routine) {
    auto [it, added] = routine_id.try_emplace(routine, uint32_t(nearest.size()));
    if (added) nearest.push_back(SIZE_MAX);
    return it->second;
  };
  std::unordered_map<uint32_t, size_t> focus_slot;  // focused view node -> index in v.callers
  std::vector<std::map<std::vector<uint64_t>, size_t>> chain_index;  // per focused function
  std::vector<Frame> stack;

  auto pop = [&] {
    Frame &f = stack.back();
    if (f.registered) {
      nearest[f.routine_id] = f.previous;
    }
    if (f.focus >= 0) v.callers[f.focus].chains[f.chain].total += f.value + f.below;
    else if (stack.size() > 1 && f.view != kNone) stack[stack.size() - 2].below += f.value + f.below;
    stack.pop_back();
  };

  Frame root;
  root.view = o.focus ? kNone : kViewRoot;  // with a focus, only matches enter the view
  if (!o.focus && !o.left_out.empty()) v.nodes[kViewRoot].left_out = o.left_out[0];
  auto enter = [&](const Node &n, uint64_t index, const Frame &parent) {
    Frame f;
    f.routine = n.routine;
    f.depth = parent.depth + 1;
    const uint64_t value = metric_value(meta, n, source.samples(), o.metric);
    f.ignored = parent.ignored || (o.ignore && o.ignore(n.routine));
    // Outside the view so far (focus given): a match re-roots.
    const bool focus_match = !f.ignored && parent.view == kNone && o.focus && o.focus(n.routine);
    if (f.ignored || (parent.view == kNone && !focus_match)) {
      ++v.ignored;
      v.ignored_value += value;
      return f;
    }
    f.value = value;
    const uint64_t missing = index < o.left_out.size() ? o.left_out[index] : 0;
    f.below += missing;
    uint32_t id = kNone;
    if (o.fold_recursion) f.routine_id = dense(n.routine);
    if (o.fold_recursion && nearest[f.routine_id] != SIZE_MAX) {
      id = stack[nearest[f.routine_id]].view;
      ++v.folded;
    } else {
      uint32_t parent_view = focus_match ? kViewRoot : parent.view;
      uint64_t site = focus_match ? 0 : n.call_site;
      id = children.find(parent_view, n.routine, site);
      if (id == kNone) {
        if (v.nodes.size() >= kNone) throw std::length_error("build_view: more than 2^32 view nodes");
        id = uint32_t(v.nodes.size());
        ViewNode vn;
        vn.routine = n.routine;
        vn.call_site = site;
        vn.parent = parent_view;
        vn.min_depth = f.depth;
        v.nodes.push_back(vn);
        children.insert(id);
      }
    }
    if (focus_match) {
      auto [slot, added] = focus_slot.try_emplace(id, v.callers.size());
      if (added) {
        v.callers.push_back({id, {}});
        chain_index.emplace_back();
      }
      CallerChain c;
      c.routines = caller_chain(stack, c.cut);
      std::vector<CallerChain> &chains = v.callers[slot->second].chains;
      auto [it, new_chain] = chain_index[slot->second].emplace(c.routines, chains.size());
      if (new_chain) chains.push_back(std::move(c));
      f.focus = int64_t(slot->second);
      f.chain = int64_t(it->second);
    }
    ViewNode &vn = v.nodes[id];
    vn.self += value;
    vn.left_out += missing;
    vn.calls += metric_value(meta, n, 0, Metric::calls);
    vn.known |= metric_known(meta, n, source.samples(), o.metric);
    vn.min_depth = std::min(vn.min_depth, f.depth);
    vn.max_depth = std::max(vn.max_depth, f.depth);
    ++vn.instances;
    if (metric_known(meta, n, source.samples(), o.metric) && value >= v.threshold) {
      ++vn.hot_instances;
      ++v.hot;
    }
    f.view = id;
    if (o.fold_recursion) {
      f.previous = nearest[f.routine_id];
      nearest[f.routine_id] = stack.size();
      f.registered = true;
    }
    return f;
  };
  v.source_nodes = walk_preorder(source, stack, root, "build_view", progress, enter, pop);
  while (!stack.empty()) pop();

  for (ContextView::FocusCallers &fc : v.callers)
    std::stable_sort(fc.chains.begin(), fc.chains.end(),
                     [](const CallerChain &a, const CallerChain &b) { return a.total > b.total; });
  // Totals bottom-up: every parent precedes its children.
  for (ViewNode &n : v.nodes) n.total = n.self + n.left_out;
  for (size_t i = v.nodes.size(); i-- > 1;) v.nodes[v.nodes[i].parent].total += v.nodes[i].total;
  return v;
}

std::string elide_template_arguments(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  size_t depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (depth == 0 && name.compare(i, 8, "operator") == 0) {
      // The operator's own punctuation is not a bracket: operator<, operator<<=, operator->.
      size_t j = i + 8;
      while (j < name.size() && std::string_view("<>=!+-*/%&|^~").find(name[j]) != std::string_view::npos) ++j;
      out.append(name.substr(i, j - i));
      i = j - 1;
      continue;
    }
    if (c == '<') {
      if (depth++ == 0) out += "<…>";
      continue;
    }
    if (c == '>' && depth > 0) {
      --depth;
      continue;
    }
    if (depth == 0) out += c;
  }
  if (depth != 0) return std::string(name);  // unbalanced: not a template argument list
  return out;
}

ChildIndex view_children(const ContextView &view) {
  const size_t n = view.nodes.size();
  ChildIndex c;
  c.offset.assign(n + 1, 0);
  for (size_t i = 1; i < n; ++i) ++c.offset[view.nodes[i].parent + 1];
  for (size_t i = 0; i < n; ++i) c.offset[i + 1] += c.offset[i];
  c.child.resize(n ? n - 1 : 0);
  std::vector<uint32_t> fill(c.offset.begin(), c.offset.end() - 1);
  for (size_t i = 1; i < n; ++i) c.child[fill[view.nodes[i].parent]++] = uint32_t(i);
  for (size_t i = 0; i < n; ++i) {
    auto begin = c.child.begin() + c.offset[i], end = c.child.begin() + c.offset[i + 1];
    std::stable_sort(begin, end, [&](uint32_t a, uint32_t b) {
      const ViewNode &x = view.nodes[a], &y = view.nodes[b];
      return x.total != y.total ? x.total > y.total : x.self > y.self;
    });
  }
  return c;
}

std::vector<FlatEntry> flat_profile(NodeSource &source, const ViewOptions &o,
                                    const std::function<void(uint64_t)> &progress) {
  const ThreadMeta &meta = source.meta();
  struct Frame {
    uint64_t index = 0, routine = 0;
    uint64_t subtree = 0;  // its value plus its in-view descendants' so far
    bool in_view = false, ignored = false;
  };
  std::unordered_map<uint64_t, size_t> slot;    // routine -> index in out
  std::unordered_map<uint64_t, uint32_t> running;  // routine -> in-view frames on the path
  std::vector<FlatEntry> out;
  std::vector<Frame> stack;
  auto pop = [&] {
    Frame f = stack.back();
    stack.pop_back();
    if (!f.in_view) return;
    auto r = running.find(f.routine);
    if (--r->second == 0) {
      running.erase(r);
      out[slot[f.routine]].total += f.subtree;  // the outermost call of the function on this path
    }
    if (!stack.empty()) stack.back().subtree += f.subtree;
  };
  Frame root;
  root.in_view = !o.focus;
  auto enter = [&](const Node &n, uint64_t, const Frame &parent) {
    Frame f;
    f.routine = n.routine;
    f.ignored = parent.ignored || (o.ignore && o.ignore(n.routine));
    f.in_view = !f.ignored && (parent.in_view || (o.focus && o.focus(n.routine)));
    if (f.in_view) {
      f.subtree = metric_value(meta, n, source.samples(), o.metric);
      auto [s, added] = slot.try_emplace(n.routine, out.size());
      if (added) out.push_back({n.routine});
      FlatEntry &e = out[s->second];
      e.self += f.subtree;
      e.calls += metric_value(meta, n, 0, Metric::calls);
      ++e.contexts;
      ++running[n.routine];
    }
    return f;
  };
  walk_preorder(source, stack, root, "flat_profile", progress, enter, pop);
  // The root's frame is not a function's: leave it out of the totals.
  while (stack.size() > 1) pop();
  std::stable_sort(out.begin(), out.end(), [](const FlatEntry &a, const FlatEntry &b) {
    return a.total != b.total ? a.total > b.total : a.self > b.self;
  });
  return out;
}

}  // namespace hcct::analysis
