#include "hcct/analysis/exporters.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <stdexcept>
#include <unordered_map>

#include "hcct/analysis/json.h"
#include "hcct/analysis/text.h"

namespace hcct::analysis {
namespace {


// The name a frame has in the text formats: the demangled function or the placeholder.
const std::string &frame_name(const TreeInfo &t, uint64_t routine) { return t.names->routine(routine).function; }

// Whether the call site of the context `w` lies outside its parent's function (call_site_outside).
bool call_outside_parent(const TreeInfo &t, const WalkNode &w, std::span<const WalkNode> path) {
  if (!w.node.call_site || path.size() < 2) return false;
  return call_site_outside(t.names->call_site(w.node.call_site), t.names->routine(path.back().node.routine));
}

// Whether a tree carries time into the formats with several values: it has a time metric and
// holds samples (a run too short for one sample exports as calls alone, as before time existed).
bool holds_samples(const ThreadMeta &m) { return m.timed() && m.samples + m.samples_lost > 0; }

// Samples of different clocks or periods do not add up (merge refuses them too): a format that
// carries time for several trees takes the first tree's and refuses another.
void check_same_sampling(const ThreadMeta &m, const std::string &clock, uint64_t period_ns, const std::string &source,
                         const char *format) {
  if (!m.timed() || (m.time == clock && m.sample_period_ns == period_ns)) return;
  throw std::invalid_argument(std::string(format) + ": " + (source.empty() ? "pid " + std::to_string(m.pid) : source) +
                              " sampled " + m.time + " time every " + std::to_string(m.sample_period_ns) +
                              " ns, the first tree " + clock + " every " + std::to_string(period_ns) +
                              " ns: samples of different rates do not add up; export them separately");
}

// ---------------------------------------------------------------------------------------- folded

// One line per kept node with a nonzero count: "root-most;...;leaf COUNT". flamegraph.pl, inferno
// and speedscope add up equal stacks; the counts add up to the exported total. The root's count
// (--metric time: samples charged outside every instrumented function) is "(thread start)", as
// callgrind and pprof name it.
class Folded : public Exporter {
 public:
  explicit Folded(std::ostream &out) : out_(out) {}
  void begin_tree(const TreeInfo &info) override {
    info_ = info;
    names_.clear();
  }
  void node(const WalkNode &w, std::span<const WalkNode> path) override {
    // (The root is never selected: by time, its count is its own samples.)
    const uint64_t count = path.empty() ? (info_.metric == Metric::time ? w.samples : 0) : w.count;
    if (count == 0) return;
    line_.clear();
    for (size_t k = 1; k < path.size(); ++k) {
      line_ += name(path[k].node.routine);
      line_ += ';';
    }
    line_ += path.empty() ? std::string("(thread start)") : name(w.node.routine);
    line_ += ' ';
    line_ += std::to_string(count);
    line_ += '\n';
    out_ << line_;
  }
  void end_tree(const WalkStats &) override {}
  void finish() override {}

