// hcct report: the (φ,ε)-HCCT of each thread (or of each process, with --merge-threads), with φ
// chosen now, after the run.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "common.h"
#include "text_layout.h"
#include "hcct/analysis/hot.h"
#include "hcct/analysis/view.h"
#include "hcct/analysis/merge.h"
#include "hcct/analysis/reader.h"

namespace hcct::cli {
namespace {

using analysis::HotSet;
using analysis::Mode;
using analysis::NodeClass;
using analysis::PrunedTree;
using analysis::ThreadProfile;

struct ReportOptions {
  InputOptions in;
  FilterOptions filter;
  double phi = 1e-4;
  bool merge = false;
  unsigned depth = 0;  // 0: unlimited
  std::string color = "auto";
  long width = -1;     // -1: the terminal's (output_width)
  bool no_fold = false;
  bool flat = false;
  NameStyle names;
  analysis::Metric metric = analysis::Metric::calls;
  std::string metric_name = "calls";  // --sort
};

// One output line: a node of the pruned tree at its place in the display order.
struct Row {
  uint32_t node;        // index in the pruned tree
  uint32_t depth;       // 1 for children of the root
  int64_t parent_row;   // -1 for depth 1
  bool cut;             // has children hidden by --depth
};

// Preorder with children sorted by count, descending. A cold ancestor has no count of its own that
// ranks it, so it sorts by the largest hot count below it: the branch holding the hottest context
// comes first.
std::vector<Row> display_order(const PrunedTree &t, unsigned max_depth) {
  const size_t n = t.nodes.size();
  std::vector<uint64_t> key(n, 0);
  for (size_t i = 0; i < n; ++i)
    if (t.cls[i] == NodeClass::hot) key[i] = t.nodes[i].count;
  for (size_t i = n; i-- > 1;) {
    uint32_t p = t.nodes[i].parent;
    if (t.cls[p] != NodeClass::hot) key[p] = std::max(key[p], key[i]);
  }
  analysis::ChildIndex kids = analysis::child_index(t.nodes);
  for (size_t v = 0; v < n; ++v) {
    auto begin = kids.child.begin() + kids.offset[v], end = kids.child.begin() + kids.offset[v + 1];
    std::stable_sort(begin, end, [&](uint32_t a, uint32_t b) { return key[a] > key[b]; });
  }
  std::vector<Row> rows;
  rows.reserve(n);
  struct Item {
    uint32_t node, depth;
    int64_t parent_row;
  };
  std::vector<Item> stack;
  auto push_children = [&](uint32_t v, uint32_t depth, int64_t row) {
    auto c = kids.of(v);
    for (auto it = c.rbegin(); it != c.rend(); ++it) stack.push_back({*it, depth + 1, row});
  };
  push_children(analysis::kRoot, 0, -1);
  while (!stack.empty()) {
    Item it = stack.back();
    stack.pop_back();
    bool has_kids = !kids.of(it.node).empty();
    bool cut = max_depth && it.depth >= max_depth && has_kids;
    rows.push_back({it.node, it.depth, it.parent_row, cut});
    if (!cut) push_children(it.node, it.depth, int64_t(rows.size() - 1));
  }
  return rows;
}

// What the sampled fraction is worth (docs/BURSTING.md, "The estimator" and "Closed-gate bursts").
std::string burst_estimator_note(const analysis::ThreadMeta &m) {
  const std::string *clock = m.find_extra(format::meta::kBurstClock);
  const std::string *basis = m.find_extra(format::meta::kSampledFractionBasis);
  if (clock && *clock == "events")
    return "# estimator: every burst window sampled the same fraction of the thread's calls (burst_clock=events): "
           "unbiased in every phase; expected average error on hot contexts <= 10 % (docs/BENCHMARKS.md)\n";
  if (basis && *basis == "events")
    return "# estimator: one counted fraction for the whole run (burst_clock=time): phases that bursts slow down more "
           "are under-counted, the others over-counted (errors of 10-50 % seen; docs/BURSTING.md)\n";
  // The gate was closed between bursts: the fraction of wall time in bursts stands for the fraction
  // of calls, and over-states it by the in-burst slowdown of each phase.
  return "# estimator: fraction of wall time in bursts (gate closed between bursts, burst_clock=time): each phase's "
         "counts are low by about its in-burst slowdown (x0.14-0.17 on a phase of 2-ns calls; 54-91 % average error "
         "on real programs); shares within a phase hold; for counts use burst_sync=shadow (docs/BURSTING.md, "
         "\"Closed-gate bursts\")\n";
}

// In hcct mode an unmonitored node's count is not an estimate of anything.
bool count_known(const analysis::ThreadMeta &m, const analysis::Node &n) {
  return m.mode != Mode::hcct || n.monitored();
}

std::string format_double(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

// The lines every text view of a tree starts with: where it comes from, what N and the threshold
// are, and what the counts can be trusted for.
std::string report_header(const TreeInput &t, const ReportOptions &o, uint64_t threshold) {
  const analysis::ThreadMeta &m = *t.meta;
  std::string out;
  ThreadProfile label_of;
  label_of.meta = m;
  // Bytes from the file (paths, META values) are escaped where they are inserted: a newline in them
  // must not start a line of its own.
  out += "# " + escape_text((t.source.empty() ? std::string("(merged)") : t.source) + ": " + thread_label(label_of)) + "\n";
  if (!m.cmdline.empty()) {
    out += "# command: " + escape_text(shell_join(m.cmdline));
    // A merge of runs of several commands lists them all (docs/ANALYSIS.md, "META of a merged profile").
    if (const std::string *commands = m.find_extra(format::meta::kMergedCommands))
      out += " (merged with " + std::to_string(std::count(commands->begin(), commands->end(), '\x1e')) +
             " other commands: merged_commands in hcct info)";
    out += "\n";
  }
  const char *whole = o.metric == analysis::Metric::time ? "all samples" : m.lost ? "all calls" : "N";
  out += "# mode " + std::string(analysis::to_string(m.mode)) + ", key " + std::string(analysis::to_string(m.key)) +
         ": " + calls_summary(m) + "; phi = " + format_double(o.phi) + ", threshold floor(phi*" + whole +
         ") = " + with_commas(threshold) + "\n";
  if (m.mode == Mode::hcct) {
    // A minimum counter of 0 means the counters never filled: no context was ever evicted, so every
    // count is exact (Space-Saving overestimates only through evictions).
    out += "# epsilon = " + format_double(m.epsilon) + " (" + with_commas(m.counters) + " counters): " +
           (m.min_count == 0 ? std::string("counts are exact (the counters never filled, nothing was evicted)")
                             : "counts are estimates, each at most " + with_commas(m.min_count) +
                                   " above the true count (epsilon*N = " + format_double(m.epsilon * double(m.calls)) +
                                   ")") +
           "\n";
    if (o.phi <= m.epsilon)
      out += "# note: phi <= epsilon, so contexts near the threshold may be false positives; choose phi > epsilon\n";
  } else if (m.mode == Mode::cct) {
    out += "# counts are exact\n";
  }
  if (m.find_extra(format::meta::kBurstScaled)) {  // a merge scaled each input by its own fraction
    out += "# sampled (static bursting), merged: each thread's counts were scaled by its own sampled fraction, so counts "
           "are whole-run estimates\n";
  } else if (const std::string *f = m.find_extra(format::meta::kSampledFraction)) {  // static bursting (docs/BURSTING.md)
    const std::string *basis = m.find_extra(format::meta::kSampledFractionBasis);
    double fraction = std::strtod(f->c_str(), nullptr);
    out += "# sampled (static bursting): counts are of the calls made during bursts, a fraction " + format_double(fraction) +
           " of all calls (" + (basis && *basis == "events" ? std::string("counted") : std::string("estimated from time; an upper bound")) +
           "); scale by " + format_double(fraction > 0 ? 1 / fraction : 0) + " for whole-run counts\n";
  }
  if (m.timed()) out += "# " + time_summary(m) + "\n";
  if (o.metric == analysis::Metric::time) {
    out += "# sorted by time: self and total are " + std::string(m.time == "wall" ? "wall-clock" : "CPU-time") +
           " samples (total: the context and everything it called), "
           "phi applies to self samples";
    if (m.mode == Mode::hcct)
      out += "; in hcct mode each self figure overcounts by at most " + with_commas(m.time_min_count) +
             " samples, and '-' marks a context that holds no time counter";
    out += "\n";
  }
  if (m.find_extra(format::meta::kBurst))  // the estimator's expected error (docs/BURSTING.md, "The estimator")
    out += burst_estimator_note(m);
  for (const std::string &w : loss_warnings(m)) out += "# warning: " + w + "\n";
  if (m.dropped) out += "# note: " + with_commas(m.dropped) + " events were dropped (arrived while the runtime was busy)\n";
  return out;
}

// The share columns of a view: "12,345   1.23%" with the count right-aligned in `width`.
std::string count_and_share(uint64_t value, bool known, uint64_t whole, size_t width) {
  std::string count = known ? with_commas(value) : "-", share = known ? percent(value, whole) : "-";
  return std::string(width > count.size() ? width - count.size() : 0, ' ') + count + " " +
         std::string(share.size() < 8 ? 8 - share.size() : 0, ' ') + share;
}

// A share coloured by size on a terminal: >= 10% red, >= 1% yellow.
std::string colour_share(const std::string &text, uint64_t value, uint64_t whole, bool color) {
  if (!color || !whole) return text;
  double share = double(value) / double(whole);
  if (share >= 0.1) return "\033[31m" + text + "\033[0m";
  if (share >= 0.01) return "\033[33m" + text + "\033[0m";
  return text;
}

// One line of a text view: the columns (plain and coloured), indentation, the context fitted into
// what is left of `width`. A line never exceeds `width` columns (0: unlimited).
std::string view_line(const std::string &columns, const std::string &coloured_columns, const std::string &indent,
                      const std::string &function, const std::string &definition, const std::string &site,
                      size_t width) {
  size_t used = display_width(columns) + display_width(indent);
  if (width && used >= width) return fit(columns + indent, width);
  std::string context = fit_context(function, definition, site, width ? width - used : 0);
  return coloured_columns + indent + context;
}

struct TextView {
  const TreeInput &t;
  const ReportOptions &o;
  const analysis::ContextView &v;
  size_t width;
  bool color;
  size_t count_width;

  std::string columns(const analysis::ViewNode &n, bool coloured) const {
    std::string total = count_and_share(n.total, true, v.whole, count_width);
    std::string self = count_and_share(n.self, n.known, v.whole, count_width);
    if (coloured) self = colour_share(self, n.self, v.whole, color);
    return total + "  " + self + "  ";
  }

  // A folded recursion: "name ↻K" (K contexts folded), short enough to survive fitting; its depth
  // range goes with the definition, which is the first thing a narrow line drops.
  std::string function_text(const analysis::ViewNode &n) const {
    std::string f = display_function(t.names->routine(n.routine), o.names);
    if (n.instances > 1) f += " ↻" + with_commas(n.instances);
    return f;
  }
  std::string definition_text(const analysis::ViewNode &n) const {
    std::string def = display_definition(t.names->routine(n.routine), o.names);
    if (n.instances > 1)
      def += std::string(def.empty() ? "" : "; ") + "recursion folded: " + with_commas(n.instances) + " contexts, depth " +
             with_commas(n.min_depth) + ".." + with_commas(n.max_depth);
    return def;
  }

  std::string line(uint32_t id, uint32_t depth, bool hot, bool cut) const {
    const analysis::ViewNode &n = v.nodes[id];
    const analysis::Symbol *parent = n.parent == analysis::kViewRoot ? nullptr : &t.names->routine(v.nodes[n.parent].routine);
    std::string site = n.call_site ? display_call_site(t.names->call_site(n.call_site), parent, o.names) : std::string();
    // A subtree cut by --depth ends in "  ...", kept whatever the width.
    const std::string cut_mark = cut ? "  ..." : "";
    const size_t room = width == 0 ? 0 : width > cut_mark.size() ? width - cut_mark.size() : 1;
    std::string plain = columns(n, false);
    std::string text = view_line(plain, color && hot ? columns(n, true) : plain, indentation(depth), function_text(n),
                                 definition_text(n), site, room);
    text += cut_mark;
    if (color && !hot) text = "\033[2m" + text + "\033[0m";
    return text;
  }
};

// The width of the count columns: the largest count shown, at least "count".
size_t count_column_width(const analysis::ContextView &v) {
  return std::max<size_t>(7, with_commas(std::max(v.whole, v.nodes[analysis::kViewRoot].total)).size());
}

// What the tree view shows: hot contexts (own count >= threshold) and their ancestors; with
// nothing hot, the contexts with the largest totals (calls spread thin), and why.
constexpr size_t kFallbackContexts = 30;
std::vector<char> shown_contexts(const analysis::ContextView &v, std::string &why) {
  const size_t n = v.nodes.size();
  std::vector<char> shown(n, 0);
  bool any = false;
  for (size_t i = 1; i < n; ++i)
    if (v.nodes[i].hot_instances) shown[i] = any = true;
  if (!any && n > 1) {
    std::vector<uint32_t> order(n - 1);
    for (size_t i = 1; i < n; ++i) order[i - 1] = uint32_t(i);
    size_t k = std::min(kFallbackContexts, order.size());
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](uint32_t a, uint32_t b) { return v.nodes[a].total > v.nodes[b].total; });
    for (size_t i = 0; i < k; ++i) shown[order[i]] = true;
    why = "no context reaches the threshold on its own (its calls are spread over " + with_commas(n - 1) +
          " contexts): showing the " + std::to_string(k) + " contexts with the largest totals; a smaller --phi shows the hot ones";
  }
  for (size_t i = n; i-- > 1;)
    if (shown[i]) shown[v.nodes[i].parent] = true;
  // A focused function is always shown: it is what was asked for.
  for (const auto &fc : v.callers) shown[fc.node] = true;
  return shown;
}

std::string print_tree(const TextView &tv) {
  const analysis::ContextView &v = tv.v;
  std::string why;
  std::vector<char> shown = shown_contexts(v, why);
  std::string out;
  if (!why.empty()) out += "# note: " + why + "\n";
  if (v.folded)
    out += "# recursion: " + with_commas(v.folded) + " contexts folded into the caller running the same function (--no-fold expands)\n";
  if (!tv.o.filter.focus.empty()) {
    for (const auto &fc : v.callers) {
      const analysis::ViewNode &f = v.nodes[fc.node];
      out += "# callers of " + tv.function_text(f) + " (total " + with_commas(f.total) + ", " + percent(f.total, v.whole) + "):\n";
      constexpr size_t kChains = 10;
      uint64_t rest = 0;
      for (size_t k = 0; k < fc.chains.size(); ++k) {
        const analysis::CallerChain &c = fc.chains[k];
        if (k >= kChains) {
          rest += c.total;
          continue;
        }
        std::string chain = c.cut ? "... > " : "";
        for (uint64_t r : c.routines) chain += display_function(tv.t.names->routine(r), tv.o.names) + " > ";
        chain += display_function(tv.t.names->routine(f.routine), tv.o.names);
        if (c.routines.empty()) chain += " (thread start)";
        std::string cols = "#" + count_and_share(c.total, true, v.whole, tv.count_width) + "  ";
        out += cols + fit(chain, tv.width ? (tv.width > cols.size() ? tv.width - cols.size() : 0) : SIZE_MAX, true) + "\n";
      }
      if (fc.chains.size() > kChains)
        out += "# ... " + with_commas(fc.chains.size() - kChains) + " more caller chains, total " + with_commas(rest) + "\n";
    }
  }
  std::string head = std::string(tv.count_width > 5 ? tv.count_width - 5 : 0, ' ') + "total    share  " +
                     std::string(tv.count_width > 4 ? tv.count_width - 4 : 0, ' ') + "self    share  calling context";
  out += "#" + fit(head.substr(1), tv.width ? tv.width - 1 : SIZE_MAX) + "\n";
  analysis::ChildIndex kids = analysis::view_children(v);
  struct Item {
    uint32_t node, depth;
  };
  std::vector<Item> stack;
  auto push_children = [&](uint32_t id, uint32_t depth) {
    auto c = kids.of(id);
    for (auto it = c.rbegin(); it != c.rend(); ++it)
      if (shown[*it]) stack.push_back({*it, depth + 1});
  };
  push_children(analysis::kViewRoot, 0);
  while (!stack.empty()) {
    Item it = stack.back();
    stack.pop_back();
    bool has_kids = false;
    for (uint32_t c : kids.of(it.node)) has_kids |= bool(shown[c]);
    bool cut = tv.o.depth && it.depth >= tv.o.depth && has_kids;
    out += tv.line(it.node, it.depth, v.nodes[it.node].hot_instances > 0, cut) + "\n";
    if (!cut) push_children(it.node, it.depth);
  }
  return out;
}

struct FlatText {
  const TreeInput &t;
  const ReportOptions &o;
  analysis::Metric metric;
  uint64_t whole, threshold;
  size_t width;
};

std::string print_flat(const FlatText &tv, const std::vector<analysis::FlatEntry> &flat) {
  uint64_t self_sum = 0;
  for (const analysis::FlatEntry &e : flat) self_sum += e.self;
  std::string out;
  out += "# flat profile: per function, self = its own " + std::string(analysis::to_string(tv.metric)) +
         ", total = with everything it called (a recursion counted once); self adds up to " + with_commas(self_sum) + "\n";
  const size_t w = std::max<size_t>(5, with_commas(std::max(tv.whole, self_sum)).size());
  std::string head = std::string(w > 4 ? w - 4 : 0, ' ') + "self    share  " + std::string(w > 5 ? w - 5 : 0, ' ') +
                     "total    share  " + std::string(w > 5 ? w - 5 : 0, ' ') + "calls  contexts  function";
  out += "#" + fit(head.substr(1), tv.width ? tv.width - 1 : SIZE_MAX) + "\n";
  size_t hidden = 0;
  uint64_t hidden_self = 0;
  for (const analysis::FlatEntry &e : flat) {
    if (e.total < tv.threshold) {
      ++hidden;
      hidden_self += e.self;
      continue;
    }
    std::string contexts = with_commas(e.contexts);
    std::string calls = with_commas(e.calls);
    std::string cols = count_and_share(e.self, true, tv.whole, w) + "  " + count_and_share(e.total, true, tv.whole, w) + "  " +
                       std::string(w > calls.size() ? w - calls.size() : 0, ' ') + calls + " " +
                       std::string(contexts.size() < 9 ? 9 - contexts.size() : 0, ' ') + contexts + "  ";
    const analysis::Symbol &s = tv.t.names->routine(e.routine);
    out += view_line(cols, cols, "", display_function(s, tv.o.names), display_definition(s, tv.o.names), "", tv.width) + "\n";
  }
  if (hidden)
    out += "# " + with_commas(hidden) + " functions with a total below the threshold not shown (their self: " +
           with_commas(hidden_self) + "; --phi 0 shows them)\n";
  return out;
}

// Comment lines ("# ...") longer than `width` wrapped at spaces, continued with "#   "; a word that
// does not fit is cut. The view's own lines are already fitted.
std::string wrap_comments(const std::string &text, size_t width) {
  if (!width) return text;
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (line.empty() || line[0] != '#' || display_width(line) <= width) {
      out.append(line);
      out += '\n';
      continue;
    }
    std::string current;
    size_t pos = 0;
    while (pos < line.size()) {
      size_t space = line.find(' ', pos + 1);
      if (space == std::string_view::npos) space = line.size();
      std::string_view word = line.substr(pos, space - pos);  // with its leading space, if any
      if (!current.empty() && display_width(current) + display_width(word) > width) {
        out += fit(current, width) + "\n";
        current = "#  ";
      }
      current += word;
      pos = space;
    }
    out += fit(current, width) + "\n";
  }
  return out;
}

