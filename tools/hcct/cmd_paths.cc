// hcct paths: multi-iteration path profiles (docs/KPATH.md). Builds the k-IPF (thesis Algorithms
// 5–6) from the k-SF each thread recorded, sums the threads, and prints one prefix forest per
// function: every sequence of up to k consecutive Ball-Larus paths of one activation, each edge
// labelled X%(Y%) — the node's count as a share of its parent's and of its root's (thesis Fig. 6.2)
// — and every path ID decoded to its source lines from the metadata in the profiled binaries.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "common.h"
#include "hcct/analysis/kpath_ipf.h"
#include "hcct/analysis/kpath_sampling.h"
#include "hcct/analysis/kpath_metadata.h"
#include "hcct/analysis/kpath_profile.h"
#include "hcct/analysis/reader.h"

namespace hcct::cli {
namespace {

using analysis::Ipf;
using analysis::IpfNode;
using analysis::PathFunction;

struct PathsOptions {
  InputOptions in;
  std::optional<uint32_t> k;
  std::string function;
  double min_share = 0.01;  // fraction of the parent's and of the root's count
  std::optional<double> phi;  // --phi: show the sequences that may have run at least φN times
  bool dot = false;
  std::string out;  // -o: empty = standard output
};

std::string pct(uint64_t part, uint64_t whole) { return format_percent(whole ? 100.0 * double(part) / double(whole) : 0.0); }

// What the forest of one function needs for printing.
struct FunctionView {
  uint64_t id = 0;
  const PathFunction *meta = nullptr;  // null: no metadata found (binary gone or rebuilt)
  std::string name;
  std::vector<uint32_t> roots;  // kept roots, most frequent first
  uint64_t total = 0;           // sum of all its roots: its BL path count
};

// What the selected threads recorded: the header of every output.
struct Recorded {
  uint32_t k = 1;
  std::string kind;  // forest_kind_name() of every thread, or "mixed"; "unknown" for version-1 sections
  size_t threads = 0;
  uint64_t lost = 0;   // path IDs not counted (memory ran out), summed over threads
  uint64_t paths = 0;  // N: path IDs counted, summed over threads
  // Functions of the profiled binaries left without probes (no loop, one feasible path: kFlagNotProbed),
  // so absent from every profile; 0 without metadata.
  size_t unprobed = 0;
  // Bounded forests (docs/KPATH.md, "Bounded forests"): the threads' bounds add up when their
  // forests are summed.
  size_t bounded_threads = 0;
  double epsilon = 0;  // the largest of the threads'
  uint64_t delta = 0, cuts = 0, forced_sweeps = 0, bounded_lost = 0;
  bool bounded() const { return bounded_threads > 0; }
  // Sampled in bursts (docs/KPATH.md, "Bursting"): `paths` is then the estimate of N, from
  // `sampled_paths` counted; `joins`/`leaves`: the selected threads' activations cut at a burst
  // boundary.
  bool sampled = false;
  uint64_t sampled_paths = 0, joins = 0, leaves = 0;
  analysis::PathEstimator::Summary estimate;
  // How far below the truth a count of a sequence of n paths may be (never above it).
  uint64_t error_bound(size_t n) const {
    return delta + (n > 1 ? uint64_t(n - 1) * cuts : 0) + uint64_t(n) * bounded_lost;
  }
};

std::string kind_name(analysis::ForestKind kind) {
  return kind == analysis::ForestKind::kUnknown ? "unknown" : analysis::forest_kind_name(kind);
}

Recorded describe_recording(const std::vector<analysis::ThreadPaths> &threads) {
  Recorded r;
  r.k = threads.front().forest.k;
  r.kind = kind_name(threads.front().forest.kind);
  r.threads = threads.size();
  for (const auto &t : threads) {
    if (kind_name(t.forest.kind) != r.kind) r.kind = "mixed";
    r.lost += t.forest.lost;
    r.paths += t.forest.paths;
    if (t.sampling && t.sampling->bursting) {
      r.joins += t.sampling->joins;
      r.leaves += t.sampling->leaves;
    }
    const analysis::ForestBound &b = t.forest.bound;
    if (!b.bounded()) continue;
    ++r.bounded_threads;
    r.epsilon = std::max(r.epsilon, b.epsilon);
    r.delta += b.delta;
    r.cuts += b.cuts;
    r.forced_sweeps += b.forced_sweeps;
    r.bounded_lost += b.lost;
  }
  return r;
}

class PathsReport {
 public:
  PathsReport(const Ipf &ipf, const analysis::PathMetadata &meta, const PathsOptions &o, const Recorded &rec)
      : ipf_(ipf), meta_(meta), o_(o), rec_(rec) {
    group_roots();
  }
  // How far below the truth node v's count may be (0 for exact forests).
  uint64_t error_bound(uint32_t v) const { return rec_.error_bound(size_t(ipf_.nodes()[v].depth) + 1); }
  const std::vector<FunctionView> &functions() const { return functions_; }

