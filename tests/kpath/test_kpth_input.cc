// Hostile KPTH / KTRC sections (docs/FORMAT.md "kpath sections"; analysis/src/kpath_profile.cc):
// truncated anywhere, wrong versions and kinds, node counts and parent links out of range, links
// that would make a non-tree, levels beyond the kind's bound, counts that overflow, huge counts
// claimed by a tiny section, and random mutations. In process every one must be a FormatError
// naming the file (never another exception, a crash or a huge allocation); through `hcct paths`
// and `hcct guide` on a directory holding such a file, a message naming the file and exit
// status 1. (Also run under -fsanitize=address,undefined: docs/KPATH.md.)
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "analysis/testutil.h"
#include "hcct/analysis/kpath_profile.h"
#include "hcct/analysis/reader.h"
#include "hcct/analysis/writer.h"
#include "hcct/format.h"
#include "support/command.h"

namespace an = hcct::analysis;
namespace fs = std::filesystem;
using an::Bytes;

namespace {

void varint(Bytes &b, uint64_t v) {
  while (v >= 0x80) {
    b.push_back(uint8_t(v | 0x80));
    v >>= 7;
  }
  b.push_back(uint8_t(v));
}
void u64(Bytes &b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(uint8_t(v >> (8 * i)));
}

struct N {
  uint64_t delta, function, path, count;  // function: roots only
};

// A KPTH body: header fields, then the nodes as given (no check: the point is to write bad ones).
// Version 3's bound fields: ε's bits, budget, delta, cuts, sweeps, forced, evicted.
struct Bound {
  double epsilon = 0;
  uint64_t budget = 0, delta = 0, cuts = 0, sweeps = 0, forced = 0, evicted = 0;
};

Bytes kpth(uint64_t version, uint64_t k, std::optional<uint64_t> kind, uint64_t paths, uint64_t count,
           const std::vector<N> &nodes, const Bound &bound = {}) {
  Bytes b;
  varint(b, version);
  varint(b, k);
  if (kind) varint(b, *kind);
  varint(b, paths);
  varint(b, 1);  // enters
  varint(b, 0);  // lost
  if (version >= 3) {
    uint64_t bits;
    std::memcpy(&bits, &bound.epsilon, sizeof bits);
    u64(b, bits);
    for (uint64_t v : {bound.budget, bound.delta, bound.cuts, bound.sweeps, bound.forced, bound.evicted}) varint(b, v);
  }
  varint(b, count);
  for (const N &n : nodes) {
    varint(b, n.delta);
    if (n.delta == 0) u64(b, n.function);
    varint(b, n.path);
    varint(b, n.count);
  }
  return b;
}

// A well-formed k = 3 k-SF: two trees (depths 4 and 1), counts summing to 10.
const std::vector<N> kGood{{0, 9, 1, 2}, {1, 0, 2, 1}, {1, 0, 3, 1}, {1, 0, 1, 1}, {3, 0, 4, 1}, {0, 7, 0, 4}};
Bytes good_kpth() { return kpth(2, 3, hcct::format::kPathForestSlab, 10, kGood.size(), kGood); }

// A thread file (small_profile's META/MODS/CCT: pid 77, thread 0) with extra sections.
Bytes thread_file(const std::vector<an::Section> &extra) {
  an::ThreadProfile p = hcct::test::small_profile();
  auto entries = an::meta_entries(p.meta);
  std::vector<an::Section> sections{
      {hcct::format::kTagMeta, 0, an::encode_meta(entries)},
      {hcct::format::kTagModules, 0, an::encode_modules(p.modules)},
      {hcct::format::kTagTree, 0, an::encode_tree(p.nodes)},
  };
  sections.insert(sections.end(), extra.begin(), extra.end());
  return an::encode_file(sections);
}
Bytes with_kpth(const Bytes &body) { return thread_file({{hcct::format::kTagPaths, 0, body}}); }

// The reader's verdict: "" if accepted, else the FormatError's text. Any other exception fails.
std::string verdict(const Bytes &file, std::optional<an::ThreadPaths> *out = nullptr) {
  try {
    auto t = an::parse_thread_paths(file, "dir/77.0.hcct");
    if (out) *out = std::move(t);
    return "";
  } catch (const an::FormatError &e) {
    return e.what();
  }
}

void rejected(const Bytes &body, const std::string &problem) {
  std::string v = verdict(with_kpth(body));
  INFO(v);
  CHECK(v.rfind("dir/77.0.hcct: KPTH: ", 0) == 0);
  CHECK(v.find(problem) != std::string::npos);
}

// What an accepted forest must satisfy, whatever bytes produced it.
void check_invariants(const an::KsfForest &f) {
  uint64_t sum = 0;
  std::vector<uint32_t> level(f.nodes.size());
  uint32_t bound = f.kind == an::ForestKind::kWindow ? f.k : std::max(2 * f.k - 2, f.k);
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const an::KsfNode &n = f.nodes[i];
    if (n.parent == an::kNoParent) {
      level[i] = 1;
    } else {
      REQUIRE(n.parent < i);
      level[i] = level[n.parent] + 1;
    }
    REQUIRE(level[i] <= bound);
    sum += n.count;
  }
  REQUIRE(sum == f.paths);
}

