// Thread merge against a path-keyed oracle.
#include <catch2/catch.hpp>
#include <map>

#include "hcct/analysis/merge.h"
#include "hcct/analysis/reader.h"
#include "hcct/analysis/writer.h"
#include "testutil.h"

using namespace hcct::analysis;

namespace {

using Path = std::vector<std::pair<uint64_t, uint64_t>>;
struct Agg {
  uint64_t count = 0;
  uint8_t flags = 0;
};

void add_paths(const ThreadProfile &p, std::map<Path, Agg> &out) {
  std::vector<Path> paths(p.nodes.size());
  for (uint32_t i = 1; i < p.nodes.size(); ++i) {
    paths[i] = paths[p.nodes[i].parent];
    paths[i].push_back({p.nodes[i].routine, p.nodes[i].call_site});
    Agg &a = out[paths[i]];
    a.count += p.nodes[i].count;
    a.flags |= p.nodes[i].flags;
  }
}

}  // namespace

TEST_CASE("merged tree has the summed count of every path", "[merge]") {
  std::mt19937_64 rng(31);
  for (int round = 0; round < 60; ++round) {
    Mode mode = round % 2 ? Mode::hcct : Mode::cct;
    std::vector<ThreadProfile> threads;
    size_t nthreads = 1 + rng() % 5;
    for (size_t t = 0; t < nthreads; ++t) {
      threads.push_back(hcct::test::make_profile(hcct::test::random_tree(rng, 1 + rng() % 500, 6, 2), mode, rng, 9, t));
      threads.back().meta.min_count = 1 + t;
      threads.back().meta.dropped = t;
      threads.back().meta.max_depth = 10 * t;
    }
    threads.back().meta.status = ThreadStatus::live_at_exit;
    ThreadProfile m = merge_threads(threads);

    std::map<Path, Agg> want, got;
    for (auto &t : threads) add_paths(t, want);
    add_paths(m, got);
    REQUIRE(got.size() == want.size());
    for (auto &[path, agg] : want) {
      REQUIRE(got.count(path));
      CHECK(got[path].count == agg.count);
      CHECK(got[path].flags == agg.flags);
    }
    // Each path once: the merge collapses duplicate siblings.
    CHECK(m.nodes.size() == want.size() + 1);

    uint64_t calls = 0, min_count = 0, counters = 0, dropped = 0;
    for (auto &t : threads) {
      calls += t.meta.calls;
      min_count += t.meta.min_count;
      counters += t.meta.counters;
      dropped += t.meta.dropped;
    }
    CHECK(m.meta.calls == calls);
    CHECK(m.meta.dropped == dropped);
    CHECK(m.meta.max_depth == 10 * (nthreads - 1));
    CHECK(m.meta.status == ThreadStatus::live_at_exit);
    if (mode == Mode::hcct) {
      CHECK(m.meta.min_count == min_count);
      CHECK(m.meta.counters == counters);
    }
    REQUIRE(m.meta.find_extra("merged_threads"));
    CHECK(m.meta.find_extra("merged_threads")->size() == 2 * nthreads - 1);
    CHECK(m.modules.size() == 2);  // identical maps collapse

    // The result is a valid file (preorder, counts consistent with calls) and round-trips.
    ThreadProfile back = parse_profile(encode_profile(m), "merged");
    CHECK(back.nodes == m.nodes);
  }
}

TEST_CASE("merge refuses incompatible threads", "[merge]") {
  auto a = hcct::test::small_profile(Mode::cct);
  auto b = hcct::test::small_profile(Mode::hcct);
  std::vector<ThreadProfile> mixed{a, b};
  CHECK_THROWS_WITH(merge_threads(mixed), Catch::Contains("hcct mode"));
  auto c = a;
  c.meta.key = KeyKind::routine;
  std::vector<ThreadProfile> keys{a, c};
  CHECK_THROWS_AS(merge_threads(keys), std::invalid_argument);
  auto d = a;
  d.meta.pid = 5;
  std::vector<ThreadProfile> pids{a, d};
  CHECK_THROWS_WITH(merge_threads(pids), Catch::Contains("another process"));
  CHECK_THROWS_AS(merge_threads(std::span<const ThreadProfile>()), std::invalid_argument);
}

TEST_CASE("merging one thread reproduces it", "[merge]") {
  auto a = hcct::test::small_profile(Mode::cct);
  std::vector<ThreadProfile> one{a};
  ThreadProfile m = merge_threads(one);
  CHECK(m.nodes == a.nodes);
  CHECK(m.meta.calls == a.meta.calls);
}