  // A node is kept when its count is at least min_share times its parent's and its root's (the
  // thesis prunes Fig. 6.2 the same way); roots when at least min_share times their function's.
  // Larger count first; equal counts by label, so the order never depends on how the IPF was built.
  bool heavier(uint32_t a, uint32_t b) const {
    const auto &x = ipf_.nodes()[a], &y = ipf_.nodes()[b];
    return x.count != y.count ? x.count > y.count : x.label < y.label;
  }
  // With --phi: every sequence whose true count may reach φN (count + its error bound), so none
  // that did is left out.
  bool hot(uint32_t v) const {
    return double(ipf_.nodes()[v].count) + double(error_bound(v)) >= *o_.phi * double(rec_.paths);
  }
  bool keep(uint32_t v, uint64_t parent, uint64_t root) const {
    if (o_.phi) return hot(v);
    double c = double(ipf_.nodes()[v].count), limit = o_.min_share;
    return c > 0 && c >= limit * double(parent) && c >= limit * double(root);
  }
  std::vector<uint32_t> kept_children(uint32_t v, uint64_t root) const {
    std::vector<uint32_t> out;
    for (uint32_t c : ipf_.nodes()[v].children)
      if (keep(c, ipf_.nodes()[v].count, root)) out.push_back(c);
    std::sort(out.begin(), out.end(), [&](uint32_t a, uint32_t b) { return heavier(a, b); });
    return out;
  }
  std::string path_lines(const FunctionView &f, uint64_t path) const {
    if (!f.meta) return "(no metadata)";
    auto d = analysis::decode_path(*f.meta, path);
    if (!d) return "(ID out of range: stale binary?)";
    std::string home = f.meta->info.file ? f.meta->files[f.meta->info.file - 1] : std::string();
    return analysis::describe_lines(*d, home);
  }
  std::string where(const FunctionView &f) const {
    if (!f.meta || !f.meta->info.file) return "";
    const std::string &file = f.meta->files[f.meta->info.file - 1];
    return short_path(file) + ":" + std::to_string(f.meta->info.line);
  }
  // Path IDs that appear in the kept part of a function's forest.
  std::set<uint64_t> ids_shown(const FunctionView &f) const {
    std::set<uint64_t> ids;
    std::vector<std::pair<uint32_t, uint64_t>> work;
    for (uint32_t r : f.roots) work.push_back({r, ipf_.nodes()[r].count});
    while (!work.empty()) {
      auto [v, root] = work.back();
      work.pop_back();
      ids.insert(ipf_.nodes()[v].label.path);
      for (uint32_t c : kept_children(v, root)) work.push_back({c, root});
    }
    return ids;
  }
  const Ipf &ipf() const { return ipf_; }
  // Every function with recorded paths (before --function), most paths first: for messages.
  std::vector<std::string> all_names() const {
    auto v = all_names_;
    std::sort(v.begin(), v.end(), [](const auto &a, const auto &b) { return a.first > b.first; });
    std::vector<std::string> out;
    for (auto &[total, name] : v) out.push_back(name);
    return out;
  }