// Runs `cmd` (stderr into the output), whatever its exit status.
hcct::test::CommandResult run_any(const std::string &cmd) { return hcct::test::run_status(cmd + " 2>&1"); }

}  // namespace

TEST_CASE("KPTH input: every truncation of a valid section is an error naming the file") {
  std::optional<an::ThreadPaths> t;
  REQUIRE(verdict(with_kpth(good_kpth()), &t) == "");
  REQUIRE(t);
  CHECK(t->forest.nodes.size() == kGood.size());
  check_invariants(t->forest);
  Bytes body = good_kpth();
  for (size_t n = 0; n < body.size(); ++n) {
    INFO("KPTH cut to " << n << " of " << body.size() << " bytes");
    rejected(Bytes(body.begin(), body.begin() + long(n)), "");
  }
  // The whole file cut anywhere: the header's size check names it too.
  Bytes file = with_kpth(body);
  for (size_t n = 0; n < file.size(); n += 3) {
    std::string v = verdict(Bytes(file.begin(), file.begin() + long(n)));
    INFO(n << ": " << v);
    CHECK(v.rfind("dir/77.0.hcct: ", 0) == 0);
  }
}

TEST_CASE("KPTH input: version 3, the bounded kWF's fields") {
  using hcct::format::kPathForestSlab;
  using hcct::format::kPathForestWindow;
  // A k = 3 kWF: root 1 (count 2) with child 2 (count 1); root 2 (count 1).
  const std::vector<N> nodes{{0, 9, 1, 2}, {1, 0, 2, 1}, {0, 9, 2, 1}};
  std::optional<an::ThreadPaths> t;
  REQUIRE(verdict(with_kpth(kpth(3, 3, kPathForestWindow, 4, 3, nodes, {0.01, 600, 5, 2, 3, 1, 40})), &t) == "");
  REQUIRE(t);
  CHECK(t->forest.bound.bounded());
  CHECK(t->forest.bound.epsilon == 0.01);
  CHECK(t->forest.bound.budget == 600);
  CHECK(t->forest.bound.error_bound(1) == 5);
  CHECK(t->forest.bound.error_bound(3) == 5 + 2 * 2);
  CHECK(t->forest.bound.forced_sweeps == 1);
  // Exact version 3, and version 2 (no fields): not bounded.
  REQUIRE(verdict(with_kpth(kpth(3, 3, kPathForestWindow, 4, 3, nodes)), &t) == "");
  CHECK_FALSE(t->forest.bound.bounded());
  REQUIRE(verdict(with_kpth(kpth(2, 3, kPathForestWindow, 4, 3, nodes)), &t) == "");
  CHECK_FALSE(t->forest.bound.bounded());
  rejected(kpth(3, 3, kPathForestSlab, 4, 3, nodes, {0.01, 600, 5, 2, 3, 1, 40}), "a bounded k-SF");
  rejected(kpth(3, 3, kPathForestWindow, 4, 3, nodes, {0, 600, 5, 2, 3, 1, 40}), "eviction accounting in an exact forest");
  rejected(kpth(3, 3, kPathForestWindow, 4, 3, nodes, {1.5, 600, 5, 2, 3, 1, 40}), "outside [0, 1)");
  rejected(kpth(3, 3, kPathForestWindow, 4, 3, nodes, {-0.5, 600, 5, 2, 3, 1, 40}), "outside [0, 1)");
  rejected(kpth(3, 3, kPathForestWindow, 4, 3, nodes, {std::nan(""), 600, 5, 2, 3, 1, 40}), "outside [0, 1)");
  rejected(kpth(3, 3, kPathForestWindow, 4, 3, nodes, {0.01, 600, 5, 2, 3, 4, 40}), "more forced sweeps than sweeps");
  rejected(kpth(3, 3, kPathForestWindow, 4, 3, nodes, {0.01, 600, 5, UINT64_MAX, 3, 1, 40}), "overflows");
  // Every truncation of a version-3 section is an error naming the file.
  Bytes body = kpth(3, 3, kPathForestWindow, 4, 3, nodes, {0.01, 600, 5, 2, 3, 1, 40});
  for (size_t n = 0; n < body.size(); ++n) {
    INFO("KPTH cut to " << n << " of " << body.size() << " bytes");
    rejected(Bytes(body.begin(), body.begin() + long(n)), "");
  }
}

