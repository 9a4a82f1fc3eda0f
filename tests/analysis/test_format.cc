// Reader/writer: round trips, exhaustive corruption, hand-made hostile files, directory loading.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>

#include "hcct/analysis/reader.h"
#include "hcct/analysis/writer.h"
#include "testutil.h"

using namespace hcct::analysis;
using hcct::test::TempDir;
namespace format = hcct::format;

namespace {

const std::string kName = "sample.hcct";

// Expects parse_profile to throw FormatError naming the file, and returns the message.
std::string rejection(const Bytes &bytes, const std::string &name = kName) {
  try {
    parse_profile(bytes, name);
  } catch (const FormatError &e) {
    std::string msg = e.what();
    CHECK(msg.rfind(name + ": ", 0) == 0);
    return msg;
  }
  FAIL("accepted: expected a FormatError");
  return {};
}

// Checks the invariants profile.h promises for anything the reader returns, independently of it.
void check_invariants(const ThreadProfile &p) {
  REQUIRE(!p.nodes.empty());
  CHECK(p.nodes[0].routine == 0);
  CHECK(p.nodes[0].call_site == 0);
  CHECK(p.nodes[0].count == 0);
  for (size_t i = 1; i < p.nodes.size(); ++i) REQUIRE(p.nodes[i].parent < i);
}

struct Parts {
  Bytes meta, mods, tree;
};
Parts parts_of(const ThreadProfile &p) {
  return {encode_meta(meta_entries(p.meta)), encode_modules(p.modules), encode_tree(p.nodes)};
}
Bytes assemble(const Parts &parts) {
  Section s[3] = {{format::kTagMeta, 0, parts.meta}, {format::kTagModules, 0, parts.mods}, {format::kTagTree, 0, parts.tree}};
  return encode_file(s);
}

Bytes varint(uint64_t v) {
  unsigned char buf[format::kMaxVarintBytes];
  size_t n = format::encode_varint(v, buf);
  return Bytes(buf, buf + n);
}
void append(Bytes &b, const Bytes &more) { b.insert(b.end(), more.begin(), more.end()); }

// A CCT body from explicit (delta, routine, site, count, flags) records.
struct RawNode {
  uint64_t delta, routine, site, count;
  uint8_t flags;
};
Bytes raw_tree(uint64_t count, const std::vector<RawNode> &nodes) {
  Bytes b = varint(count);
  for (const RawNode &n : nodes) {
    append(b, varint(n.delta));
    append(b, varint(n.routine));
    append(b, varint(n.site));
    append(b, varint(n.count));
    b.push_back(n.flags);
  }
  return b;
}

std::vector<std::pair<std::string, std::string>> meta_without(const ThreadMeta &m, const std::string &key) {
  auto e = meta_entries(m);
  std::erase_if(e, [&](const auto &kv) { return kv.first == key; });
  return e;
}
std::vector<std::pair<std::string, std::string>> meta_with(const ThreadMeta &m, const std::string &key,
                                                            const std::string &value) {
  auto e = meta_entries(m);
  for (auto &kv : e)
    if (kv.first == key) kv.second = value;
  return e;
}

}  // namespace

TEST_CASE("write then read gives back the same profile", "[format]") {
  for (Mode mode : {Mode::cct, Mode::hcct, Mode::empty}) {
    ThreadProfile p = hcct::test::small_profile(mode == Mode::empty ? Mode::cct : mode);
    if (mode == Mode::empty) {
      p.meta.mode = Mode::empty;
      p.nodes.resize(1);
    }
    Bytes b = encode_profile(p);
    ThreadProfile q = parse_profile(b, kName);
    CHECK(q.source == kName);
    CHECK(q.nodes == p.nodes);
    CHECK(q.modules == p.modules);
    CHECK(meta_entries(q.meta) == meta_entries(p.meta));
    CHECK(q.meta.cmdline == p.meta.cmdline);
    REQUIRE(q.meta.extra.size() == 1);
    CHECK(*q.meta.find_extra("future_key") == "some value");
    CHECK(encode_profile(q) == b);  // byte-identical re-encoding
  }
}