// ---- Merging the exact CCTs of threads = the CCT of their merged call streams.

namespace {

// A random call stream: +routine/site enters, 0 exits (never below the thread start).
struct Event {
  bool enter;
  uint64_t routine, site;
};
std::vector<Event> random_stream(std::mt19937_64 &rng, size_t n) {
  std::vector<Event> s;
  size_t depth = 0;
  for (size_t i = 0; i < n; ++i) {
    if (depth && rng() % 5 < 2) {
      s.push_back({false, 0, 0});
      --depth;
    } else {
      s.push_back({true, 0x401000 + 0x10 * (rng() % 5), 0x402000 + rng() % 3});
      ++depth;
    }
  }
  return s;
}

// The brute-force CCT of streams that each start at the thread start: context -> entries.
std::map<Path, uint64_t> cct_of(const std::vector<std::vector<Event>> &streams) {
  std::map<Path, uint64_t> out;
  for (const auto &s : streams) {
    Path path;
    for (const Event &e : s) {
      if (e.enter) {
        path.push_back({e.routine, e.site});
        ++out[path];
      } else {
        path.pop_back();
      }
    }
  }
  return out;
}

// A cct-mode profile holding `paths` (map order is a preorder: a prefix sorts before its extensions).
ThreadProfile profile_of(const std::map<Path, uint64_t> &paths, uint64_t seq) {
  std::mt19937_64 rng(1);
  ThreadProfile p = hcct::test::make_profile({Node{}}, Mode::cct, rng, 9, seq);
  std::map<Path, uint32_t> index;
  uint64_t calls = 0;
  for (const auto &[path, count] : paths) {
    Path parent(path.begin(), path.end() - 1);
    Node n;
    n.routine = path.back().first;
    n.call_site = path.back().second;
    n.count = count;
    n.parent = parent.empty() ? 0 : index.at(parent);
    index[path] = uint32_t(p.nodes.size());
    p.nodes.push_back(n);
    calls += count;
  }
  p.meta.calls = calls;
  return p;
}

std::map<Path, uint64_t> counts_of(const ThreadProfile &p) {
  std::map<Path, Agg> agg;
  add_paths(p, agg);
  std::map<Path, uint64_t> out;
  for (auto &[k, v] : agg) out[k] = v.count;
  return out;
}

}  // namespace

TEST_CASE("merging per-thread CCTs gives the CCT of the merged call streams", "[merge][oracle]") {
  std::mt19937_64 rng(77);
  for (int round = 0; round < 40; ++round) {
    std::vector<std::vector<Event>> streams;
    std::vector<ThreadProfile> threads;
    for (uint64_t t = 0; t < 1 + rng() % 5; ++t) {
      streams.push_back(random_stream(rng, rng() % 2000));
      threads.push_back(profile_of(cct_of({streams.back()}), t));
    }
    ThreadProfile m = merge_threads(threads);
    CHECK(counts_of(m) == cct_of(streams));
    // The merge is a valid profile.
    ThreadProfile back = parse_profile(encode_profile(m), "merged");
    CHECK(back.nodes == m.nodes);
  }
}