TEST_CASE("KPTH input: versions, kinds, counts, links, levels and overflow") {
  using hcct::format::kPathForestBlpp;
  using hcct::format::kPathForestSlab;
  using hcct::format::kPathForestWindow;
  const N root{0, 9, 1, 1};
  rejected(kpth(0, 3, kPathForestSlab, 1, 1, {root}), "unsupported version 0");
  rejected(kpth(4, 3, kPathForestSlab, 1, 1, {root}), "unsupported version 4");
  rejected(kpth(UINT64_MAX, 3, kPathForestSlab, 1, 1, {root}), "unsupported version 18446744073709551615");
  rejected(kpth(2, 0, kPathForestSlab, 1, 1, {root}), "k = 0 is outside [1, 256]");
  rejected(kpth(2, 257, kPathForestSlab, 1, 1, {root}), "k = 257 is outside [1, 256]");
  rejected(kpth(2, 3, 3, 1, 1, {root}), "unknown forest kind 3");
  rejected(kpth(2, 3, UINT64_MAX, 1, 1, {root}), "unknown forest kind");
  rejected(kpth(2, 3, kPathForestBlpp, 1, 1, {root}), "forest kind BLPP with k = 3");
  rejected(kpth(2, 1, kPathForestWindow, 1, 1, {root}), "forest kind kWF with k = 1");
  // A varint of 11 bytes, or with bits beyond 64.
  Bytes b{2};
  b.insert(b.end(), 10, 0x80);
  b.push_back(0);
  rejected(b, "malformed varint for k");
  rejected(Bytes{2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}, "malformed varint for k");

  // Huge node counts claimed by a tiny section: refused before anything is reserved.
  for (uint64_t count : {uint64_t(4), uint64_t(1) << 32, uint64_t(1) << 62, UINT64_MAX}) {
    INFO(count);
    rejected(kpth(2, 3, kPathForestSlab, 1, count, {root}), "exceeds the section");
  }
  rejected(kpth(2, 3, kPathForestSlab, 1, 2, {root}), "malformed varint for parent delta");
  rejected(kpth(2, 3, kPathForestSlab, 1, 0, {root}), "trailing bytes");

  // Links: a parent before the first node, itself, or off the current root-to-node path.
  rejected(kpth(2, 3, kPathForestSlab, 1, 1, {{1, 0, 1, 1}}), "node 0: parent delta 1 before the first node");
  rejected(kpth(2, 3, kPathForestSlab, 2, 2, {root, {2, 0, 1, 1}}), "node 1: parent delta 2 before the first node");
  rejected(kpth(2, 3, kPathForestSlab, 2, 2, {root, {UINT64_MAX, 0, 1, 1}}), "before the first node");
  // 0 -> 1, 0 -> 2, then 3 under 1: 1's subtree was closed by 2 (not preorder; as a "tree" walk
  // it would revisit a finished subtree).
  rejected(kpth(2, 3, kPathForestSlab, 4, 4, {root, {1, 0, 1, 1}, {2, 0, 2, 1}, {2, 0, 3, 1}}), "node 3 breaks preorder");
  // Under a node of an earlier tree.
  rejected(kpth(2, 3, kPathForestSlab, 3, 3, {root, {0, 8, 1, 1}, {2, 0, 1, 1}}), "node 2 breaks preorder");
  // BLPP: roots only.
  rejected(kpth(2, 1, kPathForestBlpp, 2, 2, {root, {1, 0, 1, 1}}), "BLPP profile with a non-root node");

  // Levels: a chain one deeper than each kind allows (k-SF 2k-2, kWF k; version 1: 2k-2).
  auto chain = [](uint64_t version, uint64_t k, std::optional<uint64_t> kind, uint32_t depth) {
    std::vector<N> nodes{{0, 9, 1, 1}};
    for (uint32_t i = 1; i < depth; ++i) nodes.push_back({1, 0, 1, 1});
    return kpth(version, k, kind, depth, depth, nodes);
  };
  CHECK(verdict(with_kpth(chain(2, 256, kPathForestSlab, 510))) == "");
  rejected(chain(2, 256, kPathForestSlab, 511), "node 510 is at level 511, deeper than a k-SF with k = 256 allows (510)");
  CHECK(verdict(with_kpth(chain(2, 256, kPathForestWindow, 256))) == "");
  rejected(chain(2, 256, kPathForestWindow, 257), "deeper than a kWF with k = 256 allows (256)");
  rejected(chain(1, 2, std::nullopt, 3), "deeper than a forest with k = 2 allows (2)");

  // Counts: the sum must be `paths`, and must not wrap around 2^64 to get there.
  rejected(kpth(2, 3, kPathForestSlab, 3, 2, {root, {0, 8, 1, 1}}), "counters sum to 2, not paths = 3");
  rejected(kpth(2, 3, kPathForestSlab, 0, 2, {{0, 9, 1, uint64_t(1) << 63}, {0, 8, 1, uint64_t(1) << 63}}),
           "node 1: the counts overflow 64 bits");
  rejected(kpth(2, 3, kPathForestSlab, 4, 3, {{0, 9, 1, UINT64_MAX}, {1, 0, 1, 3}, {1, 0, 2, 2}}), "overflow");

  // Two KPTH sections; KTRC errors.
  std::string v = verdict(thread_file({{hcct::format::kTagPaths, 0, good_kpth()}, {hcct::format::kTagPaths, 0, good_kpth()}}));
  CHECK(v == "dir/77.0.hcct: duplicate KPTH section");
  auto ktrc = [](uint64_t version, uint64_t count, Bytes records) {
    Bytes b;
    varint(b, version);
    varint(b, 0);
    varint(b, count);
    b.insert(b.end(), records.begin(), records.end());
    return b;
  };
  Bytes enter{0, 5};
  for (int i = 0; i < 8; ++i) enter.push_back(i == 0 ? 9 : 0);
  auto with_trace = [&](Bytes trace) {
    return verdict(thread_file({{hcct::format::kTagPaths, 0, good_kpth()}, {hcct::format::kTagPathTrace, 0, trace}}));
  };
  CHECK(with_trace(ktrc(1, 1, enter)) == "");
  CHECK(with_trace(ktrc(2, 1, enter)) == "dir/77.0.hcct: KTRC: unsupported version 2");
  CHECK(with_trace(ktrc(1, UINT64_MAX, enter)) == "dir/77.0.hcct: KTRC: record count exceeds the section");
  CHECK(with_trace(ktrc(1, 1, Bytes{})) == "dir/77.0.hcct: KTRC: record count exceeds the section");
  Bytes bad_kind = enter;
  bad_kind[0] = 7;
  CHECK(with_trace(ktrc(1, 1, bad_kind)) == "dir/77.0.hcct: KTRC: record 0: kind 7");
  Bytes path_rec = enter;
  path_rec[0] = 1;  // a path record without its path id
  CHECK(with_trace(ktrc(1, 1, path_rec)) == "dir/77.0.hcct: KTRC: malformed varint for path id");
}