 private:
  const std::string &name(uint64_t routine) {
    auto it = names_.find(routine);
    if (it != names_.end()) return it->second;
    std::string n = valid_utf8(frame_name(info_, routine));
    // ';' separates frames and the last space the count; a name must contain neither ';' nor a
    // newline (spaces inside names are fine: the count follows the last one).
    std::replace(n.begin(), n.end(), ';', ':');
    if (n.empty()) n = "?";
    return names_.emplace(routine, std::move(n)).first->second;
  }
  std::ostream &out_;
  TreeInfo info_;
  std::unordered_map<uint64_t, std::string> names_;
  std::string line_;
};

// ------------------------------------------------------------------------------------- callgrind

// The calling-context tree projected onto functions, as callgrind writes it: event "Calls" (entries
// into a context). A function's self cost is the number of times it was entered (at its
// definition line); each caller->callee arc carries the calls and, as inclusive cost, every call
// made below them. Every figure a consumer derives must stay within the tree's total N:
//   - A synthetic function "(thread start)" calls every top-level context, so that each function
//     has callers and callgrind_annotate / KCachegrind take its inclusive cost from its arcs.
//   - An arc's inclusive cost counts only the outermost activation of the callee on the path: a
//     recursive call (the callee already on the path) carries its calls and no cost, because its
//     cost is inside the outer activation's already. So no function is above 100%.
//   - An unmonitored HCCT context has no count (0 would be a lie, and `calls=0` makes consumers
//     read the arc's cost as the caller's self cost); it counts as one call, the one entry the
//     tree proves, and its inclusive cost is that of the monitored contexts below it.
// A profile with a time metric that holds samples adds a second event, "Samples" (self time
// samples, docs/FORMAT.md), with the same self / inclusive rules; samples charged to a thread's
// root context (outside every instrumented function) are the self cost of "(thread start)".
class Callgrind : public Exporter {
 public:
  explicit Callgrind(std::ostream &out) : out_(out) {}
  void begin_tree(const TreeInfo &info) override {
    info_ = info;
    if (!have_header_) {
      have_header_ = true;
      pid_ = info.meta->pid;
      cmd_ = shell_join(info.meta->cmdline);
    }
    if (holds_samples(*info.meta)) {
      if (!timed_) {
        timed_ = true;
        clock_ = info.meta->time;
        period_ns_ = info.meta->sample_period_ns;
      }
      check_same_sampling(*info.meta, clock_, period_ns_, info.source, "callgrind");
    }
    samples_lost_ += info.meta->samples_lost;
    lost_ += info.meta->lost;
    unmatched_ += info.meta->unmatched_exits;
    fn_of_.clear();
    line_of_.clear();
    on_path_.clear();
    active_.assign(defs_.size(), 0);
  }
  void node(const WalkNode &w, std::span<const WalkNode> path) override {
    const uint64_t samples = w.sample_count;
    if (path.empty()) {  // the root: only its own samples
      if (samples) {
        self_[uint64_t(thread_start()) << 32].samples += samples;
        total_.samples += samples;
      }
      return;
    }
    const uint32_t callee = function(w.node.routine);
    if (w.count || samples) {
      Cost &self = self_[uint64_t(callee) << 32 | defs_[callee].line];
      self.calls += w.count;
      self.samples += samples;
    }
    total_.calls += w.count;
    total_.samples += samples;
    follow_path(path);
    const bool outermost = active_[callee] == 0;
    const bool top = path.size() < 2;
    const uint32_t caller = top ? thread_start() : on_path_.back().function;
    const uint32_t line = w.node.call_site && !top ? call_line(w.node.call_site, path.back().node.routine, caller) : 0;
    const bool known = info_.meta->mode != Mode::hcct || w.node.monitored();
    if (!known) ++unmonitored_;
    const uint64_t calls = known ? w.node.count : 1;
    const Cost inclusive = outermost ? Cost{w.total, w.sample_total} : Cost{};
    if (!calls && !inclusive.calls && !inclusive.samples) return;
    Arc &a = arcs_[ArcKey{caller, callee, line}];
    a.calls += std::max<uint64_t>(calls, 1);  // never calls=0: consumers would read its cost as self
    a.inclusive.calls += inclusive.calls;
    a.inclusive.samples += inclusive.samples;
  }
  void end_tree(const WalkStats &) override {}
  void finish() override {
    std::string o;
    o += "# callgrind format (hcct export; docs/EXPORTS.md)\n";
    o += "version: 1\ncreator: hcct\n";
    o += "pid: " + std::to_string(pid_) + "\n";
    o += "cmd: " + valid_utf8(cmd_) + "\n";
    // Calls the trees do not hold cannot be costs of any function; callgrind_annotate prints desc lines.
    if (lost_) o += "desc: Lost calls: " + std::to_string(lost_) + " (tree memory, max_mb, ran out; in no function's cost)\n";
    if (unmatched_) o += "desc: Unmatched exits: " + std::to_string(unmatched_) + " (the tree above those frames may be wrong)\n";
    if (unmonitored_)
      o += "desc: Unmonitored contexts: " + std::to_string(unmonitored_) +
           " (hcct: count unknown; each is one call on its arc, its inclusive cost that of the monitored contexts below it)\n";
    if (timed_) {
      o += "desc: Samples: " + valid_utf8(clock_) + " time samples, one every " + std::to_string(period_ns_) +
           " ns (self: charged to the context itself)\n";
      if (samples_lost_)
        o += "desc: Lost samples: " + std::to_string(samples_lost_) + " (charged to no context; in no function's cost)\n";
    }
    o += std::string("part: 1\n\npositions: line\nevents: Calls") + (timed_ ? " Samples" : "") + "\n";
    o += "summary: " + cost_text(total_) + "\n\n";
    out_ << o;
    std::vector<bool> named_fn(defs_.size(), false), named_file(files_.size(), false), named_ob(objects_.size(), false);
    // Name compression: "(id) name" the first time, "(id)" after.
    auto ref = [](std::vector<bool> &named, uint32_t id, const std::string &name) {
      std::string r = "(" + std::to_string(id + 1) + ")";
      if (!named[id]) {
        named[id] = true;
        r += " " + name;
      }
      return r;
    };
    auto file_ref = [&](uint32_t id) { return ref(named_file, id, files_[id]); };
    auto fn_ref = [&](uint32_t id) { return ref(named_fn, id, defs_[id].name); };
    auto ob_ref = [&](uint32_t id) { return ref(named_ob, id, objects_[id]); };
    // Grouped by function: self costs, then the calls it makes, in a stable order.
    std::vector<std::pair<uint64_t, Cost>> self(self_.begin(), self_.end());
    std::sort(self.begin(), self.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    std::vector<std::pair<ArcKey, Arc>> arcs(arcs_.begin(), arcs_.end());
    std::sort(arcs.begin(), arcs.end(), [](const auto &a, const auto &b) {
      return std::tie(a.first.caller, a.first.callee, a.first.line) < std::tie(b.first.caller, b.first.callee, b.first.line);
    });
    size_t si = 0, ai = 0;
    while (si < self.size() || ai < arcs.size()) {
      const uint32_t id = std::min(si < self.size() ? uint32_t(self[si].first >> 32) : UINT32_MAX,
                                   ai < arcs.size() ? arcs[ai].first.caller : UINT32_MAX);
      const FunctionDef &d = defs_[id];
      o.clear();
      o += "ob=" + ob_ref(d.object) + "\n";
      o += "fl=" + file_ref(d.file) + "\n";
      o += "fn=" + fn_ref(id) + "\n";
      for (; si < self.size() && uint32_t(self[si].first >> 32) == id; ++si)
        o += std::to_string(uint32_t(self[si].first)) + " " + cost_text(self[si].second) + "\n";
      for (; ai < arcs.size() && arcs[ai].first.caller == id; ++ai) {
        const ArcKey &key = arcs[ai].first;
        const Arc &arc = arcs[ai].second;
        const FunctionDef &c = defs_[key.callee];
        if (c.object != d.object) o += "cob=" + ob_ref(c.object) + "\n";
        o += "cfl=" + file_ref(c.file) + "\n";
        o += "cfn=" + fn_ref(key.callee) + "\n";
        o += "calls=" + std::to_string(arc.calls) + " " + std::to_string(c.line) + "\n";
        o += std::to_string(key.line) + " " + cost_text(arc.inclusive) + "\n";
      }
      o += "\n";
      out_ << o;
    }
    o = "totals: " + cost_text(total_) + "\n";
    out_ << o;
  }

 private:
  struct FunctionDef {
    std::string name;
    uint32_t file = 0, object = 0, line = 0;
  };
  struct Cost {
    uint64_t calls = 0, samples = 0;
  };
  struct Arc {
    uint64_t calls = 0;
    Cost inclusive;
  };
  // A cost line's values: the events of the header.
  std::string cost_text(const Cost &c) const {
    return timed_ ? std::to_string(c.calls) + " " + std::to_string(c.samples) : std::to_string(c.calls);
  }
  struct ArcKey {
    uint32_t caller, callee, line;
    bool operator==(const ArcKey &) const = default;
  };
  struct ArcHash {
    size_t operator()(const ArcKey &k) const {
      uint64_t h = (uint64_t(k.caller) << 32 | k.callee) * 0x9e3779b97f4a7c15ull ^ uint64_t(k.line) * 0xbf58476d1ce4e5b9ull;
      return size_t(h ^ h >> 29);
    }
  };

  // Keeps on_path_ equal to the functions of `path` (root excluded) and active_ counting them. The
  // walk hands out nodes in postorder, so consecutive paths share a prefix: amortized O(1) a node.
  void follow_path(std::span<const WalkNode> path) {
    const size_t want = path.size() - 1;
    while (on_path_.size() > want || (!on_path_.empty() && on_path_.back().id != path[on_path_.size()].id)) {
      --active_[on_path_.back().function];
      on_path_.pop_back();
    }
    while (on_path_.size() < want) {
      const WalkNode &p = path[on_path_.size() + 1];
      const uint32_t f = function(p.node.routine);
      ++active_[f];
      on_path_.push_back({p.id, f});
    }
  }

  // The caller of every top-level context.
  uint32_t thread_start() {
    if (thread_start_ == UINT32_MAX) thread_start_ = define("(thread start)", "???", "???", 0);
    return thread_start_;
  }

  uint32_t define(const std::string &name, const std::string &file, const std::string &object, uint32_t line) {
    FunctionDef d;
    d.name = name;
    d.file = intern(file_ids_, files_, file);
    d.object = intern(object_ids_, objects_, object);
    d.line = line;
    std::string key = std::to_string(d.object) + "\n" + std::to_string(d.file) + "\n" + d.name;
    auto [kit, fresh] = def_ids_.try_emplace(key, uint32_t(defs_.size()));
    if (fresh) {
      defs_.push_back(d);
      active_.push_back(0);
    }
    return kit->second;
  }

  // The line in the caller's function (`caller_routine`, callgrind function `caller`) of the call
  // at `site`: that of the innermost frame of the site's inline chain in the caller's function
  // (functions inlined into the caller without probes of their own end in the caller's line of
  // them). A site outside the caller's function — an inlined probe reports the caller's own return
  // address, a site in the caller's caller — is at the caller's definition line, never at a line of
  // another function.
  uint32_t call_line(uint64_t site, uint64_t caller_routine, uint32_t caller) {
    const SiteCaller key{site, caller};
    auto it = line_of_.find(key);
    if (it != line_of_.end()) return it->second;
    const Symbol &s = info_.names->call_site(site);
    uint32_t line = s.line;  // no inline chain: the symbolizer's line (0 if unknown)
    if (!s.frames.empty()) {
      const std::string &name = info_.names->routine(caller_routine).function;
      auto in_caller = std::find_if(s.frames.begin(), s.frames.end(),
                                    [&](const SourceFrame &f) { return frame_in_function(f, name); });
      line = in_caller != s.frames.end() ? in_caller->line : defs_[caller].line;
    }
    line_of_.emplace(key, line);
    return line;
  }

  static uint32_t intern(std::unordered_map<std::string, uint32_t> &ids, std::vector<std::string> &names,
                         const std::string &s) {
    auto [it, fresh] = ids.try_emplace(s, uint32_t(names.size()));
    if (fresh) names.push_back(s);
    return it->second;
  }

  // Functions are identified by object, file and name, so that the trees of several threads and
  // processes (other load addresses) add up.
  uint32_t function(uint64_t routine) {
    auto it = fn_of_.find(routine);
    if (it != fn_of_.end()) return it->second;
    const Symbol &s = info_.names->routine(routine);
    const uint32_t id = define(valid_utf8(s.function), s.file.empty() ? "???" : valid_utf8(s.file),
                               s.module ? valid_utf8(s.module->path) : "???", s.line);
    fn_of_.emplace(routine, id);
    return id;
  }

  std::ostream &out_;
  TreeInfo info_;
  bool have_header_ = false;
  uint64_t pid_ = 0;
  std::string cmd_;
  Cost total_;
  uint64_t lost_ = 0, unmatched_ = 0;  // over every tree
  bool timed_ = false;  // some tree holds time samples: a second event
  std::string clock_;
  uint64_t period_ns_ = 0, samples_lost_ = 0;
  std::unordered_map<uint64_t, uint32_t> fn_of_;  // per tree: routine address -> function
  std::unordered_map<std::string, uint32_t> def_ids_, file_ids_, object_ids_;
  std::vector<FunctionDef> defs_;
  std::vector<std::string> files_, objects_;
  std::unordered_map<uint64_t, Cost> self_;  // function << 32 | line -> cost
  std::unordered_map<ArcKey, Arc, ArcHash> arcs_;
  struct SiteCaller {
    uint64_t site;
    uint32_t caller;
    bool operator==(const SiteCaller &) const = default;
  };
  struct SiteCallerHash {
    size_t operator()(const SiteCaller &k) const {
      uint64_t h = k.site * 0x9e3779b97f4a7c15ull ^ uint64_t(k.caller) * 0xbf58476d1ce4e5b9ull;
      return size_t(h ^ h >> 29);
    }
  };
  std::unordered_map<SiteCaller, uint32_t, SiteCallerHash> line_of_;  // per tree: (site, caller) -> line
  struct PathFrame {
    uint32_t id, function;
  };
  std::vector<PathFrame> on_path_;  // per tree: the functions of the current path
  std::vector<uint32_t> active_;    // per function: how often it is on the current path
  uint32_t thread_start_ = UINT32_MAX;
  uint64_t unmonitored_ = 0;        // unmonitored hcct contexts exported, over every tree
};

// ----------------------------------------------------------------------------------------- pprof

// Protocol-buffer wire format, written by hand (profile.proto needs nothing else).
class Proto {
 public:
  std::string buf;
  void varint(uint64_t v) {
    while (v >= 0x80) {
      buf += char(v | 0x80);
      v >>= 7;
    }
    buf += char(v);
  }
  void tag(uint32_t field, uint32_t wire) { varint(uint64_t(field) << 3 | wire); }
  void uint(uint32_t field, uint64_t v) {
    if (!v) return;  // proto3 default
    tag(field, 0);
    varint(v);
  }
  void bytes(uint32_t field, const std::string &s) {
    tag(field, 2);
    varint(s.size());
    buf += s;
  }
  void packed(uint32_t field, const std::vector<uint64_t> &vs) {
    if (vs.empty()) return;
    Proto p;
    for (uint64_t v : vs) p.varint(v);
    bytes(field, p.buf);
  }
};

// A perftools.profiles.Profile (pprof's profile.proto): one sample per kept node with a nonzero
// count, value = [count] of type "calls"/"count", its stack leaf first: the node's function at its
// entry, then every ancestor once, in its own function, at the call site of the frame above it
// (callers_location), so that the stacks are the folded export's. Samples are written as they
// come; mappings, locations, functions and the string table follow at the end (repeated fields
// may come in any order). A profile with a time metric that holds samples (the first tree decides:
// samples are written as they come) has three sample types: calls/count, samples/count and cpu (or wall)/nanoseconds = samples × the sampling period;
// samples charged to a thread's root context are a sample whose one location is "(thread start)".
class Pprof : public Exporter {
 public:
  explicit Pprof(std::ostream &out) : out_(out) { str(""); }
  void begin_tree(const TreeInfo &info) override {
    info_ = info;
    if (++tree_ == 1) {
      timed_ = holds_samples(*info.meta);
      clock_ = info.meta->time;
      period_ns_ = info.meta->sample_period_ns;
    } else if (timed_) {
      check_same_sampling(*info.meta, clock_, period_ns_, info.source, "pprof");
    } else if (holds_samples(*info.meta)) {
      samples_left_out_ += info.meta->samples;  // the sample types were fixed by the first tree
    }
    if (timed_) samples_lost_ += info.meta->samples_lost;
    site_loc_.clear();
    entry_loc_.clear();
    mapping_of_.assign(info.modules->size(), 0);
    // Sample labels: pid, and the thread unless threads were merged.
    Proto labels, pid;
    pid.uint(1, str("pid"));
    pid.uint(3, info.meta->pid);
    labels.bytes(3, pid.buf);
    if (!info.merged) {
      Proto th;
      th.uint(1, str("thread"));
      th.uint(3, info.meta->thread_seq);
      labels.bytes(3, th.buf);
    }
    labels_ = labels.buf;
    if (!time_ns_ || info.meta->start_ns < time_ns_) time_ns_ = info.meta->start_ns;
    lost_ += info.meta->lost;
    unmatched_ += info.meta->unmatched_exits;
    end_ns_ = std::max(end_ns_, info.meta->end_ns);
  }
  void node(const WalkNode &w, std::span<const WalkNode> path) override {
    const uint64_t samples = timed_ ? w.sample_count : 0;
    if (w.count == 0 && samples == 0) return;
    ids_.clear();
    if (path.empty()) {  // the root: its own samples only
      ids_.push_back(thread_start_location());
      write_sample(0, samples);
      return;
    }
    ids_.push_back(entry_location(w.node.routine));
    // Each ancestor once, in its own function: the call site of the frame above it, whose inline
    // chain may stand for several ancestors at once (callers_location).
    for (size_t k = path.size() - 1; k >= 1;) {
      const WalkNode &child = k + 1 < path.size() ? path[k + 1] : w;
      size_t covered = 1;
      ids_.push_back(callers_location(child.node.call_site, path, k, covered));
      k -= covered;
    }
    write_sample(w.count, samples);
  }
  void end_tree(const WalkStats &) override {}
  void finish() override {
    Proto tail;
    auto value_type = [&](const std::string &type, const std::string &unit) {
      Proto vt;
      vt.uint(1, str(type));
      vt.uint(2, str(unit));
      return vt.buf;
    };
    tail.bytes(1, value_type("calls", "count"));  // sample_type
    if (timed_) {
      tail.bytes(1, value_type("samples", "count"));
      tail.bytes(1, value_type(clock_, "nanoseconds"));
      tail.bytes(11, value_type(clock_, "nanoseconds"));  // period_type
      tail.uint(12, period_ns_);                           // period
    } else {
      tail.bytes(11, value_type("calls", "count"));
      tail.uint(12, 1);
    }
    for (const std::string &m : mappings_) tail.bytes(3, m);
    for (const std::string &l : locations_) tail.bytes(4, l);
    for (const std::string &f : functions_) tail.bytes(5, f);
    tail.uint(9, time_ns_);
    if (end_ns_ > time_ns_) tail.uint(10, end_ns_ - time_ns_);
    tail.uint(13, str("hcct export --format pprof: calling-context tree, value = entries into each context"));
    if (lost_)
      tail.uint(13, str("lost calls: " + std::to_string(lost_) + " (tree memory, max_mb, ran out; in no sample)"));
    if (unmatched_)
      tail.uint(13, str("unmatched exits: " + std::to_string(unmatched_) + " (the tree above those frames may be wrong)"));
    if (timed_)
      tail.uint(13, str(clock_ + " time: samples = self time samples of each context, one every " +
                        std::to_string(period_ns_) + " ns; " + clock_ + " = samples x that period"));
    if (samples_lost_)
      tail.uint(13, str("lost samples: " + std::to_string(samples_lost_) + " (charged to no context; in no sample)"));
    for (const std::string &w : warnings()) tail.uint(13, str(w));
    for (const std::string &s : strings_) tail.bytes(6, s);  // after the last str()
    out_ << tail.buf;
  }

