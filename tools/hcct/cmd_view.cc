// hcct view: one self-contained HTML page per profile set — an interactive flame graph (or icicle)
// of each profile's calling contexts, a sortable flat profile and, for two profiles, what changed.
// d3 and d3-flame-graph are inlined (view_assets.h): the page needs no network when opened.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <unordered_map>

#include "common.h"
#include "text_layout.h"
#include "view_assets.h"
#include "hcct/analysis/merge.h"
#include "hcct/analysis/view.h"

namespace hcct::cli {
namespace {

using analysis::ThreadProfile;

struct ViewCommandOptions {
  std::vector<std::string> inputs;
  std::string out = "hcct-view.html";
  std::optional<uint64_t> pid, thread;
  bool no_symbols = false;
  size_t max_nodes = 20000;
  NameStyle names;
  std::string metric = "calls";  // --metric: what the frames measure (calls, or self time samples)
};

// Every selected thread of one input as one tree (threads, processes and runs add). One thread is
// read as a stream, once per pass, so that a 10^7-node file costs the pruned view's memory, not the
// tree's; several threads are merged in memory first (a merge needs whole trees).
struct ViewInput {
  std::string source;
  analysis::ThreadMeta meta;
  std::vector<analysis::Module> modules;
  uint64_t node_count = 0;
  std::function<std::unique_ptr<analysis::NodeSource>()> open;  // a fresh pass over the nodes
};

// A pass over the nodes together with what it reads them from (a file's stream, or a merged
// profile held in memory), owned together.
template <class Owner, class Source>
class OwnedPass : public analysis::NodeSource {
 public:
  explicit OwnedPass(Owner owner) : owner_(std::move(owner)), source_(*owner_) {}
  const analysis::ThreadMeta &meta() const override { return source_.meta(); }
  const std::vector<analysis::Module> &modules() const override { return source_.modules(); }
  uint64_t node_count() const override { return source_.node_count(); }
  bool next(analysis::Node &node) override { return source_.next(node); }
  uint64_t samples() const override { return source_.samples(); }

