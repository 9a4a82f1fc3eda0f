// hcct guide: hot-loop guidance for OSR tiers (docs/GUIDE.md). Reads kpath profiles (one or more
// directories of the same program), writes the guidance file (JSON; the kpath plugin's OSR-point
// inserter reads it) and prints a readable report: per hot loop its iterations and entries, the
// iterations per entry, its dominant paths and their run lengths, the calling contexts reached
// from its body (when the run also recorded a CCT), and recommendations with their evidence.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "common.h"
#include "hcct/guide_format.h"
#include "hcct/analysis/kpath_guide.h"
#include "hcct/analysis/kpath_metadata.h"
#include "hcct/analysis/kpath_profile.h"

namespace hcct::cli {
namespace {

namespace an = analysis;

struct GuideOptions {
  std::vector<std::string> dirs{"hcct.data"};
  std::string output = "hcct-guide.json";
  std::optional<uint32_t> k;
  size_t top = 10;
  double min_share = 0.001;  // fraction of all loop iterations
  bool json = false;
  std::string thresholds;  // the oracle's thresholds file to write, if any
};

const char *kind_name(an::LoopPath::Kind k) {
  switch (k) {
    case an::LoopPath::Kind::kEntry: return "entry";
    case an::LoopPath::Kind::kCycle: return "cycle";
    case an::LoopPath::Kind::kExit: return "exit";
  }
  return "?";
}

std::string fixed(double x, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::string osr_key(const an::LoopGuide &l) {
  return std::filesystem::path(l.file).filename().string() + ":" + std::to_string(l.line);
}

json to_json(const an::Guide &g, const std::vector<std::string> &dirs) {
  json loops = json::array();
  for (const an::LoopGuide &l : g.loops) {
    json paths = json::array();
    for (const an::LoopPath &p : l.paths) {
      json jp = {{"id", p.id}, {"kind", kind_name(p.kind)}, {"count", p.count}, {"share", p.share}, {"lines", p.lines}, {"blocks", p.blocks}};
      if (!p.repeats.empty()) {
        jp["repeats"] = p.repeats;
        jp["runs_at_least"] = p.runs_at_least;
      }
      paths.push_back(std::move(jp));
    }
    json contexts = json::array();
    for (const an::LoopContext &c : l.contexts)
      contexts.push_back({{"frames", c.frames}, {"call_line", c.call_line}, {"calls", c.calls}});
    json recs = json::array();
    for (const an::Recommendation &r : l.recommendations) {
      json jr = {{"kind", r.kind}, {"text", r.text}, {"evidence", r.evidence}};
      if (r.kind == "unroll" || r.kind == "specialise") jr["path"] = r.path;
      if (r.kind == "unroll") jr["factor"] = r.factor;
      if (r.kind == "unroll" || r.kind == "specialise") jr["share"] = r.share;
      recs.push_back(std::move(jr));
    }
    json jl = {{"rank", l.rank},
               {"function", l.function},
               {"display", l.display},
               {"function_id", hex(l.function_id)},
               {"file", l.file},
               {"line", l.line},
               {"key", osr_key(l)},
               {"header_block", l.header_block},
               {"stage", l.late ? "late" : "early"},
               {"opt_level", l.opt_level < 0 ? json() : json(l.opt_level)},
               {"depth", l.depth},
               {"innermost", l.innermost},
               {"iterations", l.iterations},
               {"unsampled", l.unsampled},
               {"entries", l.entries},
               {"mean_iterations", l.mean_iterations},
               {"share_of_program", l.share_of_program},
               {"entries_at_least", l.entries_at_least},
               {"threshold", l.threshold ? json(*l.threshold) : json()},
               {"paths", std::move(paths)},
               {"contexts", std::move(contexts)},
               {"recommendations", std::move(recs)}};
    loops.push_back(std::move(jl));
  }
  // The counts' guarantee (docs/KPATH.md, "Bounded forests"): all 0 for exact profiles.
  json counts = {{"bounded", g.bounded_threads > 0}, {"path_epsilon", g.epsilon}, {"paths", g.paths},
                 {"delta", g.delta}, {"cuts", g.cuts}, {"lost", g.lost}, {"forced_sweeps", g.forced_sweeps},
                 {"sampled", g.sampled}};
  // A bursting profile (docs/KPATH.md, "Bursting"): estimated counts, from this many sampled paths.
  if (g.sampled) {
    counts["estimator"] = "root-ratio";
    counts["sampled_paths"] = g.sampled_paths;
    counts["joins"] = g.joins;
    counts["leaves"] = g.leaves;
    counts["clock"] = g.estimate.event_clock ? "path-starts" : "time";
    json threads = json::array();
    for (const auto &t : g.estimate.unsampled_threads)
      threads.push_back({{"pid", t.pid}, {"tid", t.tid}, {"paths", t.paths}, {"starts", t.starts}});
    counts["unsampled_threads"] = std::move(threads);
    counts["threads_may_be_missing"] = g.estimate.threads_may_be_missing;
  }
  return {{"format", guide_format::kGuideFormat}, {"version", guide_format::kGuideVersion}, {"k", g.k}, {"profiles", dirs}, {"loop_iterations", g.loop_iterations},
          {"counts", std::move(counts)}, {"loops", std::move(loops)}};
}

// The online oracle's thresholds file (hcct/guide_format.h): every loop with a threshold, in rank
// order. A key the format cannot hold (a newline, a leading '#') is left out and named.
void write_thresholds(const an::Guide &g, const std::string &path) {
  using namespace guide_format;
  OutputFile out(path);
  out.stream() << kThresholdsHeader << "\n";
  for (const an::LoopGuide &l : g.loops) {
    if (!l.threshold) continue;
    std::string key = osr_key(l);
    if (!key_fits_thresholds_file(key.data(), key.size())) {
      warn_always("loop key '" + key + "' cannot be written to a thresholds file (a newline, a leading '#' or over " +
                  std::to_string(kMaxKeyBytes) + " bytes); left out of " + path);
      continue;
    }
    out.stream() << key << "=" << *l.threshold << "\n";
  }
  out.stream() << kThresholdsEnd << "\n";
  out.commit();
}

void print_report(const an::Guide &g, size_t top, const std::string &output, const std::string &thresholds) {
  std::cout << "hot loops (k = " << g.k << ", " << with_commas(g.loop_iterations) << " loop iterations in all)\n";
  if (g.bounded_threads) {
    char eps[32];
    std::snprintf(eps, sizeof eps, "%g", g.epsilon);
    std::cout << "counts from a bounded path profile (path_epsilon = " << eps << "): a count of a sequence of n paths is at "
              << "most " << with_commas(g.delta) << " + (n - 1) * " << with_commas(g.cuts)
              << (g.lost ? " + n * " + with_commas(g.lost) : std::string()) << " below the truth ("
              << fixed(100.0 * double(g.delta) / double(std::max<uint64_t>(g.paths, 1)), 4) << "% of the "
              << with_commas(g.paths) << " paths for one path), never above";
    if (g.forced_sweeps) std::cout << "; " << g.forced_sweeps << " forced sweeps";
    std::cout << "\n";
  }
  if (g.sampled)
    std::cout << "counts from a path profile sampled in bursts (burst=1): estimates, each sequence's sampled count "
              << "times T/S of its first path's start (per-root ratio estimator, docs/KPATH.md \"Bursting\"); "
              << with_commas(g.sampled_paths) << " of an estimated " << with_commas(g.paths) << " paths sampled; "
              << with_commas(g.joins) << " activations joined and " << with_commas(g.leaves)
              << " left the instrumented code at a loop header\n";
  if (g.sampled) std::cout << an::unsampled_threads_text(g.estimate, "");
  std::string oracle;
  for (const an::LoopGuide &l : g.loops) {
    if (l.rank > top) break;
    std::cout << "\n#" << l.rank << "  " << l.display << "  " << osr_key(l) << "  (header block " << l.header_block
              << (l.innermost ? ", innermost" : "") << ", depth " << l.depth << ")\n";
    if (l.unsampled)
      std::cout << "    not sampled: " << with_commas(l.iterations) << " back edges counted ("
                << share_percent(l.share_of_program, {.digits = 1}) << "), no burst saw it run\n";
    else
      std::cout << "    iterations " << with_commas(l.iterations) << " (" << share_percent(l.share_of_program, {.digits = 1}) << "), entries "
                << with_commas(l.entries) << ", mean " << fixed(l.mean_iterations) << " per entry\n";
    if (!l.entries_at_least.empty() && l.entries) {
      std::cout << "    iterations per entry:";
      size_t n = l.entries_at_least.size();
      for (size_t j = 1; j < n; ++j) {
        uint64_t exactly = l.entries_at_least[j - 1] - l.entries_at_least[j];
        if (exactly) std::cout << " " << j << ":" << with_commas(exactly);
      }
      if (l.entries_at_least[n - 1]) std::cout << " >=" << n << ":" << with_commas(l.entries_at_least[n - 1]);
      std::cout << "\n";
    }
    for (const an::LoopPath &p : l.paths) {
      if (p.share < 0.01) continue;
      std::cout << "    path " << p.id << " " << kind_name(p.kind) << " " << share_percent(p.share, {.digits = 1}) << "  " << p.lines << "\n";
      if (p.kind == an::LoopPath::Kind::kCycle && p.repeats.size() > 1 && p.repeats[0]) {
        std::cout << "      runs >= j:";
        for (size_t j = 1; j <= p.runs_at_least.size(); ++j)
          if (j <= 4 || j == p.runs_at_least.size() || (j & (j - 1)) == 0) std::cout << " " << j << ":" << with_commas(p.runs_at_least[j - 1]);
        std::cout << "; followed by >= " << p.repeats.size() - 1 << " more in "
                  << format_percent(100.0 * double(p.repeats.back()) / double(p.repeats[0]), {.digits = 1}) << " of occurrences\n";
      }
    }
    for (const an::LoopContext &c : l.contexts) {
      std::cout << "    calls (line " << c.call_line << "): ";
      for (size_t i = 0; i < c.frames.size(); ++i) std::cout << (i ? " > " : "") << c.frames[i];
      std::cout << "  " << with_commas(c.calls) << "\n";
    }
    for (const an::Recommendation &r : l.recommendations) std::cout << "  => " << r.text << "\n       (" << r.evidence << ")\n";
    if (l.threshold) oracle += (oracle.empty() ? "" : ",") + osr_key(l) + "=" + std::to_string(*l.threshold);
  }
  std::cout << "\nguidance written to " << output << "\n";
  std::cout << "  OSR points: HCCT_GUIDE=" << output << " clang -fpass-plugin=kpath.so ... (HCCT_KPATH_PROFILE=0: no path probes)\n";
  if (!oracle.empty()) std::cout << "  oracle thresholds: HCCT_ORACLE=" << oracle << "\n";
  if (!thresholds.empty()) std::cout << "  oracle thresholds of every loop: HCCT_ORACLE_GUIDE=" << thresholds << "\n";
}

int run_guide(const GuideOptions &o) {
  std::vector<an::ThreadPaths> threads;
  std::vector<std::string> dir_of;  // per thread, the directory it came from (for messages)
  for (const std::string &d : o.dirs) {
    if (!std::filesystem::exists(d)) throw UserError(d + ": no such file or directory");
    auto t = an::read_thread_paths(d);
    if (t.empty())
      throw UserError(d + ": no path profile (KPTH section) in any thread file; compile the program with "
                      "clang -fpass-plugin=kpath.so and link libhcct");
    for (auto &x : t) {
      threads.push_back(std::move(x));
      dir_of.push_back(d);
    }
  }
  uint32_t recorded = threads.front().forest.k;
  for (size_t i = 0; i < threads.size(); ++i)
    if (threads[i].forest.k != recorded)
      throw UserError("profiles recorded with different k (" + std::to_string(recorded) + " in " + threads.front().profile.source +
                      ", " + std::to_string(threads[i].forest.k) + " in " + threads[i].profile.source +
                      "); guide profiles of one k at a time");
  if (o.k && *o.k > recorded)
    throw UserError("--k " + std::to_string(*o.k) + " exceeds the k = " + std::to_string(recorded) + " " + dir_of.front() +
                    " was recorded with (HCCT_OPTIONS=k=" + std::to_string(*o.k) + " records it)");
  an::PathMetadata meta;
  std::set<std::string> seen;
  std::set<std::string> unreadable;  // not regular files: warned about here, once
  for (const auto &t : threads)
    for (const an::Module &m : t.profile.modules) {
      if (!seen.insert(m.path).second) continue;
      try {
        meta.add_elf(m.path);
      } catch (const an::IoError &e) {  // a FIFO or device: never opened for reading
        unreadable.insert(m.path);
        warn_always(e.what());
      } catch (const an::FormatError &e) {
        warn_always(e.what());
      }
    }
  // A bursting profile: counts scaled by the per-root ratio estimator (all threads of a process
  // count towards S, as its start counters are process-wide).
  an::PathEstimator estimator(threads);
  estimator.resolve(meta);
  an::GuideOptions go;
  go.estimator = &estimator;
  go.k = o.k.value_or(0);
  go.min_share = o.min_share;
  an::Guide g;
  try {
    g = an::make_guide(threads, meta, go);
  } catch (const std::invalid_argument &e) {
    throw UserError(std::string("guide: ") + e.what());
  }
  for (const std::string &w : g.warnings) {
    // The symbolizer would name an unreadable module a second time.
    bool repeat = std::any_of(unreadable.begin(), unreadable.end(),
                              [&](const std::string &path) { return w.starts_with("cannot read " + path + " ("); });
    if (!repeat) warn_always(w);
  }
  json j = to_json(g, o.dirs);
  OutputFile out(o.output);
  out.stream() << j.dump(1) << "\n";
  out.commit();
  if (!o.thresholds.empty()) write_thresholds(g, o.thresholds);
  if (o.json) std::cout << j.dump(1) << "\n";
  else print_report(g, o.top, o.output, o.thresholds);
  return 0;
}

}  // namespace

void add_guide_command(CLI::App &app, Action &action) {
  auto o = std::make_shared<GuideOptions>();
  CLI::App *sub = app.add_subcommand("guide", "hot-loop guidance for OSR: where to put OSR points, when to fire, which loop versions pay");
  sub->add_option("dirs", o->dirs, "profile directories (or .hcct files) of kpath-instrumented runs of one program, summed")
      ->capture_default_str();
  sub->add_option("-o,--output", o->output, "guidance file to write (JSON, read by the kpath plugin's OSR-point inserter)")
      ->capture_default_str();
  sub->add_option("--k", o->k, "use sequences of up to K paths, 1 <= K <= the recorded k (default: the recorded k)")
      ->check(CLI::Range(1, 256));
  sub->add_option("--top", o->top, "loops shown in the report (the file has all)")->capture_default_str();
  sub->add_option("--min-share", o->min_share,
                  "leave out loops whose iterations are below F times all loop iterations (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_flag("--json", o->json, "print the guidance (JSON) instead of the report");
  sub->add_option("--thresholds", o->thresholds,
                  "also write the online oracle's thresholds file (key=T lines, read at run time through "
                  "HCCT_ORACLE_GUIDE=FILE)");
  sub->footer(std::string("\n") + R"(Reads profiles of a program built with clang -fpass-plugin=kpath.so (linked with libhcct) and run
with HCCT_OPTIONS=k=K; K >= 16 lets every unroll factor be checked (docs/GUIDE.md). The report, per
loop, hottest first (by share of all loop iterations):
  #RANK  FUNCTION  FILE:LINE  (header block B, innermost, depth D)
    iterations I (P%), entries E, mean M per entry    I = header executions, P% of all loops'
    iterations per entry: 1:N1 2:N2 ... >=K:NK        entries by iterations run (innermost loops)
    path ID KIND P%  LINES                            KIND: entry, cycle (one whole iteration), exit
      runs >= j: ...                                  cycle paths: maximal runs of it of length >= j
    calls (line L): CALLEE > ...  COUNT               contexts reached from the body (with a CCT)
  => RECOMMENDATION                                   osr-point, no-osr-point, unroll, specialise; not-sampled
                                                      (a bursting profile: no burst saw the loop run)
       (EVIDENCE)
and the environment that applies the guidance: HCCT_GUIDE for the plugin, HCCT_ORACLE thresholds
(the shown loops'; --thresholds FILE writes every loop's, for HCCT_ORACLE_GUIDE=FILE).

Examples:
  HCCT_OPTIONS=k=16 ./prog                          record (into hcct.data/)
  hcct guide                                        report; writes hcct-guide.json
  hcct guide run1.data run2.data -o prog.guide.json   two runs summed
  hcct guide --min-share 0 --top 50                 every loop
  hcct guide --json | jq '.loops[0].recommendations'
  hcct guide --thresholds prog.thresholds; HCCT_ORACLE_GUIDE=prog.thresholds ./prog   the oracle's thresholds
  HCCT_GUIDE=hcct-guide.json clang -O2 -fpass-plugin=kpath.so prog.c ...   OSR points where advised
)");
  sub->callback([o, &action] { action = [o] { return run_guide(*o); }; });
}

}  // namespace hcct::cli