TEST_CASE("random profiles round-trip through files", "[format]") {
  TempDir dir;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20; ++round) {
    Mode mode = round % 2 ? Mode::hcct : Mode::cct;
    ThreadProfile p = hcct::test::make_profile(hcct::test::random_tree(rng, 1 + rng() % 3000), mode, rng);
    auto file = dir / profile_file_name(p.meta.pid, p.meta.thread_seq);
    write_profile(file, p);
    ThreadProfile q = read_profile(file);
    CHECK(q.nodes == p.nodes);
    CHECK(meta_entries(q.meta) == meta_entries(p.meta));
  }
  // The writer leaves no temporaries behind.
  for (auto &e : std::filesystem::directory_iterator(dir.path())) CHECK(e.path().filename().string()[0] != '.');
}

TEST_CASE("epsilon survives the round trip exactly", "[format]") {
  ThreadProfile p = hcct::test::small_profile(Mode::hcct);
  for (double eps : {2e-5, 1.0 / 3, 1e-9, 1.0}) {
    p.meta.epsilon = eps;
    CHECK(parse_profile(encode_profile(p), kName).meta.epsilon == eps);
  }
}

TEST_CASE("every truncation of a valid file is rejected", "[format][corruption]") {
  Bytes good = encode_profile(hcct::test::small_profile());
  REQUIRE_NOTHROW(parse_profile(good, kName));
  for (size_t len = 0; len < good.size(); ++len) {
    Bytes cut(good.begin(), good.begin() + long(len));
    INFO("length " << len);
    rejection(cut);
  }
  Bytes longer = good;
  longer.push_back(0);
  CHECK_THAT(rejection(longer), Catch::Contains("trailing garbage"));
}

TEST_CASE("every flipped bit and every inverted byte is rejected", "[format][corruption]") {
  Bytes good = encode_profile(hcct::test::small_profile());
  for (size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      Bytes bad = good;
      bad[i] ^= uint8_t(1u << bit);
      INFO("byte " << i << " bit " << bit);
      rejection(bad);
    }
    Bytes bad = good;
    bad[i] = uint8_t(~bad[i]);
    INFO("byte " << i << " inverted");
    rejection(bad);
  }
}

TEST_CASE("resealed random mutations are rejected or yield a valid profile", "[format][corruption]") {
  // With the hash fixed up, mutations reach the section parsers. Some produce valid files (a
  // changed address); all others must fail cleanly.
  std::mt19937_64 rng(99);
  Bytes good = encode_profile(hcct::test::small_profile());
  size_t rejected = 0;
  for (int round = 0; round < 20000; ++round) {
    Bytes bad = good;
    int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) bad[format::kHeaderSize + rng() % (bad.size() - format::kHeaderSize)] = uint8_t(rng());
    reseal(bad);
    try {
      check_invariants(parse_profile(bad, kName));
    } catch (const FormatError &e) {
      ++rejected;
      REQUIRE(std::string(e.what()).rfind(kName + ": ", 0) == 0);
    }
  }
  CHECK(rejected > 10000);
}

TEST_CASE("header problems", "[format][hostile]") {
  Bytes good = encode_profile(hcct::test::small_profile());
  SECTION("bad magic") {
    Bytes b = good;
    b[0] = 'X';
    CHECK_THAT(rejection(b), Catch::Contains("bad magic"));
  }
  SECTION("future version") {
    Bytes b = good;
    b[8] = 3;
    reseal(b);
    CHECK_THAT(rejection(b), Catch::Contains("version 3"));
  }
  SECTION("version 0") {
    Bytes b = good;
    b[8] = 0;
    reseal(b);
    CHECK_THAT(rejection(b), Catch::Contains("version 0"));
  }
  SECTION("payload size mismatch") {
    Bytes b = good;
    b[16] ^= 1;
    CHECK_THAT(rejection(b), Catch::Contains("payload bytes"));
  }
  SECTION("hash mismatch") {
    Bytes b = good;
    b.back() ^= 1;
    CHECK_THAT(rejection(b), Catch::Contains("hash mismatch"));
  }
  SECTION("section count too high") {
    Bytes b = good;
    b[12] = 4;
    reseal(b);
    CHECK_THAT(rejection(b), Catch::Contains("truncated section header"));
  }
  SECTION("section count too low") {
    Bytes b = good;
    b[12] = 2;
    reseal(b);
    CHECK_THAT(rejection(b), Catch::Contains("after the 2 sections"));
  }
  SECTION("section count 2^32-1 terminates quickly") {
    Bytes b = good;
    b[12] = b[13] = b[14] = b[15] = 0xff;
    reseal(b);
    rejection(b);
  }
}