TEST_CASE("KPTH input: random mutations are read whole or rejected with the file named") {
  std::mt19937_64 rng(20240611);
  Bytes base = good_kpth();
  size_t accepted = 0, rejected_count = 0;
  for (int round = 0; round < 20000; ++round) {
    Bytes b = base;
    int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = b.empty() ? 0 : size_t(rng() % b.size());
      switch (rng() % 5) {
        case 0: if (!b.empty()) b[at] = uint8_t(rng()); break;                        // any byte
        case 1: if (!b.empty()) b[at] ^= uint8_t(1u << (rng() % 8)); break;           // one bit
        case 2: b.insert(b.begin() + long(at), uint8_t(rng())); break;                 // insert
        case 3: if (!b.empty()) b.erase(b.begin() + long(at)); break;                  // delete
        case 4: if (!b.empty()) b[at] = uint8_t(rng() % 2 ? 0xff : 0x80); break;       // varint continuation
      }
    }
    std::optional<an::ThreadPaths> t;
    std::string v = verdict(with_kpth(b), &t);
    if (v.empty()) {
      ++accepted;
      REQUIRE(t);
      check_invariants(t->forest);
    } else {
      ++rejected_count;
      INFO(v);
      REQUIRE(v.rfind("dir/77.0.hcct: KPTH: ", 0) == 0);
    }
  }
  CHECK(accepted > 0);
  CHECK(rejected_count > 10000);
}