 private:
  Owner owner_;
  Source source_;
};
using FilePass = OwnedPass<std::unique_ptr<analysis::ProfileStream>, analysis::StreamSource>;
using MemoryPass = OwnedPass<std::shared_ptr<const ThreadProfile>, analysis::MemorySource>;

ViewInput open_input(const std::string &input, const ViewCommandOptions &o) {
  InputOptions in;
  in.dir = input;
  in.pid = o.pid;
  in.thread = o.thread;
  std::vector<analysis::ProfileFile> files;
  for (const FileSelection &sel : select_files(in))
    for (const analysis::ProfileFile &f : sel.files) files.push_back(f);
  ViewInput v;
  v.source = input;
  if (files.size() == 1) {
    FilePass first(open_stream(files[0]));
    v.meta = first.meta();
    v.modules = first.modules();
    v.node_count = first.node_count();
    analysis::ProfileFile f = files[0];
    v.open = [f] { return std::unique_ptr<analysis::NodeSource>(std::make_unique<FilePass>(open_stream(f))); };
    return v;
  }
  std::vector<ThreadProfile> threads;
  for (const analysis::ProfileFile &f : files) threads.push_back(read_listed_profile(f));
  std::vector<const ThreadProfile *> ptrs;
  for (const ThreadProfile &t : threads) ptrs.push_back(&t);
  std::shared_ptr<ThreadProfile> merged;
  try {
    merged = std::make_shared<ThreadProfile>(analysis::merge_profiles(ptrs));
  } catch (const std::invalid_argument &e) {
    throw UserError(input + ": " + e.what());
  }
  merged->source = input;
  v.meta = merged->meta;
  v.modules = merged->modules;
  v.node_count = merged->nodes.size();
  v.open = [merged] { return std::unique_ptr<analysis::NodeSource>(std::make_unique<MemoryPass>(merged)); };
  return v;
}

// One profile as the page shows it: the folded view pruned to at most max_nodes contexts (those
// with the largest totals: a context's ancestors have totals at least as large, so what is kept
// is a tree), their names, and the path of each kept context as a key for the diff.
struct PageProfile {
  std::string label;
  json tree;
  json flat;
  json summary;
  std::unordered_map<std::string, std::pair<uint64_t, uint64_t>> by_path;  // path -> (self, total)
  uint64_t whole = 0;
};

PageProfile page_profile(const std::string &input, const ViewCommandOptions &o,
                         std::shared_ptr<analysis::DebugInfoCache> cache) {
  ViewInput p = open_input(input, o);
  Names names(p.modules, !o.no_symbols, cache);
  // First the contexts that can be drawn: those whose subtree holds at least 1/(4·max_nodes) of
  // the calls (at most 4·max_nodes per level of the tree) and their callers, with what their
  // subtrees hold; then the folded view of those, with the rest's share kept in the totals.
  const analysis::Metric metric = *analysis::metric_named(o.metric);
  if (metric == analysis::Metric::time && !p.meta.timed())
    throw UserError(input + ": view --metric time: the profile has no time metric (recorded with time=off, with "
                    "bursting, or by a runtime before format version 2)");
  analysis::TreeFilter drawable;
  drawable.metric = metric;
  drawable.min_share = 1;
  drawable.keep_total_share = 1.0 / (4.0 * double(o.max_nodes));
  ThreadProfile candidates;
  candidates.meta = p.meta;
  std::vector<uint64_t> subtree;
  {
    std::unique_ptr<analysis::NodeSource> source = p.open();
    analysis::walk_tree(*source, drawable, [&](const analysis::WalkNode &w, std::span<const analysis::WalkNode> path) {
      if (candidates.nodes.size() <= w.id) {
        candidates.nodes.resize(w.id + 1);
        subtree.resize(w.id + 1);
        if (p.meta.timed()) candidates.samples.resize(w.id + 1);
      }
      if (p.meta.timed()) candidates.samples[w.id] = w.samples;
      analysis::Node n = w.node;
      n.parent = path.empty() ? 0 : w.parent;
      candidates.nodes[w.id] = n;
      subtree[w.id] = w.subtree;
    });
  }
  analysis::ViewOptions vo;
  vo.metric = metric;
  std::vector<uint64_t> left_out(subtree);
  for (size_t i = candidates.nodes.size(); i-- > 1;) {
    left_out[i] -= analysis::metric_value(p.meta, candidates.nodes[i], candidates.self_samples(uint32_t(i)), vo.metric);
    left_out[candidates.nodes[i].parent] -= subtree[i];
  }
  vo.left_out = left_out;
  analysis::MemorySource pruned(candidates);
  analysis::ContextView v = analysis::build_view(pruned, vo);
  PageProfile page;
  page.whole = v.whole;
  page.label = input;
  const size_t n = v.nodes.size();

  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  const size_t keep = std::min(n, o.max_nodes + 1);  // the root, and max_nodes contexts
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](uint32_t a, uint32_t b) {
    return v.nodes[a].total != v.nodes[b].total ? v.nodes[a].total > v.nodes[b].total : a < b;
  });
  std::vector<char> kept(n, 0);
  uint64_t kept_self = 0;
  for (size_t k = 0; k < keep; ++k) {
    kept[order[k]] = 1;
    kept_self += v.nodes[order[k]].self;
  }
  analysis::ChildIndex kids = analysis::view_children(v);
  const analysis::ThreadMeta &m = p.meta;
  const bool by_time = metric == analysis::Metric::time;
  const uint64_t bound = m.mode != analysis::Mode::hcct ? 0 : by_time ? m.time_min_count : m.min_count;

