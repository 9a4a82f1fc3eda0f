#include "hcct/analysis/profile.h"

#include <algorithm>
#include <charconv>
#include <set>

namespace hcct::analysis {

std::string_view to_string(Mode m) {
  switch (m) {
    case Mode::empty: return "empty";
    case Mode::cct: return "cct";
    case Mode::hcct: return "hcct";
  }
  return "?";
}

std::optional<double> ThreadMeta::sampled_fraction() const {
  const std::string *f = find_extra(format::meta::kSampledFraction);
  if (!f) return std::nullopt;
  double v = 0;
  auto [ptr, ec] = std::from_chars(f->data(), f->data() + f->size(), v);
  // The negated comparison also rejects NaN.
  if (ec != std::errc() || ptr != f->data() + f->size() || !(v > 0 && v <= 1)) return std::nullopt;
  return v;
}

ModuleMap::ModuleMap(std::span<const Module> modules) {
  // Sweep over the range boundaries: between two consecutive boundaries the set of covering
  // modules is constant, and its smallest index is the answer.
  struct Event {
    uint64_t at;
    bool open;
    int64_t module;
  };
  std::vector<Event> events;
  events.reserve(2 * modules.size());
  for (size_t i = 0; i < modules.size(); ++i) {
    if (modules[i].lo >= modules[i].hi) continue;
    events.push_back({modules[i].lo, true, int64_t(i)});
    events.push_back({modules[i].hi, false, int64_t(i)});
  }
  std::sort(events.begin(), events.end(), [](const Event &a, const Event &b) { return a.at < b.at; });
  std::set<int64_t> active;
  for (size_t e = 0; e < events.size();) {
    const uint64_t at = events[e].at;
    for (; e < events.size() && events[e].at == at; ++e) {
      if (events[e].open) active.insert(events[e].module);
      else active.erase(events[e].module);
    }
    const int64_t owner = active.empty() ? -1 : *active.begin();
    if (owner_.empty() || owner_.back() != owner) {
      starts_.push_back(at);
      owner_.push_back(owner);
    }
  }
}

int64_t ModuleMap::find(uint64_t address) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), address);
  if (it == starts_.begin()) return -1;
  return owner_[size_t(it - starts_.begin()) - 1];
}

std::string_view to_string(KeyKind k) { return k == KeyKind::site ? "site" : "routine"; }

std::string_view to_string(ThreadStatus s) {
  return s == ThreadStatus::exited ? "exited" : "live-at-exit";
}

const std::string *ThreadMeta::find_extra(std::string_view key) const {
  for (const auto &[k, v] : extra)
    if (k == key) return &v;
  return nullptr;
}

size_t ThreadProfile::monitored_nodes() const {
  return size_t(std::count_if(nodes.begin(), nodes.end(), [](const Node &n) { return n.monitored(); }));
}

std::vector<uint32_t> node_depths(std::span<const Node> nodes) {
  std::vector<uint32_t> depth(nodes.size(), 0);
  for (size_t i = 1; i < nodes.size(); ++i) depth[i] = depth[nodes[i].parent] + 1;
  return depth;
}

std::vector<uint32_t> subtree_ends(std::span<const Node> nodes) {
  std::vector<uint32_t> end(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) end[i] = uint32_t(i + 1);
  // Reverse preorder visits every child before its parent, so a child's final end is known when it
  // is propagated upwards.
  for (size_t i = nodes.size(); i-- > 1;) {
    uint32_t p = nodes[i].parent;
    end[p] = std::max(end[p], end[i]);
  }
  return end;
}

ChildIndex child_index(std::span<const Node> nodes) {
  ChildIndex ix;
  ix.offset.assign(nodes.size() + 1, 0);
  for (size_t i = 1; i < nodes.size(); ++i) ++ix.offset[nodes[i].parent + 1];
  for (size_t i = 0; i < nodes.size(); ++i) ix.offset[i + 1] += ix.offset[i];
  ix.child.resize(nodes.size() ? nodes.size() - 1 : 0);
  std::vector<uint32_t> fill(ix.offset.begin(), ix.offset.end() - 1);
  for (size_t i = 1; i < nodes.size(); ++i) ix.child[fill[nodes[i].parent]++] = uint32_t(i);
  return ix;
}

}  // namespace hcct::analysis
