#include "hcct/analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

#include "hcct/analysis/hot.h"
#include "hcct/analysis/names.h"
#include "hcct/analysis/text.h"

namespace hcct::analysis {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return h;
}

uint64_t fnv(std::span<const unsigned char> bytes, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t fnv(std::string_view text, uint64_t h) {
  return fnv({reinterpret_cast<const unsigned char *>(text.data()), text.size()}, h);
}

uint64_t module_identity(const Module &m) {
  if (!m.build_id.empty()) return fnv(m.build_id, 1);
  return fnv(base_name(m.path), 2);
}

struct Candidate {
  uint64_t key;
  uint8_t side;  // 0 test, 1 ref
  uint32_t node;
};

// Relative-path features of a subtree (first kCap nodes in preorder): hashes of the symbolic keys
// on the path from the subtree's root.
constexpr size_t kFeatureCap = 4096;

std::vector<uint64_t> features(const ThreadProfile &p, std::span<const NodeKey> keys, const std::vector<uint32_t> &end,
                               uint32_t root) {
  const uint32_t stop = uint32_t(std::min<uint64_t>(end[root], uint64_t(root) + kFeatureCap));
  std::vector<uint64_t> h(stop - root);
  h[0] = 0x1234;
  for (uint32_t j = root + 1; j < stop; ++j) h[j - root] = mix(h[p.nodes[j].parent - root], keys[j].symbolic);
  std::vector<uint64_t> out(h.begin() + 1, h.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

double containment(const std::vector<uint64_t> &a, const std::vector<uint64_t> &b) {
  if (a.empty() || b.empty()) return a.empty() && b.empty() ? 1.0 : 0.0;
  size_t i = 0, j = 0, common = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] < b[j]) ++i;
    else if (b[j] < a[i]) ++j;
    else ++common, ++i, ++j;
  }
  return double(common) / double(std::min(a.size(), b.size()));
}

double count_closeness(uint64_t a, uint64_t b) {
  return 1.0 / (1.0 + std::fabs(std::log((1.0 + double(a)) / (1.0 + double(b)))));
}

}  // namespace

ModuleKeys::ModuleKeys(std::span<const Module> mods) {
  for (const Module &m : mods) sorted_.push_back(&m);
  std::sort(sorted_.begin(), sorted_.end(), [](const Module *a, const Module *b) { return a->lo < b->lo; });
  for (const Module *m : sorted_) ids_.push_back(module_identity(*m));
}

uint64_t ModuleKeys::operator()(uint64_t addr) const {
  if (addr == 0) return 0;
  auto it = std::upper_bound(sorted_.begin(), sorted_.end(), addr, [](uint64_t a, const Module *m) { return a < m->lo; });
  if (it != sorted_.begin()) {
    --it;
    if ((*it)->contains(addr)) return mix(ids_[size_t(it - sorted_.begin())], addr - (*it)->bias);
  }
  return mix(3, addr);
}

uint64_t combine_keys(uint64_t a, uint64_t b) { return mix(a, b); }

std::vector<NodeKey> node_keys(const ThreadProfile &p, Names *names) {
  if (!names) return module_offset_keys(p);
  ModuleKeys offset(p.modules);
  // addr -> (exact, symbolic), for routines and for call sites.
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> routine_keys, site_keys;
  auto key = [&](uint64_t a, bool site) {
    auto &cache = site ? site_keys : routine_keys;
    auto it = cache.find(a);
    if (it != cache.end()) return it->second;
    uint64_t exact = offset(a), sym = exact;
    const Symbol *s = a ? &(site ? names->call_site(a) : names->routine(a)) : nullptr;
    if (s && s->resolved && !s->stale && (!site || s->line)) {
      sym = fnv(s->function, site ? 29 : 17);
      if (site)
        for (const SourceFrame &f : s->frames)
          sym = fnv(f.function + "\n" + base_name(f.file) + ":" + std::to_string(f.line), sym);
    }
    return cache[a] = {exact, sym};
  };
  auto routine_key = [&](uint64_t a) { return key(a, false); };
  auto site_key = [&](uint64_t a) { return key(a, true); };
  std::vector<NodeKey> keys(p.nodes.size());
  for (size_t i = 1; i < p.nodes.size(); ++i) {
    auto r = routine_key(p.nodes[i].routine);
    auto c = site_key(p.nodes[i].call_site);
    keys[i] = {combine_keys(r.first, c.first), combine_keys(r.second, c.second)};
  }
  return keys;
}