// The text report of one tree: header, then the tree (or the flat profile).
std::string text_report(TreeInput &t, const ReportOptions &o, bool color, size_t width, bool &focus_matched) {
  const analysis::ThreadMeta &m = *t.meta;
  analysis::ViewOptions vo;
  vo.metric = o.metric;
  vo.fold_recursion = !o.no_fold;
  vo.phi = o.phi;
  FilterOptions predicates = o.filter;
  predicates.depth = 0;
  analysis::TreeFilter filter = make_tree_filter(predicates, *t.names, o.phi);
  filter.metric = o.metric;
  if (o.metric == analysis::Metric::time && !m.timed())
    throw UserError((t.source.empty() ? std::string("(merged)") : t.source) +
                    ": no time metric (recorded with time=off, with bursting, or by a runtime before format version 2); "
                    "report it with --sort calls");
  vo.focus = filter.focus;
  vo.ignore = filter.ignore;
  if (o.flat) {
    // One pass, memory for the path and one entry per function.
    std::vector<analysis::FlatEntry> flat = analysis::flat_profile(*t.nodes, vo, t.progress);
    FlatText ft{t, o, o.metric, analysis::metric_whole(m, o.metric),
                analysis::hot_threshold(o.phi, analysis::metric_whole(m, o.metric)), width};
    std::string out = report_header(t, o, ft.threshold);
    if (!o.filter.focus.empty())
      out += "# focus: functions called (directly or not) from the functions matching /" + escape_text(o.filter.focus) + "/\n";
    if (!o.filter.ignore.empty())
      out += "# ignored: contexts through functions matching /" + escape_text(o.filter.ignore) + "/\n";
    if (m.mode == Mode::empty) return wrap_comments(out, width) + "(mode empty: the runtime recorded no calling contexts)\n\n";
    if (!o.filter.focus.empty() && flat.empty()) return wrap_comments(out, width) + "(no function matches --focus in this thread)\n\n";
    focus_matched = focus_matched || !flat.empty();
    return wrap_comments(out + print_flat(ft, flat), width) + "\n";
  }
  // One streaming pass keeps what the tree can show: the hot contexts, the contexts whose subtree
  // reaches the threshold (what is shown when nothing is hot), and their ancestors; every node's
  // subtree sum comes along, so totals stay those of the whole tree. The view folds that.
  analysis::TreeFilter keep = filter;
  // Totals of at least 1/(4k) of N (k: the contexts shown when nothing is hot): at most 4k per
  // level of the tree, and enough to find the k largest.
  keep.keep_total_share = std::min(o.phi, 1.0 / double(4 * kFallbackContexts));
  // With --focus every context under a match is kept: a function that runs rarely is still found.
  if (filter.focus) keep.min_share = 0;
  analysis::ThreadProfile kept;
  kept.meta = m;
  std::vector<uint64_t> subtree;
  const bool timed = m.timed();
  analysis::walk_tree(
      *t.nodes, keep,
      [&](const analysis::WalkNode &w, std::span<const analysis::WalkNode> path) {
        if (kept.nodes.size() <= w.id) {
          kept.nodes.resize(w.id + 1);
          subtree.resize(w.id + 1);
          if (timed) kept.samples.resize(w.id + 1);
        }
        analysis::Node n = w.node;
        n.parent = path.empty() ? 0 : w.parent;
        kept.nodes[w.id] = n;
        if (timed) kept.samples[w.id] = w.samples;
        subtree[w.id] = w.subtree;
      },
      t.progress);
  // What each kept node's subtree holds beyond itself and its kept children: left out.
  std::vector<uint64_t> left_out(subtree);
  for (size_t i = kept.nodes.size(); i-- > 1;) {
    left_out[i] -= analysis::metric_value(m, kept.nodes[i], kept.self_samples(uint32_t(i)), o.metric);
    left_out[kept.nodes[i].parent] -= subtree[i];
  }
  vo.left_out = left_out;
  analysis::MemorySource pruned(kept);
  analysis::ContextView v = analysis::build_view(pruned, vo);
  std::string out = report_header(t, o, v.threshold);
  const bool by_time = o.metric == analysis::Metric::time;
  out += "# " + with_commas(v.hot) + " hot contexts of " + with_commas(t.node_count > 0 ? t.node_count - 1 : 0) +
         " nodes; columns: total (the context and everything it called) and self (its own " +
         (by_time ? "samples" : "count") + "), with their shares of " +
         (by_time ? std::string("all samples (S + lost)") : m.lost ? std::string("all calls") : std::string("N")) + "\n";
  if (!o.filter.focus.empty())
    out += "# focus: re-rooted at the functions matching /" + escape_text(o.filter.focus) + "/: their callers above, callees below\n";
  if (!o.filter.ignore.empty())
    out += "# ignored: contexts through functions matching /" + escape_text(o.filter.ignore) + "/ (not in the totals)\n";
  out = wrap_comments(out, width);
  if (m.mode == Mode::empty) return out + "(mode empty: the runtime recorded no calling contexts)\n\n";
  if (!o.filter.focus.empty() && v.callers.empty()) return out + "(no function matches --focus in this thread)\n\n";
  focus_matched = focus_matched || !v.callers.empty();
  if (v.nodes.size() == 1) return out + "(no calling contexts)\n\n";
  TextView tv{t, o, v, width, color, count_column_width(v)};
  out += print_tree(tv);
  return wrap_comments(out, width) + "\n";
}