TEST_CASE("KPTH input: hcct paths and hcct guide name the file and exit 1") {
  fs::path root = hcct::test::work_directory("tests/kpath/work/kpth_input");
  using hcct::format::kPathForestSlab;
  struct Case {
    const char *name;
    Bytes file;
    std::string problem;
  };
  Bytes good = with_kpth(good_kpth());
  Bytes cut(good.begin(), good.end() - 5);
  Bytes body = good_kpth();
  Bytes cut_body(body.begin(), body.end() - 3);
  std::vector<Case> cases{
      {"truncated-file", cut, "truncated"},
      {"truncated-kpth", with_kpth(cut_body), "KPTH: truncated"},
      {"version", with_kpth(kpth(9, 3, kPathForestSlab, 1, 1, {{0, 9, 1, 1}})), "KPTH: unsupported version 9"},
      {"kind", with_kpth(kpth(2, 3, 5, 1, 1, {{0, 9, 1, 1}})), "KPTH: unknown forest kind 5"},
      {"huge-count", with_kpth(kpth(2, 3, kPathForestSlab, 1, uint64_t(1) << 60, {{0, 9, 1, 1}})), "exceeds the section"},
      {"link", with_kpth(kpth(2, 3, kPathForestSlab, 1, 1, {{5, 9, 1, 1}})), "parent delta 5 before the first node"},
      {"preorder", with_kpth(kpth(2, 3, kPathForestSlab, 3, 3, {{0, 9, 1, 1}, {0, 8, 1, 1}, {2, 0, 1, 1}})), "breaks preorder"},
      {"deep", with_kpth(kpth(2, 2, hcct::format::kPathForestWindow, 3, 3, {{0, 9, 1, 1}, {1, 0, 1, 1}, {1, 0, 1, 1}})), "deeper than a kWF"},
      {"overflow", with_kpth(kpth(2, 3, kPathForestSlab, 0, 2, {{0, 9, 1, uint64_t(1) << 63}, {0, 8, 1, uint64_t(1) << 63}})), "overflow"},
  };
  for (const Case &c : cases) {
    fs::path dir = root / c.name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::path f = dir / "77.0.hcct";
    std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char *>(c.file.data()), long(c.file.size()));
    for (std::string cmd : {std::string(" paths ") + dir.string(), " guide " + dir.string() + " -o " + (root / "guide.json").string()}) {
      hcct::test::CommandResult s = run_any("timeout 60 " + std::string(HCCT_TOOL) + cmd);
      INFO(c.name << ": hcct" << cmd << "\n" << s.output);
      CHECK(s.status == 1);
      CHECK(s.output.rfind("hcct: " + f.string() + ": ", 0) == 0);
      CHECK(s.output.find(c.problem) != std::string::npos);
      CHECK(std::count(s.output.begin(), s.output.end(), '\n') == 1);
    }
  }
  // The valid file through the same commands: no error (the checks above can fail).
  fs::path dir = root / "good";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "77.0.hcct", std::ios::binary).write(reinterpret_cast<const char *>(good.data()), long(good.size()));
  hcct::test::CommandResult s = run_any(std::string(HCCT_TOOL) + " paths " + dir.string());
  INFO(s.output);
  CHECK(s.status == 0);
}