TEST_CASE("merging across processes normalises addresses to module offsets", "[merge][aslr]") {
  std::mt19937_64 rng(5);
  ThreadProfile a = hcct::test::make_profile(hcct::test::random_tree(rng, 300, 6, 2), Mode::cct, rng, 100, 0);
  // Run b: the same program loaded 0x10000000 higher (ASLR), with one more library whose range is
  // where a's executable lies.
  const uint64_t shift = 0x10000000;
  ThreadProfile b = a;
  b.meta.pid = 200;
  for (Module &mod : b.modules) {
    mod.bias += shift;
    mod.lo += shift;
    mod.hi += shift;
  }
  for (size_t i = 1; i < b.nodes.size(); ++i) {
    b.nodes[i].routine += shift;
    b.nodes[i].call_site += shift;
  }
  b.modules.push_back({0, 0x401000, 0x402000, "/lib/other.so", {7}});
  b.nodes.push_back({0x401800, 0, 5, 0, 0});  // a context in the other library, below the root
  b.meta.calls += 5;
  b.meta.pid = 200;

  std::vector<const ThreadProfile *> in{&a, &b};
  ThreadProfile m = merge_profiles(in);
  CHECK(*m.meta.find_extra("merged_from") == "100.0,200.0");
  CHECK(m.meta.find_extra("merged_threads") == nullptr);
  CHECK(m.meta.calls == a.meta.calls + b.meta.calls);
  // a's contexts appear once, with double counts, at a's addresses.
  std::map<Path, uint64_t> want = counts_of(a);
  for (auto &[k, v] : want) v *= 2;
  std::map<Path, uint64_t> got = counts_of(m);
  // The other library was moved away from a's executable; its context keeps its offset.
  REQUIRE(m.modules.size() == a.modules.size() + 1);
  const Module &moved = m.modules.back();
  CHECK(moved.path == "/lib/other.so");
  CHECK((moved.hi <= 0x401000 || moved.lo >= 0x500000));
  CHECK(moved.lo - moved.bias == 0x401000);
  Path other{{0x401800 - 0x401000 + moved.lo, 0}};
  REQUIRE(got.count(other));
  CHECK(got[other] == 5);
  got.erase(other);
  CHECK(got == want);
  // Readable by every tool.
  ThreadProfile back = parse_profile(encode_profile(m), "merged");
  CHECK(back.nodes == m.nodes);
  // Within one process (merge_threads) the pid must agree.
  std::vector<const ThreadProfile *> two{&a, &b};
  CHECK_THROWS_AS(merge_threads(std::span<const ThreadProfile *const>(two)), std::invalid_argument);
}

namespace {

// A profile of `n` modules of 64 KiB each, side by side from `base`, with one context per module
// (module k's function called from the root) counted k + 1 times.
ThreadProfile many_modules(size_t n, uint64_t base, uint64_t pid) {
  std::mt19937_64 rng(1);
  ThreadProfile p = hcct::test::make_profile({Node{}}, Mode::cct, rng, pid, 0);
  p.modules.clear();
  p.meta.calls = 0;
  for (size_t k = 0; k < n; ++k) {
    const uint64_t lo = base + (uint64_t(k) << 16);
    p.modules.push_back({lo, lo, lo + 0x10000, "/lib/m" + std::to_string(k) + ".so", {uint8_t(k), uint8_t(k >> 8)}});
    p.nodes.push_back({lo + 0x100, 0, k + 1, 0, 0});
    p.meta.calls += k + 1;
  }
  return p;
}

}  // namespace

TEST_CASE("merging runs of many modules lines every module up with its first occurrence", "[merge][aslr]") {
  // Two runs of a program with 20,000 libraries, the second loaded elsewhere and in reverse order;
  // a third run whose libraries sit where the first run's are but are other files (other build-ids).
  constexpr size_t kModules = 20000;
  ThreadProfile a = many_modules(kModules, 0x7f0000000000, 100);
  ThreadProfile b = many_modules(kModules, 0x7e0000000000, 200);
  std::reverse(b.modules.begin(), b.modules.end());
  ThreadProfile c = many_modules(kModules, 0x7f0000000000, 300);
  for (Module &m : c.modules) m.build_id.push_back(0xcc);
  std::vector<const ThreadProfile *> in{&a, &b, &c};
  ThreadProfile m = merge_profiles(in);
  REQUIRE(m.modules.size() == 2 * kModules);  // a's (b's are the same objects), then c's, moved
  for (size_t k = 0; k < kModules; ++k) CHECK((m.modules[k] == a.modules[k]));
  uint64_t a_top = a.modules.back().hi;
  for (size_t k = kModules; k < m.modules.size(); ++k) {
    REQUIRE(m.modules[k].lo >= a_top);  // c's libraries collide with a's: placed above everything
    CHECK(m.modules[k].lo - m.modules[k].bias == c.modules[k - kModules].lo - c.modules[k - kModules].bias);
  }
  // a's and b's contexts add up at a's addresses; c's stay apart in its moved modules.
  REQUIRE(m.nodes.size() == 1 + 2 * kModules);
  std::map<uint64_t, uint64_t> count_at;
  for (size_t i = 1; i < m.nodes.size(); ++i) count_at[m.nodes[i].routine] += m.nodes[i].count;
  for (size_t k = 0; k < kModules; ++k) CHECK(count_at[a.modules[k].lo + 0x100] == 2 * (k + 1));
  CHECK(m.meta.calls == a.meta.calls + b.meta.calls + c.meta.calls);
  ThreadProfile back = parse_profile(encode_profile(m), "merged");
  CHECK(back.nodes == m.nodes);
}