// Self and total (inclusive) time samples of each node of the pruned tree, by its id; empty when
// the profile has no time metric (issue 17).
struct TimeColumns {
  std::vector<uint64_t> self, total;
  bool on() const { return !self.empty(); }
};

json json_report(const TreeInput &t, const ReportOptions &o, const HotSet &h, const PrunedTree &pt,
                 const std::vector<Row> &rows, Names &names, const TimeColumns &time) {
  const analysis::ThreadMeta &m = *t.meta;
  json j;
  j["file"] = t.source.empty() ? json() : json(t.source);
  j["pid"] = m.pid;
  const std::string *merged = m.find_extra(format::meta::kMergedThreads);
  j["merged"] = merged != nullptr;
  if (merged) {
    json seqs = json::array();
    for (size_t start = 0; start <= merged->size();) {
      size_t comma = merged->find(',', start);
      if (comma == std::string::npos) comma = merged->size();
      seqs.push_back(std::stoull(merged->substr(start, comma - start)));
      start = comma + 1;
    }
    j["threads"] = seqs;
  } else {
    j["threads"] = json::array({m.thread_seq});
    j["tid"] = m.tid;
    j["status"] = analysis::to_string(m.status);
  }
  j["mode"] = analysis::to_string(m.mode);
  j["key"] = analysis::to_string(m.key);
  j["calls"] = m.calls;
  j["lost"] = m.lost;
  j["all_calls"] = m.all_calls();  // shares are of these
  j["unmatched_exits"] = m.unmatched_exits;
  j["phi"] = o.phi;
  j["threshold"] = h.threshold;
  if (m.mode == Mode::hcct) {
    j["epsilon"] = m.epsilon;
    j["counters"] = m.counters;
    j["error_bound"] = m.min_count;
  } else {
    j["epsilon"] = json();
    j["counters"] = json();
    j["error_bound"] = m.mode == Mode::cct ? json(0) : json();
  }
  if (const std::string *f = m.find_extra(format::meta::kSampledFraction)) {  // static bursting
    double fraction = std::strtod(f->c_str(), nullptr);
    j["sampled_fraction"] = fraction;
    j["scale"] = fraction > 0 ? json(1 / fraction) : json();
  }
  j["sort"] = analysis::to_string(o.metric);
  if (time.on()) j.update(analysis::time_json(m));
  j["hot"] = h.hot;
  j["cold_ancestors"] = h.cold_ancestors;
  j["total_nodes"] = t.node_count - 1;
  json nodes = json::array();
  for (size_t k = 0; k < rows.size(); ++k) {
    const Row &r = rows[k];
    const analysis::Node &n = pt.nodes[r.node];
    json node;
    node["id"] = k;
    node["parent"] = r.parent_row < 0 ? json() : json(r.parent_row);
    node["depth"] = r.depth;
    node["hot"] = pt.cls[r.node] == NodeClass::hot;
    bool known = count_known(m, n);
    node["count"] = known ? json(n.count) : json();
    node["share"] = known && m.all_calls() ? json(double(n.count) / double(m.all_calls())) : json();
    if (m.mode == Mode::hcct) node["monitored"] = n.monitored();
    if (time.on()) {
      node["self_samples"] = m.mode != Mode::hcct || time.self[r.node] ? json(time.self[r.node]) : json();
      node["total_samples"] = time.total[r.node];
    }
    node["routine"] = hex(n.routine);
    node["call_site"] = n.call_site ? json(hex(n.call_site)) : json();
    node["function"] = symbol_json(names.routine(n.routine), false);
    node["call"] = n.call_site ? symbol_json(names.call_site(n.call_site), true) : json();
    if (r.cut) node["truncated"] = true;
    nodes.push_back(std::move(node));
  }
  j["nodes"] = std::move(nodes);
  return j;
}