  // The page's tree, built top-down without recursion (a deep chain must not overflow the stack).
  std::vector<json> nodes(n);
  std::vector<std::string> paths(n);
  uint32_t hottest = 0;
  for (uint32_t i = 1; i < n; ++i)
    if (kept[i] && v.nodes[i].self > v.nodes[hottest].self) hottest = i;
  std::vector<uint32_t> preorder;
  preorder.reserve(keep);
  std::vector<uint32_t> work{analysis::kViewRoot};
  while (!work.empty()) {
    uint32_t id = work.back();
    work.pop_back();
    preorder.push_back(id);
    auto c = kids.of(id);
    for (auto it = c.rbegin(); it != c.rend(); ++it)
      if (kept[*it]) work.push_back(*it);
  }
  for (uint32_t id : preorder) {
    const analysis::ViewNode &vn = v.nodes[id];
    json j;
    if (id == analysis::kViewRoot) {
      j["n"] = "all";
    } else {
      const analysis::Symbol &s = names.routine(vn.routine);
      std::string name = display_function(s, o.names);
      j["n"] = name;
      std::string def = display_definition(s, o.names);
      if (!def.empty()) j["f"] = def;
      const analysis::Symbol *parent = vn.parent == analysis::kViewRoot ? nullptr : &names.routine(v.nodes[vn.parent].routine);
      if (vn.call_site) j["cs"] = display_call_site(names.call_site(vn.call_site), parent, o.names);
      if (vn.instances > 1) j["r"] = {vn.instances, vn.min_depth, vn.max_depth};
      paths[id] = paths[vn.parent] + "\x1f" + name + "@" + j.value("cs", std::string());
      page.by_path[paths[id]] = {vn.self, vn.total};
    }
    j["v"] = vn.total;
    j["s"] = vn.known || id == analysis::kViewRoot ? json(vn.self) : json();
    j["e"] = bound;
    nodes[id] = std::move(j);
  }
  // Children into parents, bottom-up (preorder reversed: every child before its parent).
  for (size_t k = preorder.size(); k-- > 1;) {
    uint32_t id = preorder[k];
    json &parent = nodes[v.nodes[id].parent];
    if (!parent.contains("c")) parent["c"] = json::array();
    parent["c"].push_back(std::move(nodes[id]));
  }
  // push_back in reverse preorder reversed each child list: put it back in rank order.
  for (uint32_t id : preorder)
    if (nodes[id].contains("c")) std::reverse(nodes[id]["c"].begin(), nodes[id]["c"].end());
  page.tree = std::move(nodes[analysis::kViewRoot]);

  std::string hottest_path;
  for (uint32_t i = hottest; i != analysis::kViewRoot; i = v.nodes[i].parent)
    hottest_path = display_function(names.routine(v.nodes[i].routine), o.names) + (hottest_path.empty() ? "" : " > ") + hottest_path;
  page.summary = {{"input", input},
                  {"mode", analysis::to_string(m.mode)},
                  {"metric", analysis::to_string(v.metric)},
                  {"unit", by_time ? m.time + " time samples" : std::string("calls")},
                  {"calls", by_time ? m.samples : m.calls},
                  {"lost", by_time ? m.samples_lost : m.lost},
                  {"whole", v.whole},
                  {"unmatched_exits", m.unmatched_exits},
                  {"error_bound", bound},
                  {"contexts", p.node_count ? p.node_count - 1 : 0},
                  {"shown", keep - 1},
                  {"pruned_self", v.nodes[analysis::kViewRoot].total - kept_self},
                  {"folded", v.folded},
                  {"warnings", loss_warnings(m)},
                  {"hottest", hottest ? json{{"path", hottest_path}, {"self", v.nodes[hottest].self}} : json()}};

  page.flat = json::array();
  std::unique_ptr<analysis::NodeSource> again = p.open();
  for (const analysis::FlatEntry &e : analysis::flat_profile(*again, vo)) {
    const analysis::Symbol &s = names.routine(e.routine);
    page.flat.push_back({display_function(s, o.names), display_definition(s, o.names), e.self, e.total, e.calls, e.contexts});
  }
  return page;
}

