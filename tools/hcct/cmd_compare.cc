// hcct compare: accuracy of one tree against another (thesis §5.1.2) — an HCCT against the exact
// CCT of the same run, or one run against another — after lining their nodes up by module offset
// and symbol rather than by raw address.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "common.h"
#include "text_layout.h"
#include "hcct/analysis/compare.h"
#include "hcct/analysis/hot.h"
#include "hcct/analysis/merge.h"

namespace hcct::cli {
namespace {

using analysis::ThreadProfile;

struct CompareOptions {
  std::string test, ref;
  double phi = 1e-4;
  std::vector<double> taus = {0.001, 0.01, 0.05, 0.1, 0.2};
  std::optional<uint64_t> thread;
  bool merge = false;
  bool no_symbols = false;
  bool json = false;
  std::string metric = "calls";  // compare: the metrics on calls or on time samples
};

struct Side {
  std::string location;
  std::vector<std::pair<uint64_t, std::vector<ThreadProfile>>> processes;  // pid -> threads (or one merge)
};

Side load(const std::string &dir, const CompareOptions &o) {
  InputOptions in;
  in.dir = dir;
  in.thread = o.thread;
  Side s;
  s.location = dir;
  for (const FileSelection &sel : select_files(in)) {
    std::vector<ThreadProfile> threads;
    for (const analysis::ProfileFile &f : sel.files) threads.push_back(read_listed_profile(f));
    if (o.merge && threads.size() > 1) {
      ThreadProfile merged;
      try {
        merged = analysis::merge_threads(std::span<const ThreadProfile>(threads));
      } catch (const std::invalid_argument &e) {
        throw UserError(dir + ": pid " + std::to_string(sel.pid) + ": " + e.what());
      }
      merged.source = dir + " (pid " + std::to_string(sel.pid) + ", threads merged)";
      threads.clear();
      threads.push_back(std::move(merged));
    }
    s.processes.push_back({sel.pid, std::move(threads)});
  }
  return s;
}

std::string pct(double fraction) { return share_percent(fraction); }
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}
std::string pct_value(double percent_value) { return format_percent(percent_value, {.digits = 4, .significant = true}); }

std::string label(const ThreadProfile &t) {
  return escape_text(t.source.empty() ? std::string("(merged)") : t.source) + " (" + std::string(analysis::to_string(t.meta.mode)) +
         ", " + calls_summary(t.meta) + ")";
}

// A sampled side (static bursting) is compared as whole-run estimates: its counts scaled by
// 1/sampled_fraction (docs/BURSTING.md, "The estimator"). The factor, or 1.
double count_scale(const ThreadProfile &t) {
  std::optional<double> f = t.meta.sampled_fraction();
  return f ? 1 / *f : 1;
}

std::string scale_note(const ThreadProfile &t, const char *side) {
  std::optional<double> f = t.meta.sampled_fraction();
  if (!f) return "";
  const std::string *basis = t.meta.find_extra(format::meta::kSampledFractionBasis);
  const std::string *clock = t.meta.find_extra(format::meta::kBurstClock);
  return std::string("# note: ") + side + " is sampled (static bursting): its counts are scaled by 1/sampled_fraction = " +
         num(1 / *f) + " (fraction " + num(*f) + " of " + (basis && *basis == "events" ? "its calls" : "wall time") +
         ", burst_clock " + (clock ? *clock : std::string("time")) + ")" +
         // The gate was closed between bursts (docs/BURSTING.md, "Closed-gate bursts").
         (basis && *basis == "events" ? "" : "; a fraction of time over-states the fraction of calls by the "
                                             "in-burst slowdown, so scaled counts are low by up to that factor") +
         "\n";
}

void print_text(const ThreadProfile &test, const ThreadProfile &ref, const analysis::Alignment &a,
                const analysis::Metrics &m, double test_scale, double ref_scale) {
  std::ostringstream o;
  o << "# test:      " << label(test) << "\n# reference: " << label(ref) << "\n";
  if (test_scale != 1) o << scale_note(test, "the test");
  if (ref_scale != 1) o << scale_note(ref, "the reference");
  for (const ThreadProfile *t : {&test, &ref})
    for (const std::string &w : loss_warnings(t->meta))
      o << "# warning: " << (t == &test ? "test" : "reference") << ": " << w << "\n";
  if (ref.meta.mode != analysis::Mode::cct)
    o << "# note: the reference is not an exact CCT (mode " << analysis::to_string(ref.meta.mode)
      << "); its counts are taken as the true ones\n";
  o << "# aligned " << with_commas(test.nodes.size() - 1 - a.unmatched_test) << " of " << with_commas(test.nodes.size() - 1)
    << " test nodes (" << with_commas(a.by_exact) << " by module offset, " << with_commas(a.by_symbol) << " by symbol, "
    << with_commas(a.by_similarity) << " by subtree similarity); " << with_commas(a.unmatched_ref) << " of "
    << with_commas(ref.nodes.size() - 1) << " reference nodes have no counterpart\n";
  o << "phi = " << num(m.phi) << ": hot threshold floor(phi*N) = " << with_commas(m.test_threshold) << " (test), "
    << with_commas(m.ref_threshold) << " (reference); hottest reference context w_max = " << with_commas(m.wmax) << "\n";
  o << "  (phi,eps)-HCCT of the test:   " << with_commas(m.hcct_nodes) << " nodes: " << with_commas(m.hot) << " hot ("
    << with_commas(m.true_hot) << " true hot, " << with_commas(m.false_positives) << " false positives), "
    << with_commas(m.cold_ancestors) << " cold ancestors";
  if (m.unmatched_hcct) o << "; " << with_commas(m.unmatched_hcct) << " not in the reference";
  o << "\n";
  o << "  exact HCCT of the reference:  " << with_commas(m.exact_hot) << " hot contexts; false negatives "
    << with_commas(m.false_negatives) << "\n";
  o << "  degree of overlap:            " << pct(m.overlap) << "\n";
  o << "  hot edge coverage:           ";
  for (const analysis::Coverage &c : m.coverage)
    o << " tau=" << num(c.tau) << ": " << pct(c.ratio) << " (" << c.covered << "/" << c.hot << ")";
  o << "\n";
  o << "  tau~ (100% coverage from):    " << (m.tau_tilde > 1 ? "never (the hottest context is uncovered)" : num(m.tau_tilde))
    << "\n";
  o << "  uncovered contexts:           " << with_commas(m.uncovered) << "; hotness max " << pct_value(m.max_uncovered)
    << ", average " << pct_value(m.avg_uncovered) << " of w_max\n";
  o << "  counter error (hot contexts): max " << pct_value(m.max_error) << ", average " << pct_value(m.avg_error)
    << " over " << with_commas(m.error_samples) << "; largest absolute " << with_commas(m.max_abs_error) << "\n";
  o << "  estimate - true count (all counted test nodes): from " << m.min_signed_error_all << " to "
    << m.max_signed_error_all;
  if (m.error_bound)
    o << "; Space-Saving bound: 0 .. min_count = " << with_commas(*m.error_bound) << " (epsilon*N = " << num(m.epsilon_n)
      << ")";
  o << "\n\n";
  std::cout << o.str();
}

json metrics_json(const ThreadProfile &test, const ThreadProfile &ref, const analysis::Alignment &a,
                  const analysis::Metrics &m) {
  auto tree = [](const ThreadProfile &t) {
    return json{{"file", t.source.empty() ? json() : json(t.source)},
                {"count_scale", count_scale(t)},
                {"pid", t.meta.pid},
                {"thread", t.meta.find_extra(format::meta::kMergedThreads) ? json() : json(t.meta.thread_seq)},
                {"mode", analysis::to_string(t.meta.mode)},
                {"calls", t.meta.calls},
                {"lost", t.meta.lost},
                {"unmatched_exits", t.meta.unmatched_exits},
                {"nodes", t.nodes.size() - 1}};
  };
  json cov = json::array();
  for (const analysis::Coverage &c : m.coverage)
    cov.push_back({{"tau", c.tau}, {"covered", c.covered}, {"hot", c.hot}, {"ratio", c.ratio}});
  return json{
      {"test", tree(test)},
      {"reference", tree(ref)},
      {"alignment",
       {{"by_offset", a.by_exact},
        {"by_symbol", a.by_symbol},
        {"by_similarity", a.by_similarity},
        {"unmatched_test", a.unmatched_test},
        {"unmatched_reference", a.unmatched_ref}}},
      {"phi", m.phi},
      {"test_threshold", m.test_threshold},
      {"reference_threshold", m.ref_threshold},
      {"wmax", m.wmax},
      {"hcct_nodes", m.hcct_nodes},
      {"hot", m.hot},
      {"cold_ancestors", m.cold_ancestors},
      {"true_hot", m.true_hot},
      {"false_positives", m.false_positives},
      {"false_negatives", m.false_negatives},
      {"exact_hot", m.exact_hot},
      {"unmatched_hcct", m.unmatched_hcct},
      {"overlap", m.overlap},
      {"coverage", cov},
      {"tau_tilde", m.tau_tilde},
      {"uncovered", m.uncovered},
      {"max_uncovered_percent", m.max_uncovered},
      {"avg_uncovered_percent", m.avg_uncovered},
      {"error_samples", m.error_samples},
      {"max_error_percent", m.max_error},
      {"avg_error_percent", m.avg_error},
      {"max_abs_error", m.max_abs_error},
      {"min_signed_error_all", m.min_signed_error_all},
      {"max_signed_error_all", m.max_signed_error_all},
      {"max_abs_error_all", m.max_abs_error_all},
      {"error_bound", m.error_bound ? json(*m.error_bound) : json()},
      {"epsilon_n", m.error_bound ? json(m.epsilon_n) : json()}};
}

// The pairs of threads to compare: processes pair by pid when both sides hold the same pids (HCCT
// and exact CCT of one run), else by position in pid order (two runs); threads by thread_seq.
using PairFn = std::function<void(const ThreadProfile &test, const ThreadProfile &ref)>;
void for_each_pair(const CompareOptions &o, const PairFn &fn) {
  Side test = load(o.test, o), ref = load(o.ref, o);
  // Processes pair by pid when both sides hold the same pids (HCCT and exact CCT of one run), else
  // by position in pid order (two runs).
  bool same_pids = test.processes.size() == ref.processes.size();
  for (size_t i = 0; same_pids && i < test.processes.size(); ++i)
    same_pids = test.processes[i].first == ref.processes[i].first;
  if (!same_pids && test.processes.size() != ref.processes.size())
    throw UserError("compare: " + o.test + " holds " + std::to_string(test.processes.size()) + " processes, " + o.ref +
                    " holds " + std::to_string(ref.processes.size()) + "; compare one process each (files, or --thread)");
  size_t pairs = 0;
  for (size_t i = 0; i < test.processes.size(); ++i) {
    auto &tp = test.processes[i].second;
    auto &rp = ref.processes[i].second;
    std::unordered_map<uint64_t, const ThreadProfile *> ref_thread;  // by thread_seq: no scan per thread
    for (const ThreadProfile &c : rp) ref_thread[c.meta.thread_seq] = &c;
    for (const ThreadProfile &t : tp) {
      auto found = ref_thread.find(t.meta.thread_seq);
      const ThreadProfile *r = found == ref_thread.end() ? nullptr : found->second;
      if (!r && tp.size() == 1 && rp.size() == 1) r = &rp[0];
      if (!r) {
        warn_always(t.source + ": no thread " + std::to_string(t.meta.thread_seq) + " in the reference; skipped");
        continue;
      }
      if (t.meta.key != r->meta.key)
        throw UserError("compare: " + t.source + " and " + r->source + " use different node keys");
      fn(t, *r);
      ++pairs;
    }
  }
  if (!pairs) throw UserError("compare: no pair of threads to compare");
}

int run_compare(const CompareOptions &o) {
  for (double t : o.taus)
    if (!(t >= 0 && t <= 1)) throw UserError("--tau: " + num(t) + " is not in [0, 1]");
  auto cache = std::make_shared<analysis::DebugInfoCache>();
  analysis::CompareOptions co;
  co.phi = o.phi;
  co.taus = o.taus;
  json results = json::array();
  for_each_pair(o, [&](const ThreadProfile &t, const ThreadProfile &r) {
    Names tn(t.modules, !o.no_symbols, cache), rn(r.modules, !o.no_symbols, cache);
    auto tk = analysis::node_keys(t, o.no_symbols ? nullptr : &tn);
    auto rk = analysis::node_keys(r, o.no_symbols ? nullptr : &rn);
    analysis::Alignment a = analysis::align_trees(t, tk, r, rk);
    // Sampled sides count the calls of bursts only: compared as whole-run estimates.
    double test_scale = count_scale(t), ref_scale = count_scale(r);
    ThreadProfile scaled_test, scaled_ref;
    try {
      if (test_scale != 1) scaled_test = analysis::scale_sampled(t);
      if (ref_scale != 1) scaled_ref = analysis::scale_sampled(r);
    } catch (const std::invalid_argument &e) {
      throw UserError(t.source + ": " + e.what());
    }
    const ThreadProfile *ts = test_scale != 1 ? &scaled_test : &t;
    const ThreadProfile *rs = ref_scale != 1 ? &scaled_ref : &r;
    // By time: the same metrics with self samples for counts (and S for N).
    ThreadProfile timed_test, timed_ref;
    if (o.metric == "time") {
      for (auto [side, timed] : {std::pair{&ts, &timed_test}, std::pair{&rs, &timed_ref}}) {
        try {
          *timed = analysis::time_as_counts(**side);
        } catch (const std::invalid_argument &e) {
          throw UserError((*side)->source + ": compare --metric time: " + e.what());
        }
        *side = timed;
      }
    }
    analysis::Metrics m = analysis::compare_trees(*ts, *rs, a, co);
    if (o.json) {
      results.push_back(metrics_json(t, r, a, m));
      results.back()["metric"] = o.metric;
    } else {
      if (o.metric == "time")
        std::cout << "# metric: time: every count below is self " << t.meta.time
                  << " time samples, N is S (+ lost samples), min_count the time summary's\n";
      print_text(t, r, a, m, test_scale, ref_scale);
    }
  });
  if (o.json) print_json({{"schema", "hcct-compare/1"}, {"phi", o.phi}, {"comparisons", std::move(results)}});
  return 0;
}

// ---- hcct diff A B: what changed between two runs.

struct DiffOptions {
  CompareOptions in;  // A = in.test, B = in.ref; phi and taus unused
  double min_change = 0.001;
  size_t top = 30;
  long width = -1;
  NameStyle names;
  std::string color = "auto";
};

// The calling context of `node` as "a > b > c", the innermost kPathFrames functions.
constexpr size_t kPathFrames = 8;
std::vector<uint64_t> context_path(const ThreadProfile &p, uint32_t node, bool &cut) {
  std::vector<uint64_t> routines;
  for (uint32_t i = node; i != analysis::kRoot && routines.size() < kPathFrames; i = p.nodes[i].parent)
    routines.push_back(p.nodes[i].routine);
  uint32_t top = node;
  for (size_t k = 1; k < routines.size(); ++k) top = p.nodes[top].parent;
  cut = p.nodes[top].parent != analysis::kRoot;
  std::reverse(routines.begin(), routines.end());
  return routines;
}

std::string signed_points(double change) { return share_percent(change, {.sign = true}); }

int run_diff(const DiffOptions &o) {
  if (!(o.min_change >= 0 && o.min_change <= 1)) throw UserError("--min-change: " + num(o.min_change) + " is not in [0, 1]");
  auto cache = std::make_shared<analysis::DebugInfoCache>();
  const size_t width = output_width(o.width);
  const bool color = !o.in.json && use_color(o.color);
  json results = json::array();
  for_each_pair(o.in, [&](const ThreadProfile &a, const ThreadProfile &b) {
    Names an(a.modules, !o.in.no_symbols, cache), bn(b.modules, !o.in.no_symbols, cache);
    auto ak = analysis::node_keys(a, o.in.no_symbols ? nullptr : &an);
    auto bk = analysis::node_keys(b, o.in.no_symbols ? nullptr : &bn);
    analysis::Alignment al = analysis::align_trees(a, ak, b, bk);
    std::vector<analysis::ContextChange> changes = analysis::diff_trees(a, b, al, o.min_change);
    const size_t shown = std::min(changes.size(), o.top);
    auto describe = [&](const analysis::ContextChange &c, bool &cut) {
      const ThreadProfile &p = c.a != analysis::kNoMatch ? a : b;
      Names &names = c.a != analysis::kNoMatch ? an : bn;
      uint32_t node = c.a != analysis::kNoMatch ? c.a : c.b;
      std::vector<std::string> frames;
      for (uint64_t r : context_path(p, node, cut)) frames.push_back(display_function(names.routine(r), o.names));
      const analysis::Symbol *site = p.nodes[node].call_site ? &names.call_site(p.nodes[node].call_site) : nullptr;
      uint32_t parent = p.nodes[node].parent;
      const analysis::Symbol *caller = parent == analysis::kRoot ? nullptr : &names.routine(p.nodes[parent].routine);
      return std::make_tuple(frames, site, caller);
    };
    if (o.in.json) {
      json list = json::array();
      for (size_t k = 0; k < shown; ++k) {
        const analysis::ContextChange &c = changes[k];
        bool cut = false;
        auto [frames, site, caller] = describe(c, cut);
        list.push_back({{"path", frames},
                        {"path_cut", cut},
                        {"call", site ? symbol_json(*site, true) : json()},
                        {"in_a", c.a != analysis::kNoMatch},
                        {"in_b", c.b != analysis::kNoMatch},
                        {"self_a", c.self_a},
                        {"self_b", c.self_b},
                        {"total_a", c.total_a},
                        {"total_b", c.total_b}});
      }
      results.push_back({{"a", {{"file", a.source}, {"calls", a.meta.calls}, {"lost", a.meta.lost}}},
                         {"b", {{"file", b.source}, {"calls", b.meta.calls}, {"lost", b.meta.lost}}},
                         {"changed", changes.size()},
                         {"changes", std::move(list)}});
      return;
    }
    std::string out = "# A: " + label(a) + "\n# B: " + label(b) + "\n";
    for (const ThreadProfile *t : {&a, &b})
      for (const std::string &w : loss_warnings(t->meta)) out += "# warning: " + std::string(t == &a ? "A" : "B") + ": " + w + "\n";
    out += "# aligned " + with_commas(a.nodes.size() - 1 - al.unmatched_test) + " of " + with_commas(a.nodes.size() - 1) +
           " contexts of A (" + with_commas(al.by_exact) + " by module offset, " + with_commas(al.by_symbol) + " by symbol, " +
           with_commas(al.by_similarity) + " by subtree similarity); " + with_commas(al.unmatched_ref) +
           " contexts of B are new\n";
    if (changes.empty()) {
      out += "(no context's share changed by more than " + pct(o.min_change) + " of the calls)\n\n";
      std::cout << out;
      return;
    }
    out += "# " + with_commas(changes.size()) + " contexts changed share by more than " + pct(o.min_change) +
           "; ranked by the change of their own share (self), then of their total";
    if (shown < changes.size()) out += "; the first " + with_commas(shown) + " (--top)";
    out += "\n#  self A   self B   change  total A  total B   change  calling context\n";
    for (size_t k = 0; k < shown; ++k) {
      const analysis::ContextChange &c = changes[k];
      bool cut = false;
      auto [frames, site, caller] = describe(c, cut);
      char cols[128];
      std::snprintf(cols, sizeof cols, "%8s %8s %8s %8s %8s %8s  ", pct(c.self_a).c_str(), pct(c.self_b).c_str(),
                    signed_points(c.self_change()).c_str(), pct(c.total_a).c_str(), pct(c.total_b).c_str(),
                    signed_points(c.total_change()).c_str());
      std::string path = cut ? "... > " : "";
      for (size_t f = 0; f < frames.size(); ++f) path += (f ? " > " : "") + frames[f];
      if (c.a == analysis::kNoMatch) path += " (new in B)";
      if (c.b == analysis::kNoMatch) path += " (gone in B)";
      std::string at = site ? display_call_site(*site, caller, o.names) : std::string();
      std::string line = std::string(cols);
      std::string context = fit_context(path, "", at, width ? (width > line.size() ? width - line.size() : 0) : 0);
      if (width && line.size() >= width) line = fit(line, width);
      else line += context;
      if (color) line = (c.self_change() > 0 ? "\033[31m" : "\033[32m") + line + "\033[0m";
      out += line + "\n";
    }
    std::cout << out << "\n";
  });
  if (o.in.json) print_json({{"schema", "hcct-diff/1"}, {"min_change", o.min_change}, {"comparisons", std::move(results)}});
  return 0;
}

}  // namespace