TEST_CASE("ModuleMap finds the first module in recorded order, overlaps included", "[merge]") {
  std::vector<Module> mods{{0, 0x1000, 0x3000, "a", {}}, {0, 0x2000, 0x5000, "b", {}}, {0, 0x4000, 0x4000, "empty", {}},
                           {0, 0x0800, 0x6000, "c", {}}, {0, 0x9000, 0xa000, "d", {}}};
  ModuleMap map(mods);
  // Brute force over every address near a boundary.
  for (uint64_t addr = 0; addr < 0xb000; addr += 0x80) {
    int64_t want = -1;
    for (size_t i = 0; i < mods.size() && want < 0; ++i)
      if (mods[i].contains(addr)) want = int64_t(i);
    INFO(addr);
    CHECK(map.find(addr) == want);
  }
  CHECK(ModuleMap().find(0x1000) == -1);
}

TEST_CASE("merged META: every key by its own rule", "[merge]") {
  std::mt19937_64 rng(3);
  ThreadProfile a = hcct::test::make_profile(hcct::test::random_tree(rng, 50, 6, 2), Mode::cct, rng, 100, 0);
  ThreadProfile b = hcct::test::make_profile(hcct::test::random_tree(rng, 50, 6, 2), Mode::cct, rng, 100, 1);
  a.meta.lost = 10;
  b.meta.lost = 5;
  a.meta.unmatched_exits = 1;
  b.meta.unmatched_exits = 2;
  a.meta.start_ns = 1000, a.meta.end_ns = 3000;
  b.meta.start_ns = 2000, b.meta.end_ns = 2500;
  a.meta.extra = {{"same", "x"}, {"differs", "1"}, {"bursts", "3"}};
  b.meta.extra = {{"same", "x"}, {"differs", "2"}, {"bursts", "4"}};
  b.meta.cmdline = {"other", "command"};
  std::vector<const ThreadProfile *> in{&a, &b};
  ThreadProfile m = merge_threads(std::span<const ThreadProfile *const>(in));
  CHECK(m.meta.lost == 15);
  CHECK(m.meta.unmatched_exits == 3);
  CHECK(m.meta.all_calls() == a.meta.all_calls() + b.meta.all_calls());
  CHECK(m.meta.start_ns == 1000);
  CHECK(m.meta.end_ns == 3000);
  CHECK(*m.meta.find_extra("thread_time_ns") == "2500");  // 2000 + 500, not the 2000 span
  CHECK(*m.meta.find_extra("same") == "x");
  CHECK(m.meta.find_extra("differs") == nullptr);
  CHECK(*m.meta.find_extra("merged_dropped_keys") == "differs");
  CHECK(*m.meta.find_extra("bursts") == "7");
  CHECK(m.meta.cmdline == a.meta.cmdline);
  const std::string *commands = m.meta.find_extra("merged_commands");
  REQUIRE(commands);
  CHECK(std::count(commands->begin(), commands->end(), '\x1e') == 1);
  CHECK_THAT(*commands, Catch::Contains("other\x1f" "command"));
  // Readable, and a second merge keeps the sums.
  ThreadProfile back = parse_profile(encode_profile(m), "merged");
  CHECK(back.meta.lost == 15);
  std::vector<const ThreadProfile *> again{&back, &a};
  ThreadProfile m2 = merge_profiles(again);
  CHECK(*m2.meta.find_extra("thread_time_ns") == "4500");
}

TEST_CASE("merged bursting threads are scaled each by its own sampled fraction", "[merge]") {
  std::mt19937_64 rng(4);
  for (Mode mode : {Mode::cct, Mode::hcct}) {
    ThreadProfile a = hcct::test::make_profile(hcct::test::random_tree(rng, 80, 6, 2), mode, rng, 100, 0);
    ThreadProfile b = hcct::test::make_profile(hcct::test::random_tree(rng, 80, 6, 2), mode, rng, 100, 1);
    a.meta.extra = {{"sampled_fraction", "0.5"}, {"sampled_fraction_basis", "events"}};
    b.meta.extra = {{"sampled_fraction", "0.125"}, {"sampled_fraction_basis", "time"}};
    b.meta.lost = 3;
    std::vector<const ThreadProfile *> in{&a, &b};
    ThreadProfile m = merge_threads(std::span<const ThreadProfile *const>(in));
    CHECK(m.meta.find_extra("sampled_fraction") == nullptr);
    CHECK(*m.meta.find_extra("burst_scaled") == "1");
    CHECK(*m.meta.find_extra("sampled_fraction_basis") == "time");
    CHECK(m.meta.lost == 24);
    std::map<Path, Agg> want;
    ThreadProfile sa = a, sb = b;
    for (Node &n : sa.nodes) n.count *= 2;
    for (Node &n : sb.nodes) n.count *= 8;
    add_paths(sa, want);
    add_paths(sb, want);
    std::map<Path, Agg> got;
    add_paths(m, got);
    REQUIRE(got.size() == want.size());
    for (const auto &[path, agg] : want) CHECK(got[path].count == agg.count);
    // Valid: in cct mode the scaled counts still sum to calls exactly.
    ThreadProfile back = parse_profile(encode_profile(m), "merged");
    CHECK(back.meta.calls == m.meta.calls);
    // Equal fractions need no scaling: the counts stay sampled and the fraction is kept.
    b.meta.extra = a.meta.extra;
    ThreadProfile same = merge_threads(std::span<const ThreadProfile *const>(in));
    CHECK(*same.meta.find_extra("sampled_fraction") == "0.5");
    CHECK(same.meta.find_extra("burst_scaled") == nullptr);
  }
}

