// hcct report: the (φ,ε)-HCCT of each thread (or of each process, with --merge-threads), with φ
// chosen now, after the run.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "common.h"
#include "hcct/analysis/hot.h"
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

// In hcct mode an unmonitored node's count is not an estimate of anything.
bool count_known(const analysis::ThreadMeta &m, const analysis::Node &n) {
  return m.mode != Mode::hcct || n.monitored();
}

std::string format_double(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

void print_text(const TreeInput &t, const ReportOptions &o, const HotSet &h, const PrunedTree &pt,
                const std::vector<Row> &rows, Names &names, bool color) {
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
  out += "# mode " + std::string(analysis::to_string(m.mode)) + ", key " + std::string(analysis::to_string(m.key)) +
         ": " + calls_summary(m) + "; phi = " + format_double(o.phi) +
         ", threshold floor(phi*" + std::string(m.lost ? "all calls" : "N") + ") = " + with_commas(h.threshold) + "\n";
  if (m.mode == Mode::hcct) {
    out += "# epsilon = " + format_double(m.epsilon) + " (" + with_commas(m.counters) +
           " counters): counts are estimates, each at most " + with_commas(m.min_count) +
           " above the true count (epsilon*N = " + format_double(m.epsilon * double(m.calls)) + ")\n";
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
  if (m.find_extra(format::meta::kBurst))  // the estimator's expected error (docs/BURSTING.md, "The estimator")
    out += m.find_extra(format::meta::kBurstClock) && *m.find_extra(format::meta::kBurstClock) == "events" ? "# estimator: every burst window sampled the same fraction of the thread's calls (burst_clock=events): unbiased in every phase; expected average error on hot contexts <= 10 % (docs/BENCHMARKS.md)\n" : "# estimator: one sampled fraction for the whole run (burst_clock=time): phases that bursts slow down more are under-counted, the others over-counted (errors of 10-50 % seen; docs/BURSTING.md)\n";
  for (const std::string &w : loss_warnings(m)) out += "# warning: " + w + "\n";
  if (m.dropped) out += "# note: " + with_commas(m.dropped) + " events were dropped (arrived while the runtime was busy)\n";
  out += "# " + with_commas(h.hot) + " hot contexts, " + with_commas(h.cold_ancestors) + " cold ancestors, of " +
         with_commas(t.node_count - 1) + " nodes\n";
  if (!o.filter.focus.empty()) out += "# focus: contexts through functions matching /" + escape_text(o.filter.focus) + "/\n";
  if (!o.filter.ignore.empty()) out += "# ignored: contexts through functions matching /" + escape_text(o.filter.ignore) + "/\n";
  std::cout << out;
  if (m.mode == Mode::empty) {
    std::cout << "(mode empty: the runtime recorded no calling contexts)\n\n";
    return;
  }
  if (rows.empty()) {
    std::cout << "(no context reaches the threshold; try a smaller --phi)\n\n";
    return;
  }
  std::cout << "#      count    share  calling context\n";
  const char *dim = color ? "\033[2m" : "", *reset = color ? "\033[0m" : "";
  for (const Row &r : rows) {
    const analysis::Node &n = pt.nodes[r.node];
    bool hot = pt.cls[r.node] == NodeClass::hot;
    bool known = count_known(m, n);
    char head[64];
    std::snprintf(head, sizeof head, "%12s %8s  ", known ? with_commas(n.count).c_str() : "-",
                  known ? percent(n.count, m.all_calls()).c_str() : "-");
    std::string line = head;
    line += indentation(r.depth);
    std::string context = describe_routine(names.routine(n.routine));
    if (n.call_site) context += "  @ " + describe_call_site(names.call_site(n.call_site));
    line += escape_text(context);
    if (!hot) line += "  (cold)";
    if (r.cut) line += "  ...";
    if (!hot) line = dim + line + reset;
    std::cout << line << "\n";
  }
  std::cout << "\n";
}

json json_report(const TreeInput &t, const ReportOptions &o, const HotSet &h, const PrunedTree &pt,
                           const std::vector<Row> &rows, Names &names) {
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

bool use_color(const std::string &mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char *no_color = std::getenv("NO_COLOR");
  return isatty(STDOUT_FILENO) && !(no_color && *no_color);
}

int run_report(const ReportOptions &o) {
  const bool color = !o.in.json && use_color(o.color);
  json reports = json::array();
  for_each_tree(o.in, o.merge, [&](TreeInput &t) {
    // One streaming pass keeps the (phi,eps)-HCCT (after --focus/--ignore): memory for the kept
    // nodes and the current path only. --depth is applied when printing.
    FilterOptions display_only = o.filter;
    display_only.depth = 0;
    analysis::TreeFilter filter = make_tree_filter(display_only, *t.names, o.phi);
    PrunedTree pt;
    analysis::WalkStats st = analysis::walk_tree(
        *t.nodes, filter,
        [&](const analysis::WalkNode &w, std::span<const analysis::WalkNode> path) {
          if (pt.nodes.size() <= w.id) {
            pt.nodes.resize(w.id + 1);
            pt.origin.resize(w.id + 1);
            pt.cls.resize(w.id + 1);
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
    std::vector<Row> rows = display_order(pt, o.depth);
    if (o.in.json) {
      reports.push_back(json_report(t, o, h, pt, rows, *t.names));
    } else {
      print_text(t, o, h, pt, rows, *t.names, color);
    }
  });
  if (o.in.json) print_json({{"schema", "hcct-report/1"}, {"phi", o.phi}, {"reports", std::move(reports)}});
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
  add_filter_options(sub, o->filter, false);
  sub->add_option("--color", o->color, "dim cold ancestors: auto (terminal and no NO_COLOR), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  sub->footer(std::string("\n") +
      "Shows every calling context whose count reaches floor(phi*N) (N = calls of the thread), together with\n"
      "the contexts on the way from the thread's start to it (marked '(cold)'), as an indented tree.\n"
      "Children are sorted by count, hottest first. In hcct mode counts are Space-Saving estimates that\n"
      "overcount by at most min_count (printed in the header); a cold context's '-' means 'not monitored'.\n"
      "Each line: count, share of N, function (definition file:line), '@' call site (file:line of the call)." + "\n" + R"(
Examples:
  hcct report                          hcct.data/, every thread, phi = 1e-4
  hcct report out.dir --phi 0.01       only contexts with at least 1% of the calls
  hcct report --merge-threads --pid 4242
  hcct report --thread 0 --depth 5     main thread, five levels
  hcct report --json | jq '.reports[0].nodes[0]'
  hcct report --focus 'Parser::' --ignore '^std::'    only contexts through Parser, none through std
)");
  sub->callback([o, &action] { action = [o] { return run_report(*o); }; });
}

}  // namespace hcct::cli
