// ProfileStream against the in-memory reader (same verdict and nodes on valid, truncated, flipped
// and resealed-mutated files), and walk_tree's filters against a brute-force oracle.
#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "hcct/analysis/hot.h"
#include "hcct/analysis/reader.h"
#include "hcct/analysis/walk.h"
#include "hcct/analysis/writer.h"
#include "testutil.h"

using namespace hcct::analysis;
using hcct::test::TempDir;

namespace {

struct Outcome {
  bool ok = false;
  std::string error;
  ThreadProfile p;
};

Outcome by_parse(const Bytes &b, const std::string &name) {
  Outcome o;
  try {
    o.p = parse_profile(b, name);
    o.ok = true;
  } catch (const FormatError &e) {
    o.error = e.what();
  }
  return o;
}

Outcome by_stream(const std::filesystem::path &file, size_t buffer) {
  Outcome o;
  try {
    ProfileStream s(file, buffer);
    o.p.meta = s.meta();
    o.p.modules = s.modules();
    Node n;
    while (s.next(n)) o.p.nodes.push_back(n);
    CHECK(s.nodes_read() == s.node_count());
    CHECK(s.bytes_read() == s.file_size());
    o.ok = true;
  } catch (const FormatError &e) {
    o.error = e.what();
  }
  return o;
}

void same_verdict(const Bytes &b, const TempDir &dir, size_t buffer = 64) {
  auto file = dir / "x.hcct";
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(b.data()), std::streamsize(b.size()));
  }
  Outcome a = by_parse(b, file.string()), s = by_stream(file, buffer);
  INFO("parse: " << a.error << " / stream: " << s.error);
  REQUIRE(a.ok == s.ok);
  if (a.ok) {
    CHECK(s.p.nodes == a.p.nodes);
    CHECK(s.p.modules == a.p.modules);
    CHECK(meta_entries(s.p.meta) == meta_entries(a.p.meta));
  } else {
    CHECK(s.error.rfind(file.string() + ": ", 0) == 0);
  }
}

}  // namespace

TEST_CASE("the stream reads what the reader reads", "[stream]") {
  TempDir dir;
  std::mt19937_64 rng(5);
  for (int round = 0; round < 30; ++round) {
    Mode mode = round % 2 ? Mode::hcct : Mode::cct;
    ThreadProfile p = hcct::test::make_profile(hcct::test::random_tree(rng, 1 + rng() % 5000), mode, rng);
    Bytes b = encode_profile(p);
    same_verdict(b, dir, 41 + rng() % 200);
  }
  // Sections in another order (MODS and META after the tree) and an unknown section.
  ThreadProfile p = hcct::test::small_profile();
  Section s[4] = {{hcct::format::kTagTree, 0, encode_tree(p.nodes)},
                  {hcct::format::tag('X', 'T', 'R', 'A'), 0, Bytes(1000, 7)},
                  {hcct::format::kTagModules, 0, encode_modules(p.modules)},
                  {hcct::format::kTagMeta, 0, encode_meta(meta_entries(p.meta))}};
  same_verdict(encode_file(s), dir);
}

TEST_CASE("the stream rejects what the reader rejects", "[stream][corruption]") {
  TempDir dir;
  Bytes good = encode_profile(hcct::test::small_profile());
  for (size_t len = 0; len < good.size(); ++len) same_verdict(Bytes(good.begin(), good.begin() + long(len)), dir);
  for (size_t i = 0; i < good.size(); ++i) {
    Bytes bad = good;
    bad[i] ^= 0x10;
    same_verdict(bad, dir);
  }
  std::mt19937_64 rng(3);
  for (int round = 0; round < 3000; ++round) {
    Bytes bad = good;
    for (int e = 0; e < 1 + int(rng() % 3); ++e)
      bad[hcct::format::kHeaderSize + rng() % (bad.size() - hcct::format::kHeaderSize)] = uint8_t(rng());
    reseal(bad);
    same_verdict(bad, dir);
  }
}

TEST_CASE("a parent that is not on the previous node's path is not preorder", "[stream][format]") {
  // 0 root, 1 <- 0, 2 <- 1, 3 <- 0, 4 <- 2: node 4's parent closed when node 3 began.
  ThreadProfile p = hcct::test::small_profile(Mode::cct);
  p.nodes = {Node{}, {1, 2, 1, 0, 0}, {3, 4, 1, 1, 0}, {5, 6, 1, 0, 0}, {7, 8, 1, 2, 0}};
  p.meta.calls = 4;
  Bytes b = encode_profile(p);
  CHECK_THROWS_WITH(parse_profile(b, "x"), Catch::Contains("node 4: parent 2 is not on the path"));
  TempDir dir;
  same_verdict(b, dir);
}

// ---- walk_tree against an oracle