// --json: the (phi,epsilon)-HCCT itself, unfolded (hcct-report/1, docs/CLI.md); with --flat the
// flat profile (hcct-flat/1).
int run_json_report(const ReportOptions &o) {
  json reports = json::array();
  for_each_tree(o.in, o.merge, [&](TreeInput &t) {
    FilterOptions display_only = o.filter;
    display_only.depth = 0;
    analysis::TreeFilter filter = make_tree_filter(display_only, *t.names, o.phi);
    if (o.flat) {
      analysis::ViewOptions vo;
      vo.metric = o.metric;
      vo.phi = o.phi;
      vo.ignore = filter.ignore;
      vo.focus = filter.focus;
      json functions = json::array();
      for (const analysis::FlatEntry &e : analysis::flat_profile(*t.nodes, vo, t.progress)) {
        functions.push_back({{"function", symbol_json(t.names->routine(e.routine), false)},
                             {"routine", hex(e.routine)},
                             {"self", e.self},
                             {"total", e.total},
                             {"calls", e.calls},
                             {"contexts", e.contexts}});
      }
      const analysis::ThreadMeta &m = *t.meta;
      reports.push_back({{"file", t.source.empty() ? json() : json(t.source)},
                         {"pid", m.pid},
                         {"threads", t.threads},
                         {"mode", analysis::to_string(m.mode)},
                         {"metric", analysis::to_string(o.metric)},
                         {"calls", m.calls},
                         {"lost", m.lost},
                         {"whole", analysis::metric_whole(m, o.metric)},
                         {"error_bound", m.mode == Mode::hcct ? json(m.min_count) : (m.mode == Mode::cct ? json(0) : json())},
                         {"functions", std::move(functions)}});
      return;
    }
    // One streaming pass keeps the (phi,eps)-HCCT (after --focus/--ignore): memory for the kept
    // nodes and the current path only. --depth is applied when printing.
    filter.metric = o.metric;
    if (o.metric == analysis::Metric::time && !t.meta->timed())
      throw UserError((t.source.empty() ? std::string("(merged)") : t.source) +
                      ": no time metric (recorded with time=off, with bursting, or by a runtime before format version "
                      "2); report it with --sort calls");
    PrunedTree pt;
    TimeColumns time;
    analysis::WalkStats st = analysis::walk_tree(
        *t.nodes, filter,
        [&](const analysis::WalkNode &w, std::span<const analysis::WalkNode> path) {
          if (pt.nodes.size() <= w.id) {
            pt.nodes.resize(w.id + 1);
            pt.origin.resize(w.id + 1);
            pt.cls.resize(w.id + 1);
          }
          if (t.meta->timed()) {
            time.self.resize(pt.nodes.size());
            time.total.resize(pt.nodes.size());
            time.self[w.id] = w.samples;
            time.total[w.id] = w.total_samples;
          }
          analysis::Node n = w.node;
          n.parent = path.empty() ? 0 : w.parent;
          pt.nodes[w.id] = n;
          pt.origin[w.id] = uint32_t(w.index);
          pt.cls[w.id] = path.empty() || !w.selected ? NodeClass::cold_ancestor : NodeClass::hot;
        },
        t.progress);
    HotSet h;
    h.phi = o.phi;
    h.threshold = st.threshold;
    h.hot = st.selected;
    h.cold_ancestors = st.kept - st.selected;
    reports.push_back(json_report(t, o, h, pt, display_order(pt, o.depth), *t.names, time));
  });
  print_json({{"schema", o.flat ? "hcct-flat/1" : "hcct-report/1"}, {"phi", o.phi}, {"reports", std::move(reports)}});
  return 0;
}