TEST_CASE("section-level problems", "[format][hostile]") {
  ThreadProfile p = hcct::test::small_profile();
  Parts parts = parts_of(p);
  SECTION("duplicate META") {
    Section s[4] = {{format::kTagMeta, 0, parts.meta}, {format::kTagModules, 0, parts.mods},
                    {format::kTagTree, 0, parts.tree}, {format::kTagMeta, 0, parts.meta}};
    CHECK_THAT(rejection(encode_file(s)), Catch::Contains("duplicate 'META'"));
  }
  SECTION("duplicate CCT") {
    Section s[4] = {{format::kTagMeta, 0, parts.meta}, {format::kTagTree, 0, parts.tree},
                    {format::kTagModules, 0, parts.mods}, {format::kTagTree, 0, parts.tree}};
    CHECK_THAT(rejection(encode_file(s)), Catch::Contains("duplicate 'CCT '"));
  }
  SECTION("missing sections") {
    Section no_meta[2] = {{format::kTagModules, 0, parts.mods}, {format::kTagTree, 0, parts.tree}};
    CHECK_THAT(rejection(encode_file(no_meta)), Catch::Contains("missing META"));
    Section no_mods[2] = {{format::kTagMeta, 0, parts.meta}, {format::kTagTree, 0, parts.tree}};
    CHECK_THAT(rejection(encode_file(no_mods)), Catch::Contains("missing MODS"));
    Section no_tree[2] = {{format::kTagMeta, 0, parts.meta}, {format::kTagModules, 0, parts.mods}};
    CHECK_THAT(rejection(encode_file(no_tree)), Catch::Contains("missing 'CCT '"));
  }
  SECTION("unknown sections are skipped") {
    Section s[4] = {{format::tag('X', 'T', 'R', 'A'), 0, Bytes(100, 0xab)}, {format::kTagMeta, 0, parts.meta},
                    {format::kTagModules, 0, parts.mods}, {format::kTagTree, 0, parts.tree}};
    CHECK(parse_profile(encode_file(s), kName).nodes == p.nodes);
  }
  SECTION("reserved field not zero") {
    Section s[3] = {{format::kTagMeta, 7, parts.meta}, {format::kTagModules, 0, parts.mods}, {format::kTagTree, 0, parts.tree}};
    CHECK_THAT(rejection(encode_file(s)), Catch::Contains("reserved"));
  }
  SECTION("section length past the payload end") {
    Bytes b = assemble(parts);
    // The first section's length field sits at 32 + 8.
    b[32 + 8 + 7] = 0x10;
    reseal(b);
    CHECK_THAT(rejection(b), Catch::Contains("runs past the payload end"));
  }
}