namespace {

struct Expect {
  uint32_t id, parent;
  uint64_t count, total;
  bool selected, truncated;
};

std::map<uint64_t, Expect> oracle(const ThreadProfile &p, const TreeFilter &f, const std::set<uint64_t> &focus,
                                  const std::set<uint64_t> &ignore) {
  const size_t n = p.nodes.size();
  const uint64_t thr = hot_threshold(f.min_share, p.meta.calls);
  std::vector<uint32_t> depth = node_depths(p.nodes);
  std::vector<bool> in_focus(n, f.focus == nullptr), ignored(n, false), selected(n, false), kept(n, false),
      truncated(n, false);
  std::vector<uint64_t> count(n, 0), total(n, 0);
  for (size_t i = 1; i < n; ++i) {
    const Node &v = p.nodes[i];
    in_focus[i] = in_focus[v.parent] || focus.count(v.routine);
    ignored[i] = ignored[v.parent] || ignore.count(v.routine);
    selected[i] = !ignored[i] && in_focus[i] && p.countable(uint32_t(i)) && v.count >= thr;
  }
  // Charge deep selected nodes to their ancestor at the cut.
  for (size_t i = 1; i < n; ++i) {
    if (!selected[i]) continue;
    size_t a = i;
    if (f.max_depth && depth[i] > f.max_depth)
      while (depth[a] > f.max_depth) a = p.nodes[a].parent;
    count[a] += p.nodes[i].count;
    kept[a] = true;
    if (a != i) truncated[a] = true;
  }
  kept[0] = true;
  for (size_t i = n; i-- > 1;)
    if (kept[i]) kept[p.nodes[i].parent] = true;
  for (size_t i = n; i-- > 1;) {
    if (!kept[i]) continue;
    total[i] += count[i];
    total[p.nodes[i].parent] += total[i];
  }
  std::map<uint64_t, Expect> out;
  std::vector<uint32_t> id(n, 0);
  uint32_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!kept[i]) continue;
    id[i] = next++;
    out[i] = {id[i], i ? id[p.nodes[i].parent] : 0, count[i], total[i], i > 0 && selected[i] && !(f.max_depth && depth[i] > f.max_depth), bool(truncated[i])};
  }
  return out;
}

}  // namespace

TEST_CASE("walk_tree keeps, charges and numbers like the oracle", "[walk]") {
  std::mt19937_64 rng(17);
  for (int round = 0; round < 400; ++round) {
    Mode mode = round % 3 == 0 ? Mode::hcct : Mode::cct;
    ThreadProfile p = hcct::test::make_profile(hcct::test::random_tree(rng, 1 + rng() % 400, 8, 2), mode, rng);
    TreeFilter f;
    const double shares[] = {0, 0, 0.001, 0.01, 0.05, 0.2, 1};
    f.min_share = shares[rng() % 7];
    f.max_depth = rng() % 3 ? 0 : uint32_t(1 + rng() % 6);
    std::set<uint64_t> focus, ignore;
    if (rng() % 3 == 0) {
      focus.insert(0x401000 + 0x10 * (rng() % 8));
      f.focus = [&focus](uint64_t r) { return focus.count(r) > 0; };
    }
    if (rng() % 3 == 0) {
      ignore.insert(0x401000 + 0x10 * (rng() % 8));
      f.ignore = [&ignore](uint64_t r) { return ignore.count(r) > 0; };
    }
    auto want = oracle(p, f, focus, ignore);
    MemorySource src(p);
    std::set<uint64_t> seen;
    std::vector<uint32_t> emitted_ids;
    WalkStats st = walk_tree(src, f, [&](const WalkNode &w, std::span<const WalkNode> path) {
      INFO("round " << round << " node " << w.index);
      REQUIRE(want.count(w.index));
      const Expect &e = want[w.index];
      CHECK(w.id == e.id);
      CHECK(w.count == e.count);
      CHECK(w.total == e.total);
      CHECK(w.truncated == e.truncated);
      if (w.index) {
        CHECK(w.parent == e.parent);
        CHECK(w.selected == e.selected);
        REQUIRE(!path.empty());
        CHECK(path.back().id == e.parent);
        CHECK(path.size() == w.depth);
      }
      // Postorder: every child before its parent.
      for (size_t k = 0; k < path.size(); ++k) CHECK(!seen.count(path[k].index));
      seen.insert(w.index);
      emitted_ids.push_back(w.id);
    });
    CHECK(seen.size() == want.size());
    CHECK(st.kept == want.size() - 1);
    CHECK(st.total == want[0].total);
    CHECK(st.nodes == p.nodes.size());
    // Ids are a permutation of 0..kept.
    std::sort(emitted_ids.begin(), emitted_ids.end());
    for (size_t k = 0; k < emitted_ids.size(); ++k) REQUIRE(emitted_ids[k] == k);
  }
}

TEST_CASE("with min_share = phi the walk keeps the (phi,eps)-HCCT", "[walk][hot]") {
  std::mt19937_64 rng(23);
  for (int round = 0; round < 100; ++round) {
    ThreadProfile p = hcct::test::make_profile(hcct::test::random_tree(rng, 2 + rng() % 800), round % 2 ? Mode::hcct : Mode::cct, rng);
    double phi = std::vector<double>{0, 0.001, 0.01, 0.1}[rng() % 4];
    HotSet h = query_hot(p, phi);
    TreeFilter f;
    f.min_share = phi;
    MemorySource src(p);
    std::vector<NodeClass> got(p.nodes.size(), NodeClass::pruned);
    WalkStats st = walk_tree(src, f, [&](const WalkNode &w, std::span<const WalkNode>) {
      got[w.index] = w.index == 0 || !w.selected ? NodeClass::cold_ancestor : NodeClass::hot;
    });
    CHECK(got == h.cls);
    CHECK(st.selected == h.hot);
    CHECK(st.kept - st.selected == h.cold_ancestors);
  }
}