 private:
  std::vector<std::string> warnings() const override {
    if (!samples_left_out_) return {};
    return {"pprof: " + std::to_string(samples_left_out_) +
            " time samples not exported: the first tree held none, so the profile has no time sample type "
            "(export the trees with samples alone, e.g. --pid/--thread)"};
  }
  void write_sample(uint64_t calls, uint64_t samples) {
    Proto s;
    s.packed(1, ids_);
    if (timed_)
      s.packed(2, {calls, samples, samples * period_ns_});
    else
      s.packed(2, {calls});
    s.buf += labels_;
    Proto sample;
    sample.bytes(2, s.buf);
    out_ << sample.buf;
  }
  // The one location of samples charged to a thread's root context.
  uint64_t thread_start_location() {
    if (!thread_start_loc_) {
      Proto l;
      thread_start_loc_ = locations_.size() + 1;
      l.uint(1, thread_start_loc_);
      add_line(l, "(thread start)", "", 0, 0);
      locations_.push_back(l.buf);
    }
    return thread_start_loc_;
  }
  uint64_t str(const std::string &s) {
    std::string v = valid_utf8(s);
    auto [it, fresh] = string_ids_.try_emplace(v, strings_.size());
    if (fresh) strings_.push_back(v);
    return it->second;
  }
  // Functions by name and file; the start line is known only for those first met at their entry.
  uint64_t function_id(const std::string &name, const std::string &file, uint32_t line) {
    std::string key = name + '\n' + file;
    auto [it, fresh] = function_ids_.try_emplace(key, functions_.size() + 1);
    if (fresh) {
      Proto f;
      f.uint(1, it->second);
      f.uint(2, str(name));
      f.uint(3, str(name));
      f.uint(4, str(file));
      f.uint(5, line);
      functions_.push_back(f.buf);
    }
    return it->second;
  }
  uint64_t mapping(const Module *m) {
    if (!m) return 0;
    // The symbol points into the names' copy of the module map, which is in the same order.
    const size_t i = info_.names->module_index(m);
    if (i >= mapping_of_.size()) return 0;
    if (!mapping_of_[i]) {
      Proto p;
      mapping_of_[i] = mappings_.size() + 1;
      p.uint(1, mapping_of_[i]);
      p.uint(2, m->lo);
      p.uint(3, m->hi);
      p.uint(5, str(m->path));
      static const char digits[] = "0123456789abcdef";
      std::string id;
      for (uint8_t c : m->build_id) (id += digits[c >> 4]) += digits[c & 15];
      p.uint(6, str(id));
      p.uint(7, info_.symbolized);
      p.uint(8, info_.symbolized);
      p.uint(9, info_.symbolized);
      p.uint(10, info_.symbolized);
      mappings_.push_back(p.buf);
    }
    return mapping_of_[i];
  }
  // A Location for a routine's entry: one Line, its definition.
  uint64_t entry_location(uint64_t routine) {
    const Symbol &s = info_.names->routine(routine);
    return location(entry_loc_, routine, s, [&](Proto &l) { add_line(l, s.function, s.file, s.line, s.line); });
  }
  // The Location for ancestors path[k], path[k-1], ... at `site`, the call site of the frame
  // above path[k]; `covered` is set to the number of ancestors it stands for (at least 1).
  //
  // A call site's inline chain (innermost first) names where the call was: in early-probed code
  // (gcc -finstrument-functions, the plugin's early stage) each inlined function is a frame of its
  // own, so the chain's frames are path[k], path[k-1], ... and one Location with one Line each,
  // innermost first as pprof wants, stands for all of them. Inline frames without probes (the
  // late stage, clang after inlining) are not frames of the tree and are left out, the call is at
  // the line where they were inlined. When the chain does not lie in path[k]'s function at all —
  // the probe of a function inlined into path[k] reports path[k]'s own return address, a site in
  // path[k]'s caller — path[k] is shown at its entry, never the caller again.
  uint64_t callers_location(uint64_t site, std::span<const WalkNode> path, size_t k, size_t &covered) {
    covered = 1;
    if (!site) return entry_location(path[k].node.routine);
    const std::vector<SourceFrame> &frames = info_.names->call_site(site).frames;
    auto is = [&](const SourceFrame &f, size_t a) {
      return frame_in_function(f, info_.names->routine(path[a].node.routine).function);
    };
    size_t first = 0;
    while (first < frames.size() && !is(frames[first], k)) ++first;
    if (first == frames.size()) return entry_location(path[k].node.routine);
    size_t n = 1;
    while (first + n < frames.size() && n < k && is(frames[first + n], k - n)) ++n;
    covered = n;
    const SiteKey key{site, uint32_t(first), uint32_t(n)};
    auto it = site_loc_.find(key);
    if (it != site_loc_.end()) return it->second;
    const Symbol &s = info_.names->call_site(site);
    const uint64_t id = new_location(s, site, [&](Proto &l) {
      for (size_t j = 0; j < n; ++j) {
        const Symbol &fn = info_.names->routine(path[k - j].node.routine);
        add_line(l, fn.function, fn.file, 0, frames[first + j].line);
      }
    });
    site_loc_.emplace(key, id);
    return id;
  }
  // The Location of `address`, made once per tree (`lines` writes its Line fields).
  template <class Lines>
  uint64_t location(std::unordered_map<uint64_t, uint64_t> &made, uint64_t address, const Symbol &s, Lines lines) {
    auto it = made.find(address);
    if (it != made.end()) return it->second;
    const uint64_t id = new_location(s, address, lines);
    made.emplace(address, id);
    return id;
  }
  template <class Lines>
  uint64_t new_location(const Symbol &s, uint64_t address, Lines lines) {
    Proto l;
    uint64_t id = locations_.size() + 1;
    l.uint(1, id);
    l.uint(2, mapping(s.module));
    l.uint(3, address);
    lines(l);
    locations_.push_back(l.buf);
    return id;
  }
  void add_line(Proto &l, const std::string &function, const std::string &file, uint32_t start_line, uint64_t line) {
    Proto p;
    p.uint(1, function_id(function, file, start_line));
    p.uint(2, line);
    l.bytes(4, p.buf);
  }

