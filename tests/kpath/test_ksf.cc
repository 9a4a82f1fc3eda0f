// The runtime's k-SF (libhcct/kpath_forest.h, thesis Algorithm 4) converted by Algorithms 5–6
// (analysis/kpath_ipf) equals direct n-gram counting, for every n ≤ k, k = 1…20, on random and
// adversarial streams with ∗ markers and interleaved (nested, recursive) activations; its counters
// sum to the stream length.
#include <catch2/catch.hpp>

#include <functional>
#include <random>

#include "hcct/analysis/kpath_ipf.h"
#include "kpath_forest.h"

using hcct::analysis::Ipf;
using hcct::analysis::KsfForest;
using hcct::analysis::PathLabel;
namespace rt = hcct::rt;

namespace {

// Drives a PathProfiler with a call stack of activations and records each activation's stream.
class StreamDriver {
 public:
  explicit StreamDriver(rt::PathProfiler &p) : p_(p) {}
  void call(uint64_t function) {
    frames_.push_back(std::make_unique<rt::PathFrame>());
    functions_.push_back(function);
    slot_.push_back(streams_.size());
    streams_.emplace_back();
    p_.enter(frames_.back().get(), function);
  }
  void emit(uint64_t id) {
    p_.path(frames_.back().get(), functions_.back(), id);
    streams_[slot_.back()].push_back({functions_.back(), id});
    ++length_;
  }
  void ret() {
    frames_.pop_back();
    functions_.pop_back();
    slot_.pop_back();
  }
  size_t depth() const { return frames_.size(); }
  const std::vector<std::vector<PathLabel>> &streams() const { return streams_; }
  uint64_t length() const { return length_; }

 private:
  rt::PathProfiler &p_;
  std::vector<std::unique_ptr<rt::PathFrame>> frames_;
  std::vector<uint64_t> functions_;
  std::vector<size_t> slot_;
  std::vector<std::vector<PathLabel>> streams_;
  uint64_t length_ = 0;
};

// The runtime's forest in the analysis model, read through its public structure.
KsfForest snapshot(const rt::PathProfiler &p) {
  KsfForest f;
  f.k = p.k();
  f.paths = p.paths();
  f.enters = p.enters();
  f.lost = p.lost();
  const rt::RootTable &roots = p.roots();
  for (size_t i = 0; i < roots.capacity(); ++i) {
    const auto &slot = roots.slots()[i];
    if (!slot.value) continue;
    if (p.k() == 1) {
      f.nodes.push_back({{slot.function, slot.path}, slot.value, hcct::analysis::kNoParent});
      continue;
    }
    std::function<void(const rt::KsfNode *, uint32_t)> walk = [&](const rt::KsfNode *n, uint32_t parent) {
      f.nodes.push_back({{slot.function, n->path}, n->count, parent});
      uint32_t me = uint32_t(f.nodes.size() - 1);
      for (const rt::KsfNode *c = n->first_child; c; c = c->next_sibling) walk(c, me);
    };
    walk(reinterpret_cast<const rt::KsfNode *>(slot.value), hcct::analysis::kNoParent);
  }
  return f;
}

uint32_t max_depth(const KsfForest &f) {
  std::vector<uint32_t> d(f.nodes.size());
  uint32_t m = 0;
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    d[i] = f.nodes[i].parent == hcct::analysis::kNoParent ? 1 : d[f.nodes[i].parent] + 1;
    m = std::max(m, d[i]);
  }
  return m;
}