ThreadProfile time_as_counts(const ThreadProfile &p) {
  if (!p.meta.timed())
    throw std::invalid_argument("the profile has no time metric (recorded with time=off, with bursting, or by a "
                                "runtime before format version 2)");
  ThreadProfile out = p;
  const bool hcct = p.meta.mode == Mode::hcct;
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    Node &n = out.nodes[i];
    n.count = i == kRoot ? 0 : p.samples[i];
    if (hcct) n.flags = n.count ? n.flags | format::kNodeMonitored : n.flags & ~format::kNodeMonitored;
  }
  out.meta.calls = p.meta.samples;
  out.meta.lost = p.meta.samples_lost;
  out.meta.min_count = p.meta.time_min_count;
  return out;
}

std::vector<NodeKey> module_offset_keys(const ThreadProfile &p) {
  ModuleKeys ix(p.modules);
  std::vector<NodeKey> keys(p.nodes.size());
  for (size_t i = 1; i < p.nodes.size(); ++i) {
    uint64_t k = mix(ix(p.nodes[i].routine), ix(p.nodes[i].call_site));
    keys[i] = {k, k};
  }
  return keys;
}

Alignment align_trees(const ThreadProfile &test, std::span<const NodeKey> tk, const ThreadProfile &ref,
                      std::span<const NodeKey> rk) {
  if (tk.size() != test.nodes.size() || rk.size() != ref.nodes.size())
    throw std::invalid_argument("align_trees: one key per node expected");
  Alignment a;
  a.ref_of.assign(test.nodes.size(), kNoMatch);
  a.test_of.assign(ref.nodes.size(), kNoMatch);
  ChildIndex ct = child_index(test.nodes), cr = child_index(ref.nodes);
  std::vector<uint32_t> test_end, ref_end;  // computed when first needed
  std::vector<std::pair<uint32_t, uint32_t>> work{{kRoot, kRoot}};
  a.ref_of[kRoot] = kRoot;
  a.test_of[kRoot] = kRoot;
  auto match = [&](uint32_t t, uint32_t r, uint64_t &counter) {
    a.ref_of[t] = r;
    a.test_of[r] = t;
    ++counter;
    work.push_back({t, r});
  };

  std::vector<Candidate> cands, rest;
  while (!work.empty()) {
    auto [t, r] = work.back();
    work.pop_back();
    auto tc = ct.of(t), rc = cr.of(r);
    if (tc.empty() || rc.empty()) continue;
    if (tc.size() == 1 && rc.size() == 1 && tk[tc[0]].exact == rk[rc[0]].exact) {
      match(tc[0], rc[0], a.by_exact);
      continue;
    }
    // Pass 1: exact keys; pass 2: symbolic keys; what stays ambiguous goes to similarity.
    cands.clear();
    for (uint32_t c : tc) cands.push_back({tk[c].exact, 0, c});
    for (uint32_t c : rc) cands.push_back({rk[c].exact, 1, c});
    for (int pass = 0; pass < 2; ++pass) {
      std::sort(cands.begin(), cands.end(), [](const Candidate &x, const Candidate &y) {
        return x.key != y.key ? x.key < y.key : x.side != y.side ? x.side < y.side : x.node < y.node;
      });
      rest.clear();
      for (size_t i = 0; i < cands.size();) {
        size_t j = i, nt = 0;
        while (j < cands.size() && cands[j].key == cands[i].key) nt += cands[j++].side == 0;
        size_t nr = (j - i) - nt;
        if (nt == 1 && nr == 1) {
          match(cands[i].node, cands[i + 1].node, pass == 0 ? a.by_exact : a.by_symbol);
        } else if (nt > 0 && nr > 0) {
          for (size_t k = i; k < j; ++k) rest.push_back(cands[k]);
        } else if (pass == 0) {
          for (size_t k = i; k < j; ++k) rest.push_back(cands[k]);  // may still match symbolically
        }
        i = j;
      }
      if (pass == 0) {
        cands.clear();
        for (const Candidate &c : rest) cands.push_back({c.side == 0 ? tk[c.node].symbolic : rk[c.node].symbolic, c.side, c.node});
      }
    }
    // Ambiguous groups (same symbolic key, several siblings on a side).
    for (size_t i = 0; i < rest.size();) {
      size_t j = i;
      while (j < rest.size() && rest[j].key == rest[i].key) ++j;
      std::vector<uint32_t> xs, ys;
      for (size_t k = i; k < j; ++k) (rest[k].side == 0 ? xs : ys).push_back(rest[k].node);
      i = j;
      if (xs.empty() || ys.empty()) continue;
      struct Pair {
        double score;
        uint32_t x, y;
      };
      std::vector<Pair> pairs;
      if (xs.size() * ys.size() > 100000) {
        // Too many to score pairwise: pair by rank of count.
        auto by_count = [](const ThreadProfile &p) {
          return [&p](uint32_t u, uint32_t v) { return p.nodes[u].count > p.nodes[v].count; };
        };
        std::sort(xs.begin(), xs.end(), by_count(test));
        std::sort(ys.begin(), ys.end(), by_count(ref));
        for (size_t k = 0; k < std::min(xs.size(), ys.size()); ++k) pairs.push_back({double(-long(k)), xs[k], ys[k]});
      } else {
        if (test_end.empty()) {
          test_end = subtree_ends(test.nodes);
          ref_end = subtree_ends(ref.nodes);
        }
        std::vector<std::vector<uint64_t>> fx, fy;
        for (uint32_t x : xs) fx.push_back(features(test, tk, test_end, x));
        for (uint32_t y : ys) fy.push_back(features(ref, rk, ref_end, y));
        for (size_t p = 0; p < xs.size(); ++p)
          for (size_t q = 0; q < ys.size(); ++q)
            pairs.push_back({containment(fx[p], fy[q]) + 0.5 * count_closeness(test.nodes[xs[p]].count, ref.nodes[ys[q]].count),
                             xs[p], ys[q]});
      }
      std::stable_sort(pairs.begin(), pairs.end(), [](const Pair &u, const Pair &v) { return u.score > v.score; });
      for (const Pair &p : pairs)
        if (a.ref_of[p.x] == kNoMatch && a.test_of[p.y] == kNoMatch) match(p.x, p.y, a.by_similarity);
    }
  }
  for (size_t i = 1; i < a.ref_of.size(); ++i) a.unmatched_test += a.ref_of[i] == kNoMatch;
  for (size_t i = 1; i < a.test_of.size(); ++i) a.unmatched_ref += a.test_of[i] == kNoMatch;
  return a;
}