namespace {

// A KPSC body (docs/FORMAT.md): flags, schedule, joins, leaves, dropped tables, then per function
// (version 2: its flags) its start blocks and counts.
struct Starts {
  uint64_t function;
  std::vector<std::pair<uint64_t, uint64_t>> blocks;  // (block, count)
  uint64_t flags = 0;                                  // version 2: bit 0 = per-thread counters
};
Bytes kpsc(uint64_t version, uint64_t flags, uint64_t interval, uint64_t length, const std::vector<Starts> &functions,
           std::optional<uint64_t> claimed = std::nullopt) {
  Bytes b;
  varint(b, version);
  varint(b, flags);
  varint(b, interval);
  varint(b, length);
  varint(b, 3);  // joins
  varint(b, 2);  // leaves
  varint(b, 0);  // dropped tables
  varint(b, claimed.value_or(functions.size()));
  for (const Starts &f : functions) {
    u64(b, f.function);
    if (version >= 2) varint(b, f.flags);
    varint(b, f.blocks.size());
    for (auto [block, count] : f.blocks) {
      varint(b, block);
      varint(b, count);
    }
  }
  return b;
}
const std::vector<Starts> kGoodStarts{{9, {{0, 5}, {2, 40}}}, {7, {{0, 4}}}};

Bytes with_kpsc(const Bytes &body) {
  return thread_file({{hcct::format::kTagPaths, 0, good_kpth()}, {hcct::format::kTagPathSampling, 0, body}});
}

}  // namespace

