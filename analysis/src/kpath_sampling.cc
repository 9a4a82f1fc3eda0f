#include "hcct/analysis/kpath_sampling.h"

#include <algorithm>
#include <cmath>

namespace hcct::analysis {

PathEstimator::PathEstimator(const std::vector<ThreadPaths> &all) {
  for (const ThreadPaths &t : all) {
    if (!t.sampling) continue;
    Process &p = processes_[t.profile.meta.pid];
    const PathSampling &s = *t.sampling;
    p.bursting |= s.bursting;
    p.event_clock |= s.event_clock;
    p.interval_ns = s.interval_ns;
    p.length_ns = s.length_ns;
    p.dropped_tables = std::max(p.dropped_tables, s.dropped_tables);
    p.thread_functions.insert(s.thread_functions.begin(), s.thread_functions.end());
    Unit &own = p.threads[t.profile.meta.thread_seq];
    own.tid = t.profile.meta.tid;
    for (const auto &[start, count] : s.starts) {
      if (s.thread_functions.count(start.first)) {
        own.started[start] = std::max(own.started[start], count);  // (a thread written twice: the later)
      } else {
        // Each file has the process's counters at its own dump: they only grow, so the largest is
        // the latest.
        p.shared.started[start] = std::max(p.shared.started[start], count);
      }
    }
    // Every item is counted once, in a node labelled with it (both forest kinds, and BLPP): the
    // 1-gram count of a path is the sum of its nodes' counts.
    for (const KsfNode &n : t.forest.nodes)
      (s.thread_functions.count(n.label.function) ? own : p.shared).sampled[n.label] += n.count;
  }
}

void PathEstimator::Unit::resolve(const PathMetadata &meta) {
  std::map<PathLabel, std::pair<uint64_t, uint32_t>> start_of;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> function_totals;  // function -> (T, S) over its starts
  for (const auto &[label, count] : sampled) {
    uint32_t block = 0;
    bool decoded = false;
    if (const PathFunction *f = meta.find(label.function))
      if (auto d = decode_path(*f, label.path); d && !d->blocks.empty()) {
        block = d->after_back_edge ? d->blocks.front() : 0;
        decoded = true;
      }
    if (decoded && started.count({label.function, block})) {
      start_of[label] = {label.function, block};
      sampled_at[{label.function, block}] += count;
    }
  }
  for (const auto &[start, t] : started)
    if (t && !sampled_at.count(start)) {
      unsampled_paths += t;
      ++unsampled_starts;
    }
  for (const auto &[start, s] : sampled_at) {
    uint64_t t = started.at(start);
    if (t < s) ++low_counters;
    function_totals[start.first].first += t;
    function_totals[start.first].second += s;
  }
  for (const auto &[label, count] : sampled) {
    double r = 1;
    if (auto it = start_of.find(label); it != start_of.end()) {
      r = double(started.at(it->second)) / double(sampled_at.at(it->second));
    } else if (started.count({label.function, 0})) {  // versioned, start unknown
      auto [t, s] = function_totals[label.function];
      r = s ? double(t) / double(s) : 1;
      ++fallback_paths;
    }
    ratio[label] = std::max(r, 1.0);  // (counters that lost increments to races: no scaling down)
  }
}

void PathEstimator::resolve(const PathMetadata &meta) {
  for (auto &[pid, p] : processes_) {
    p.shared.resolve(meta);
    for (auto &[seq, unit] : p.threads) unit.resolve(meta);
  }
}

bool PathEstimator::sampled(uint64_t pid) const {
  auto it = processes_.find(pid);
  return it != processes_.end() && it->second.bursting;
}

bool PathEstimator::any_sampled() const {
  return std::any_of(processes_.begin(), processes_.end(), [](const auto &p) { return p.second.bursting; });
}

double PathEstimator::ratio(const ThreadMeta &thread, PathLabel root) const {
  auto it = processes_.find(thread.pid);
  if (it == processes_.end() || !it->second.bursting) return 1;
  const Process &p = it->second;
  const Unit *unit = &p.shared;
  if (p.thread_functions.count(root.function)) {
    auto t = p.threads.find(thread.thread_seq);
    if (t == p.threads.end()) return 1;
    unit = &t->second;
  }
  auto r = unit->ratio.find(root);
  return r == unit->ratio.end() ? 1 : r->second;
}

Ipf PathEstimator::scale(const Ipf &ipf, const ThreadMeta &thread) const {
  if (!sampled(thread.pid)) return ipf;
  Ipf out = ipf;
  const auto &nodes = ipf.nodes();
  std::vector<double> factor(nodes.size(), 1);
  // A parent is created before its children: one pass in index order finds every root's ratio.
  for (uint32_t v = 0; v < nodes.size(); ++v) {
    factor[v] = nodes[v].parent == kNoParent ? ratio(thread, nodes[v].label) : factor[nodes[v].parent];
    uint64_t scaled = uint64_t(std::llround(double(nodes[v].count) * factor[v]));
    if (scaled > nodes[v].count) out.add(v, scaled - nodes[v].count);
  }
  return out;
}

uint64_t PathEstimator::started(uint64_t pid, uint64_t function, uint32_t block) const {
  auto it = processes_.find(pid);
  if (it == processes_.end() || !it->second.bursting) return 0;
  const Process &p = it->second;
  auto count = [&](const Unit &u) {
    auto c = u.started.find({function, block});
    return c == u.started.end() ? uint64_t(0) : c->second;
  };
  uint64_t total = count(p.shared);
  for (const auto &[seq, unit] : p.threads) total += count(unit);
  return total;
}

std::vector<uint64_t> PathEstimator::counted_functions(const std::vector<uint64_t> &pids) const {
  std::vector<uint64_t> out;
  for (uint64_t pid : pids) {
    auto it = processes_.find(pid);
    if (it == processes_.end() || !it->second.bursting) continue;
    for (const auto &[start, count] : it->second.shared.started) out.push_back(start.first);
    for (const auto &[seq, unit] : it->second.threads)
      for (const auto &[start, count] : unit.started) out.push_back(start.first);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

PathEstimator::Summary PathEstimator::summary(std::vector<uint64_t> pids) const {
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  Summary s;
  auto add = [&s](const Unit &u) {
    for (const auto &[start, count] : u.sampled_at) {
      s.sampled_paths += count;
      s.started_paths += u.started.at(start);
    }
    s.fallback_paths += u.fallback_paths;
    s.unsampled_paths += u.unsampled_paths;
    s.unsampled_starts += u.unsampled_starts;
    s.low_counters += u.low_counters;
  };
  for (uint64_t pid : pids) {
    auto it = processes_.find(pid);
    if (it == processes_.end() || !it->second.bursting) continue;
    const Process &p = it->second;
    s.interval_ns = p.interval_ns;
    s.length_ns = p.length_ns;
    s.event_clock |= p.event_clock;
    s.threads_may_be_missing |= !p.event_clock && !p.thread_functions.empty();
    add(p.shared);
    for (const auto &[seq, unit] : p.threads) {
      add(unit);
      if (unit.sampled_at.empty() && unit.unsampled_paths)
        s.unsampled_threads.push_back({pid, unit.tid, unit.unsampled_paths, unit.unsampled_starts});
    }
    s.dropped_tables += p.dropped_tables;
  }
  return s;
}

std::string unsampled_threads_text(const PathEstimator::Summary &s, const std::string &prefix) {
  std::string text;
  auto commas = [](uint64_t v) {
    std::string digits = std::to_string(v), out;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return out;
  };
  for (const PathEstimator::UnsampledThread &t : s.unsampled_threads)
    text += prefix + "thread " + std::to_string(t.tid) + " (pid " + std::to_string(t.pid) + "): no burst sampled it; its " +
            commas(t.paths) + " paths (in N) started at " + std::to_string(t.starts) +
            " function entries or loop headers, each start's count exact (its calls and loop iterations), its "
            "sequences unknown\n";
  if (s.threads_may_be_missing)
    text += prefix + "time clock (-kpath-burst-event-clock=0): a thread whose whole life fell between bursts wrote no "
                     "file; its paths are not in N\n";
  return text;
}

}  // namespace hcct::analysis