Metrics compare_trees(const ThreadProfile &test, const ThreadProfile &ref, const Alignment &al,
                      const CompareOptions &o) {
  if (al.ref_of.size() != test.nodes.size() || al.test_of.size() != ref.nodes.size())
    throw std::invalid_argument("compare: the alignment belongs to other trees");
  for (double tau : o.taus)
    if (!(tau >= 0 && tau <= 1)) throw std::invalid_argument("compare: tau must be in [0, 1]");
  Metrics m;
  m.phi = o.phi;
  m.test_calls = test.meta.calls;
  m.ref_calls = ref.meta.calls;
  HotSet hs = query_hot(test, o.phi);  // validates φ
  m.test_threshold = hs.threshold;
  m.ref_threshold = hot_threshold(o.phi, ref.meta.all_calls());  // lost calls are calls too
  const size_t nref = ref.nodes.size();
  for (size_t b = 1; b < nref; ++b) m.wmax = std::max(m.wmax, ref.nodes[b].count);

  std::vector<bool> covered(nref, false);
  long double overlap = 0;
  for (size_t t = 1; t < test.nodes.size(); ++t) {
    if (hs.cls[t] == NodeClass::pruned) continue;
    ++m.hcct_nodes;
    if (hs.cls[t] == NodeClass::hot) ++m.hot;
    else ++m.cold_ancestors;
    uint32_t b = al.ref_of[t];
    if (b == kNoMatch) {
      ++m.unmatched_hcct;
      continue;
    }
    covered[b] = true;
    overlap += ref.nodes[b].count;
  }
  m.overlap = ref.meta.all_calls() ? double(overlap / ref.meta.all_calls()) : 0;

  for (double tau : o.taus) {
    Coverage c;
    c.tau = tau;
    // In double, like τ itself: 0.01·100 must be 1 (long double would expose 0.01's binary error).
    const double bar = tau * double(m.wmax);
    for (size_t b = 1; b < nref; ++b) {
      if (double(ref.nodes[b].count) >= bar) {
        ++c.hot;
        c.covered += covered[b];
      }
    }
    c.ratio = c.hot ? double(c.covered) / double(c.hot) : 1.0;
    m.coverage.push_back(c);
  }

  uint64_t max_unc = 0;
  long double sum_unc = 0;
  for (size_t b = 1; b < nref; ++b) {
    if (covered[b]) continue;
    ++m.uncovered;
    max_unc = std::max(max_unc, ref.nodes[b].count);
    sum_unc += ref.nodes[b].count;
  }
  if (m.wmax) {
    m.max_uncovered = 100.0 * double(max_unc) / double(m.wmax);
    m.avg_uncovered = m.uncovered ? double(100.0L * sum_unc / m.uncovered / m.wmax) : 0;
    m.tau_tilde = m.uncovered ? (double(max_unc) + 1) / double(m.wmax) : 0;
  }

  // Hot sets. H: the exact HCCT of the reference.
  std::vector<bool> in_h(nref, false);
  for (size_t b = 1; b < nref; ++b) {
    if (ref.countable(uint32_t(b)) && ref.nodes[b].count >= m.ref_threshold) {
      in_h[b] = true;
      ++m.exact_hot;
    }
  }
  long double sum_err = 0;
  bool any_counted = false;
  for (size_t t = 1; t < test.nodes.size(); ++t) {
    uint32_t b = al.ref_of[t];
    const uint64_t est = test.nodes[t].count;
    if (hs.cls[t] == NodeClass::hot) {
      if (b != kNoMatch && in_h[b]) ++m.true_hot;
      else ++m.false_positives;
      if (b != kNoMatch && ref.nodes[b].count > 0) {
        const uint64_t w = ref.nodes[b].count;
        const uint64_t abs_err = est > w ? est - w : w - est;
        const double rel = 100.0 * double(abs_err) / double(w);
        ++m.error_samples;
        m.max_error = std::max(m.max_error, rel);
        sum_err += rel;
        m.max_abs_error = std::max(m.max_abs_error, abs_err);
      }
    }
    if (b != kNoMatch && test.countable(uint32_t(t))) {
      const uint64_t w = ref.nodes[b].count;
      const int64_t signed_err = int64_t(est) - int64_t(w);
      m.max_abs_error_all = std::max<uint64_t>(m.max_abs_error_all, est > w ? est - w : w - est);
      m.min_signed_error_all = any_counted ? std::min(m.min_signed_error_all, signed_err) : signed_err;
      m.max_signed_error_all = any_counted ? std::max(m.max_signed_error_all, signed_err) : signed_err;
      any_counted = true;
    }
  }
  m.avg_error = m.error_samples ? double(sum_err / m.error_samples) : 0;
  for (size_t b = 1; b < nref; ++b) {
    if (!in_h[b]) continue;
    uint32_t t = al.test_of[b];
    if (t == kNoMatch || hs.cls[t] != NodeClass::hot) ++m.false_negatives;
  }
  if (test.meta.mode == Mode::hcct) {
    m.error_bound = test.meta.min_count;
    m.epsilon_n = test.meta.epsilon * double(test.meta.calls);
  }
  return m;
}

