// hcct info: what a profile directory holds, per process and thread.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include <map>
#include <unordered_set>

#include "common.h"
#include "hcct/analysis/kpath_profile.h"
#include "hcct/analysis/reader.h"

namespace hcct::cli {
namespace {

using analysis::Module;
using analysis::ThreadProfile;

struct InfoOptions {
  InputOptions in;
  bool modules = false;
};

struct Stats {
  size_t nodes = 0;      // root excluded
  size_t monitored = 0;
  size_t depth = 0;      // deepest node of the tree as written
  // A file with no calling context may hold a kpath path profile (a program built for path
  // profiling only): what it holds, so that info does not describe it as an empty run.
  std::optional<analysis::KsfForest> paths;
};

// Node statistics, gathered while each file is streamed (run_info): the trees are not kept.
std::map<const ThreadProfile *, Stats> g_stats;
std::vector<Stats> g_stats_pending;

Stats stats_of(const ThreadProfile &t) { return g_stats.at(&t); }

// META, modules and node statistics of one file, reading its nodes as a stream.
ThreadProfile read_summary(const analysis::ProfileFile &f, Stats &s) {
  std::unique_ptr<analysis::ProfileStream> stream = open_stream(f);
  Progress progress("reading " + stream->source());
  std::vector<uint32_t> path;
  analysis::Node n;
  while (stream->next(n)) {
    const uint32_t i = uint32_t(stream->nodes_read() - 1);
    if ((i & 0xffff) == 0) progress.update(stream->bytes_read(), stream->file_size());
    if (i) {
      while (path.back() != n.parent) path.pop_back();
      ++s.nodes;
      s.monitored += n.monitored();
    }
    path.push_back(i);
    s.depth = std::max(s.depth, path.size() - 1);
  }
  ThreadProfile t;
  t.source = stream->source();
  t.meta = stream->meta();
  t.modules = stream->modules();
  if (s.nodes == 0 && t.meta.calls == 0) {
    // Small by construction (no tree): read whole for its KPTH section.
    std::ifstream in(f.path, std::ios::binary);
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (std::optional<analysis::ThreadPaths> tp = analysis::parse_thread_paths(bytes, t.source)) {
      tp->forest.nodes.shrink_to_fit();
      s.paths = std::move(tp->forest);
    }
  }
  return t;
}

// "k-SF, k = 4: 1,234 paths in 56 activations, 78 forest nodes" (lost ones stated).
std::string describe_paths(const analysis::KsfForest &f) {
  std::string out = std::string(analysis::forest_kind_name(f.kind)) + ", k = " + std::to_string(f.k) + ": " +
                    with_commas(f.paths) + " paths in " + with_commas(f.enters) + " activations, " +
                    with_commas(f.nodes.size()) + " forest nodes";
  if (f.lost) out += ", " + with_commas(f.lost) + " paths lost";
  return out;
}

std::string build_id_hex(const std::vector<uint8_t> &id) {
  std::string s;
  char buf[3];
  for (uint8_t b : id) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    s += buf;
  }
  return s;
}

json module_json(const Module &m) {
  return {{"path", m.path},
          {"bias", hex(m.bias)},
          {"lo", hex(m.lo)},
          {"hi", hex(m.hi)},
          {"build_id", m.build_id.empty() ? json() : json(build_id_hex(m.build_id))}};
}

json thread_json(const ThreadProfile &t) {
  const analysis::ThreadMeta &m = t.meta;
  Stats s = stats_of(t);
  json j = {{"file", t.source},
            {"thread_seq", m.thread_seq},
            {"tid", m.tid},
            {"status", analysis::to_string(m.status)},
            {"runtime", m.runtime},
            {"mode", analysis::to_string(m.mode)},
            {"key", analysis::to_string(m.key)},
            {"epsilon", m.mode == analysis::Mode::hcct ? json(m.epsilon) : json()},
            {"counters", m.mode == analysis::Mode::hcct ? json(m.counters) : json()},
            {"min_count", m.mode == analysis::Mode::hcct ? json(m.min_count) : json()},
            {"calls", m.calls},
            {"dropped", m.dropped},
            {"lost", m.lost},
            {"unmatched_exits", m.unmatched_exits},
            {"nodes", s.nodes},
            {"monitored", s.monitored},
            {"tree_depth", s.depth},
            {"max_depth", m.max_depth},
            {"tree_bytes", m.tree_bytes},
            {"nodes_peak", m.nodes_peak},
            {"start_ns", m.start_ns},
            {"end_ns", m.end_ns},
            {"time", m.timed() ? json(m.time) : json()},
            {"sample_period_ns", m.timed() ? json(m.sample_period_ns) : json()},
            {"samples", m.timed() ? json(m.samples) : json()},
            {"samples_lost", m.timed() ? json(m.samples_lost) : json()},
            {"time_min_count", m.timed() && m.mode == analysis::Mode::hcct ? json(m.time_min_count) : json()}};
  // A path profile of a kpath-only run (no calling context): what it holds; null otherwise.
  j["paths"] = s.paths ? json{{"forest", analysis::forest_kind_name(s.paths->kind)},
                              {"k", s.paths->k},
                              {"paths", s.paths->paths},
                              {"activations", s.paths->enters},
                              {"forest_nodes", s.paths->nodes.size()},
                              {"lost", s.paths->lost}}
                       : json();
  json extra = json::object();
  for (const auto &[k, v] : m.extra) extra[k] = v;
  j["extra"] = std::move(extra);
  json mods = json::array();
  for (const Module &mod : t.modules) mods.push_back(module_json(mod));
  j["modules"] = std::move(mods);
  return j;
}


std::string seconds(uint64_t start_ns, uint64_t end_ns) {
  if (end_ns < start_ns) return "?";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", double(end_ns - start_ns) / 1e9);
  return buf;
}

void print_text(const Selection &s, const InfoOptions &o) {
  const ThreadProfile &first = *s.threads.front();
  const analysis::ThreadMeta &pm = first.meta;
  std::string out;
  // META values and paths are bytes from the file, escaped where they are inserted: a newline or
  // an escape sequence in them must not forge lines or reach the terminal.
  out += "process " + std::to_string(s.process->pid) + " (parent " + std::to_string(pm.ppid) + "): " + escape_text(pm.exe) + "\n";
  out += "  command: " + escape_text(shell_join(pm.cmdline)) + "\n";
  out += "  runtime: " + escape_text(pm.runtime) + "\n";
  // Each file has its own map (taken when it was written); list the union.
  std::vector<const Module *> mods;
  struct SameModule {  // hash and equality of the module a pointer points to
    size_t operator()(const Module *m) const {
      return std::hash<std::string>()(m->path) ^ (m->lo * 0x9e3779b97f4a7c15ull) ^ (m->hi * 0xbf58476d1ce4e5b9ull);
    }
    bool operator()(const Module *a, const Module *b) const { return *a == *b; }
  };
  std::unordered_set<const Module *, SameModule, SameModule> seen;
  for (const ThreadProfile *t : s.threads)
    for (const Module &m : t->modules)
      if (seen.insert(&m).second) mods.push_back(&m);
  out += "  modules: " + std::to_string(mods.size()) + (o.modules ? "" : " (list them with --modules)") + "\n";
  if (o.modules) {
    for (const Module *m : mods) {
      out += "    " + hex(m->lo) + "-" + hex(m->hi) + " bias " + hex(m->bias) + "  " + escape_text(m->path);
      if (!m->build_id.empty()) out += "  build-id " + build_id_hex(m->build_id);
      out += "\n";
    }
  }
  for (const ThreadProfile *t : s.threads) {
    const analysis::ThreadMeta &m = t->meta;
    Stats st = stats_of(*t);
    out += "  thread " + std::to_string(m.thread_seq) + " (tid " + std::to_string(m.tid) + "): " +
           std::string(analysis::to_string(m.status)) + ", " + seconds(m.start_ns, m.end_ns) + ", file " + escape_text(t->source) + "\n";
    out += "    mode " + std::string(analysis::to_string(m.mode)) + ", key " + std::string(analysis::to_string(m.key));
    if (m.mode == analysis::Mode::hcct) {
      char eps[32];
      std::snprintf(eps, sizeof eps, "%g", m.epsilon);
      out += ", epsilon " + std::string(eps) + " (" + with_commas(m.counters) + " counters, min_count " +
             with_commas(m.min_count) + ")";
    }
    out += "\n";
    if (st.paths) {
      out += "    path profile (kpath): " + describe_paths(*st.paths) + "\n";
      out += "    no calling contexts: the program was built for path profiling only (see hcct paths, hcct guide)\n";
      out += "    memory: tree " + human_bytes(m.tree_bytes) + " at peak\n";
      for (const auto &[k, v] : m.extra) out += "    " + escape_text(k) + " = " + escape_text(v) + "\n";
      continue;
    }
    out += "    calls (N) " + with_commas(m.calls) + ", lost " + with_commas(m.lost) + ", dropped " +
           with_commas(m.dropped) + ", unmatched exits " + with_commas(m.unmatched_exits) + "\n";
    if (m.timed()) out += "    " + time_summary(m) + "\n";
    for (const std::string &w : loss_warnings(m)) out += "    warning: " + w + "\n";
    out += "    nodes " + with_commas(st.nodes);
    if (m.mode == analysis::Mode::hcct) out += " (" + with_commas(st.monitored) + " monitored)";
    out += ", tree depth " + with_commas(st.depth) + ", max stack depth " + with_commas(m.max_depth) + "\n";
    out += "    memory: tree " + human_bytes(m.tree_bytes) + " at peak, " + with_commas(m.nodes_peak) +
           " nodes at peak\n";
    for (const auto &[k, v] : m.extra) out += "    " + escape_text(k) + " = " + escape_text(v) + "\n";
  }
  std::cout << out << "\n";
}

int run_info(const InfoOptions &o) {
  analysis::ProfileSet set;
  set.location = o.in.dir;
  for (const FileSelection &fs : select_files(o.in)) {
    analysis::Process p;
    p.pid = fs.pid;
    for (const analysis::ProfileFile &f : fs.files) {
      Stats st;
      p.threads.push_back(read_summary(f, st));
      g_stats_pending.push_back(st);  // keyed below, once the threads no longer move
    }
    set.processes.push_back(std::move(p));
  }
  size_t k = 0;
  for (const analysis::Process &p : set.processes)
    for (const ThreadProfile &t : p.threads) g_stats[&t] = g_stats_pending[k++];
  std::vector<Selection> selected = select(set, o.in);
  if (!o.in.json) {
    for (const Selection &s : selected) print_text(s, o);
    return 0;
  }
  json procs = json::array();
  for (const Selection &s : selected) {
    const analysis::ThreadMeta &pm = s.threads.front()->meta;
    json threads = json::array();
    for (const ThreadProfile *t : s.threads) threads.push_back(thread_json(*t));
    procs.push_back({{"pid", s.process->pid},
                     {"ppid", pm.ppid},
                     {"exe", pm.exe},
                     {"cmdline", pm.cmdline},
                     {"threads", std::move(threads)}});
  }
  print_json({{"schema", "hcct-info/1"}, {"location", set.location}, {"processes", std::move(procs)}});
  return 0;
}

}  // namespace

void add_info_command(CLI::App &app, Action &action) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App *sub = app.add_subcommand("info", "What was recorded: processes, threads, parameters, sizes");
  add_input_options(sub, o->in, /*symbols=*/false);
  sub->add_flag("--modules", o->modules, "list every module (address range, load bias, path, build-id)");
  sub->footer(std::string("\n") +
      "Per process: executable, command line, modules. Per thread: tid, status (exited, or live-at-exit:\n"
      "still running when the process exited), mode and parameters, N (calls), dropped events, node\n"
      "counts, depth and the memory the tree used at its peak." + "\n" + R"(
Examples:
  hcct info
  hcct info other.data --pid 4242 --modules
  hcct info --json | jq '.processes[].threads[].calls'
)");
  sub->callback([o, &action] { action = [o] { return run_info(*o); }; });
}

}  // namespace hcct::cli