void check(uint32_t k, const std::function<void(StreamDriver &)> &script, bool mtf = true) {
  rt::PathProfiler p;
  REQUIRE(p.init(k, /*trace=*/false, mtf));
  StreamDriver d(p);
  script(d);
  KsfForest f = snapshot(p);
  p.destroy();
  REQUIRE(f.paths == d.length());
  uint64_t sum = 0;
  for (const auto &n : f.nodes) sum += n.count;
  REQUIRE(sum == d.length());
  REQUIRE(f.lost == 0);
  if (k >= 2) REQUIRE(max_depth(f) <= 2 * k - 2);
  // Every n ≤ k, not only n = k: the k'-IPF for k' ≤ k comes from the same k-SF.
  for (uint32_t kk = 1; kk <= k; kk = kk < 4 ? kk + 1 : kk * 2) {
    Ipf got = hcct::analysis::make_k_ipf(f, kk);
    Ipf want = hcct::analysis::count_ngrams(d.streams(), kk);
    INFO("k = " << k << ", k' = " << kk);
    for (const auto &n : got.nodes()) REQUIRE(n.count > 0);
    REQUIRE(got.sequences() == want.sequences());
  }
  Ipf got = hcct::analysis::make_k_ipf(f, k);
  REQUIRE(got.sequences() == hcct::analysis::count_ngrams(d.streams(), k).sequences());
}

}  // namespace

TEST_CASE("k-SF: adversarial single-activation streams, k = 1..20") {
  for (uint32_t k = 1; k <= 20; ++k) {
    // Lengths around multiples of the chunk length k − 1.
    for (uint32_t len : {0u, 1u, k - 1, k, k + 1, 2 * k - 2, 2 * k - 1, 3 * k, 5 * k + 3}) {
      check(k, [&](StreamDriver &d) {  // one ID repeated: the masked-convolution case
        d.call(7);
        for (uint32_t i = 0; i < len; ++i) d.emit(0);
      });
      check(k, [&](StreamDriver &d) {  // all distinct
        d.call(7);
        for (uint32_t i = 0; i < len; ++i) d.emit(i);
      });
    }
    for (uint32_t period = 1; period <= k + 2; ++period)
      check(k, [&](StreamDriver &d) {
        d.call(3);
        for (uint32_t i = 0; i < 4 * k + 7; ++i) d.emit(i % period);
      });
    check(k, [&](StreamDriver &d) {  // ∗ after every 0..3 items (empty activations included)
      std::mt19937 rng(k);
      for (int a = 0; a < 60; ++a) {
        d.call(1 + rng() % 2);
        for (uint32_t i = 0, n = rng() % 4; i < n; ++i) d.emit(rng() % 3);
        d.ret();
      }
    });
  }
}

TEST_CASE("k-SF: random streams with nested and recursive activations, k = 1..20") {
  for (uint32_t k = 1; k <= 20; ++k)
    for (uint64_t seed = 0; seed < 12; ++seed) {
      std::mt19937_64 rng(seed * 1000 + k);
      uint32_t alphabet = 1 + uint32_t(rng() % 6);
      bool mtf = seed % 2 == 0;
      check(
          k,
          [&](StreamDriver &d) {
            d.call(100);
            for (int step = 0; step < 3000; ++step) {
              uint64_t r = rng() % 100;
              if (r < 6 && d.depth() < 40) d.call(100 + rng() % 3);  // same function: recursion
              else if (r < 12 && d.depth() > 1) d.ret();
              else d.emit(rng() % alphabet);
            }
          },
          mtf);
    }
}

TEST_CASE("k-SF: a frame from elsewhere (never entered here) starts afresh") {
  rt::PathProfiler p;
  REQUIRE(p.init(4, false));
  rt::PathFrame stale{reinterpret_cast<rt::KsfNode *>(0x1234), reinterpret_cast<rt::KsfNode *>(0x5678), 2, nullptr};
  p.path(&stale, 9, 1);  // must not follow the stale pointers
  p.path(&stale, 9, 1);
  KsfForest f = snapshot(p);
  p.destroy();
  CHECK(f.paths == 2);
  auto seqs = hcct::analysis::make_k_ipf(f, 4).sequences();
  CHECK(seqs.at({{9, 1}}) == 2);
  CHECK(seqs.at({{9, 1}, {9, 1}}) == 1);
}
