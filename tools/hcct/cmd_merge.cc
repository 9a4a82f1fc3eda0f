// hcct merge: threads, processes and runs into one profile, written in the dump format.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "common.h"
#include "hcct/analysis/merge.h"
#include "hcct/analysis/writer.h"

namespace hcct::cli {
namespace {

namespace fs = std::filesystem;
using analysis::ThreadProfile;

struct MergeOptions {
  std::vector<std::string> inputs{"hcct.data"};
  std::string out;
  std::optional<uint64_t> pid, thread;
  bool per_process = false;
};

int run_merge(const MergeOptions &o) {
  // Everything is read (and validated) before anything is written.
  std::vector<std::vector<ThreadProfile>> groups;  // one per output file
  std::vector<ThreadProfile> all;
  size_t processes = 0;
  for (const std::string &dir : o.inputs) {
    InputOptions in;
    in.dir = dir;
    in.pid = o.pid;
    in.thread = o.thread;
    for (const FileSelection &sel : select_files(in)) {
      ++processes;
      std::vector<ThreadProfile> threads;
      for (const analysis::ProfileFile &f : sel.files) threads.push_back(read_listed_profile(f));
      if (o.per_process) {
        groups.push_back(std::move(threads));
      } else {
        for (ThreadProfile &t : threads) all.push_back(std::move(t));
      }
    }
  }
  if (!o.per_process) groups.push_back(std::move(all));

  std::vector<ThreadProfile> merged;
  for (std::vector<ThreadProfile> &g : groups) {
    std::vector<const ThreadProfile *> ptrs;
    for (const ThreadProfile &t : g) ptrs.push_back(&t);
    try {
      merged.push_back(o.per_process ? analysis::merge_threads(std::span<const ThreadProfile *const>(ptrs))
                                     : analysis::merge_profiles(ptrs));
    } catch (const std::invalid_argument &e) {
      throw UserError(e.what());
    }
    g.clear();
  }

  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) throw UserError(o.out + ": " + ec.message());
  for (const auto &e : fs::directory_iterator(o.out, ec))
    if (analysis::parse_profile_file_name(e.path().filename().string()))
      throw UserError(o.out + ": already holds profile files (" + e.path().filename().string() +
                      "); merge into an empty or new directory");
  if (ec) throw UserError(o.out + ": " + ec.message());
  std::set<std::string> names;
  for (const ThreadProfile &m : merged) {
    std::string name = analysis::profile_file_name(m.meta.pid, m.meta.thread_seq);
    if (!names.insert(name).second)
      throw UserError("merge: two inputs have process " + std::to_string(m.meta.pid) +
                      "; --per-process needs distinct pids");
  }
  uint64_t threads = 0;
  for (const ThreadProfile &m : merged) {
    fs::path file = fs::path(o.out) / analysis::profile_file_name(m.meta.pid, m.meta.thread_seq);
    analysis::write_profile(file, m);
    const std::string *list = m.meta.find_extra(format::meta::kMergedFrom);
    if (!list) list = m.meta.find_extra(format::meta::kMergedThreads);
    threads += list ? uint64_t(std::count(list->begin(), list->end(), ',') + 1) : 1;
    std::cerr << "hcct: wrote " << escape_text(file.string()) << " (" << analysis::to_string(m.meta.mode) << ", "
              << calls_summary(m.meta) << ", " << with_commas(m.nodes.size() - 1) << " nodes)\n";
    for (const std::string &w : loss_warnings(m.meta)) warn_always(file.string() + ": " + w);
    // Sampled inputs (static bursting, docs/BURSTING.md "The estimator"): say what the counts are.
    if (m.meta.find_extra(format::meta::kBurstScaled))
      std::cerr << "hcct: " << escape_text(file.string())
                << ": sampled inputs (static bursting) were scaled by their own 1/sampled_fraction: counts are "
                   "whole-run estimates\n";
    else if (std::optional<double> f = m.meta.sampled_fraction())
      std::cerr << "hcct: " << escape_text(file.string()) << ": counts are sampled (static bursting, one fraction "
                << *f << " shared by every input): whole-run estimates are counts / " << *f << "\n";
  }
  std::cerr << "hcct: merged " << threads << " thread" << (threads == 1 ? "" : "s") << " of " << processes
            << " process" << (processes == 1 ? "" : "es") << " into " << merged.size() << " file"
            << (merged.size() == 1 ? "" : "s") << " in " << o.out << "\n";
  return 0;
}

}  // namespace

void add_merge_command(CLI::App &app, Action &action) {
  auto o = std::make_shared<MergeOptions>();
  CLI::App *sub = app.add_subcommand("merge", "Merge threads, processes and runs into one profile (dump format)");
  sub->add_option("INPUT", o->inputs, "profile directories or .hcct files (default: hcct.data)");
  sub->add_option("-o,--out", o->out, "output directory (created; must hold no profile files)")->required();
  sub->add_option("--pid", o->pid, "only the process with this pid (in every input)");
  sub->add_option("--thread", o->thread, "only this thread (thread_seq) of each process");
  sub->add_flag("--per-process", o->per_process,
                "merge the threads of each process into one file per process, instead of everything into one");
  sub->footer(std::string("\n") +
      "Contexts are matched by their path of (function, call site) from the thread start, after every\n"
      "address is normalised to (module, offset), so that runs at other load addresses (ASLR) line up.\n"
      "cct trees merge exactly (counts add); hcct trees merge into a summary whose error bound\n"
      "(min_count) is the sum of the inputs' bounds. All inputs must share mode and key. The result is\n"
      "an ordinary profile: report, export, compare and info read it (docs/CLI.md, 'hcct merge')." + "\n" + R"(
Examples:
  hcct merge run1 run2 run3 -o all-runs          three runs into one tree
  hcct merge hcct.data --per-process -o by-proc  threads of each process
  hcct report all-runs --phi 0.001
)");
  sub->callback([o, &action] { action = [o] { return run_merge(*o); }; });
}

}  // namespace hcct::cli