  std::ostream &out_;
  TreeInfo info_;
  uint64_t tree_ = 0;
  uint64_t time_ns_ = 0, end_ns_ = 0;
  uint64_t lost_ = 0, unmatched_ = 0;  // over every tree
  bool timed_ = false;  // the first tree holds time samples: three sample types
  std::string clock_;
  uint64_t period_ns_ = 0, samples_lost_ = 0, samples_left_out_ = 0;
  uint64_t thread_start_loc_ = 0;  // over every tree (no mapping, no address)
  std::vector<uint64_t> ids_;
  std::string labels_;
  std::vector<std::string> strings_, mappings_, locations_, functions_;
  std::unordered_map<std::string, uint64_t> string_ids_, function_ids_;
  // A call site's Location for the chain frames [first, first + count) (callers_location).
  struct SiteKey {
    uint64_t site;
    uint32_t first, count;
    bool operator==(const SiteKey &) const = default;
  };
  struct SiteKeyHash {
    size_t operator()(const SiteKey &k) const {
      uint64_t h = k.site * 0x9e3779b97f4a7c15ull ^ (uint64_t(k.first) << 32 | k.count) * 0xbf58476d1ce4e5b9ull;
      return size_t(h ^ h >> 29);
    }
  };
  std::unordered_map<SiteKey, uint64_t, SiteKeyHash> site_loc_;  // per tree (addresses are per process)
  std::unordered_map<uint64_t, uint64_t> entry_loc_;              // per tree
  std::vector<uint64_t> mapping_of_;                              // per tree: module index -> mapping id
};

// ------------------------------------------------------------------------------------------ json

// "hcct-tree/2" (docs/hcct-tree.schema.json): one object per tree, nodes one per line in postorder.
// Version 2 added time: per tree its sampling figures, per node its self and inclusive samples.
class Json : public Exporter {
 public:
  explicit Json(std::ostream &out) : out_(out) { out_ << "{\"schema\":\"hcct-tree/2\",\"trees\":["; }
  void begin_tree(const TreeInfo &info) override {
    info_ = info;
    const ThreadMeta &m = *info.meta;
    json h;
    h["file"] = info.source.empty() ? json() : json(info.source);
    h["pid"] = m.pid;
    h["threads"] = info.threads;
    h["merged"] = info.merged;
    h["mode"] = to_string(m.mode);
    h["key"] = to_string(m.key);
    h["calls"] = m.calls;
    h["lost"] = m.lost;
    h["all_calls"] = m.all_calls();
    h["unmatched_exits"] = m.unmatched_exits;
    h["epsilon"] = m.mode == Mode::hcct ? json(m.epsilon) : json();
    h["error_bound"] = m.mode == Mode::hcct ? json(m.min_count) : m.mode == Mode::cct ? json(0) : json();
    h["min_share"] = info.min_share;
    h["threshold"] = info.threshold;
    h["input_nodes"] = info.node_count;
    if (m.timed())
      h.update(time_json(m));
    else
      h["time"] = json();
    std::string s = h.dump(-1, ' ', false, json::error_handler_t::replace);
    s.pop_back();
    out_ << (first_ ? "\n" : ",\n") << s << ",\"nodes\":[";
    first_ = false;
    first_node_ = true;
    functions_.clear();
    calls_.clear();
  }
  // Built by hand around cached symbol objects: a 10^7-node tree has few distinct addresses.
  void node(const WalkNode &w, std::span<const WalkNode> path) override {
    std::string &o = line_;
    o.clear();
    o += first_node_ ? "\n" : ",\n";
    first_node_ = false;
    o += "{\"id\":" + std::to_string(w.id);
    o += ",\"parent\":" + (path.empty() ? std::string("null") : std::to_string(w.parent));
    o += ",\"depth\":" + std::to_string(w.depth);
    o += ",\"count\":" + std::to_string(w.count);
    o += ",\"total\":" + std::to_string(w.total);
    if (info_.meta->timed()) {
      o += ",\"samples\":" + std::to_string(w.samples);
      o += ",\"total_samples\":" + std::to_string(w.total_samples);
    }
    o += w.selected ? ",\"selected\":true" : ",\"selected\":false";
    if (w.truncated) o += ",\"truncated\":true";
    if (!path.empty()) {
      o += ",\"raw_count\":" + std::to_string(w.node.count);
      if (info_.meta->mode == Mode::hcct) o += w.node.monitored() ? ",\"monitored\":true" : ",\"monitored\":false";
      o += ",\"routine\":\"" + hex(w.node.routine) + "\"";
      o += ",\"call_site\":" + (w.node.call_site ? "\"" + hex(w.node.call_site) + "\"" : std::string("null"));
      o += ",\"function\":" + cached(functions_, w.node.routine, false);
      o += ",\"call\":" + (w.node.call_site ? cached(calls_, w.node.call_site, true) : std::string("null"));
      if (call_outside_parent(info_, w, path)) o += ",\"call_outside_parent\":true";
    }
    o += "}";
    out_ << o;
  }
  void end_tree(const WalkStats &st) override {
    out_ << "\n],\"kept\":" << st.kept << ",\"selected\":" << st.selected << ",\"total\":" << st.total << "}";
  }
  void finish() override { out_ << "\n]}\n"; }