// Time (issue 17): each context's self samples add like its counts; META samples, samples_lost and
// time_min_count add; inputs sampled at different rates are refused; without time everywhere, the
// merge has none.
TEST_CASE("merge adds self time samples path by path", "[merge][time]") {
  std::mt19937_64 rng(77);
  for (int round = 0; round < 20; ++round) {
    Mode mode = round % 2 ? Mode::hcct : Mode::cct;
    std::vector<ThreadProfile> threads;
    for (size_t t = 0; t < 1 + rng() % 4; ++t) {
      ThreadProfile p = hcct::test::make_profile(hcct::test::random_tree(rng, 1 + rng() % 300, 6, 2), mode, rng, 9, t);
      p.meta.time = "cpu";
      p.meta.sample_period_ns = 1000000;
      p.meta.samples_lost = t;
      p.meta.time_min_count = mode == Mode::hcct ? 2 : 0;
      p.samples.assign(p.nodes.size(), 0);
      for (auto &s : p.samples) s = rng() % 3 == 0 ? rng() % 50 : 0;
      p.meta.samples = 0;
      for (uint64_t s : p.samples) p.meta.samples += s;
      threads.push_back(std::move(p));
    }
    ThreadProfile m = merge_threads(threads);
    std::map<Path, uint64_t> want, got;
    uint64_t samples = 0, lost = 0, root = 0;
    for (const ThreadProfile &t : threads) {
      std::vector<Path> paths(t.nodes.size());
      for (uint32_t i = 1; i < t.nodes.size(); ++i) {
        paths[i] = paths[t.nodes[i].parent];
        paths[i].push_back({t.nodes[i].routine, t.nodes[i].call_site});
        want[paths[i]] += t.samples[i];
      }
      root += t.samples[0];
      samples += t.meta.samples;
      lost += t.meta.samples_lost;
    }
    REQUIRE(m.meta.timed());
    REQUIRE(m.samples.size() == m.nodes.size());
    std::vector<Path> paths(m.nodes.size());
    for (uint32_t i = 1; i < m.nodes.size(); ++i) {
      paths[i] = paths[m.nodes[i].parent];
      paths[i].push_back({m.nodes[i].routine, m.nodes[i].call_site});
      got[paths[i]] += m.samples[i];
    }
    CHECK(got == want);
    CHECK(m.samples[0] == root);
    CHECK(m.meta.samples == samples);
    CHECK(m.meta.samples_lost == lost);
    CHECK(m.meta.time_min_count == (mode == Mode::hcct ? 2 * threads.size() : 0));
    ThreadProfile back = parse_profile(encode_profile(m), "merged");
    CHECK(back.samples == m.samples);
  }
  auto a = hcct::test::small_profile(Mode::cct);
  a.meta.time = "cpu";
  a.meta.sample_period_ns = 1000000;
  a.samples.assign(a.nodes.size(), 0);
  auto b = a;
  b.meta.sample_period_ns = 500000;
  std::vector<ThreadProfile> rates{a, b};
  CHECK_THROWS_WITH(merge_threads(rates), Catch::Contains("another rate"));
  auto c = hcct::test::small_profile(Mode::cct);
  std::vector<ThreadProfile> mixed{a, c};
  ThreadProfile m = merge_threads(mixed);
  CHECK(!m.meta.timed());
  CHECK(m.samples.empty());
}