 private:
  void group_roots() {
    std::map<uint64_t, FunctionView> by_id;
    for (uint32_t r : ipf_.roots()) {
      const IpfNode &n = ipf_.nodes()[r];
      FunctionView &f = by_id[n.label.function];
      f.id = n.label.function;
      f.roots.push_back(r);
      f.total += n.count;
    }
    for (auto &[id, f] : by_id) {
      f.meta = meta_.find(id);
      f.name = f.meta ? analysis::demangle(f.meta->info.name.c_str()) : "function " + hex(id);
      all_names_.push_back({f.total, f.name});
      if (!o_.function.empty() && !matches(f)) continue;
      std::vector<uint32_t> kept;
      for (uint32_t r : f.roots)
        if (o_.phi ? hot(r)
                   : ipf_.nodes()[r].count > 0 && double(ipf_.nodes()[r].count) >= o_.min_share * double(f.total))
          kept.push_back(r);
      std::sort(kept.begin(), kept.end(), [&](uint32_t a, uint32_t b) { return heavier(a, b); });
      f.roots = std::move(kept);
      functions_.push_back(std::move(f));
    }
    std::sort(functions_.begin(), functions_.end(), [](const FunctionView &a, const FunctionView &b) {
      return a.total != b.total ? a.total > b.total : a.name < b.name;
    });
  }
  bool matches(const FunctionView &f) const {
    const std::string &want = o_.function;
    if (f.name == want || (f.meta && f.meta->info.name == want)) return true;
    return f.name.rfind(want + "(", 0) == 0;  // a C++ name without its parameter list
  }