void add_compare_command(CLI::App &app, Action &action) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App *sub = app.add_subcommand("compare", "Accuracy of a tree against a reference: overlap, coverage, errors");
  sub->add_option("TEST", o->test, "the tree under evaluation (an HCCT, or one run): directory or .hcct file")->required();
  sub->add_option("REFERENCE", o->ref, "the reference (the exact CCT, e.g. TEST/exact, or another run)")->required();
  sub->add_option("--phi", o->phi, "hotness threshold for the HCCT and the exact hot set")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--tau", o->taus, "edge-hotness thresholds for hot edge coverage, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  CLI::Option *thread = sub->add_option("--thread", o->thread, "only this thread (thread_seq) of each process");
  sub->add_flag("--merge-threads", o->merge, "merge the threads of each process on both sides first")->excludes(thread);
  sub->add_flag("--no-symbols", o->no_symbols, "align by module offsets only; do not read binaries");
  sub->add_flag("--json", o->json, "machine-readable output on stdout (docs/CLI.md)");
  sub->add_option("--metric", o->metric,
                  "the metrics on calls (entries), or on time (self time samples; profiles with a time metric)")
      ->check(CLI::IsMember({"calls", "time"}))
      ->capture_default_str();
  sub->footer(std::string("\n") +
      "Metrics (thesis 5.1.2): degree of overlap, hot edge coverage per tau and tau~ (the smallest tau with\n"
      "full coverage), hotness of uncovered contexts, false positives and negatives of the hot set,\n"
      "counter errors. Processes pair by pid (same run) or by order (two runs); threads by thread_seq.\n"
      "Nodes line up by (module, offset) of function and call site, then by symbol (function, call line),\n"
      "then, for siblings still ambiguous, by the similarity of their subtrees." + "\n" + R"(
Examples:
  hcct record --mode hcct --options exact=1 -- ./prog      writes hcct.data/ and hcct.data/exact/
  hcct compare hcct.data hcct.data/exact --phi 1e-3
  hcct compare run1 run2 --tau 0.01,0.1 --json
)");
  sub->callback([o, &action] { action = [o] { return run_compare(*o); }; });
}