TEST_CASE("META problems", "[format][hostile]") {
  ThreadProfile p = hcct::test::small_profile();
  Parts parts = parts_of(p);
  auto with_meta = [&](const Bytes &meta) {
    Parts q = parts;
    q.meta = meta;
    return assemble(q);
  };
  SECTION("every required key is required") {
    for (const auto &[key, value] : meta_entries(p.meta)) {
      if (key == "future_key") continue;
      INFO(key);
      if (key == "lost" || key == "unmatched_exits") {  // optional: files of older runtimes lack them
        ThreadProfile q = parse_profile(with_meta(encode_meta(meta_without(p.meta, key))), kName);
        CHECK(q.meta.lost == 0);
        CHECK(q.meta.unmatched_exits == 0);
        continue;
      }
      CHECK_THAT(rejection(with_meta(encode_meta(meta_without(p.meta, key)))),
                 Catch::Contains("missing key '" + key + "'"));
    }
  }
  SECTION("hcct keys are optional in cct mode") {
    ThreadProfile c = hcct::test::small_profile(Mode::cct);
    auto e = meta_entries(c.meta);
    REQUIRE(std::none_of(e.begin(), e.end(), [](auto &kv) { return kv.first == "epsilon"; }));
    CHECK_NOTHROW(parse_profile(encode_profile(c), kName));
  }
  SECTION("duplicate key") {
    auto e = meta_entries(p.meta);
    e.push_back({"pid", "77"});
    CHECK_THAT(rejection(with_meta(encode_meta(e))), Catch::Contains("duplicate key 'pid'"));
  }
  SECTION("numbers must parse fully") {
    for (const char *bad : {"", "12a", "-1", "+1", " 1", "1 ", "0x10", "18446744073709551616", "1e3"}) {
      INFO("'" << bad << "'");
      CHECK_THAT(rejection(with_meta(encode_meta(meta_with(p.meta, "calls", bad)))),
                 Catch::Contains("for key 'calls'"));
    }
    CHECK_NOTHROW(parse_profile(with_meta(encode_meta(meta_with(p.meta, "dropped", "18446744073709551615"))), kName));
  }
  SECTION("epsilon must be a number in (0, 1]") {
    for (const char *bad : {"", "0", "-0.1", "1.5", "nan", "inf", "1e-5x", "0x1p-4 "}) {
      INFO("'" << bad << "'");
      CHECK_THAT(rejection(with_meta(encode_meta(meta_with(p.meta, "epsilon", bad)))),
                 Catch::Contains("for key 'epsilon'"));
    }
  }
  SECTION("enumerations") {
    CHECK_THAT(rejection(with_meta(encode_meta(meta_with(p.meta, "mode", "fast")))), Catch::Contains("key 'mode'"));
    CHECK_THAT(rejection(with_meta(encode_meta(meta_with(p.meta, "key", "both")))), Catch::Contains("key 'key'"));
    CHECK_THAT(rejection(with_meta(encode_meta(meta_with(p.meta, "status", "dead")))), Catch::Contains("key 'status'"));
    CHECK_THAT(rejection(with_meta(encode_meta(meta_with(p.meta, "counters", "0")))), Catch::Contains("key 'counters'"));
  }
  SECTION("malformed text") {
    Bytes m = parts.meta;
    m.pop_back();  // value of the last key loses its NUL
    CHECK_THAT(rejection(with_meta(m)), Catch::Contains("unterminated"));
    Bytes e = parts.meta;
    e.insert(e.begin(), {0, 'x', 0});
    CHECK_THAT(rejection(with_meta(e)), Catch::Contains("empty key"));
  }
}

TEST_CASE("MODS problems", "[format][hostile]") {
  ThreadProfile p = hcct::test::small_profile();
  Parts parts = parts_of(p);
  auto with_mods = [&](const Bytes &mods) {
    Parts q = parts;
    q.mods = mods;
    return assemble(q);
  };
  SECTION("module count beyond the section") {
    Bytes m = parts.mods;
    m[0] = m[1] = m[2] = m[3] = 0xff;
    CHECK_THAT(rejection(with_mods(m)), Catch::Contains("module count 4294967295 exceeds"));
  }
  SECTION("path length beyond the section") {
    Bytes m = parts.mods;
    m[4 + 24] = 0xff;
    m[4 + 25] = 0xff;
    CHECK_THAT(rejection(with_mods(m)), Catch::Contains("truncated path"));
  }
  SECTION("inverted range") {
    ThreadProfile q = p;
    std::swap(q.modules[1].lo, q.modules[1].hi);
    CHECK_THAT(rejection(with_mods(encode_modules(q.modules))), Catch::Contains("module 1: address range"));
  }
  SECTION("trailing bytes") {
    Bytes m = parts.mods;
    m.push_back(0);
    CHECK_THAT(rejection(with_mods(m)), Catch::Contains("after the last module"));
  }
  SECTION("no modules is fine") {
    CHECK_NOTHROW(parse_profile(with_mods(encode_modules({})), kName));
  }
}

