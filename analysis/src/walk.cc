#include "hcct/analysis/walk.h"

#include <stdexcept>

#include "hcct/analysis/hot.h"
#include "hcct/analysis/reader.h"

namespace hcct::analysis {

const ThreadMeta &StreamSource::meta() const { return s_.meta(); }
const std::vector<Module> &StreamSource::modules() const { return s_.modules(); }
uint64_t StreamSource::node_count() const { return s_.node_count(); }
bool StreamSource::next(Node &node) {
  if (!s_.next(node)) return false;
  const auto &time = s_.time_samples();
  samples_ = time_at_ < time.size() && time[time_at_].first == index_ ? time[time_at_++].second : 0;
  ++index_;
  return true;
}

std::string_view to_string(Metric m) { return m == Metric::time ? "time" : "calls"; }

std::optional<Metric> metric_named(std::string_view name) {
  if (name == "calls") return Metric::calls;
  if (name == "time") return Metric::time;
  return std::nullopt;
}

std::vector<uint64_t> total_samples(const ThreadProfile &p) {
  if (p.samples.empty()) return {};
  std::vector<uint64_t> total = p.samples;
  for (size_t i = total.size(); i-- > 1;) total[p.nodes[i].parent] += total[i];
  return total;
}

namespace {
struct FrameState {
  bool has_id = false;
  bool in_focus = false;
  bool ignored = false;
  bool kept = false;  // something below was kept, or deeper nodes were charged to it
};
}  // namespace

WalkStats walk_tree(NodeSource &source, const TreeFilter &filter, const EmitFn &emit,
                    const std::function<void(uint64_t)> &progress) {
  const ThreadMeta &meta = source.meta();
  WalkStats stats;
  const bool time = filter.metric == Metric::time;
  if (time && !meta.timed())
    throw std::invalid_argument("the profile has no time metric (recorded with time=off, with bursting, or by a "
                                "runtime before format version 2)");
  // Shares are of every call (or sample), lost ones too.
  stats.threshold = hot_threshold(filter.min_share, time ? meta.samples + meta.samples_lost : meta.all_calls());
  const bool hcct = meta.mode == Mode::hcct;
  const bool timed = meta.timed();
  const uint64_t sample_threshold = timed ? hot_threshold(filter.min_share, meta.samples + meta.samples_lost) : 0;
  const uint32_t cut = filter.max_depth;
  const bool keep_totals = filter.keep_total_share >= 0;
  if (keep_totals && !(filter.keep_total_share <= 1)) throw std::invalid_argument("keep_total_share must be in [0, 1]");
  const uint64_t total_threshold =
      keep_totals ? hot_threshold(filter.keep_total_share, time ? meta.samples + meta.samples_lost : meta.all_calls()) : 0;

  std::vector<WalkNode> stack;  // the current root path
  std::vector<FrameState> state;
  uint32_t next_id = 0;

  // Gives ids to the frames up to k that have none, top-down (the root always has one).
  auto assign_ids = [&](size_t k) {
    size_t j = k;
    while (!state[j].has_id) --j;
    for (++j; j <= k; ++j) {
      stack[j].id = next_id++;
      stack[j].parent = stack[j - 1].id;
      state[j].has_id = true;
    }
  };

  auto close_top = [&] {
    const size_t k = stack.size() - 1;
    WalkNode &w = stack[k];
    FrameState &st = state[k];
    if (k > 0) {
      stack[k - 1].subtree += w.subtree;
      stack[k - 1].total_samples += w.total_samples;  // every node, kept or not
    }
    if (k > 0 && cut && w.depth > cut) {
      WalkNode &top = stack[cut];
      if (w.selected) {
        top.count += w.count;
        top.total += w.count;
        top.truncated = true;
        state[cut].kept = true;
        ++stats.selected;
      }
      if (w.sample_count) {
        top.sample_count += w.sample_count;
        top.sample_total += w.sample_count;
        top.truncated = true;
        state[cut].kept = true;
      }
    } else if (k == 0 || w.selected || st.kept || (keep_totals && w.subtree >= total_threshold) ||
               (filter.keep_sampled && w.sample_count)) {
      if (!st.has_id) assign_ids(k);
      if (k > 0) {
        ++stats.kept;
        stats.selected += w.selected;
      } else {
        stats.total = w.total;
      }
      emit(w, std::span<const WalkNode>(stack.data(), k));
      if (k > 0) {
        stack[k - 1].total += w.total;
        stack[k - 1].sample_total += w.sample_total;
        state[k - 1].kept = true;
      }
    }
    stack.pop_back();
    state.pop_back();
  };

  Node n;
  uint64_t index = 0;
  while (source.next(n)) {
    if (progress && (index & 0xffff) == 0) progress(index);
    if (index == 0) {
      WalkNode root;
      root.node = n;
      root.samples = root.total_samples = source.samples();
      // Samples charged to the thread's root context (outside every instrumented function).
      root.sample_count = root.sample_total = timed ? root.samples : 0;
      stack.push_back(root);
      FrameState fs;
      fs.has_id = true;
      fs.in_focus = !filter.focus;
      state.push_back(fs);
      next_id = 1;
      ++index;
      continue;
    }
    while (!stack.empty() && stack.back().index != n.parent) close_top();
    // The sources guarantee preorder, so the parent is on the path.
    if (stack.empty()) throw std::logic_error("walk_tree: source not in preorder");
    const WalkNode &parent = stack.back();
    const FrameState &pst = state.back();
    WalkNode w;
    w.index = index;
    w.node = n;
    w.depth = parent.depth + 1;
    FrameState fs;
    fs.ignored = pst.ignored || (filter.ignore && filter.ignore(n.routine));
    fs.in_focus = pst.in_focus || (filter.focus && filter.focus(n.routine));
    w.samples = w.total_samples = source.samples();
    const uint64_t value = time ? w.samples : n.count;
    const bool countable = time ? (!hcct || value) : (!hcct || n.monitored());
    w.selected = !fs.ignored && fs.in_focus && countable && value >= stats.threshold;
    if (!fs.ignored && fs.in_focus && countable && !w.selected) {
      ++stats.below_threshold;
      stats.below_threshold_count += value;
    }
    w.count = w.selected ? value : 0;
    w.total = w.count;
    // The same filters by time (hcct mode: only nodes that hold a time counter estimate samples).
    if (timed && !fs.ignored && fs.in_focus && w.samples && w.samples >= sample_threshold) w.sample_count = w.samples;
    w.sample_total = w.sample_count;
    w.subtree = !fs.ignored && countable ? value : 0;
    stack.push_back(w);
    state.push_back(fs);
    ++index;
  }
  while (!stack.empty()) close_top();
  stats.nodes = index;
  if (progress) progress(index);
  return stats;
}

}  // namespace hcct::analysis