TEST_CASE("KPSC input: the sampling section is read whole or rejected with the file named") {
  std::optional<an::ThreadPaths> t;
  REQUIRE(verdict(with_kpsc(kpsc(1, 1, 2000000, 200000, kGoodStarts)), &t) == "");
  REQUIRE(t);
  REQUIRE(t->sampling);
  CHECK(t->sampling->bursting);
  CHECK(t->sampling->joins == 3);
  CHECK(t->sampling->leaves == 2);
  CHECK(t->sampling->starts.at({9, 2}) == 40);
  CHECK(t->sampling->starts.at({7, 0}) == 4);
  auto rejected_kpsc = [](const Bytes &body, const std::string &problem) {
    std::string v = verdict(with_kpsc(body));
    INFO(v);
    CHECK(v.rfind("dir/77.0.hcct: KPSC: ", 0) == 0);
    CHECK(v.find(problem) != std::string::npos);
  };
  // Version 2: per-function flags, bit 0 = the thread's own counters.
  REQUIRE(verdict(with_kpsc(kpsc(2, 1, 2000000, 200000, {{9, {{0, 5}, {2, 40}}, 1}, {7, {{0, 4}}}})), &t) == "");
  REQUIRE(t->sampling);
  CHECK(t->sampling->starts.at({9, 2}) == 40);
  CHECK(t->sampling->thread_functions == std::set<uint64_t>{9});
  rejected_kpsc(kpsc(2, 1, 2000000, 200000, {{9, {{0, 5}}, 2}}), "unknown flags 2");
  for (size_t n = 0; n < kpsc(2, 1, 2000000, 200000, kGoodStarts).size(); ++n) {
    Bytes v2 = kpsc(2, 1, 2000000, 200000, kGoodStarts);
    INFO("version 2 truncated to " << n << " of " << v2.size() << " bytes");
    CHECK(verdict(with_kpsc(Bytes(v2.begin(), v2.begin() + long(n)))).rfind("dir/77.0.hcct: KPSC: ", 0) == 0);
  }
  rejected_kpsc(kpsc(3, 1, 2000000, 200000, kGoodStarts), "unsupported version 3");
  rejected_kpsc(kpsc(1, 4, 2000000, 200000, kGoodStarts), "unknown flags");
  rejected_kpsc(kpsc(1, 1, 200000, 2000000, kGoodStarts), "burst length above the interval");
  rejected_kpsc(kpsc(1, 1, 2000000, 200000, kGoodStarts, uint64_t(1) << 60), "exceeds the section");
  rejected_kpsc(kpsc(1, 1, 2000000, 200000, {{9, {{1, 5}}}}), "not 0 then ascending");
  rejected_kpsc(kpsc(1, 1, 2000000, 200000, {{9, {{0, 5}, {3, 1}, {3, 1}}}}), "not 0 then ascending");
  rejected_kpsc(kpsc(1, 1, 2000000, 200000, {{9, {}}, {7, {{0, 4}}}}), "start count 0");
  rejected_kpsc(kpsc(1, 1, 2000000, 200000, {{9, {{0, UINT64_MAX}}}, {9, {{0, 1}}}}), "overflow");
  Bytes trailing = kpsc(1, 1, 2000000, 200000, kGoodStarts);
  trailing.push_back(0);
  rejected_kpsc(trailing, "trailing bytes");
  // Every truncation.
  Bytes body = kpsc(1, 1, 2000000, 200000, kGoodStarts);
  for (size_t n = 0; n < body.size(); ++n) {
    INFO("truncated to " << n << " of " << body.size() << " bytes");
    std::string v = verdict(with_kpsc(Bytes(body.begin(), body.begin() + long(n))));
    CHECK(v.rfind("dir/77.0.hcct: KPSC: ", 0) == 0);
  }
  // Two KPSC sections.
  Bytes twice = thread_file({{hcct::format::kTagPaths, 0, good_kpth()},
                             {hcct::format::kTagPathSampling, 0, body},
                             {hcct::format::kTagPathSampling, 0, body}});
  CHECK(verdict(twice).find("duplicate KPSC section") != std::string::npos);
}

TEST_CASE("KPSC input: files of one process that disagree on a function's per-thread counters are rejected") {
  fs::path dir = fs::temp_directory_path() / ("hcct-kpsc-kinds-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const std::string &name, const Bytes &file) {
    std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char *>(file.data()), long(file.size()));
  };
  write("77.0.hcct", with_kpsc(kpsc(2, 1, 2000000, 200000, {{9, {{0, 5}}, 1}})));
  write("77.1.hcct", with_kpsc(kpsc(2, 1, 2000000, 200000, {{9, {{0, 6}}, 1}})));
  CHECK(an::read_thread_paths(dir).size() == 2);  // agreeing files are read
  write("77.2.hcct", with_kpsc(kpsc(2, 1, 2000000, 200000, {{9, {{0, 7}}, 0}})));
  try {
    an::read_thread_paths(dir);
    FAIL("the disagreeing file was read");
  } catch (const an::FormatError &e) {
    std::string what = e.what();
    INFO(what);
    CHECK(what.find("per-thread") != std::string::npos);
    CHECK(what.find("77.") != std::string::npos);
  }
  fs::remove_all(dir);
}