namespace {
// Per node: count (0 unless countable) and subtree sum, as shares of all calls.
void shares(const ThreadProfile &p, std::vector<double> &self, std::vector<double> &total) {
  const size_t n = p.nodes.size();
  std::vector<uint64_t> sum(n, 0);
  for (size_t i = n; i-- > 1;) {
    if (p.countable(uint32_t(i))) sum[i] += p.nodes[i].count;
    sum[p.nodes[i].parent] += sum[i];
  }
  const double whole = double(std::max<uint64_t>(p.meta.all_calls(), 1));
  self.assign(n, 0);
  total.assign(n, 0);
  for (size_t i = 1; i < n; ++i) {
    self[i] = p.countable(uint32_t(i)) ? double(p.nodes[i].count) / whole : 0;
    total[i] = double(sum[i]) / whole;
  }
}
}  // namespace

std::vector<ContextChange> diff_trees(const ThreadProfile &a, const ThreadProfile &b, const Alignment &al,
                                      double min_change) {
  if (al.ref_of.size() != a.nodes.size() || al.test_of.size() != b.nodes.size())
    throw std::invalid_argument("diff_trees: the alignment is of other trees");
  std::vector<double> self_a, total_a, self_b, total_b;
  shares(a, self_a, total_a);
  shares(b, self_b, total_b);
  std::vector<ContextChange> out;
  auto consider = [&](ContextChange c) {
    if (std::abs(c.self_change()) > min_change || std::abs(c.total_change()) > min_change) out.push_back(c);
  };
  for (uint32_t i = 1; i < a.nodes.size(); ++i) {
    ContextChange c;
    c.a = i;
    c.b = al.ref_of[i];
    c.self_a = self_a[i];
    c.total_a = total_a[i];
    if (c.b != kNoMatch) {
      c.self_b = self_b[c.b];
      c.total_b = total_b[c.b];
    }
    consider(c);
  }
  for (uint32_t j = 1; j < b.nodes.size(); ++j) {
    if (al.test_of[j] != kNoMatch) continue;
    ContextChange c;
    c.b = j;
    c.self_b = self_b[j];
    c.total_b = total_b[j];
    consider(c);
  }
  std::stable_sort(out.begin(), out.end(), [](const ContextChange &x, const ContextChange &y) {
    double sx = std::abs(x.self_change()), sy = std::abs(y.self_change());
    if (sx != sy) return sx > sy;
    return std::abs(x.total_change()) > std::abs(y.total_change());
  });
  return out;
}

}  // namespace hcct::analysis
