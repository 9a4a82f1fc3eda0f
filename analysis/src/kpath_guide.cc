#include "hcct/analysis/kpath_guide.h"
#include "hcct/analysis/text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>

#include "hcct/analysis/symbolizer.h"

namespace hcct::analysis {
namespace {

using kpath::EdgeKind;

std::string percent(double x) { return share_percent(x, {.digits = 1}); }

std::string base_name(const std::string &path) { return std::filesystem::path(path).filename().string(); }

// The loops of one function, from its metadata: headers are the targets of kStart edges that some
// latch (a kBreak source) jumps back to on a CFG edge closing a cycle.
struct LoopShape {
  uint32_t header = 0;
  std::vector<uint32_t> body;  // sorted
  std::set<uint32_t> latches;
};

std::vector<LoopShape> find_loops(const PathFunction &f) {
  const auto &blocks = f.info.blocks;
  uint32_t n = uint32_t(blocks.size());
  std::set<uint32_t> starts, breaks;
  for (const auto &e : f.info.edges) {
    if (e.kind == EdgeKind::kStart) starts.insert(e.to);
    if (e.kind == EdgeKind::kBreak) breaks.insert(e.from);
  }
  std::vector<std::vector<uint32_t>> preds(n);
  for (uint32_t b = 0; b < n; ++b)
    for (uint32_t s : blocks[b].succs)
      if (s < n) preds[s].push_back(b);
  auto reaches = [&](uint32_t from, uint32_t to) {
    std::vector<bool> seen(n);
    std::vector<uint32_t> work{from};
    seen[from] = true;
    while (!work.empty()) {
      uint32_t v = work.back();
      work.pop_back();
      if (v == to) return true;
      for (uint32_t s : blocks[v].succs)
        if (s < n && !seen[s]) seen[s] = true, work.push_back(s);
    }
    return false;
  };
  std::vector<LoopShape> loops;
  for (uint32_t h : starts) {
    LoopShape l;
    l.header = h;
    for (uint32_t t : breaks)
      if (std::count(blocks[t].succs.begin(), blocks[t].succs.end(), h) && reaches(h, t)) l.latches.insert(t);
    if (l.latches.empty()) continue;  // an edge cut for overflow, not a loop
    // Natural loop: the header and everything that reaches a latch without passing the header.
    std::vector<bool> in(n);
    in[h] = true;
    std::vector<uint32_t> work(l.latches.begin(), l.latches.end());
    for (uint32_t t : work) in[t] = true;
    while (!work.empty()) {
      uint32_t v = work.back();
      work.pop_back();
      if (v == h) continue;
      for (uint32_t p : preds[v])
        if (!in[p]) in[p] = true, work.push_back(p);
    }
    for (uint32_t b = 0; b < n; ++b)
      if (in[b]) l.body.push_back(b);
    loops.push_back(std::move(l));
  }
  return loops;
}

}  // namespace

std::optional<uint64_t> osr_threshold(double mean) {
  // Fire once an entry has run T iterations. With T <= mean/20 at least ~95 % of an average
  // entry's iterations run in the new version; T stays >= 100 so that the switch (a call, a
  // version change) is amortised, and <= 1000 as in OSRKit's experiments (structured OSR, Table 1:
  // 10^2..10^5 perform alike; 1 is worst).
  if (mean < 2000) return std::nullopt;
  uint64_t t = 1000;
  while (t > 100 && double(t) * 20 > mean) t /= 10;
  return t;
}

Guide make_guide(const std::vector<ThreadPaths> &threads, const PathMetadata &meta, const GuideOptions &o) {
  Guide g;
  if (threads.empty()) throw std::invalid_argument("no path profile");
  uint32_t recorded = threads.front().forest.k;
  for (const auto &t : threads)
    if (t.forest.k != recorded) throw std::invalid_argument("threads recorded with different k");
  uint32_t k = o.k ? o.k : recorded;
  if (k > recorded) throw std::invalid_argument("k exceeds the recorded k");
  g.k = k;
  Ipf ipf;
  for (const auto &t : threads) {
    Ipf own = make_k_ipf(t.forest, k).without_zero_counts();
    uint64_t pid = t.profile.meta.pid;
    if (o.estimator && o.estimator->sampled(pid)) {
      g.sampled = true;
      if (t.sampling) {
        g.joins += t.sampling->joins;
        g.leaves += t.sampling->leaves;
      }
      ipf.merge(o.estimator->scale(own, t.profile.meta));
    } else {
      ipf.merge(own);
    }
    g.paths += t.forest.paths;
    if (!t.forest.bound.bounded()) continue;
    ++g.bounded_threads;
    g.epsilon = std::max(g.epsilon, t.forest.bound.epsilon);
    g.delta += t.forest.bound.delta;
    g.cuts += t.forest.bound.cuts;
    g.forced_sweeps += t.forest.bound.forced_sweeps;
    g.lost += t.forest.bound.lost;
  }

  if (g.sampled) {  // N: the estimate, as every count is
    g.sampled_paths = g.paths;
    g.paths = 0;
    for (uint32_t r : ipf.roots()) g.paths += ipf.nodes()[r].count;
    std::vector<uint64_t> pids;
    for (const auto &t : threads) pids.push_back(t.profile.meta.pid);
    g.estimate = o.estimator->summary(pids);
    g.paths += g.estimate.unsampled_paths;  // (each pid once: summary sums per process)
  }

  // Roots by function: the 1-IPF.
  std::map<uint64_t, std::vector<uint32_t>> roots_of;
  for (uint32_t r : ipf.roots()) roots_of[ipf.nodes()[r].label.function].push_back(r);

  // A sampled profile: loops that no burst saw still have their exact back-edge counts.
  std::vector<uint64_t> pids;
  for (const auto &t : threads) pids.push_back(t.profile.meta.pid);
  if (g.sampled)
    for (uint64_t fid : o.estimator->counted_functions(pids)) roots_of[fid];
  auto started = [&](uint64_t fid, uint32_t block) {
    uint64_t t = 0;
    std::vector<uint64_t> once = pids;
    std::sort(once.begin(), once.end());
    once.erase(std::unique(once.begin(), once.end()), once.end());
    for (uint64_t pid : once) t += o.estimator->started(pid, fid, block);
    return t;
  };

  for (const auto &[fid, roots] : roots_of) {
    const PathFunction *f = meta.find(fid);
    if (!f) continue;
    std::vector<LoopShape> shapes = find_loops(*f);
    if (shapes.empty()) continue;
    std::map<uint64_t, DecodedPath> decoded;
    for (uint32_t r : roots) {
      uint64_t id = ipf.nodes()[r].label.path;
      if (auto d = decode_path(*f, id)) decoded.emplace(id, std::move(*d));
      else g.warnings.push_back(f->info.name + ": path " + std::to_string(id) + " does not decode (stale binary?)");
    }
    std::string home = f->info.file ? f->files[f->info.file - 1] : std::string();
    std::set<uint32_t> headers;
    for (const auto &s : shapes) headers.insert(s.header);
    for (const LoopShape &s : shapes) {
      LoopGuide l;
      l.function_id = fid;
      l.function = f->info.name;
      l.late = f->info.flags & kpath::kFlagLate;
      l.opt_level = kpath::opt_level_of(f->info.flags);
      l.display = demangle(f->info.name.c_str());
      l.file = home;
      l.header_block = s.header;
      l.body = s.body;
      const auto &hb = f->info.blocks[s.header];
      l.line = hb.lines.empty() ? hb.term_line : hb.lines.front().line;
      for (uint32_t b : s.body)
        if (b != s.header && headers.count(b)) l.innermost = false;
      for (const LoopShape &outer : shapes)
        if (outer.header != s.header && std::binary_search(outer.body.begin(), outer.body.end(), s.header)) ++l.depth;
      // Iterations: every header execution lies on exactly one path.
      std::set<uint64_t> entry_ids, continuation_ids;
      for (uint32_t r : roots) {
        const IpfNode &n = ipf.nodes()[r];
        auto it = decoded.find(n.label.path);
        if (it == decoded.end()) continue;
        const DecodedPath &p = it->second;
        if (std::find(p.blocks.begin(), p.blocks.end(), s.header) == p.blocks.end()) continue;
        l.iterations += n.count;
        LoopPath lp;
        lp.id = n.label.path;
        lp.count = n.count;
        lp.lines = describe_lines(p, home);
        lp.blocks = p.blocks;
        bool continues = p.after_back_edge && p.blocks.front() == s.header;
        if (!continues) {
          lp.kind = LoopPath::Kind::kEntry;
          l.entries += n.count;
          entry_ids.insert(lp.id);
        } else {
          continuation_ids.insert(lp.id);
          lp.kind = p.at_back_edge && s.latches.count(p.blocks.back()) ? LoopPath::Kind::kCycle : LoopPath::Kind::kExit;
        }
        l.paths.push_back(std::move(lp));
      }
      if (l.iterations == 0 && g.sampled) {
        l.iterations = started(fid, s.header);
        l.unsampled = true;
      }
      if (l.iterations == 0) continue;
      l.mean_iterations = l.entries ? double(l.iterations) / double(l.entries) : double(l.iterations);
      std::sort(l.paths.begin(), l.paths.end(), [](const LoopPath &a, const LoopPath &b) { return a.count > b.count; });
      for (LoopPath &p : l.paths) p.share = double(p.count) / double(l.iterations);
      // Iterations per entry (innermost loops): an entry path followed by j-1 continuations.
      if (l.innermost) {
        l.entries_at_least.assign(k, 0);
        std::vector<std::pair<uint32_t, uint32_t>> work;  // (node, depth)
        for (uint32_t r : roots)
          if (entry_ids.count(ipf.nodes()[r].label.path)) work.push_back({r, 1});
        while (!work.empty()) {
          auto [v, d] = work.back();
          work.pop_back();
          l.entries_at_least[d - 1] += ipf.nodes()[v].count;
          for (uint32_t c : ipf.nodes()[v].children)
            if (continuation_ids.count(ipf.nodes()[c].label.path)) work.push_back({c, d + 1});
        }
      }
      // Runs of each cycle path: the chain path, path.path, ... in its tree.
      for (LoopPath &p : l.paths) {
        if (p.kind != LoopPath::Kind::kCycle) continue;
        uint32_t v = kNoParent;
        for (uint32_t r : roots)
          if (ipf.nodes()[r].label.path == p.id) v = r;
        while (v != kNoParent) {
          p.repeats.push_back(ipf.nodes()[v].count);
          uint32_t next = kNoParent;
          for (uint32_t c : ipf.nodes()[v].children)
            if (ipf.nodes()[c].label.path == p.id) next = c;
          v = next;
        }
        p.repeats.resize(k, 0);
        for (uint32_t j = 1; j < k; ++j) p.runs_at_least.push_back(p.repeats[j - 1] - p.repeats[j]);
      }
      g.loop_iterations += l.iterations;
      g.loops.push_back(std::move(l));
    }
  }

  // Hot calling contexts from calls in a loop body (CCT of the same files).
  auto cache = std::make_shared<DebugInfoCache>();
  for (const auto &t : threads) {
    const auto &nodes = t.profile.nodes;
    if (nodes.size() < 2) continue;
    Symbolizer sym(t.profile.modules, cache, [&](const std::string &w) { g.warnings.push_back(w); });
    std::vector<std::vector<uint32_t>> children(nodes.size());
    for (uint32_t i = 1; i < nodes.size(); ++i) children[nodes[i].parent].push_back(i);
    for (uint32_t i = 1; i < nodes.size(); ++i) {
      uint32_t p = nodes[i].parent;
      if (p == kRoot || !t.profile.countable(i)) continue;
      const std::string &caller = sym.routine(nodes[p].routine).function;
      const Symbol &site = sym.call_site(nodes[i].call_site);
      for (LoopGuide &l : g.loops) {
        if (caller != l.display && caller != l.function) continue;
        if (base_name(site.file) != base_name(l.file)) continue;
        const PathFunction *f = meta.find(l.function_id);
        bool in_body = false;
        for (uint32_t b : l.body)
          for (const auto &sl : f->info.blocks[b].lines)
            if (sl.line == site.line) in_body = true;
        if (!in_body) continue;
        // The callee and its descendants, three levels deep.
        std::function<void(uint32_t, std::vector<std::string>)> walk = [&](uint32_t v, std::vector<std::string> frames) {
          frames.push_back(sym.routine(nodes[v].routine).function);
          if (t.profile.countable(v)) {
            auto it = std::find_if(l.contexts.begin(), l.contexts.end(),
                                   [&](const LoopContext &c) { return c.frames == frames && c.call_line == site.line; });
            if (it == l.contexts.end()) l.contexts.push_back({frames, site.line, nodes[v].count});
            else it->calls += nodes[v].count;
          }
          if (frames.size() < 3)
            for (uint32_t c : children[v]) walk(c, frames);
        };
        walk(i, {});
      }
    }
  }
  for (LoopGuide &l : g.loops) {
    std::sort(l.contexts.begin(), l.contexts.end(), [](const LoopContext &a, const LoopContext &b) { return a.calls > b.calls; });
    if (l.contexts.size() > o.top_contexts) l.contexts.resize(o.top_contexts);
  }

  // Rank by share of all loop iterations (where the program's loop work is), whatever each loop's
  // recommendation: the hottest loop comes first even when its entries are too short for an OSR
  // point (its recommendation says so); drop the cold tail.
  std::erase_if(g.loops, [&](const LoopGuide &l) { return double(l.iterations) < o.min_share * double(g.loop_iterations); });
  std::stable_sort(g.loops.begin(), g.loops.end(), [](const LoopGuide &a, const LoopGuide &b) {
    return a.iterations != b.iterations ? a.iterations > b.iterations : a.line < b.line;
  });
  for (size_t i = 0; i < g.loops.size(); ++i) {
    LoopGuide &l = g.loops[i];
    l.rank = uint32_t(i + 1);
    l.share_of_program = double(l.iterations) / double(g.loop_iterations);
    char mean[64];
    std::snprintf(mean, sizeof mean, "%.1f", l.mean_iterations);
    std::string base = std::to_string(l.iterations) + " iterations (" + percent(l.share_of_program) +
                       " of all loop iterations), " + std::to_string(l.entries) + " entries, mean " + mean + " per entry";
    if (l.unsampled) {
      Recommendation r;
      r.kind = "not-sampled";
      r.text = "no burst sampled this loop: its iterations are counted, its paths unknown; profile with shorter "
               "burst intervals, or without bursts, to guide it";
      r.evidence = std::to_string(l.iterations) + " back edges counted (" + percent(l.share_of_program) +
                   " of all loop iterations)";
      l.recommendations.push_back(r);
      continue;
    }
    l.threshold = osr_threshold(l.mean_iterations);
    if (l.threshold) {
      Recommendation r;
      r.kind = "osr-point";
      r.text = "OSR point at the top of the loop body (rank " + std::to_string(l.rank) + "), fire at iteration " +
               std::to_string(*l.threshold) + " of an entry";
      r.evidence = base + "; at least " + percent(1.0 - double(*l.threshold) / l.mean_iterations) +
                   " of an average entry's iterations run after the switch";
      l.recommendations.push_back(r);
    } else {
      Recommendation r;
      r.kind = "no-osr-point";
      r.text = "no OSR point: entries are too short to switch inside one; choose the version at loop entry "
               "(e.g. hcct_loop_hot_total) or tier up the function";
      r.evidence = base + " (an OSR point pays from a mean of 2000 iterations per entry)";
      l.recommendations.push_back(r);
    }
    for (const LoopPath &p : l.paths) {
      if (p.kind != LoopPath::Kind::kCycle || p.share < 0.05 || p.repeats.empty() || !p.repeats[0]) continue;
      for (uint32_t factor : {16u, 8u, 4u, 2u}) {
        if (factor > k || !p.repeats[factor - 1]) continue;
        double s = double(p.repeats[factor - 1]) / double(p.repeats[0]);
        if (s < 0.9) continue;
        Recommendation r;
        r.kind = "unroll";
        r.path = p.id;
        r.factor = factor;
        r.share = s;
        r.text = "path " + std::to_string(p.id) + " (" + p.lines + ") repeats >= " + std::to_string(factor) + " times in " +
                 percent(s) + " of its occurrences: unroll x" + std::to_string(factor) + " behind one check";
        r.evidence = "n-gram path^" + std::to_string(factor) + " counted " + std::to_string(p.repeats[factor - 1]) + " of " +
                     std::to_string(p.repeats[0]) + " occurrences; the path is " + percent(p.share) + " of the loop's iterations";
        l.recommendations.push_back(r);
        break;
      }
    }
    if (!l.paths.empty() && l.paths.front().kind == LoopPath::Kind::kCycle && l.paths.front().share >= 0.9) {
      const LoopPath &p = l.paths.front();
      Recommendation r;
      r.kind = "specialise";
      r.path = p.id;
      r.share = p.share;
      r.text = "specialise the loop for path " + std::to_string(p.id) + " (" + p.lines + "), guarding its branches";
      r.evidence = "the path is " + percent(p.share) + " of the loop's iterations";
      l.recommendations.push_back(r);
    }
  }
  return g;
}

}  // namespace hcct::analysis