TEST_CASE("CCT problems", "[format][hostile]") {
  ThreadProfile p = hcct::test::small_profile(Mode::cct);  // calls = 7+5+300+2+1 = 315
  Parts parts = parts_of(p);
  auto with_tree = [&](const Bytes &tree) {
    Parts q = parts;
    q.tree = tree;
    return assemble(q);
  };
  const RawNode root{0, 0, 0, 0, 0};
  SECTION("the reference tree is accepted") {
    CHECK_NOTHROW(parse_profile(with_tree(raw_tree(3, {root, {1, 10, 11, 300, 0}, {1, 12, 13, 15, 0}})), kName));
  }
  SECTION("huge node counts are rejected before anything is reserved") {
    for (uint64_t n : {uint64_t(1) << 60, UINT64_MAX, uint64_t(1) << 33, uint64_t(4)}) {
      INFO(n);
      CHECK_THAT(rejection(with_tree(raw_tree(n, {root, {1, 10, 11, 315, 0}}))), Catch::Contains("exceeds"));
    }
  }
  SECTION("no root") { CHECK_THAT(rejection(with_tree(raw_tree(0, {}))), Catch::Contains("no nodes")); }
  SECTION("bad parent deltas") {
    CHECK_THAT(rejection(with_tree(raw_tree(2, {root, {0, 10, 11, 315, 0}}))), Catch::Contains("second root"));
    CHECK_THAT(rejection(with_tree(raw_tree(3, {root, {1, 10, 11, 300, 0}, {3, 12, 13, 15, 0}}))),
               Catch::Contains("node 2: parent delta 3 points before the root"));
    CHECK_THAT(rejection(with_tree(raw_tree(2, {root, {UINT64_MAX, 10, 11, 315, 0}}))), Catch::Contains("points before"));
  }
  SECTION("root fields") {
    CHECK_THAT(rejection(with_tree(raw_tree(1, {{1, 0, 0, 0, 0}}))), Catch::Contains("root has parent delta"));
    CHECK_THAT(rejection(with_tree(raw_tree(1, {{0, 5, 0, 0, 0}}))), Catch::Contains("root must have"));
    CHECK_THAT(rejection(with_tree(raw_tree(1, {{0, 0, 0, 9, 0}}))), Catch::Contains("root must have"));
  }
  SECTION("unknown flag bits") {
    for (uint8_t f : {uint8_t(4), uint8_t(0x80), uint8_t(0xff)}) {
      CHECK_THAT(rejection(with_tree(raw_tree(2, {root, {1, 10, 11, 315, f}}))), Catch::Contains("unknown flag bits"));
    }
  }
  SECTION("monitored outside hcct mode") {
    CHECK_THAT(rejection(with_tree(raw_tree(2, {root, {1, 10, 11, 315, 1}}))), Catch::Contains("outside hcct"));
  }
  SECTION("path flag needs the parent on the path") {
    CHECK_THAT(rejection(with_tree(raw_tree(3, {root, {1, 10, 11, 300, 0}, {1, 12, 13, 15, 2}}))),
               Catch::Contains("parent is not"));
    CHECK_NOTHROW(parse_profile(with_tree(raw_tree(3, {root, {1, 10, 11, 300, 2}, {1, 12, 13, 15, 2}})), kName));
  }
  SECTION("cct counts must sum to calls") {
    CHECK_THAT(rejection(with_tree(raw_tree(2, {root, {1, 10, 11, 314, 0}}))), Catch::Contains("sum to 314"));
    CHECK_THAT(rejection(with_tree(raw_tree(3, {root, {1, 10, 11, UINT64_MAX, 0}, {1, 12, 13, 316, 0}}))),
               Catch::Contains("overflow"));
  }
  SECTION("varint form") {
    Bytes t = varint(2);
    append(t, {0, 0, 0, 0, 0});
    Bytes overlong(11, 0x80);  // 11 bytes
    overlong.back() = 0;
    append(t, overlong);
    CHECK_THAT(rejection(with_tree(t)), Catch::Contains("malformed varint"));
    Bytes big = varint(2);
    append(big, {0, 0, 0, 0, 0});
    append(big, {1});
    Bytes over64(9, 0xff);  // 9 full groups = 63 bits, then a 10th byte with more than 1 bit
    over64.push_back(0x02);
    append(big, over64);
    CHECK_THAT(rejection(with_tree(big)), Catch::Contains("malformed varint"));
    Bytes max = varint(2);
    append(max, {0, 0, 0, 0, 0});
    append(max, {1});
    append(max, varint(UINT64_MAX));  // 10 bytes, top byte 1: fine
    append(max, {11, 0x80 | (315 & 0x7f), 315 >> 7, 0});
    CHECK_NOTHROW(parse_profile(with_tree(max), kName));
  }
  SECTION("trailing bytes") {
    Bytes t = raw_tree(2, {root, {1, 10, 11, 315, 0}});
    t.push_back(0);
    CHECK_THAT(rejection(with_tree(t)), Catch::Contains("after the last node"));
  }
  SECTION("key=routine trees have no call sites") {
    ThreadProfile q = p;
    q.meta.key = KeyKind::routine;
    Parts r = parts_of(q);
    r.tree = raw_tree(2, {root, {1, 10, 0, 315, 0}});
    CHECK_NOTHROW(parse_profile(assemble(r), kName));
    r.tree = raw_tree(2, {root, {1, 10, 11, 315, 0}});
    CHECK_THAT(rejection(assemble(r)), Catch::Contains("key=routine"));
  }
}