int run_report(const ReportOptions &o) {
  if (o.in.json) return run_json_report(o);
  const bool color = use_color(o.color);
  const size_t width = output_width(o.width);
  bool focus_matched = false;
  // Held until every tree is read: a --focus that matches nowhere is an error, not a report.
  std::string out;
  for_each_tree(o.in, o.merge, [&](TreeInput &t) { out += text_report(t, o, color, width, focus_matched); });
  if (!o.filter.focus.empty() && !focus_matched)
    throw UserError("--focus '" + o.filter.focus + "' matches no function of the selected threads");
  std::cout << out;
  return 0;
}

}  // namespace

void add_report_command(CLI::App &app, Action &action) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App *sub = app.add_subcommand("report", "Hot calling contexts: the (phi,epsilon)-HCCT, phi chosen now");
  CLI::Option *thread = add_input_options(sub, o->in);
  sub->add_option("--phi", o->phi, "hotness threshold: a context is hot if count >= floor(phi*N)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_flag("--merge-threads", o->merge,
                "merge the threads of each process (paths matched by routine and call site; counts add)")
      ->excludes(thread);
  sub->add_option("--depth", o->depth, "show at most this many levels (0: all)")->capture_default_str();
  sub->add_option("--min-share", o->phi, "the same as --phi (the name the exports use)")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--focus", o->filter.focus,
                  "re-root at the functions matching this regex (ECMAScript, searched in the demangled name): their "
                  "callers above, callees below; an error if nothing matches (--json: only contexts through them)");
  sub->add_option("--ignore", o->filter.ignore, "drop contexts through a function matching this regex");
  sub->add_option("--sort", o->metric_name,
                  "the metric shown, ranked and filtered by --phi: calls, or time (self CPU-time samples; "
                  "profiles recorded with time=cpu)")
      ->check(CLI::IsMember({"calls", "time"}))
      ->capture_default_str();
  sub->add_flag("--flat", o->flat, "per function: self, total, calls and contexts (like gprof's flat profile)");
  sub->add_flag("--no-fold", o->no_fold,
                "show a recursion level by level (default: a recursive chain is folded into its first call)");
  sub->add_option("--width", o->width, "fit lines into this many columns (0: no limit; default: the terminal's, or "
                                       "$COLUMNS, or " + std::to_string(kDefaultWidth) + ")")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--templates", o->names.templates, "keep C++ template arguments (default: elided to <…>)");
  sub->add_flag("--inline", o->names.inline_chains,
                "show a call site's whole inline chain (default: its innermost frame, marked [inlined])");
  sub->add_flag("--full-paths", o->names.full_paths, "source files with their paths (default: file names only)");
  sub->add_option("--color", o->color, "colour shares and dim cold ancestors: auto (terminal and no NO_COLOR), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  sub->footer(std::string("\n") +
      "Shows every calling context whose own count reaches floor(phi*N) (N = calls of the thread), with the\n"
      "contexts on the way from the thread's start to it (dimmed on a terminal), as an indented tree. Each\n"
      "line: total (the context and everything it called) and self (its own count), each with its share of N,\n"
      "then the function (definition file:line) and '@' the call site (file:line of the call). Children are\n"
      "ranked by total. A recursion is folded into its first call and shown once with its depth range. When\n"
      "no context reaches the threshold on its own, the contexts with the largest totals are shown instead.\n"
      "In hcct mode counts are Space-Saving estimates that overcount by at most min_count (printed in the\n"
      "header); '-' means 'not monitored'." + "\n" + R"(
Examples:
  hcct report                          hcct.data/, every thread, phi = 1e-4
  hcct report out.dir --phi 0.01       only contexts with at least 1% of the calls
  hcct report --flat                   per function: self, total, calls, contexts
  hcct report --merge-threads --pid 4242
  hcct report --thread 0 --depth 5     main thread, five levels
  hcct report --focus 'Parser::parse'  who calls Parser::parse, and what it calls
  hcct report --width 0 --templates --inline    full names and call sites, lines as long as they are
  hcct report --json | jq '.reports[0].nodes[0]'
)");
  sub->callback([o, &action] {
    o->metric = *analysis::metric_named(o->metric_name);
    action = [o] { return run_report(*o); };
  });
}

}  // namespace hcct::cli