  const Ipf &ipf_;
  const analysis::PathMetadata &meta_;
  const PathsOptions &o_;
  const Recorded &rec_;
  std::vector<FunctionView> functions_;
  std::vector<std::pair<uint64_t, std::string>> all_names_;
};

// "a kWF", "a k-SF", "BLPP counters", "forests of both kinds", "a forest" (version-1 section).
std::string recorded_as(const Recorded &rec) {
  if (rec.kind == "BLPP") return "BLPP counters";
  if (rec.kind == "mixed") return "k-SFs and kWFs";
  if (rec.kind == "unknown") return "a forest";
  return "a " + rec.kind;
}

std::string share_text(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}

// What the counts guarantee, for the header: exact, or the bounded forests' error bound.
std::string guarantee_text(const Recorded &rec) {
  if (!rec.bounded()) return "";
  std::string threads = rec.bounded_threads == rec.threads ? "" : " (" + std::to_string(rec.bounded_threads) + " of " +
                                                                     std::to_string(rec.threads) + " threads)";
  std::string text = "# bounded forest" + threads + ", path_epsilon = " + share_text(rec.epsilon) +
                     ": a count c of n paths is at most B(n) = " + with_commas(rec.delta) + " + (n - 1) * " +
                     with_commas(rec.cuts) + (rec.bounded_lost ? " + n * " + with_commas(rec.bounded_lost) : std::string()) +
                     " below the truth, never above (N = " + with_commas(rec.paths) +
                     " paths; B(1) = " + pct(rec.delta, rec.paths) + " of N); every sequence that ran more than B(n) times is in the forest\n";
  if (rec.forced_sweeps)
    text += "# " + std::to_string(rec.forced_sweeps) +
            " sweeps found too little under epsilon*N to evict: the bound above exceeds epsilon*N\n";
  return text;
}

std::string ms_text(uint64_t ns) { return share_text(double(ns) / 1e6) + " ms"; }

nlohmann::json unsampled_threads_json(const analysis::PathEstimator::Summary &e) {
  nlohmann::json threads = nlohmann::json::array();
  for (const auto &t : e.unsampled_threads)
    threads.push_back({{"pid", t.pid}, {"tid", t.tid}, {"paths", t.paths}, {"starts", t.starts}});
  return threads;
}

// What the counts of a bursting profile are (docs/KPATH.md, "Bursting").
std::string sampling_text(const Recorded &rec) {
  if (!rec.sampled) return "";
  const auto &e = rec.estimate;
  std::string schedule = e.event_clock ? with_commas(e.length_ns) + " path starts every " + with_commas(e.interval_ns) +
                                             " per thread (the event clock)"
                                       : ms_text(e.length_ns) + " every " + ms_text(e.interval_ns);
  std::string text = "# sampled in bursts (burst=1: " + schedule +
                     "): counts are estimates, each tree's sampled counts times T/S of its root path's start "
                     "(the function entry or a loop header; T = paths started there in the whole run, counted "
                     "exactly; S = those sampled): per-root ratio estimator; N = " +
                     with_commas(rec.paths) + " estimated from " + with_commas(rec.sampled_paths) + " sampled (" +
                     pct(rec.sampled_paths, rec.paths) + ")\n";
  if (e.unsampled_paths)
    text += "# " + with_commas(e.unsampled_paths) + " paths (in N) started at " + std::to_string(e.unsampled_starts) +
            " function entries or loop headers that no burst sampled: counted, their sequences unknown\n";
  text += hcct::analysis::unsampled_threads_text(e, "# ");
  text += "# " + with_commas(rec.joins) + " activations joined and " + with_commas(rec.leaves) +
          " left the instrumented code at a loop header (burst boundaries): sequences across those cuts are not "
          "sampled (each cut loses at most n - 1 sequences of n paths)\n";
  if (e.fallback_paths)
    text += "# " + std::to_string(e.fallback_paths) +
            " path IDs start where no counter is (a cut edge, or no metadata): scaled by their function's T/S\n";
  if (e.low_counters)
    text += "# " + std::to_string(e.low_counters) +
            " start counters came out below their sampled count (increments lost between threads): not scaled down\n";
  if (e.dropped_tables)
    text += "# " + std::to_string(e.dropped_tables) + " modules' counters were not kept by the runtime\n";
  return text;
}

std::string selection_text(const Recorded &rec, const PathsOptions &o) {
  if (o.phi)
    return "sequences shown when count + error bound >= phi * N = " + share_text(*o.phi) + " * " + with_commas(rec.paths);
  return "nodes below " + share_text(o.min_share) + " of their parent or root hidden";
}

// A count, with its error bound when the forest is bounded: "1,234 (+<=56)".
std::string count_text(const PathsReport &r, uint32_t v) {
  std::string c = with_commas(r.ipf().nodes()[v].count);
  uint64_t b = r.error_bound(v);
  return b ? c + " (+<=" + with_commas(b) + ")" : c;
}

void print_text(std::ostream &out, const PathsReport &r, uint32_t k, const Recorded &rec, const PathsOptions &o) {
  const Ipf &ipf = r.ipf();
  out << "# " << k << "-IPF from " << recorded_as(rec) << " recorded with k = " << rec.k << " ("
            << rec.threads << (rec.threads == 1 ? " thread" : " threads summed") << "); " << selection_text(rec, o)
            << "\n"
            << "# root: [path] count, share of the function; below it: -> [path] X%(Y%) count, a path that "
               "followed, X = share of its parent, Y = of its root\n";
  out << guarantee_text(rec);
  out << sampling_text(rec);
  if (rec.lost) out << "# " << with_commas(rec.lost) << " path IDs not counted: tree memory ran out (max_mb)\n";
  if (rec.unprobed)
    out << "# " << with_commas(rec.unprobed)
        << (rec.unprobed == 1 ? " function" : " functions")
        << " without loops that can run only one path carry no probe and are not in this profile (their count "
           "would be their calls)\n";
  for (const FunctionView &f : r.functions()) {
    std::string loc = r.where(f);
    out << "\n" << f.name << (loc.empty() ? "" : " (" + loc + ")") << ": " << with_commas(f.total) << " paths"
              << (f.meta ? ", " + with_commas(f.meta->info.num_paths) + " static" : std::string())
              << (f.meta && (f.meta->info.flags & kpath::kFlagCutEdges) ? ", edges cut (overflow)" : "") << "\n";
    for (uint64_t id : r.ids_shown(f)) out << "  path " << id << ": " << r.path_lines(f, id) << "\n";
    for (uint32_t root : f.roots) {
      uint64_t rc = ipf.nodes()[root].count;
      out << "  [" << ipf.nodes()[root].label.path << "] " << count_text(r, root) << "  " << pct(rc, f.total) << " of "
                << f.name << "\n";
      // Depth-first, children by decreasing count; indentation shows depth.
      std::vector<uint32_t> stack;
      auto push_children = [&](uint32_t v) {
        auto kids = r.kept_children(v, rc);
        for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back(*it);
      };
      push_children(root);
      while (!stack.empty()) {
        uint32_t v = stack.back();
        stack.pop_back();
        const IpfNode &n = ipf.nodes()[v];
        out << std::string(2 * n.depth, ' ') << "-> [" << n.label.path << "] " << pct(n.count, ipf.nodes()[n.parent].count)
                  << "(" << pct(n.count, rc) << ")  " << count_text(r, v) << "\n";
        push_children(v);
      }
    }
  }
}

double share(uint64_t part, uint64_t whole) { return whole ? double(part) / double(whole) : 0.0; }

json node_json(const PathsReport &r, uint32_t v, uint64_t root, uint64_t function_total) {
  const IpfNode &n = r.ipf().nodes()[v];
  json j = {{"path", n.label.path}, {"count", n.count}, {"error_bound", r.error_bound(v)}};
  if (n.parent != analysis::kNoParent) {
    j["share_of_parent"] = share(n.count, r.ipf().nodes()[n.parent].count);
    j["share_of_root"] = share(n.count, root);
  } else {
    j["share_of_function"] = share(n.count, function_total);
  }
  json kids = json::array();
  for (uint32_t c : r.kept_children(v, root)) kids.push_back(node_json(r, c, root, function_total));
  j["children"] = std::move(kids);
  return j;
}

// "hcct-paths" version 1: docs/hcct-paths.schema.json.
void print_json_report(std::ostream &out, const PathsReport &r, uint32_t k, const Recorded &rec, const PathsOptions &o,
                       const std::vector<analysis::ThreadPaths> &threads) {
  json jt = json::array();
  for (const auto &t : threads)
    jt.push_back({{"file", t.profile.source},
                  {"pid", t.profile.meta.pid},
                  {"thread", t.profile.meta.thread_seq},
                  {"k", t.forest.k},
                  {"forest_kind", kind_name(t.forest.kind)},
                  {"paths", t.forest.paths},
                  {"lost", t.forest.lost},
                  {"path_epsilon", t.forest.bound.epsilon},
                  {"delta", t.forest.bound.delta},
                  {"cuts", t.forest.bound.cuts},
                  {"forced_sweeps", t.forest.bound.forced_sweeps}});
  json fs = json::array();
  for (const FunctionView &f : r.functions()) {
    json paths = json::array();
    for (uint64_t id : r.ids_shown(f)) {
      json p = {{"id", id}, {"lines", nullptr}};
      if (f.meta)
        if (auto d = analysis::decode_path(*f.meta, id)) {
          p["lines"] = r.path_lines(f, id);
          p["blocks"] = d->blocks;
          p["after_back_edge"] = d->after_back_edge;
          p["at_back_edge"] = d->at_back_edge;
        }
      paths.push_back(std::move(p));
    }
    json roots = json::array();
    for (uint32_t root : f.roots) roots.push_back(node_json(r, root, r.ipf().nodes()[root].count, f.total));
    bool located = f.meta && f.meta->info.file;
    fs.push_back({{"function_id", hex(f.id)},
                  {"name", f.name},
                  {"file", located ? json(f.meta->files[f.meta->info.file - 1]) : json()},
                  {"line", located ? json(f.meta->info.line) : json()},
                  {"total", f.total},
                  {"static_paths", f.meta ? json(f.meta->info.num_paths) : json()},
                  {"edges_cut", f.meta ? json(bool(f.meta->info.flags & kpath::kFlagCutEdges)) : json()},
                  {"paths", std::move(paths)},
                  {"forest", std::move(roots)}});
  }
  print_json({{"format", "hcct-paths"},
              {"version", 1},
              {"k", k},
              {"recorded_k", rec.k},
              {"forest_kind", rec.kind},
              {"min_share", o.min_share},
              {"phi", o.phi ? json(*o.phi) : json()},
              {"bounded", rec.bounded()},
              {"error_bound", {{"delta", rec.delta}, {"cuts", rec.cuts}, {"forced_sweeps", rec.forced_sweeps}}},
              {"paths", rec.paths},
              {"unprobed_functions", rec.unprobed},
              {"sampled", rec.sampled ? json{{"estimator", "root-ratio"},
                                             {"sampled_paths", rec.sampled_paths},
                                             {"burst_interval_ns", rec.estimate.interval_ns},
                                             {"burst_length_ns", rec.estimate.length_ns},
                                             {"joins", rec.joins},
                                             {"leaves", rec.leaves},
                                             {"fallback_paths", rec.estimate.fallback_paths},
                                             {"unsampled_paths", rec.estimate.unsampled_paths},
                                             {"clock", rec.estimate.event_clock ? "path-starts" : "time"},
                                             {"unsampled_threads", unsampled_threads_json(rec.estimate)},
                                             {"threads_may_be_missing", rec.estimate.threads_may_be_missing}}
                                      : json()},
              {"threads", std::move(jt)},
              {"functions", std::move(fs)}},
             out);
}


void print_dot(std::ostream &out, const PathsReport &r, uint32_t k, const Recorded &rec) {
  const Ipf &ipf = r.ipf();
  out << "digraph kipf {\n  label=\"" << k << "-IPF from " << recorded_as(rec) << " recorded with k = " << rec.k
            << "\";\n  node [shape=box, fontname=\"monospace\"];\n";
  for (const FunctionView &f : r.functions()) {
    for (uint32_t root : f.roots) {
      uint64_t rc = ipf.nodes()[root].count;
      std::vector<uint32_t> stack{root};
      while (!stack.empty()) {
        uint32_t v = stack.back();
        stack.pop_back();
        const IpfNode &n = ipf.nodes()[v];
        std::string label = std::to_string(n.label.path) + "\\n" + count_text(r, v);
        if (v == root) label = analysis::dot_escape(f.name) + "\\n" + label;
        out << "  n" << v << " [label=\"" << label << "\"];\n";
        if (v != root)
          out << "  n" << n.parent << " -> n" << v << " [label=\"" << pct(n.count, ipf.nodes()[n.parent].count) << "("
                    << pct(n.count, rc) << ")\"];\n";
        for (uint32_t c : r.kept_children(v, rc)) stack.push_back(c);
      }
    }
  }
  out << "}\n";
}

int run_paths(const PathsOptions &o) {
  if (!std::filesystem::exists(o.in.dir)) throw UserError(o.in.dir + ": no such file or directory");
  std::vector<analysis::ThreadPaths> threads = analysis::read_thread_paths(o.in.dir);
  if (threads.empty())
    throw UserError(o.in.dir + ": no path profile (KPTH section) in any thread file; compile the program with "
                    "clang -fpass-plugin=kpath.so and link libhcct");
  analysis::PathEstimator estimator(threads);  // (all threads of a process: a shared library's counters are process-wide)
  std::erase_if(threads, [&](const analysis::ThreadPaths &t) {
    return (o.in.pid && t.profile.meta.pid != *o.in.pid) || (o.in.thread && t.profile.meta.thread_seq != *o.in.thread);
  });
  if (threads.empty()) throw UserError(o.in.dir + ": no path profile (KPTH section) of the selected --pid/--thread");
  Recorded rec = describe_recording(threads);
  for (const auto &t : threads)
    if (t.forest.k != rec.k)
      throw UserError(o.in.dir + ": threads recorded with different k (" + std::to_string(rec.k) + " in " +
                      threads.front().profile.source + ", " + std::to_string(t.forest.k) + " in " + t.profile.source +
                      "); select some with --pid/--thread");
  uint32_t k = o.k.value_or(rec.k);
  if (k > rec.k)
    throw UserError("--k " + std::to_string(k) + " exceeds the k = " + std::to_string(rec.k) + " " + o.in.dir +
                    " was recorded with (HCCT_OPTIONS=k=" + std::to_string(k) + " records it)");
  analysis::PathMetadata meta;
  std::set<std::string> seen;
  std::vector<std::string> missing;  // modules of the run whose file is gone
  for (const auto &t : threads)
    for (const analysis::Module &m : t.profile.modules) {
      if (!seen.insert(m.path).second) continue;
      try {
        // (Names that are not paths, like linux-vdso.so.1, have no file.)
        if (!meta.add_elf(m.path) && m.path.starts_with('/') && !std::filesystem::exists(m.path)) missing.push_back(m.path);
      } catch (const std::runtime_error &e) {  // FormatError (bad metadata), IoError (a FIFO or device)
        warn_always(e.what());
      }
    }
  for (const std::string &c : meta.conflicts())
    warn_always(c + " was compiled with different control flow in several units");
  // A bursting profile: each thread's trees scaled by their roots' ratios before threads add up.
  estimator.resolve(meta);
  Ipf ipf;
  std::vector<uint64_t> pids;
  for (const auto &t : threads) {
    ipf.merge(estimator.scale(analysis::make_k_ipf(t.forest, k).without_zero_counts(), t.profile.meta));
    if (std::find(pids.begin(), pids.end(), t.profile.meta.pid) == pids.end()) pids.push_back(t.profile.meta.pid);
  }
  if (std::any_of(pids.begin(), pids.end(), [&](uint64_t pid) { return estimator.sampled(pid); })) {
    rec.sampled = true;
    rec.sampled_paths = rec.paths;
    rec.paths = 0;
    for (uint32_t root : ipf.roots()) rec.paths += ipf.nodes()[root].count;
    rec.estimate = estimator.summary(pids);
    rec.paths += rec.estimate.unsampled_paths;  // (counted exactly, in no tree)
  }
  for (const auto &[id, f] : meta.functions()) rec.unprobed += (f.info.flags & kpath::kFlagNotProbed) != 0;
  PathsReport report(ipf, meta, o, rec);
  size_t unnamed = std::count_if(report.functions().begin(), report.functions().end(), [](const FunctionView &f) { return !f.meta; });
  if (unnamed)
    warn_always("no kpath metadata for " + std::to_string(unnamed) + (unnamed == 1 ? " function" : " functions") +
                ": shown as 'function 0x…' without source lines" +
                (missing.empty() ? std::string(" (binary rebuilt without kpath?)")
                                 : "; missing: " + missing.front() + (missing.size() > 1 ? ", …" : "")));
  if (!o.function.empty() && report.functions().empty()) {
    std::vector<std::string> names = report.all_names();
    std::string some;
    for (size_t i = 0; i < names.size() && i < 5; ++i) some += (i ? ", " : "") + names[i];
    if (names.size() > 5) some += ", ...";
    for (const auto &[id, f] : meta.functions())
      if ((f.info.flags & kpath::kFlagNotProbed) && (f.info.name == o.function || analysis::demangle(f.info.name.c_str()) == o.function))
        throw UserError("--function '" + o.function + "': it carries no probe (no loop, and only one path can run: its "
                        "profile would be its call count; docs/KPATH.md, \"Functions without probes\")");
    throw UserError("--function '" + o.function + "': no recorded paths in " + o.in.dir +
                    (names.empty() ? std::string() : " (functions with paths, most first: " + some + ")"));
  }
  OutputFile output(o.out);
  if (o.dot) print_dot(output.stream(), report, k, rec);
  else if (o.in.json) print_json_report(output.stream(), report, k, rec, o, threads);
  else print_text(output.stream(), report, k, rec, o);
  output.commit();
  return 0;
}

}  // namespace

void add_paths_command(CLI::App &app, Action &action) {
  auto o = std::make_shared<PathsOptions>();
  CLI::App *sub = app.add_subcommand("paths", "k-iteration path forests (k-IPF) recorded by kpath-instrumented code");
  add_input_options(sub, o->in, /*symbols=*/false);
  sub->add_option("--k", o->k, "sequences of up to K paths, 1 <= K <= the recorded k (default: the recorded k)")
      ->check(CLI::Range(1, 256));
  sub->add_option("--function", o->function, "only this function (linkage or demangled name, parameter list optional)");
  sub->add_option("--min-share", o->min_share,
                  "hide nodes whose count is below F times their parent's or their root's, and roots below F "
                  "times their function's (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--phi", o->phi,
                  "show the hot sequences instead: those whose count plus its error bound is at least F times "
                  "the paths of the selected threads (a bounded forest then leaves out none that ran that often)")
      ->check(CLI::Range(0.0, 1.0))
      ->excludes(sub->get_option("--min-share"));
  sub->add_option("-o,--out", o->out, "write to FILE (complete or not at all) instead of standard output");
  auto *dot = sub->add_flag("--dot", o->dot, "Graphviz output");
  dot->excludes(sub->get_option("--json"));
  sub->footer(std::string("\n") + R"(Needs a program built with clang -fpass-plugin=kpath.so and linked with libhcct; HCCT_OPTIONS=k=K
records sequences of up to K paths (docs/KPATH.md). Threads of the selection are summed.
Per function, most paths first:
  NAME (FILE:LINE): T paths, S static     T = Ball-Larus paths run, S = acyclic paths it has
  path ID: LINES                            source lines of each path shown; ^ before a line: starts
                                            at a loop header after a back edge; after: ends on one
  [ID] COUNT  P% of NAME                    a root: path ID ran COUNT times, P% of T
    -> [ID] X%(Y%)  COUNT                   a path that came next in the same activation, COUNT times;
                                            X = share of its parent's count, Y = of its root's
  COUNT (+<=B)                              a bounded forest (HCCT_OPTIONS=path_epsilon, the default):
                                            the true count is in [COUNT, COUNT + B]
A profile sampled in bursts (a -kpath-burst=1 build run with HCCT_OPTIONS=burst=1) says so in its
header: every COUNT is then an estimate, the tree's sampled counts times T/S of its root path's
start (docs/KPATH.md, "Bursting").
Each level of indentation is one more path of the sequence (at most K in all).

Examples:
  HCCT_OPTIONS=k=10 ./prog                       record (into hcct.data/)
  hcct paths                                     every function, k as recorded
  hcct paths --function filter_conv --k 4        one function, sequences of up to 4 paths
  hcct paths --min-share 0                       nothing hidden
  hcct paths --phi 0.001                         sequences that may have run >= 0.1 % of all paths
  hcct paths --json | jq '.functions[0].forest[0]'        (schema: docs/hcct-paths.schema.json)
  hcct paths --dot --function filter_conv | dot -Tsvg > kipf.svg
  hcct paths --json -o paths.json                written whole or not at all
)");
  sub->callback([o, &action] { action = [o] { return run_paths(*o); }; });
}

}  // namespace hcct::cli