TEST_CASE("hcct-mode consistency", "[format][hostile]") {
  ThreadProfile p = hcct::test::small_profile(Mode::hcct);  // monitored: 1, 3, 5; counters 4
  SECTION("more monitored nodes than counters") {
    p.meta.counters = 2;
    CHECK_THAT(rejection(encode_profile(p)), Catch::Contains("3 monitored nodes, but only 2 counters"));
  }
  SECTION("unmonitored nodes carry no count") {
    p.nodes[2].count = 4;
    p.meta.calls += 4;
    CHECK_THAT(rejection(encode_profile(p)), Catch::Contains("unmonitored node with nonzero count"));
  }
  SECTION("monitored counts cannot exceed calls") {
    p.meta.calls -= 1;
    CHECK_THAT(rejection(encode_profile(p)), Catch::Contains("sum to 308, but calls is 307"));
  }
  SECTION("with every counter in use they sum to calls") {
    p.meta.counters = 3;
    CHECK_NOTHROW(parse_profile(encode_profile(p), kName));
    p.meta.calls += 1;
    CHECK_THAT(rejection(encode_profile(p)), Catch::Contains("sum to 308, but calls is 309"));
  }
  SECTION("while counters are free, calls may exceed the sum") {
    p.meta.calls += 50;
    CHECK_NOTHROW(parse_profile(encode_profile(p), kName));
  }
}

TEST_CASE("file names", "[format][dir]") {
  auto id = parse_profile_file_name("123.4.hcct");
  REQUIRE(id);
  CHECK(id->pid == 123);
  CHECK(id->seq == 4);
  CHECK(parse_profile_file_name("0.0.hcct"));
  for (const char *bad : {".123.4.hcct", ".123.4.hcct.tmp", "123.hcct", "123.4.hcct.tmp", "a.4.hcct", "123.-4.hcct",
                          "0123.4.hcct", "123.04.hcct", "123.4.5.hcct", ".hcct", "99999999999999999999.0.hcct", "1..hcct"}) {
    INFO(bad);
    CHECK_FALSE(parse_profile_file_name(bad));
  }
}

TEST_CASE("profile directories", "[format][dir]") {
  TempDir dir;
  std::mt19937_64 rng(3);
  auto put = [&](uint64_t pid, uint64_t seq, const std::string &name = "") {
    ThreadProfile p = hcct::test::make_profile(hcct::test::random_tree(rng, 50), Mode::cct, rng, pid, seq);
    write_profile(dir / (name.empty() ? profile_file_name(pid, seq) : name), p);
  };
  SECTION("empty directory") {
    CHECK_THROWS_WITH(read_profiles(dir.path()), Catch::Contains("no profile files"));
  }
  SECTION("grouped by process, sorted by pid and thread") {
    put(20, 1);
    put(20, 0);
    put(9, 0);
    put(20, 10);
    put(20, 2);
    // A dotfile and a stray file are ignored, even though they are not valid profiles.
    std::ofstream(dir / ".20.3.hcct.tmp") << "partial";
    std::ofstream(dir / "README") << "notes";
    ProfileSet set = read_profiles(dir.path());
    REQUIRE(set.processes.size() == 2);
    CHECK(set.processes[0].pid == 9);
    REQUIRE(set.processes[1].threads.size() == 4);
    std::vector<uint64_t> seqs;
    for (auto &t : set.processes[1].threads) seqs.push_back(t.meta.thread_seq);
    CHECK(seqs == std::vector<uint64_t>{0, 1, 2, 10});
  }
  SECTION("name and META disagree") {
    put(20, 1, "20.2.hcct");
    CHECK_THROWS_WITH(read_profiles(dir.path()), Catch::StartsWith((dir / "20.2.hcct").string() + ": META says"));
  }
  SECTION("a corrupt file names itself") {
    put(20, 0);
    std::ofstream(dir / "21.0.hcct") << "HCCTDUMP garbage";
    CHECK_THROWS_WITH(read_profiles(dir.path()), Catch::StartsWith((dir / "21.0.hcct").string() + ": "));
  }
  SECTION("a FIFO does not block the reader") {
    REQUIRE(mkfifo((dir / "5.0.hcct").c_str(), 0600) == 0);
    CHECK_THROWS_WITH(read_profiles(dir.path()), Catch::Contains("not a regular file"));
  }
  SECTION("a single file") {
    put(20, 0);
    ProfileSet set = read_profiles(dir / "20.0.hcct");
    REQUIRE(set.processes.size() == 1);
    CHECK(set.processes[0].threads.size() == 1);
  }
  SECTION("missing path") {
    CHECK_THROWS_AS(read_profiles(dir / "nope"), IoError);
  }
}

