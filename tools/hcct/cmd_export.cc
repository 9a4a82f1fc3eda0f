// hcct export: the selected trees in a format other tools read (docs/EXPORTS.md): folded stacks,
// callgrind, pprof, JSON, DOT.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "common.h"
#include "hcct/analysis/exporters.h"
#include "hcct/analysis/hot.h"

namespace hcct::cli {
namespace {

struct ExportOptions {
  InputOptions in;
  FilterOptions filter;
  std::string format;
  std::string out;
  bool merge = false;
  std::string metric = "calls";  // --metric: what the folded stacks add up (calls or time samples)
};

int run_export(const ExportOptions &o) {
  if (o.out.empty() && analysis::export_is_binary(o.format) && isatty(STDOUT_FILENO))
    throw UserError("export: " + o.format + " output is binary; write it to a file with -o FILE");
  // Written under a temporary name and renamed when complete: an input error half-way leaves nothing.
  const bool by_time = o.metric == "time";
  // callgrind, pprof and JSON carry calls and time samples side by side (a profile with a time
  // metric): they select by calls and also keep the contexts hot by time.
  const bool both_metrics = o.format == "callgrind" || o.format == "pprof" || o.format == "json";
  if (by_time && both_metrics)
    throw UserError("export: --metric time applies to --format folded and dot; " + o.format +
                    " carries calls and time samples together (docs/EXPORTS.md)");
  OutputFile output(o.out);
  std::ostream &out = output.stream();
  std::unique_ptr<analysis::Exporter> exporter = analysis::make_exporter(o.format, out);
  // Folded stacks and pprof samples write each context's whole stack: without a cap a deep
  // recursion makes output quadratic in its depth. The default cap charges deeper contexts to
  // their ancestor at the cap (totals kept) and says so.
  FilterOptions filters = o.filter;
  const bool whole_stacks = o.format == "folded" || o.format == "pprof";
  const bool default_cap = whole_stacks && !filters.depth;
  if (default_cap) filters.depth = kDefaultStackFrames;
  const bool default_share = whole_stacks && !filters.min_share;
  if (!filters.min_share) filters.min_share = whole_stacks ? kDefaultStackMinShare : 0.0;
  const double min_share = *filters.min_share;
  for_each_tree(o.in, o.merge, [&](TreeInput &t) {
    analysis::TreeFilter filter = make_tree_filter(filters, *t.names, min_share);
    if (by_time) filter.metric = analysis::Metric::time;
    filter.keep_sampled = both_metrics;
    analysis::TreeInfo info;
    info.source = t.source;
    info.meta = t.meta;
    info.modules = t.modules;
    info.node_count = t.node_count;
    info.threads = t.threads;
    info.merged = t.merged;
    info.names = t.names;
    info.symbolized = !o.in.no_symbols;
    info.min_share = min_share;
    info.metric = filter.metric;
    info.threshold = analysis::hot_threshold(min_share, by_time ? t.meta->samples + t.meta->samples_lost : t.meta->all_calls());
    const auto [stats, charged] = analysis::export_tree(*exporter, info, *t.nodes, filter, t.progress);
    // Folded stacks have no place for them; the other formats carry them too (docs/EXPORTS.md).
    const std::string tree_name = t.source.empty() ? "pid " + std::to_string(t.meta->pid) + " (merged)" : t.source;
    for (const std::string &w : loss_warnings(*t.meta)) warn_always(tree_name + ": " + w);
    // What the defaults left out, in the unit the filters selected by.
    const std::string unit = by_time ? " samples" : " calls";
    const uint64_t all = by_time ? t.meta->samples + t.meta->samples_lost : t.meta->all_calls();
    if (default_cap && charged)
      note(tree_name + ": " + with_commas(charged) + unit + " (" + percent(charged, all) + ") in contexts deeper than " +
           std::to_string(kDefaultStackFrames) + " frames are charged to their ancestor at depth " +
           std::to_string(kDefaultStackFrames) + "; --depth 0 keeps every frame");
    if (default_share && stats.below_threshold)
      note(tree_name + ": " + with_commas(stats.below_threshold) + " contexts below 1e-6 of all" + unit + " (" +
           with_commas(stats.below_threshold_count) + unit + ", " + percent(stats.below_threshold_count, all) +
           ") are left out; --min-share 0 keeps everything");
  });
  exporter->finish();
  output.commit();
  for (const std::string &w : exporter->warnings()) warn_always(w);
  return 0;
}

}  // namespace

void add_export_command(CLI::App &app, Action &action) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App *sub = app.add_subcommand("export", "Write profiles for other tools: flame graphs, KCachegrind, pprof, JSON, DOT");
  sub->add_option("DIR", o->in.dir, "profile directory written by 'hcct record', or one .hcct file")->capture_default_str();
  sub->add_option("-f,--format", o->format, "folded, callgrind, pprof, json or dot")
      ->required()
      ->check(CLI::IsMember(analysis::kExportFormats));
  sub->add_option("-o,--out", o->out, "output file (default: stdout)");
  sub->add_option("--metric", o->metric,
                  "folded, dot: values are calls (entries), or time (self time samples; profiles with a time metric); "
                  "callgrind, pprof and json carry both")
      ->check(CLI::IsMember({"calls", "time"}))
      ->capture_default_str();
  sub->add_option("--pid", o->in.pid, "only the process with this pid");
  CLI::Option *thread = sub->add_option("--thread", o->in.thread, "only this thread (thread_seq; 0 = main thread)");
  sub->add_flag("--merge-threads", o->merge, "merge the threads of each process first")->excludes(thread);
  sub->add_flag("--no-symbols", o->in.no_symbols, "addresses as module+offset; do not read binaries");
  add_filter_options(sub, o->filter);
  sub->footer(std::string("\n") +
      "Every selected thread (or process, with --merge-threads) goes into one output; counts are entries\n"
      "into calling contexts (in hcct mode Space-Saving estimates). Without filters the exported counts add\n"
      "up to N, the number of calls. Formats and their consumers are described in docs/EXPORTS.md." + "\n" + R"(
Examples:
  hcct export -f folded | flamegraph.pl > flame.svg         (or inferno-flamegraph, speedscope)
  hcct export -f folded --metric time | flamegraph.pl > cpu.svg     (a CPU-time flame graph)
  hcct export -f callgrind -o callgrind.out && kcachegrind callgrind.out
  hcct export -f pprof -o prof.pb && pprof -top prof.pb
  hcct export -f json --min-share 0.001 | jq '.trees[0].nodes | length'
  hcct export -f dot --min-share 0.02 --min-total 0.1 | dot -Tsvg > tree.svg
  hcct export -f folded --focus '^parse' --ignore 'malloc|free'
)");
  sub->callback([o, &action] { action = [o] { return run_export(*o); }; });
}

}  // namespace hcct::cli