void add_diff_command(CLI::App &app, Action &action) {
  auto o = std::make_shared<DiffOptions>();
  CLI::App *sub = app.add_subcommand("diff", "What changed between two runs: contexts ranked by their change of share");
  sub->add_option("A", o->in.test, "the first run (before): directory or .hcct file")->required();
  sub->add_option("B", o->in.ref, "the second run (after): directory or .hcct file")->required();
  sub->add_option("--min-change", o->min_change,
                  "leave out contexts whose shares moved by at most this fraction of the calls (0.001: 0.1 points)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--top", o->top, "show at most this many contexts")->capture_default_str();
  CLI::Option *thread = sub->add_option("--thread", o->in.thread, "only this thread (thread_seq) of each process");
  sub->add_flag("--merge-threads", o->in.merge, "merge the threads of each process on both sides first")->excludes(thread);
  sub->add_flag("--no-symbols", o->in.no_symbols, "align by module offsets only; do not read binaries");
  sub->add_flag("--json", o->in.json, "machine-readable output on stdout (hcct-diff/1, docs/CLI.md)");
  sub->add_option("--width", o->width, "fit lines into this many columns (0: no limit; default: the terminal's)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--templates", o->names.templates, "keep C++ template arguments (default: elided to <…>)");
  sub->add_flag("--inline", o->names.inline_chains, "show a call site's whole inline chain");
  sub->add_flag("--full-paths", o->names.full_paths, "source files with their paths (default: file names only)");
  sub->add_option("--color", o->color, "red for a gain, green for a loss: auto, always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  sub->footer(std::string("\n") +
      "Lines up the contexts of A and B as 'hcct compare' does (module offset, then symbol, then subtree\n"
      "similarity) and lists those whose share of the calls changed: self (the context's own count) and\n"
      "total (with everything it called), in A, in B, and the change in percentage points. A context on\n"
      "one side only has share 0 on the other. Ranked by the change of self, largest first; a run against\n"
      "itself shows nothing." + "\n" + R"(
Examples:
  hcct diff before.data after.data
  hcct diff run1 run2 --merge-threads --min-change 0.01 --top 10
  hcct diff run1 run2 --json | jq '.comparisons[0].changes[0]'
)");
  sub->callback([o, &action] { action = [o] { return run_diff(*o); }; });
}

}  // namespace hcct::cli