 private:
  const std::string &cached(std::unordered_map<uint64_t, std::string> &cache, uint64_t addr, bool site) {
    auto it = cache.find(addr);
    if (it != cache.end()) return it->second;
    const Symbol &sym = site ? info_.names->call_site(addr) : info_.names->routine(addr);
    return cache.emplace(addr, symbol_json(sym, site).dump(-1, ' ', false, json::error_handler_t::replace)).first->second;
  }

  std::ostream &out_;
  TreeInfo info_;
  bool first_ = true, first_node_ = true;
  std::string line_;
  std::unordered_map<uint64_t, std::string> functions_, calls_;  // per tree
};

// ------------------------------------------------------------------------------------------- dot

// Graphviz: one cluster per tree, a box per kept node (function, definition, count and share,
// subtree total), an edge per call labelled with the call site. Cold ancestors are dashed.
class Dot : public Exporter {
 public:
  explicit Dot(std::ostream &out) : out_(out) {
    out_ << "digraph hcct {\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
            "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  }
  void begin_tree(const TreeInfo &info) override {
    info_ = info;
    ++tree_;
    const bool by_time = info.metric == Metric::time;
    std::string label = (info.source.empty() ? std::string("merged") : info.source) + ": pid " +
                        std::to_string(info.meta->pid) + ", " +
                        (by_time ? "S = " + with_commas(info.meta->samples) + " " + info.meta->time + " time samples" +
                                       (info.meta->samples_lost ? " + " + with_commas(info.meta->samples_lost) + " lost" : "")
                                 : calls_summary(*info.meta));
    unit_ = by_time ? " samples" : "";
    for (const std::string &w : loss_warnings(*info.meta)) label += "\nwarning: " + w;
    out_ << "  subgraph cluster_" << tree_ << " {\n    label=\"" << dot_escape(label) << "\";\n";
    routines_.clear();
    sites_.clear();
  }
  void node(const WalkNode &w, std::span<const WalkNode> path) override {
    const std::string prefix = "    t" + std::to_string(tree_) + "n";
    std::string &o = line_;
    o.clear();
    if (path.empty()) {
      o = prefix + std::to_string(w.id) + " [label=\"thread start\\ntotal " + with_commas(w.total) + "\", shape=ellipse];\n";
      out_ << o;
      return;
    }
    // Shares of every call (or sample), lost ones too.
    const bool by_time = info_.metric == Metric::time;
    const uint64_t n = by_time ? info_.meta->samples + info_.meta->samples_lost : info_.meta->all_calls();
    o += prefix + std::to_string(w.id) + " [label=\"" + routine_label(w.node.routine);
    const bool unmonitored = info_.meta->mode == Mode::hcct && (by_time ? !w.samples : !w.node.monitored());
    const uint64_t own = by_time ? w.samples : w.node.count;
    if (w.count || w.selected) {
      o += "\\n" + with_commas(w.count) + unit_ + " (" + percent(w.count, n) + ")";
    } else if (unmonitored) {
      o += by_time ? "\\nno time counter: samples unknown" : "\\nnot monitored: count unknown";  // 0 would be false
    } else {
      o += "\\n" + with_commas(own) + unit_ + " (" + percent(own, n) + "), not selected";
    }
    o += "\\ntotal " + with_commas(w.total) + unit_ + " (" + percent(w.total, n) + ")";
    // What the filters left out below it: its whole subtree, kept or not.
    if (w.subtree > w.total) o += "\\nwhole subtree " + with_commas(w.subtree) + unit_ + " (" + percent(w.subtree, n) + ")";
    if (w.truncated) o += "\\n(deeper contexts included)";
    o += w.selected ? "\"];\n" : "\", style=dashed, color=gray50];\n";
    o += prefix + std::to_string(w.parent) + " -> t" + std::to_string(tree_) + "n" + std::to_string(w.id);
    if (call_outside_parent(info_, w, path))
      o += " [label=\"inlined into " + dot_escape(info_.names->routine(path.back().node.routine).function) + "\"]";
    else if (w.node.call_site)
      o += " [label=\"" + site_label(w.node.call_site) + "\"]";
    o += ";\n";
    out_ << o;
  }
  void end_tree(const WalkStats &) override { out_ << "  }\n"; }
  void finish() override { out_ << "}\n"; }

 private:
  const std::string &routine_label(uint64_t routine) {
    auto it = routines_.find(routine);
    if (it != routines_.end()) return it->second;
    return routines_.emplace(routine, dot_escape(describe_routine(info_.names->routine(routine)))).first->second;
  }
  const std::string &site_label(uint64_t site) {
    auto it = sites_.find(site);
    if (it != sites_.end()) return it->second;
    return sites_.emplace(site, dot_escape(describe_call_site(info_.names->call_site(site)))).first->second;
  }

  std::ostream &out_;
  TreeInfo info_;
  uint64_t tree_ = 0;
  std::string line_;
  std::unordered_map<uint64_t, std::string> routines_, sites_;  // per tree
  std::string unit_;  // " samples" by time, nothing by calls
};

}  // namespace

ExportedTree export_tree(Exporter &exporter, const TreeInfo &info, NodeSource &nodes, const TreeFilter &filter,
                         const std::function<void(uint64_t)> &progress) {
  ExportedTree out;
  exporter.begin_tree(info);
  out.stats = walk_tree(
      nodes, filter,
      [&](const WalkNode &w, std::span<const WalkNode> path) {
        if (w.truncated) out.charged += w.count - (w.selected ? (filter.metric == Metric::time ? w.samples : w.node.count) : 0);
        exporter.node(w, path);
      },
      progress);
  exporter.end_tree(out.stats);
  return out;
}

bool export_is_binary(const std::string &format) { return format == "pprof"; }

std::unique_ptr<Exporter> make_exporter(const std::string &format, std::ostream &out) {
  if (format == "folded") return std::make_unique<Folded>(out);
  if (format == "callgrind") return std::make_unique<Callgrind>(out);
  if (format == "pprof") return std::make_unique<Pprof>(out);
  if (format == "json") return std::make_unique<Json>(out);
  if (format == "dot") return std::make_unique<Dot>(out);
  throw std::invalid_argument("unknown export format " + format);
}

}  // namespace hcct::analysis