TEST_CASE("tree helpers", "[format]") {
  std::mt19937_64 rng(11);
  auto nodes = hcct::test::random_tree(rng, 2000);
  auto depth = node_depths(nodes);
  auto end = subtree_ends(nodes);
  auto kids = child_index(nodes);
  for (uint32_t i = 1; i < nodes.size(); ++i) {
    CHECK(depth[i] == depth[nodes[i].parent] + 1);
    // i lies in its parent's contiguous subtree range
    CHECK(i < end[nodes[i].parent]);
    auto siblings = kids.of(nodes[i].parent);
    CHECK(std::find(siblings.begin(), siblings.end(), i) != siblings.end());
  }
  // Subtree range = the node plus all nodes whose ancestor chain reaches it.
  for (uint32_t v = 0; v < nodes.size(); v += 97) {
    for (uint32_t i = 0; i < nodes.size(); ++i) {
      bool below = false;
      for (uint32_t a = i;; a = nodes[a].parent) {
        if (a == v) below = true;
        if (a == 0 || below) break;
      }
      CHECK(below == (i >= v && i < end[v]));
    }
  }
}

TEST_CASE("deep trees need no recursion", "[format]") {
  std::vector<Node> chain(200000);
  for (uint32_t i = 1; i < chain.size(); ++i) chain[i] = {0x1000 + i, 0, 1, i - 1, 0};
  auto depth = node_depths(chain);
  CHECK(depth.back() == chain.size() - 1);
  ThreadProfile p = hcct::test::small_profile(Mode::cct);
  p.nodes = chain;
  p.meta.calls = chain.size() - 1;
  CHECK(parse_profile(encode_profile(p), kName).nodes.size() == chain.size());
}

TEST_CASE("ten million nodes load in seconds", "[.perf]") {
  std::mt19937_64 rng(5);
  ThreadProfile p = hcct::test::make_profile(hcct::test::random_tree(rng, 10'000'000, 5000, 50000), Mode::cct, rng);
  TempDir dir;
  write_profile(dir / "1.0.hcct", p);
  auto t0 = std::chrono::steady_clock::now();
  ThreadProfile q = read_profile(dir / "1.0.hcct");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("read " << q.nodes.size() << " nodes (" << std::filesystem::file_size(dir / "1.0.hcct") << " bytes) in " << s << " s");
  CHECK(s < 10);
}

// ---- Time (format version 2, issue 17)

namespace {

ThreadProfile timed_profile() {
  ThreadProfile p = hcct::test::small_profile(Mode::cct);
  p.meta.time = "cpu";
  p.meta.sample_period_ns = 1000000;
  p.meta.samples_lost = 3;
  p.samples.assign(p.nodes.size(), 0);
  p.samples[0] = 2;  // the root: time outside any instrumented function
  p.samples.back() = 40;
  if (p.nodes.size() > 2) p.samples[1] = 7;
  p.meta.samples = 0;
  for (uint64_t n : p.samples) p.meta.samples += n;
  return p;
}

Bytes with_time_section(const ThreadProfile &p, const Bytes &time, uint32_t version = format::kVersion) {
  Parts parts = parts_of(p);
  Section s[4] = {{format::kTagMeta, 0, parts.meta}, {format::kTagModules, 0, parts.mods},
                  {format::kTagTree, 0, parts.tree}, {format::kTagTime, 0, time}};
  return encode_file(s, version);
}

}  // namespace