// What changed from A to B, by context path (function names and call sites): shares of each run's
// calls, ranked by the change of self.
json page_diff(const PageProfile &a, const PageProfile &b, json &b_tree) {
  const double wa = double(std::max<uint64_t>(a.whole, 1)), wb = double(std::max<uint64_t>(b.whole, 1));
  json rows = json::array();
  std::vector<std::tuple<double, std::string, double, double, double, double>> changes;
  auto add = [&](const std::string &path, std::pair<uint64_t, uint64_t> va, std::pair<uint64_t, uint64_t> vb) {
    double sa = va.first / wa, sb = vb.first / wb, ta = va.second / wa, tb = vb.second / wb;
    if (std::abs(sb - sa) > 1e-9 || std::abs(tb - ta) > 1e-9) changes.emplace_back(std::abs(sb - sa), path, sa, sb, ta, tb);
  };
  for (const auto &[path, va] : a.by_path) {
    auto it = b.by_path.find(path);
    add(path, va, it == b.by_path.end() ? std::pair<uint64_t, uint64_t>{0, 0} : it->second);
  }
  for (const auto &[path, vb] : b.by_path)
    if (!a.by_path.count(path)) add(path, {0, 0}, vb);
  std::sort(changes.begin(), changes.end(), [](const auto &x, const auto &y) {
    return std::get<0>(x) != std::get<0>(y) ? std::get<0>(x) > std::get<0>(y) : std::get<1>(x) < std::get<1>(y);
  });
  constexpr size_t kRows = 200;
  for (size_t k = 0; k < changes.size() && k < kRows; ++k) {
    auto &[change, path, sa, sb, ta, tb] = changes[k];
    std::string shown;
    for (size_t start = 1; start <= path.size();) {
      size_t end = path.find('\x1f', start);
      if (end == std::string::npos) end = path.size();
      std::string frame = path.substr(start, end - start);
      shown += (shown.empty() ? "" : " > ") + frame.substr(0, frame.rfind('@'));
      start = end + 1;
    }
    rows.push_back({shown, sa, sb, ta, tb});
  }
  // The differential flame graph: B's frames, coloured by how much their total grew (red) or shrank
  // (blue) against A, in B's calls.
  struct Item {
    json *node;
    std::string path;
  };
  std::vector<Item> work{{&b_tree, ""}};
  while (!work.empty()) {
    Item it = work.back();
    work.pop_back();
    json &node = *it.node;
    if (!it.path.empty()) {
      auto found = a.by_path.find(it.path);
      double before = found == a.by_path.end() ? 0 : double(found->second.second) / wa * wb;
      node["d"] = std::llround(node["v"].get<double>() - before);
    }
    if (node.contains("c"))
      for (json &c : node["c"])
        work.push_back({&c, it.path + "\x1f" + c["n"].get<std::string>() + "@" + c.value("cs", std::string())});
  }
  return {{"rows", rows}, {"changed", changes.size()}};
}

std::string joined(const char *const *pieces) {
  std::string out;
  for (; *pieces; ++pieces) out += *pieces;
  return out;
}

// JSON inside <script>: "</" would end the element early (a symbol name is anyone's bytes).
std::string script_safe(const json &j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace), out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') out += "\\u003c";
    else out += s[i];
  }
  return out;
}

extern const char kPage[];

int run_view(const ViewCommandOptions &o) {
  if (!kViewAssetsAvailable)
    throw UserError("view: this hcct was built without the flame graph library (npm could not fetch d3-flame-graph "
                    "when it was configured; see cmake/hcctFlameGraph.cmake)");
  std::vector<std::string> inputs = o.inputs.empty() ? std::vector<std::string>{"hcct.data"} : o.inputs;
  if (inputs.size() > 2) throw UserError("view: one profile, or two to compare (got " + std::to_string(inputs.size()) + ")");
  auto cache = std::make_shared<analysis::DebugInfoCache>();
  std::vector<PageProfile> pages;
  for (const std::string &input : inputs) pages.push_back(page_profile(input, o, cache));
  json data;
  data["profiles"] = json::array();
  json diff;
  if (pages.size() == 2) diff = page_diff(pages[0], pages[1], pages[1].tree);
  for (PageProfile &p : pages)
    data["profiles"].push_back({{"summary", std::move(p.summary)}, {"tree", std::move(p.tree)}, {"flat", std::move(p.flat)}});
  data["diff"] = diff;
  data["max_nodes"] = o.max_nodes;

  std::string page = kPage;
  auto put = [&page](const std::string &marker, const std::string &text) {
    size_t at = page.find(marker);
    if (at == std::string::npos) throw std::logic_error("view: page template lacks " + marker);
    page.replace(at, marker.size(), text);
  };
  // The data last: the libraries' text must not be searched for markers.
  put("/*HCCT_DATA*/", script_safe(data));
  put("/*HCCT_FLAMEGRAPH_CSS*/", joined(kFlameGraphCss));
  put("/*HCCT_FLAMEGRAPH_JS*/", joined(kFlameGraphJs));
  put("/*HCCT_D3_JS*/", joined(kD3Js));
  OutputFile out(o.out);
  out.stream() << page;
  out.commit();
  std::cerr << "hcct: wrote " << escape_text(o.out) << " (" << human_bytes(page.size()) << ")\n";
  return 0;
}

