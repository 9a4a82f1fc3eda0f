// The runtime's forests (libhcct/kpath_forest.h), the k-slab forest of thesis Algorithm 4 and the
// k-window forest, converted by Algorithms 5–6 (analysis/kpath_ipf) equal direct n-gram counting,
// for every n ≤ k, k = 1…20, on random and adversarial streams with ∗ markers and interleaved
// (nested, recursive) activations; their counters sum to the stream length. The k-SF is also,
// node for node and count for count, the forest a literal transcription of Algorithm 4 (below)
// builds; the kWF has one node per distinct n-gram. Every stream is driven the way instrumented
// code does it: the inline fast path (path_fast_step, the twin of the pass's IR) first, the runtime
// on a miss — and with the fast path off.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "analysis/testutil.h"
#include "hcct/analysis/kpath_ipf.h"
#include "hcct/analysis/kpath_profile.h"
#include "hcct/analysis/writer.h"
#include "hcct/format.h"
#include "kpath_forest.h"

using hcct::analysis::Ipf;
using hcct::analysis::KsfForest;
using hcct::analysis::PathLabel;
namespace rt = hcct::rt;

namespace {

// Drives a PathProfiler with a call stack of activations and records each activation's stream.
class StreamDriver {
 public:
  StreamDriver(rt::PathProfiler &p, bool fast_path, rt::KsfNode **roots) : p_(p), fast_path_(fast_path), roots_(roots) {}
  void call(uint64_t function) {
    frames_.push_back(std::make_unique<rt::PathFrame>());
    functions_.push_back(function);
    slot_.push_back(streams_.size());
    streams_.emplace_back();
    rt::PathProfiler::enter(frames_.back().get());
  }
  void emit(uint64_t id) {
    // The slot the emitting site would pass: any function of the ID will do (the pass's is the
    // parity of the ID's loop-body bits); the low bit keeps the cases below easy to read.
    unsigned slot = unsigned(id & 1);
    // __hcct_path_blpp: set by the runtime while its profiler is BLPP (k = 1).
    if (rt::path_fast_step(frames_.back().get(), p_.token(), roots_, functions_.back(), id, slot, fast_path_,
                           p_.k() == 1))
      ++fast_;
    else p_.path(frames_.back().get(), functions_.back(), id, slot);
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
  uint64_t fast() const { return fast_; }

 private:
  rt::PathProfiler &p_;
  bool fast_path_;
  rt::KsfNode **roots_;
  uint64_t fast_ = 0;
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
    if (!slot.value) continue;  // (k = 1: roots without children)
    std::function<void(const rt::KsfNode *, uint32_t)> walk = [&](const rt::KsfNode *n, uint32_t parent) {
      f.nodes.push_back({{slot.function, n->path}, n->count, parent});
      uint32_t me = uint32_t(f.nodes.size() - 1);
      for (const rt::KsfNode *c = n->first_child; c != &rt::g_path_end; c = c->next_sibling) walk(c, me);
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

// Every node of a forest as its root-to-node label sequence, with its count (zero counts too).
using Sequences = std::map<std::vector<PathLabel>, uint64_t>;
Sequences node_sequences(const KsfForest &f) {
  Sequences out;
  std::vector<std::vector<PathLabel>> seq(f.nodes.size());
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    if (f.nodes[i].parent != hcct::analysis::kNoParent) seq[i] = seq[f.nodes[i].parent];
    seq[i].push_back(f.nodes[i].label);
    REQUIRE(out.emplace(seq[i], f.nodes[i].count).second);  // a prefix forest: no sequence twice
  }
  return out;
}

// Thesis Algorithm 4, line by line, on a forest of label sequences (a node is its root-to-node
// sequence): the oracle for the runtime's k-SF. Activations are independent streams.
Sequences algorithm4(const std::vector<std::vector<PathLabel>> &streams, uint32_t k) {
  Sequences forest;
  for (const auto &stream : streams) {
    uint64_t n = 0;                                  // line 2
    std::optional<std::vector<PathLabel>> tau, beta;  // line 3 (β is set before it is read)
    for (const PathLabel &r : stream) {
      if (n % (k - 1) == 0) {  // line 6
        beta = tau;            // line 7
        tau = std::vector<PathLabel>{r};  // lines 8-11: find(R, r), or add the root
        forest.emplace(*tau, 0);
      } else {
        tau->push_back(r);  // lines 13-18
        forest.emplace(*tau, 0);
      }
      if (beta) {  // lines 20-27
        beta->push_back(r);
        ++forest[*beta];
      } else {
        ++forest[*tau];  // line 29
      }
      ++n;  // line 31
    }
  }
  return forest;
}

using Forest = rt::PathProfiler::Forest;
const char *name(Forest f) { return f == Forest::kSlab ? "k-SF" : "kWF"; }

struct Result {
  uint64_t fast = 0;   // items the fast path took
  uint64_t nodes = 0;  // nodes of the forest
  uint64_t scans = 0;  // siblings the runtime read in its child lookups
};

Result check(uint32_t k, const std::function<void(StreamDriver &)> &script, bool fast_path = true,
             Forest forest = Forest::kWindow) {
  INFO(name(forest) << ", k = " << k << ", fast path " << fast_path);
  rt::PathProfiler p;
  std::vector<rt::KsfNode *> roots(rt::kRootCacheSize);
  REQUIRE(p.init(k, /*trace=*/false, 2, roots.data(), forest));
  StreamDriver d(p, fast_path, roots.data());
  script(d);
  KsfForest f = snapshot(p);
  uint64_t slow = p.slow_paths();
  Result result{d.fast(), p.nodes(), p.scans()};
  p.destroy();
  REQUIRE(f.nodes.size() == result.nodes);
  REQUIRE(f.paths == d.length());
  REQUIRE(slow + d.fast() == d.length());
  uint64_t sum = 0;
  for (const auto &n : f.nodes) sum += n.count;
  REQUIRE(sum == d.length());
  REQUIRE(f.lost == 0);
  if (forest == Forest::kWindow || k == 1) {
    REQUIRE(max_depth(f) <= k);  // a window holds at most k items
  } else {
    REQUIRE(max_depth(f) <= 2 * k - 2);  // two chunks of k − 1
    // Node for node, count for count, the forest of Algorithm 4.
    REQUIRE(node_sequences(f) == algorithm4(d.streams(), k));
  }
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
  return result;
}

// Both forests, with the fast path on and off.
void check_all(uint32_t k, const std::function<void(StreamDriver &)> &script) {
  for (Forest forest : {Forest::kSlab, Forest::kWindow})
    for (bool fast_path : {true, false}) check(k, script, fast_path, forest);
}

}  // namespace

TEST_CASE("k-SF and kWF: adversarial single-activation streams, k = 1..20") {
  for (uint32_t k = 1; k <= 20; ++k) {
    // Lengths around multiples of the chunk length k − 1.
    for (uint32_t len : {0u, 1u, k - 1, k, k + 1, 2 * k - 2, 2 * k - 1, 3 * k, 5 * k + 3}) {
      check_all(k, [&](StreamDriver &d) {  // one ID repeated: the masked-convolution case
        d.call(7);
        for (uint32_t i = 0; i < len; ++i) d.emit(0);
      });
      check_all(k, [&](StreamDriver &d) {  // all distinct
        d.call(7);
        for (uint32_t i = 0; i < len; ++i) d.emit(i);
      });
    }
    for (uint32_t period = 1; period <= k + 2; ++period)
      check_all(k, [&](StreamDriver &d) {
        d.call(3);
        for (uint32_t i = 0; i < 4 * k + 7; ++i) d.emit(i % period);
      });
    check_all(k, [&](StreamDriver &d) {  // ∗ after every 0..3 items (empty activations included)
      std::mt19937 rng(k);
      for (int a = 0; a < 60; ++a) {
        d.call(1 + rng() % 2);
        for (uint32_t i = 0, n = rng() % 4; i < n; ++i) d.emit(rng() % 3);
        d.ret();
      }
    });
  }
}

TEST_CASE("kWF: k = 256, each new item makes a chain of 256 links at once") {
  // All distinct: every window the stream reaches is new, and so is each of its suffixes, so one
  // item creates its window and all its links — up to k nodes — in one make_child (a loop over the
  // link chain since session 13, with room for the largest k). The kWF then has one node per
  // distinct n-gram (n <= k): sum over items i of min(i + 1, k), each counted once per item that
  // ended it as a window (the deepest) — so the counts sum to the stream and the depth reaches k.
  constexpr uint32_t kK = 256, kItems = 300;
  for (bool fast_path : {true, false}) {
    rt::PathProfiler p;
    std::vector<rt::KsfNode *> roots(rt::kRootCacheSize);
    REQUIRE(p.init(kK, /*trace=*/false, 2, roots.data(), Forest::kWindow));
    StreamDriver d(p, fast_path, roots.data());
    d.call(9);
    for (uint32_t i = 0; i < kItems; ++i) d.emit(i);
    KsfForest f = snapshot(p);
    uint64_t distinct = 0;
    for (uint32_t i = 0; i < kItems; ++i) distinct += std::min(i + 1, kK);
    CHECK(p.nodes() == distinct);
    CHECK(f.nodes.size() == distinct);
    CHECK(f.paths == kItems);
    CHECK(max_depth(f) == kK);
    CHECK(p.lost() == 0);
    p.destroy();
  }
}

TEST_CASE("k-SF and kWF: random streams with nested and recursive activations, k = 1..20") {
  for (uint32_t k = 1; k <= 20; ++k)
    for (uint64_t seed = 0; seed < 24; ++seed) {
      std::mt19937_64 rng(seed * 1000 + k);
      uint32_t alphabet = 1 + uint32_t(rng() % 6);
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
          seed % 4 != 3, seed < 12 ? Forest::kWindow : Forest::kSlab);
    }
}

TEST_CASE("k-SF and kWF: a frame of another owner (another thread's, or a coroutine moved here) starts afresh") {
  for (Forest forest : {Forest::kSlab, Forest::kWindow}) {
    INFO(name(forest));
    rt::PathProfiler p;
    REQUIRE(p.init(4, false, /*token=*/8, nullptr, forest));
    rt::PathFrame stale{reinterpret_cast<rt::KsfNode *>(0x1234), 6};  // never dereferenced
    std::vector<rt::KsfNode *> roots(rt::kRootCacheSize);
    CHECK_FALSE(rt::path_fast_step(&stale, 8, roots.data(), 9, 1, 1));  // not this thread's
    p.path(&stale, 9, 1, 1);
    CHECK(stale.owner == 8);
    CHECK(p.enters() == 1);
    CHECK_FALSE(rt::path_fast_step(&stale, 8, roots.data(), 9, 1, 1));  // a new window: no guess yet
    p.path(&stale, 9, 1, 1);
    KsfForest f = snapshot(p);
    p.destroy();
    CHECK(f.paths == 2);
    auto seqs = hcct::analysis::make_k_ipf(f, 4).sequences();
    CHECK(seqs.at({{9, 1}}) == 2);
    CHECK(seqs.at({{9, 1}, {9, 1}}) == 1);
  }
}

TEST_CASE("k-SF and kWF: the fast path takes repeated patterns once learnt") {
  // k = 1 (BLPP) too: its roots are reached from the previous item's root through the same guesses.
  for (Forest forest : {Forest::kSlab, Forest::kWindow})
    for (uint32_t k : {1u, 2u, 3u, 8u, 16u}) {
      INFO(name(forest) << " k = " << k);
      // A loop alternating two paths, and period 3. A miss is a node reached for the first time,
      // or left for the first time (its guess is not set yet): at most two per node, and the
      // nodes are few (kWF: distinct n-grams; k-SF: chunk-aligned windows, one cycle of
      // lcm(period, k − 1) items).
      for (int period : {2, 3}) {
        Result r = check(k, [&](StreamDriver &d) {
          d.call(5);
          for (int i = 0; i < 3000; ++i) d.emit(i % period);
        }, true, forest);
        CHECK(r.fast >= 3000 - 2 * r.nodes - 2);
        CHECK(r.nodes <= (forest == Forest::kWindow || k == 1 ? uint64_t(period) * k
                                                                : uint64_t(2) * period * (2 * k - 2)));
      }
      // One item per activation (lexer's classify): after the first, each is a root cache hit.
      Result r = check(k, [](StreamDriver &d) {
        for (int i = 0; i < 500; ++i) {
          d.call(40 + i % 3);
          d.emit(i % 2);
          d.ret();
        }
      }, true, forest);
      CHECK(r.fast >= 500 - 6);
      // Random paths 4 and 7: every window has at most these two next items, one per parity, so
      // once a window has seen both, both are its guesses — misses are bounded by the nodes, not
      // by the stream. So with 4 and 6 (one parity): the displaced one stays in the other slot.
      // With 4, 6 and 7, 4 and 6 compete for one slot: each change between them is a miss.
      std::mt19937 rng(k);
      std::vector<uint64_t> mixed(4000), same(4000), three(4000);
      for (size_t i = 0; i < mixed.size(); ++i) {
        bool b = rng() % 2;
        mixed[i] = b ? 7 : 4;
        same[i] = b ? 6 : 4;
        three[i] = rng() % 3 == 0 ? 7 : b ? 6 : 4;
      }
      auto run = [&](const std::vector<uint64_t> &ids) {
        return check(k, [&](StreamDriver &d) {
          d.call(5);
          for (uint64_t id : ids) d.emit(id);
        }, true, forest);
      };
      Result split = run(mixed), shared = run(same), crowded = run(three);
      CHECK(int64_t(split.fast) >= int64_t(mixed.size()) - 2 * int64_t(split.nodes) - 1);
      CHECK(int64_t(shared.fast) >= int64_t(same.size()) - 2 * int64_t(shared.nodes) - 1);
      if (crowded.nodes < 400) CHECK(crowded.fast < split.fast);
    }
}

TEST_CASE("k-SF and kWF: a window with more next items than guesses keeps the two that count most") {
  // After 0, 1 the next item is 2 (40 %), 4 (30 %) or one of 30 rare ones (30 %), all of one
  // slot (the driver's slot is the ID's low bit): a lexer's state after a delimiter. When each
  // lookup put the child it found into the guesses, every rare item displaced a hot one, which
  // then missed in turn (tcc at k = 8: 16.1 M runtime calls, 9.6 M now): the fast path took 62 %
  // of the hot items at k = 2. Now 2 and 4 stay (93 %; every fifth rare lookup in a row still
  // displaces one, so that a child that becomes hot gets in). Counts stay exact (check() compares
  // every n-gram). (At larger k the windows before the choice are many, each learning on its own.)
  std::mt19937 rng(21);
  std::vector<uint64_t> next(6000);
  for (uint64_t &x : next) {
    uint32_t r = rng() % 100;
    x = r < 40 ? 2 : r < 70 ? 4 : 10 + 2 * (rng() % 30);
  }
  for (Forest forest : {Forest::kSlab, Forest::kWindow})
    for (uint32_t k : {2u, 3u}) {
      uint64_t hot = 0, hot_fast = 0;
      check(k, [&](StreamDriver &d) {
        d.call(5);
        for (uint64_t x : next) {
          d.emit(0);
          d.emit(1);
          uint64_t before = d.fast();
          d.emit(x);
          if (x < 10) hot += 1, hot_fast += d.fast() - before;
        }
      }, true, forest);
      INFO(name(forest) << " k = " << k << ": hot items the fast path took " << hot_fast << " of " << hot);
      CHECK(hot_fast >= hot * 85 / 100);
    }
}

TEST_CASE("BLPP: an item neither guess holds is taken from the root cache once the runtime has seen it") {
  // An interpreter's dispatch loop: one function, each iteration one of many paths, in no
  // predictable order, so the previous root's two guesses mostly miss. Every root is cached once
  // the runtime has counted it, so after the first of each path the fast path takes every item
  // (before issue 24's change, only the guesses could: 80 % of these items called the runtime).
  std::mt19937 rng(11);
  std::vector<uint64_t> ids(20000);
  for (uint64_t &id : ids) id = rng() % 40;
  Result r = check(1, [&](StreamDriver &d) {
    d.call(5);
    for (uint64_t id : ids) d.emit(id);
  });
  CHECK(r.nodes == 40);
  CHECK(r.fast >= ids.size() - 40);
  // Paths of two functions whose cache entries collide still count exactly (check() compares
  // the counters with the stream); the fast path then misses more, never counts wrongly.
  Result mixed = check(1, [&](StreamDriver &d) {
    for (int i = 0; i < 2000; ++i) {
      d.call(5 + uint64_t(i % 3));
      for (int j = 0; j < 5; ++j) d.emit(rng() % 300);
      d.ret();
    }
  });
  CHECK(mixed.fast > 0);
}

TEST_CASE("k-SF and kWF: a child found behind others moves to the front of its list") {
  // A window followed by many different items, and then again and again by the oldest of them
  // (a lexer's state after a delimiter, then the one frequent next token): each lookup scanned
  // the whole list in insertion order (tcc at k = 8: 5.2 siblings per lookup); now the child found
  // goes to the front, so the repeated lookups read one or two siblings. Counts stay exact
  // (check() compares every n-gram); the fast path is off so that every item is a lookup.
  constexpr int kDistinct = 20, kRepeats = 200;
  for (Forest forest : {Forest::kSlab, Forest::kWindow}) {
    auto distinct = [&](StreamDriver &d) {
      for (int x = 1; x <= kDistinct; ++x) {
        d.emit(0);
        d.emit(uint64_t(x));
      }
    };
    Result before = check(2, [&](StreamDriver &d) {
      d.call(5);
      distinct(d);
    }, /*fast_path=*/false, forest);
    Result after = check(2, [&](StreamDriver &d) {
      d.call(5);
      distinct(d);
      for (int i = 0; i < kRepeats; ++i) {
        d.emit(0);
        d.emit(1);  // the first of the distinct items: last in insertion order
      }
    }, /*fast_path=*/false, forest);
    INFO(name(forest) << ": scans " << before.scans << " then " << after.scans);
    CHECK(after.scans - before.scans <= uint64_t(2 * 2 * kRepeats + kDistinct));
  }
}

TEST_CASE("k-SF and kWF: nodes on a random binary stream (kWF = distinct n-grams, k-SF = Definition 3.7)") {
  for (Forest forest : {Forest::kSlab, Forest::kWindow}) {
    rt::PathProfiler p;
    std::vector<rt::KsfNode *> roots(rt::kRootCacheSize);
    REQUIRE(p.init(16, false, 2, roots.data(), forest));
    StreamDriver d(p, true, roots.data());
    d.call(1);
    std::mt19937 rng(3);
    for (int i = 0; i < 5000; ++i) d.emit(rng() % 2);
    uint64_t distinct = hcct::analysis::count_ngrams(d.streams(), 16).nodes().size();
    if (forest == Forest::kWindow) CHECK(p.nodes() == distinct);
    else CHECK(p.nodes() == algorithm4(d.streams(), 16).size());
    // Per item the k-SF adds at most two nodes (β and τ); the kWF up to k (every new suffix). On a
    // long low-entropy stream it is the other way round (docs/BENCHMARKS.md, "kpath"): the kWF
    // saturates at the distinct n-grams, the k-SF at the distinct chunk-aligned (2k − 2)-grams.
    if (forest == Forest::kSlab) CHECK(p.nodes() <= 2 * 5000);
    p.destroy();
  }
}

// ---- The reader of KPTH (analysis/src/kpath_profile.cc): versions, forest kinds, depth bounds.


namespace {

void put_varint(hcct::analysis::Bytes &b, uint64_t v) {
  while (v >= 0x80) {
    b.push_back(uint8_t(v | 0x80));
    v >>= 7;
  }
  b.push_back(uint8_t(v));
}

// A thread file whose KPTH holds one chain of `depth` nodes (function 9, path 1, count 1 each).
hcct::analysis::Bytes kpth_file(uint64_t version, uint64_t k, std::optional<uint64_t> kind, uint32_t depth) {
  hcct::analysis::Bytes body;
  put_varint(body, version);
  put_varint(body, k);
  if (kind) put_varint(body, *kind);
  put_varint(body, depth);  // paths
  put_varint(body, 1);      // enters
  put_varint(body, 0);      // lost
  put_varint(body, depth);  // nodes
  for (uint32_t i = 0; i < depth; ++i) {
    put_varint(body, i == 0 ? 0 : 1);
    if (i == 0)
      for (int b = 0; b < 8; ++b) body.push_back(b == 0 ? 9 : 0);
    put_varint(body, 1);
    put_varint(body, 1);
  }
  hcct::analysis::ThreadProfile p = hcct::test::small_profile();
  auto entries = hcct::analysis::meta_entries(p.meta);
  hcct::analysis::Section sections[4] = {
      {hcct::format::kTagMeta, 0, hcct::analysis::encode_meta(entries)},
      {hcct::format::kTagModules, 0, hcct::analysis::encode_modules(p.modules)},
      {hcct::format::kTagTree, 0, hcct::analysis::encode_tree(p.nodes)},
      {hcct::format::kTagPaths, 0, body},
  };
  return hcct::analysis::encode_file(sections);
}

std::string parse_error(const hcct::analysis::Bytes &file) {
  try {
    hcct::analysis::parse_thread_paths(file, "t.hcct");
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("KPTH reader: forest kinds, version 1, depth bounds and errors") {
  namespace an = hcct::analysis;
  using hcct::format::kPathForestBlpp;
  using hcct::format::kPathForestSlab;
  using hcct::format::kPathForestWindow;
  // A k-SF may be 2k − 2 levels deep, a kWF k.
  auto t = an::parse_thread_paths(kpth_file(2, 4, kPathForestSlab, 6), "t.hcct");
  REQUIRE(t);
  CHECK(t->forest.kind == an::ForestKind::kSlab);
  CHECK(t->forest.nodes.size() == 6);
  CHECK(parse_error(kpth_file(2, 4, kPathForestSlab, 7)).find("deeper than a k-SF with k = 4 allows (6)") != std::string::npos);
  t = an::parse_thread_paths(kpth_file(2, 4, kPathForestWindow, 4), "t.hcct");
  REQUIRE(t);
  CHECK(t->forest.kind == an::ForestKind::kWindow);
  CHECK(parse_error(kpth_file(2, 4, kPathForestWindow, 5)).find("deeper than a kWF with k = 4 allows (4)") != std::string::npos);
  // BLPP: k = 1 exactly.
  t = an::parse_thread_paths(kpth_file(2, 1, kPathForestBlpp, 1), "t.hcct");
  REQUIRE(t);
  CHECK(t->forest.kind == an::ForestKind::kBlpp);
  CHECK(parse_error(kpth_file(2, 4, kPathForestBlpp, 1)).find("forest kind BLPP with k = 4") != std::string::npos);
  CHECK(parse_error(kpth_file(2, 1, kPathForestSlab, 1)).find("forest kind k-SF with k = 1") != std::string::npos);
  CHECK(parse_error(kpth_file(2, 4, 7, 1)).find("unknown forest kind 7") != std::string::npos);
  // Version 1 (no kind): read, kind unknown, the k-SF's bound.
  t = an::parse_thread_paths(kpth_file(1, 4, std::nullopt, 6), "t.hcct");
  REQUIRE(t);
  CHECK(t->forest.kind == an::ForestKind::kUnknown);
  CHECK(parse_error(kpth_file(1, 4, std::nullopt, 7)).find("deeper") != std::string::npos);
  CHECK(parse_error(kpth_file(4, 4, kPathForestSlab, 1)).find("unsupported version 4") != std::string::npos);
}

TEST_CASE("k-IPF: a forest not in preorder is refused and never converted wrongly") {
  KsfForest f;
  f.k = 2;
  f.kind = hcct::analysis::ForestKind::kWindow;
  auto node = [](uint64_t path, uint32_t parent) {
    hcct::analysis::KsfNode n;
    n.label = {1, path};
    n.count = 1;
    n.parent = parent;
    return n;
  };
  // Node 2's parent is node 0, but root 1 comes between: 0's subtree is not contiguous.
  f.nodes = {node(0, hcct::analysis::kNoParent), node(1, hcct::analysis::kNoParent), node(2, 0)};
  CHECK_THROWS_AS(hcct::analysis::make_k_ipf(f, 2), std::invalid_argument);
  f.nodes = {node(0, hcct::analysis::kNoParent), node(2, 0), node(1, hcct::analysis::kNoParent)};
  CHECK(hcct::analysis::make_k_ipf(f, 2).nodes().size() == 4);  // [0], [0 2], [2], [1]
}

TEST_CASE("root cache: a function's path IDs take consecutive entries and never evict each other") {
  // ABI v4 (hcct/kpath_abi.h): root_slot(F, id) = (root_base(F) + id) mod 1024, so one-item
  // activations of up to 1024 paths of one function all stay on the inline fast path (v3's 256
  // entries took every fourth of them: paths 256 apart shared an entry).
  for (uint64_t function : {uint64_t(1), uint64_t(0x9e3779b97f4a7c15ull), uint64_t(0xdeadbeefcafef00dull)}) {
    std::set<size_t> slots;
    for (uint64_t id = 0; id < rt::kRootCacheSize; ++id) slots.insert(rt::root_slot(function, id));
    CHECK(slots.size() == rt::kRootCacheSize);
  }
  // And through the fast path's twin: one-item activations of one function cycling over 1024
  // paths, after the first round, never call the runtime.
  CHECK(rt::kRootCacheSize == 1024);
  Result r = check(2, [](StreamDriver &d) {
    for (int i = 0; i < 4 * 1024; ++i) {
      d.call(77);
      d.emit(uint64_t(i % 1024));
      d.ret();
    }
  });
  CHECK(r.fast == 3 * 1024);
}

// ---- The bounded kWF (path_epsilon > 0; docs/KPATH.md, "Bounded forests") against the n-gram
// oracle. The guarantee, on every sequence of at most k paths: a count c in the k-IPF satisfies
// c <= true <= c + B, and a sequence the k-IPF lacks ran at most B times, where B = error_bound()
// = delta + (k − 1) · cuts, and delta <= εN unless a sweep was forced. Memory: never more than
// the budget plus one item's chain of non-root nodes. (B depends on the length n of the sequence:
// delta + (n − 1) · cuts.)

namespace {

struct BoundedResult {
  uint64_t sweeps = 0, forced = 0, cuts = 0, evicted = 0, bound = 0 /* delta */, items = 0, budget = 0;
  uint64_t one_pass = 0;  // sweeps whose threshold came from the previous one's ranks
  uint64_t scratch_maps = 0;
  uint64_t grown = 0;  // times the budget grew by a floor (path_grow)
};

BoundedResult check_bounded(uint32_t k, double epsilon, const std::function<void(StreamDriver &)> &script,
                            bool fast_path = true, uint32_t grow = 1) {
  INFO("bounded kWF, k = " << k << ", epsilon = " << epsilon << ", fast path " << fast_path << ", grow " << grow);
  rt::PathProfiler p;
  std::vector<rt::KsfNode *> roots(rt::kRootCacheSize);
  REQUIRE(p.init(k, /*trace=*/false, 2, roots.data(), Forest::kWindow, epsilon, nullptr, grow));
  REQUIRE(p.bounded());
  StreamDriver d(p, fast_path, roots.data());
  script(d);
  KsfForest f = snapshot(p);
  BoundedResult r{p.sweeps(), p.forced_sweeps(), p.cuts(), p.evicted(), p.delta(), d.length(), p.budget(),
                  p.one_pass_sweeps(), p.scratch_maps(), p.grown()};
  REQUIRE(p.budget() == (1 + r.grown) * rt::PathProfiler::budget_for(k, epsilon));
  REQUIRE(r.grown < grow);
  uint64_t roots_used = p.roots().size();
  uint64_t peak = p.nodes_peak();
  p.destroy();
  // Counts move, never vanish: they still sum to the stream length.
  REQUIRE(f.paths == d.length());
  REQUIRE(max_depth(f) <= k);
  // Memory: at most the budget, plus one item's chain (k nodes), plus the roots (one per distinct
  // path, which the bound does not evict).
  REQUIRE(peak <= r.budget + k + roots_used);
  REQUIRE(f.nodes.size() <= r.budget + k + roots_used);
  if (r.forced == 0) REQUIRE(r.bound <= uint64_t(epsilon * double(d.length())));  // delta <= εN
  auto bound = [&](size_t n) { return r.bound + (n > 1 ? (n - 1) * r.cuts : 0); };
  for (uint32_t kk : {1u, 2u, k / 2 > 2 ? k / 2 : 2u, k}) {
    if (kk > k) continue;
    INFO("k' = " << kk << ", bound " << r.bound << ", sweeps " << r.sweeps << ", cuts " << r.cuts);
    auto got = hcct::analysis::make_k_ipf(f, kk).sequences();
    auto want = hcct::analysis::count_ngrams(d.streams(), kk).sequences();
    for (const auto &[seq, count] : got) {
      auto it = want.find(seq);
      uint64_t truth = it == want.end() ? 0 : it->second;
      INFO("sequence of " << seq.size() << ", counted " << count << ", true " << truth);
      REQUIRE(count <= truth);          // never over
      REQUIRE(truth <= count + bound(seq.size()));  // at most B under
    }
    for (const auto &[seq, truth] : want)
      if (!got.count(seq)) {
        INFO("missing sequence of " << seq.size() << ", true " << truth);
        REQUIRE(truth <= bound(seq.size()));  // what is not reported is cold
      }
  }
  return r;
}

}  // namespace

TEST_CASE("bounded kWF: the guarantee on every sequence, random streams with nesting and recursion") {
  uint64_t sweeps = 0, cuts = 0, one_pass = 0;
  for (uint32_t k : {2u, 3u, 5u, 8u, 16u})
    for (uint64_t seed = 0; seed < 6; ++seed) {
      std::mt19937_64 rng(seed * 77 + k);
      uint32_t alphabet = 2 + uint32_t(rng() % 12);
      double epsilon = seed % 2 ? 0.01 : 0.002;
      BoundedResult r = check_bounded(
          k, epsilon,
          [&](StreamDriver &d) {
            d.call(100);
            for (int step = 0; step < 40000; ++step) {
              uint64_t x = rng() % 100;
              if (x < 4 && d.depth() < 60) d.call(100 + rng() % 3);  // same function: recursion
              else if (x < 8 && d.depth() > 1) d.ret();
              else d.emit(rng() % alphabet);
            }
          },
          seed != 5);
      sweeps += r.sweeps;
      cuts += r.cuts;
      one_pass += r.one_pass;
    }
  CHECK(sweeps > 0);  // the budget was reached and nodes were evicted
  // Both kinds of sweep ran: with the ranks found first, and in one pass with the last ranks.
  CHECK(one_pass > 0);
  CHECK(one_pass < sweeps);
  CHECK(cuts > 0);    // a caller's window was evicted under it, and the stream went on
}

TEST_CASE("bounded kWF: adversarial streams — all distinct, phase changes, deep nesting, a hot loop in noise") {
  for (uint32_t k : {4u, 8u, 16u}) {
    // Many distinct sequences: every window new, so every item creates nodes.
    BoundedResult distinct = check_bounded(k, 0.01, [](StreamDriver &d) {
      d.call(1);
      for (uint64_t i = 0; i < 20000; ++i) d.emit(i);
    });
    CHECK(distinct.sweeps > 0);
    // Phase changes: three phases with disjoint alphabets and different periods, then the first
    // phase again (its sequences were evicted in between and come back).
    check_bounded(k, 0.005, [k](StreamDriver &d) {
      d.call(2);
      std::mt19937 rng(k);
      for (int phase : {0, 1, 2, 0})
        for (int i = 0; i < 15000; ++i) d.emit(uint64_t(phase * 100 + (phase == 1 ? i % 7 : rng() % (4 + phase * 5))));
    });
    // Deep nesting: recursion 200 deep, every level with a loop, so callers' windows wait (and
    // may be evicted) while their callees run.
    check_bounded(k, 0.01, [k](StreamDriver &d) {
      std::mt19937 rng(5 * k);
      std::function<void(int)> level = [&](int depth) {
        d.call(300 + uint64_t(depth % 4));
        for (int i = 0; i < 40; ++i) {
          d.emit(rng() % 6);
          if (i == 20 && depth < 200) level(depth + 1);
        }
        d.ret();
      };
      for (int round = 0; round < 3; ++round) level(0);
    });
    // A hot loop (period 3) in noise: its sequences are above φN for φ well above ε and must all
    // be reported, with their counts within the bound.
    BoundedResult hot = check_bounded(k, 0.002, [&](StreamDriver &d) {
      d.call(9);
      std::mt19937 rng(k + 1);
      for (int i = 0; i < 60000; ++i) d.emit(i % 4 ? 1000 + uint64_t(i % 3) : rng() % 5000);
    });
    CHECK(hot.sweeps > 0);
  }
}

TEST_CASE("bounded kWF: on a skewed stream the slack suffices: no forced sweep, delta <= εN") {
  // Like a real program's paths (loops, with rare other paths), where the uniform noise above
  // forces sweeps: this is the case the budget k/(2ε) is sized for (docs/KPATH.md).
  for (uint32_t k : {4u, 8u, 16u}) {
    std::mt19937_64 rng(k);
    BoundedResult r = check_bounded(k, 0.002, [&](StreamDriver &d) {
      // Loops: a body of seven paths; one item in fifty takes one of 40 other paths.
      d.call(1);
      for (int i = 0; i < 60000; ++i) d.emit(rng() % 50 == 0 ? 100 + rng() % 40 : uint64_t(i % 7));
    });
    CHECK(r.sweeps > 0);
    CHECK(r.forced == 0);
    // The sweeps' scratch is mapped once and kept, not mapped and unmapped by every sweep (page
    // faults: docs/BENCHMARKS.md, "Sixth pass").
    CHECK(r.sweeps > 1);
    CHECK(r.scratch_maps == 1);
  }
}

TEST_CASE("bounded kWF: several profilers (threads) and a window moved between them") {
  // Two profilers with tokens 2^32 apart, like two threads; an activation whose frame a coroutine
  // moves from one to the other starts afresh there, and sweeps of one never touch the other's.
  rt::PathProfiler a, b;
  std::vector<rt::KsfNode *> roots_a(rt::kRootCacheSize), roots_b(rt::kRootCacheSize);
  REQUIRE(a.init(4, false, uint64_t(1) << 32, roots_a.data(), Forest::kWindow, 0.05));
  REQUIRE(b.init(4, false, uint64_t(2) << 32, roots_b.data(), Forest::kWindow, 0.05));
  StreamDriver da(a, true, roots_a.data()), db(b, true, roots_b.data());
  da.call(1);
  db.call(1);
  std::mt19937 rng(1);
  for (int i = 0; i < 20000; ++i) {
    da.emit(rng() % 9);
    db.emit(rng() % 3);
  }
  CHECK(a.sweeps() > 0);
  rt::PathFrame moved{};
  rt::PathProfiler::enter(&moved);
  a.path(&moved, 1, 2, 0);
  uint64_t enters = b.enters();
  b.path(&moved, 1, 2, 0);  // a's window: another profiler's, never dereferenced by b
  CHECK(b.enters() == enters + 1);
  CHECK(moved.owner == b.owner_value());
  for (auto *p : {&a, &b}) {
    KsfForest f = snapshot(*p);
    uint64_t sum = 0;
    for (const auto &n : f.nodes) sum += n.count;
    CHECK(sum == f.paths);
    p->destroy();
  }
}

TEST_CASE("bounded kWF: a growing budget (path_grow) makes nodes instead of sweeping, and keeps the guarantee") {
  for (uint32_t k : {4u, 8u, 16u}) {
    double epsilon = 0.01;
    uint64_t floor = rt::PathProfiler::budget_for(k, epsilon);
    // A loop whose body is P distinct paths, P = 2·floor/k: its exact forest holds P·(k − 1)
    // non-root nodes, more than one floor and less than two, so the budget grows once and never
    // sweeps, and the counts are exact (the bound is 0).
    auto mid = [&](StreamDriver &d) {
      const uint64_t period = 2 * floor / k;
      d.call(1);
      for (uint64_t i = 0; i < 30 * period; ++i) d.emit(i % period);
    };
    BoundedResult fixed = check_bounded(k, epsilon, mid);
    CHECK(fixed.sweeps > 0);
    BoundedResult grown = check_bounded(k, epsilon, mid, true, 4);
    CHECK(grown.grown == 1);
    CHECK(grown.sweeps == 0);
    CHECK(grown.bound == 0);
    // Streams that need more than four floors: it grows to four and then sweeps, with the
    // guarantee and the memory bound of the grown budget (check_bounded checks both).
    for (uint64_t seed = 0; seed < 4; ++seed) {
      std::mt19937_64 rng(seed + 10 * k);
      BoundedResult r = check_bounded(
          k, 0.002,
          [&](StreamDriver &d) {
            d.call(100);
            for (int step = 0; step < 40000; ++step) {
              uint64_t x = rng() % 100;
              if (x < 4 && d.depth() < 60) d.call(100 + rng() % 3);
              else if (x < 8 && d.depth() > 1) d.ret();
              else d.emit(rng() % 14);
            }
          },
          true, 4);
      CHECK(r.grown == 3);
      CHECK(r.sweeps > 0);
    }
  }
}

TEST_CASE("bounded kWF: the budgets of all profilers (threads) share one allowance of path_grow floors") {
  REQUIRE(rt::bounded_budget_total() == 0);  // every earlier test destroyed its profilers
  const uint32_t k = 4;
  const double epsilon = 0.05;
  const uint64_t floor = rt::PathProfiler::budget_for(k, epsilon);
  rt::PathProfiler a, b;
  std::vector<rt::KsfNode *> roots_a(rt::kRootCacheSize), roots_b(rt::kRootCacheSize);
  // Three floors for the process: each profiler's first is granted, one more is left to share.
  REQUIRE(a.init(k, false, uint64_t(1) << 32, roots_a.data(), Forest::kWindow, epsilon, nullptr, 3));
  REQUIRE(b.init(k, false, uint64_t(2) << 32, roots_b.data(), Forest::kWindow, epsilon, nullptr, 3));
  CHECK(rt::bounded_budget_total() == 2 * floor);
  StreamDriver da(a, true, roots_a.data()), db(b, true, roots_b.data());
  auto noise = [](StreamDriver &d, uint64_t seed, int items) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < items; ++i) d.emit(rng() % 12);
  };
  da.call(1);
  db.call(1);
  noise(da, 1, 20000);
  CHECK(a.grown() == 1);  // the shared floor
  CHECK(a.sweeps() > 0);  // and then it swept
  noise(db, 2, 20000);
  CHECK(b.grown() == 0);  // nothing was left
  CHECK(b.sweeps() > 0);
  CHECK(rt::bounded_budget_total() == 3 * floor);
  // A thread that ends gives its budget back: the other may grow into it.
  a.destroy();
  CHECK(rt::bounded_budget_total() == floor);
  uint64_t sweeps = b.sweeps();
  noise(db, 3, 20000);
  CHECK(b.grown() == 2);
  CHECK(b.sweeps() > sweeps);
  b.destroy();
  CHECK(rt::bounded_budget_total() == 0);
}

TEST_CASE("bounded kWF: path_epsilon = 0 and the k-SF stay exact") {
  rt::PathProfiler p;
  REQUIRE(p.init(8, false, 2, nullptr, Forest::kWindow, 0));
  CHECK_FALSE(p.bounded());
  p.destroy();
  REQUIRE(p.init(8, false, 2, nullptr, Forest::kSlab, 0.01));
  CHECK_FALSE(p.bounded());
  p.destroy();
  REQUIRE(p.init(1, false, 2, nullptr, Forest::kWindow, 0.01));
  CHECK_FALSE(p.bounded());
  p.destroy();
}