TEST_CASE("time: timed profiles round-trip in memory and streamed", "[format][time]") {
  ThreadProfile p = timed_profile();
  ThreadProfile back = parse_profile(encode_profile(p), kName);
  CHECK(back.meta.time == "cpu");
  CHECK(back.meta.sample_period_ns == 1000000);
  CHECK(back.meta.samples == p.meta.samples);
  CHECK(back.meta.samples_lost == 3);
  CHECK(back.samples == p.samples);
  CHECK(back.meta.extra == p.meta.extra);  // the time keys are parsed, not kept as unknown
  TempDir dir;
  write_profile(dir.path() / "4242.0.hcct", p);
  ProfileStream stream(dir.path() / "4242.0.hcct");
  std::vector<std::pair<uint32_t, uint64_t>> expected;
  for (uint32_t i = 0; i < p.samples.size(); ++i)
    if (p.samples[i]) expected.emplace_back(i, p.samples[i]);
  CHECK(stream.time_samples() == expected);
  Node n;
  while (stream.next(n)) {
  }
}

// Files of runtimes before the time metric (format version 1) still read, as they were.
TEST_CASE("time: a version 1 file reads as a profile without time", "[format][time]") {
  ThreadProfile p = hcct::test::small_profile();
  Parts parts = parts_of(p);
  Section s[3] = {{format::kTagMeta, 0, parts.meta}, {format::kTagModules, 0, parts.mods}, {format::kTagTree, 0, parts.tree}};
  Bytes v1 = encode_file(s, 1);
  REQUIRE(v1[8] == 1);
  ThreadProfile back = parse_profile(v1, kName);
  CHECK(back.nodes == p.nodes);
  CHECK(!back.meta.timed());
  CHECK(back.samples.empty());
  // A TIME tag in a version 1 file is an unknown section there: skipped.
  ThreadProfile t = timed_profile();
  t.meta.time.clear();
  Bytes v1_with_tag = with_time_section(t, encode_time(timed_profile().samples), 1);
  CHECK(parse_profile(v1_with_tag, kName).samples.empty());
}

TEST_CASE("time: TIME section problems", "[format][time][hostile]") {
  ThreadProfile p = timed_profile();
  auto entries = [&](std::vector<std::pair<uint64_t, uint64_t>> e) {
    Bytes b = varint(e.size());
    for (auto [delta, n] : e) {
      append(b, varint(delta));
      append(b, varint(n));
    }
    return b;
  };
  SECTION("META time without TIME") {
    Parts parts = parts_of(p);
    CHECK_THAT(rejection(assemble(parts)), Catch::Contains("no TIME section"));
  }
  SECTION("TIME without META time") {
    ThreadProfile q = p;
    q.meta.time.clear();
    CHECK_THAT(rejection(with_time_section(q, encode_time(p.samples))), Catch::Contains("without META 'time'"));
  }
  SECTION("sum differs from META samples") {
    ThreadProfile q = p;
    q.meta.samples += 1;
    CHECK_THAT(rejection(with_time_section(q, encode_time(p.samples))), Catch::Contains("META 'samples' says"));
  }
  SECTION("index out of range") {
    CHECK_THAT(rejection(with_time_section(p, entries({{p.nodes.size(), 1}}))), Catch::Contains("out of range"));
  }
  SECTION("index not increasing") {
    CHECK_THAT(rejection(with_time_section(p, entries({{1, 1}, {0, 1}}))), Catch::Contains("does not increase"));
  }
  SECTION("zero samples") {
    CHECK_THAT(rejection(with_time_section(p, entries({{1, 0}}))), Catch::Contains("zero samples"));
  }
  SECTION("entry count beyond the nodes") {
    Bytes b = varint(p.nodes.size() + 1);
    CHECK_THAT(rejection(with_time_section(p, b)), Catch::Contains("exceeds"));
  }
  SECTION("trailing bytes") {
    Bytes b = encode_time(p.samples);
    b.push_back(0);
    CHECK_THAT(rejection(with_time_section(p, b)), Catch::Contains("after the last entry"));
  }
  SECTION("truncated") {
    Bytes b = encode_time(p.samples);
    b.pop_back();
    rejection(with_time_section(p, b));
  }
  SECTION("bad time metric") {
    Parts parts = parts_of(p);
    ThreadProfile q = p;
    q.meta.time = "wall-ish";
    CHECK_THAT(rejection(with_time_section(q, encode_time(p.samples))), Catch::Contains("for key 'time'"));
  }
}