const char kPage[] = R"hcct_page(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>hcct view</title>
<style>/*HCCT_FLAMEGRAPH_CSS*/</style>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 1em 2em; color: #222; }
header { position: sticky; top: 0; background: #fff; padding: .5em 0; border-bottom: 1px solid #ccc; z-index: 2; }
h1 { font-size: 1.2em; margin: 0 1em 0 0; display: inline; }
h2 { font-size: 1.1em; margin: 1.2em 0 .3em; }
#details { min-height: 1.4em; font-family: monospace; white-space: pre-wrap; }
.note { color: #555; }
.hottest { font-weight: bold; }
table { border-collapse: collapse; font-family: monospace; }
th { cursor: pointer; background: #eee; text-align: right; padding: 2px 8px; user-select: none; }
td { text-align: right; padding: 1px 8px; }
th:last-child, td:last-child { text-align: left; }
tr:nth-child(even) td { background: #f7f7f7; }
.up { color: #b00; } .down { color: #05a; }
#errors { color: #b00; }
.tablewrap { max-height: 30em; overflow: auto; }
</style>
<script>/*HCCT_D3_JS*/</script>
<script>/*HCCT_FLAMEGRAPH_JS*/</script>
</head><body>
<header>
<h1>hcct view</h1>
<input id="search" size="30" placeholder="search functions (regular expression)">
<button id="clear">clear</button>
<button id="reset">reset zoom</button>
<label><input type="checkbox" id="icicle"> icicle</label>
<span id="status"></span>
<div id="details"></div>
<div id="errors"></div>
</header>
<main id="main"></main>
<script id="hcct-data" type="application/json">/*HCCT_DATA*/</script>
<script>
"use strict";
window.addEventListener("error", (e) => {
  document.getElementById("errors").textContent += "error: " + e.message + "\n";
});
const DATA = JSON.parse(document.getElementById("hcct-data").textContent);
const fmtInt = (x) => x === null || x === undefined ? "-" : Math.round(x).toLocaleString("en-US");
const pct = (x) => (100 * x).toFixed(2) + "%";
const el = (tag, attrs, text) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
};
const charts = [];

function label(summary) {
  return (d) => {
    const x = d.data;
    let s = x.n + ": total " + fmtInt(x.v) + " (" + pct(x.v / Math.max(summary.whole, 1)) + ")";
    s += ", self " + fmtInt(x.s) + (x.s === null ? " (not monitored)" : " (" + pct(x.s / Math.max(summary.whole, 1)) + ")");
    if (summary.mode === "hcct") s += ", each count at most " + fmtInt(x.e) + " above the true one";
    if (x.d !== undefined) s += ", change " + (x.d >= 0 ? "+" : "") + fmtInt(x.d);
    if (x.f) s += "\ndefined at " + x.f;
    if (x.cs) s += "\ncalled at " + x.cs;
    if (x.r) s += "\nrecursion folded: " + fmtInt(x.r[0]) + " contexts, depth " + x.r[1] + ".." + x.r[2];
    return s;
  };
}

function drawChart(box, tree, summary, differential) {
  box.innerHTML = "";
  // The UMD build exports the chart factory as flamegraph.default. Its default accessors read the
  // compact keys the data uses: n (name), v (value: the frame's total), c (children).
  const chart = flamegraph.default()
    .width(Math.max(box.clientWidth, 600))
    .cellHeight(18)
    .transitionDuration(300)
    .minFrameSize(1)
    .inverted(document.getElementById("icicle").checked)
    .label(label(summary))
    .setDetailsElement(document.getElementById("details"))
    .setSearchHandler((results, sum, total) => {
      document.getElementById("status").textContent =
        results.length + " frames match (" + pct(sum / Math.max(total, 1)) + " of the total)";
    });
  if (differential) chart.setColorMapper(flamegraph.colorMapper.differentialColorMapper);
  d3.select(box).datum(tree).call(chart);
  return chart;
}

function flatTable(rows, whole) {
  const head = ["self", "self %", "total", "total %", "calls", "contexts", "function"];
  const key = [(r) => r[2], (r) => r[2], (r) => r[3], (r) => r[3], (r) => r[4], (r) => r[5], (r) => r[0]];
  const table = el("table", {class: "flat"});
  const thead = table.createTHead().insertRow();
  const body = table.createTBody();
  let order = {col: 2, down: true};
  const render = () => {
    const sorted = rows.slice().sort((a, b) => {
      const x = key[order.col](a), y = key[order.col](b);
      const c = typeof x === "string" ? x.localeCompare(y) : x - y;
      return order.down ? -c : c;
    });
    body.innerHTML = "";
    for (const r of sorted.slice(0, 2000)) {
      const tr = body.insertRow();
      for (const v of [fmtInt(r[2]), pct(r[2] / whole), fmtInt(r[3]), pct(r[3] / whole), fmtInt(r[4]), fmtInt(r[5])])
        tr.insertCell().textContent = v;
      tr.insertCell().textContent = r[0] + (r[1] ? " (" + r[1] + ")" : "");
    }
  };
  head.forEach((h, i) => {
    const th = el("th", {}, h);
    th.addEventListener("click", () => {
      order = {col: i, down: order.col === i ? !order.down : true};
      render();
    });
    thead.appendChild(th);
  });
  render();
  return table;
}

function build() {
  const main = document.getElementById("main");
  main.innerHTML = "";
  charts.length = 0;
  DATA.profiles.forEach((p, i) => {
    const s = p.summary;
    const section = el("section", {id: "profile-" + i});
    section.appendChild(el("h2", {}, (DATA.profiles.length > 1 ? (i ? "B: " : "A: ") : "") + s.input));
    let text = "mode " + s.mode + ", " + fmtInt(s.calls) + " " + s.unit + (s.lost ? " + " + fmtInt(s.lost) + " lost" : "") +
      ", " + fmtInt(s.contexts) + " contexts";
    if (s.mode === "hcct")
      text += s.error_bound ? "; counts are estimates, each at most " + fmtInt(s.error_bound) + " above the true count"
                            : "; counts are exact (the counters never filled, nothing was evicted)";
    if (s.folded) text += "; recursion folded (" + fmtInt(s.folded) + " contexts into their callers)";
    if (s.pruned_self > 0)
      text += "; the " + fmtInt(s.shown) + " frames with the largest totals are drawn: the " + s.unit + " of the smaller contexts (" +
        pct(s.pruned_self / Math.max(s.whole, 1)) + " of them) are inside their callers' frames";
    section.appendChild(el("div", {class: "note"}, text));
    for (const w of s.warnings) section.appendChild(el("div", {class: "note"}, "warning: " + w));
    if (s.hottest)
      section.appendChild(el("div", {class: "hottest", id: "hottest-" + i},
        "hottest context: " + s.hottest.path + " — self " + fmtInt(s.hottest.self) + " (" + pct(s.hottest.self / Math.max(s.whole, 1)) + ")"));
    const box = el("div", {class: "chart", id: "chart-" + i});
    section.appendChild(box);
    main.appendChild(section);
    charts.push(drawChart(box, p.tree, s, DATA.diff && i === 1));
    section.appendChild(el("h2", {}, "flat profile" + (DATA.profiles.length > 1 ? (i ? " of B" : " of A") : "")));
    const wrap = el("div", {class: "tablewrap"});
    wrap.appendChild(flatTable(p.flat, Math.max(s.whole, 1)));
    section.appendChild(wrap);
  });
  if (DATA.diff) {
    const section = el("section", {id: "diff"});
    section.appendChild(el("h2", {}, "what changed from A to B"));
    section.appendChild(el("div", {class: "note"},
      fmtInt(DATA.diff.changed) + " contexts changed share; B's flame graph above is coloured by the change of each " +
      "frame's total (red: grew, blue: shrank). Shares are of each run's calls."));
    const table = el("table", {});
    const head = table.createTHead().insertRow();
    for (const h of ["self A", "self B", "change", "total A", "total B", "change", "calling context"]) head.appendChild(el("th", {}, h));
    const body = table.createTBody();
    for (const r of DATA.diff.rows) {
      const tr = body.insertRow();
      const cells = [pct(r[1]), pct(r[2]), (r[2] >= r[1] ? "+" : "") + pct(r[2] - r[1]), pct(r[3]), pct(r[4]),
                     (r[4] >= r[3] ? "+" : "") + pct(r[4] - r[3]), r[0]];
      cells.forEach((c, k) => {
        const td = tr.insertCell();
        td.textContent = c;
        if (k === 2 || k === 5) td.className = (k === 2 ? r[2] - r[1] : r[4] - r[3]) > 0 ? "up" : "down";
      });
    }
    const wrap = el("div", {class: "tablewrap"});
    wrap.appendChild(table);
    section.appendChild(wrap);
    document.getElementById("main").appendChild(section);
  }
}

function search(term) {
  document.getElementById("search").value = term;
  for (const c of charts) {
    if (term) c.search(term);
    else c.clear();
  }
  if (!term) document.getElementById("status").textContent = "";
}

document.getElementById("search").addEventListener("input", (e) => search(e.target.value));
document.getElementById("clear").addEventListener("click", () => search(""));
document.getElementById("reset").addEventListener("click", () => charts.forEach((c) => c.resetZoom()));
document.getElementById("icicle").addEventListener("change", () => {
  build();
  search(document.getElementById("search").value);
});
build();
// view.html#search=REGEX opens the page with that search applied (also how the tests drive it).
const initial = new URLSearchParams(location.hash.slice(1)).get("search");
if (initial) search(initial);
</script>
</body></html>
)hcct_page";

}  // namespace

void add_view_command(CLI::App &app, Action &action) {
  auto o = std::make_shared<ViewCommandOptions>();
  CLI::App *sub = app.add_subcommand("view", "An HTML page: flame graph, flat profile, and the diff of two profiles");
  sub->add_option("INPUT", o->inputs, "one profile (directory or .hcct file; default hcct.data), or two to compare");
  sub->add_option("-o,--output", o->out, "the HTML file to write")->capture_default_str();
  sub->add_option("--pid", o->pid, "only this process of each input");
  sub->add_option("--thread", o->thread, "only this thread (thread_seq) of each selected process");
  sub->add_option("--max-nodes", o->max_nodes,
                  "draw at most this many contexts, those with the largest totals (the rest stay inside their "
                  "callers' frames; the page states how much)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_flag("--no-symbols", o->no_symbols, "no symbolization: addresses as module+0xoffset");
  sub->add_option("--metric", o->metric,
                  "what the frames measure: calls (entries), or time (self time samples; profiles with a time metric)")
      ->check(CLI::IsMember({"calls", "time"}))
      ->capture_default_str();
  sub->add_flag("--templates", o->names.templates, "keep C++ template arguments (default: elided to <…>)");
  sub->add_flag("--inline", o->names.inline_chains, "show a call site's whole inline chain");
  sub->add_flag("--full-paths", o->names.full_paths, "source files with their paths (default: file names only)");
  sub->footer(std::string("\n") +
      "Writes one self-contained HTML file (d3 and d3-flame-graph inlined: no network when it is opened).\n"
      "Every selected thread of an input is merged into one tree (as hcct merge does); recursion is folded.\n"
      "The flame graph zooms on click; the search box highlights the functions matching a regular\n"
      "expression; hovering a frame shows its total and self counts, their shares, the error bound (hcct\n"
      "mode), where the function is defined and the call site. Below: the flat profile, sortable by any\n"
      "column. With two inputs A and B: both flame graphs, B's coloured by what grew or shrank, and the\n"
      "contexts whose share changed most. Opening the page as view.html#search=REGEX applies a search." + "\n" + R"(
Examples:
  hcct view -o report.html                    hcct.data/, all threads
  hcct view before.data after.data -o diff.html
  hcct view --pid 4242 --max-nodes 5000 -o small.html
)");
  sub->callback([o, &action] { action = [o] { return run_view(*o); }; });
}

}  // namespace hcct::cli
