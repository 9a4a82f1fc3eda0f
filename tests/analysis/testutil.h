// Helpers shared by the analysis and CLI tests: temporary directories, valid sample profiles,
// random preorder trees, and an independent invariant checker.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "hcct/analysis/profile.h"

namespace hcct::test {

using analysis::Mode;
using analysis::Node;
using analysis::ThreadProfile;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hcct-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::filesystem::path &path() const { return path_; }
  std::filesystem::path operator/(const std::string &name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::string read_text(const std::filesystem::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// 1-based number of the first line of `file` containing `marker`; throws if there is none.
inline uint32_t marker_line(const std::filesystem::path &file, const std::string &marker) {
  std::ifstream in(file);
  std::string line;
  for (uint32_t n = 1; std::getline(in, line); ++n)
    if (line.find(marker) != std::string::npos) return n;
  throw std::runtime_error("marker " + marker + " not in " + file.string());
}

// A random tree in preorder: each new node hangs below some node of the current root path, which is
// exactly the set of parents preorder allows. Routines and sites come from small pools so that
// paths repeat across trees (for merging) and siblings sometimes collide.
inline std::vector<Node> random_tree(std::mt19937_64 &rng, size_t n, uint64_t routines = 12, uint64_t sites = 3) {
  std::vector<Node> nodes(1);
  std::vector<uint32_t> path{0};
  for (size_t i = 1; i < n; ++i) {
    size_t keep = 1 + rng() % path.size();
    path.resize(keep);
    Node v;
    v.parent = path.back();
    v.routine = 0x401000 + 0x10 * (rng() % routines);
    v.call_site = 0x402000 + (rng() % sites);
    nodes.push_back(v);
    path.push_back(uint32_t(i));
  }
  return nodes;
}

// Fills counts/flags/meta so that the profile is valid in `mode`: skewed counts; in hcct mode a
// random subset is monitored and `counters` leaves room for a few more.
inline ThreadProfile make_profile(std::vector<Node> nodes, Mode mode, std::mt19937_64 &rng, uint64_t pid = 4242,
                                  uint64_t seq = 0) {
  ThreadProfile p;
  p.meta.runtime = "hcct-test 1";
  p.meta.pid = pid;
  p.meta.ppid = 1;
  p.meta.thread_seq = seq;
  p.meta.tid = pid + seq;
  p.meta.mode = mode;
  p.meta.exe = "/usr/bin/true";
  p.meta.cmdline = {"true", "--flag", ""};
  p.meta.start_ns = 1000;
  p.meta.end_ns = 2000;
  p.meta.max_depth = 3;
  p.meta.tree_bytes = 4096;
  p.meta.nodes_peak = nodes.size();
  uint64_t sum = 0, monitored = 0;
  for (size_t i = 1; i < nodes.size(); ++i) {
    Node &v = nodes[i];
    // Heavy-tailed counts: most contexts are cold, a few are hot.
    uint64_t c = 1 + (rng() % 100 == 0 ? rng() % 100000 : rng() % 20);
    if (mode == Mode::hcct) {
      if (rng() % 3 == 0) {
        v.flags |= format::kNodeMonitored;
        ++monitored;
      } else {
        c = 0;
      }
    }
    v.count = c;
    sum += c;
  }
  p.meta.calls = sum;
  if (mode == Mode::hcct) {
    p.meta.counters = monitored + 1 + rng() % 4;
    p.meta.epsilon = 1.0 / double(p.meta.counters);
    p.meta.min_count = 1;
  }
  p.nodes = std::move(nodes);
  p.modules.push_back({0x1000, 0x401000, 0x500000, "/usr/bin/true", {0xde, 0xad, 0xbe, 0xef}});
  p.modules.push_back({0x7f0000000000, 0x7f0000001000, 0x7f0000100000, "/lib/x86_64-linux-gnu/libc.so.6", {}});
  return p;
}

// A small valid profile with every feature: two modules, a path flag, an unknown META key.
inline ThreadProfile small_profile(Mode mode = Mode::hcct) {
  std::vector<Node> nodes(6);
  nodes[0].flags = format::kNodeOnPath;
  nodes[1] = {0x401000, 0x7f0000001234, 7, 0, format::kNodeOnPath};
  nodes[2] = {0x401100, 0x401050, 5, 1, 0};
  nodes[3] = {0x401200, 0x401150, 300, 2, 0};
  nodes[4] = {0x401300, 0x401060, 2, 1, format::kNodeOnPath};
  nodes[5] = {0x401100, 0x401310, 1, 4, 0};
  ThreadProfile p;
  p.meta.runtime = "hcct 0.1.0";
  p.meta.pid = 77;
  p.meta.ppid = 1;
  p.meta.thread_seq = 0;
  p.meta.tid = 77;
  p.meta.mode = mode;
  p.meta.exe = "/bin/prog";
  p.meta.cmdline = {"prog", "a b"};
  p.meta.max_depth = 4;
  p.meta.tree_bytes = 4096;
  p.meta.nodes_peak = 6;
  p.meta.dropped = 3;
  p.meta.start_ns = 1700000000000000000ull;
  p.meta.end_ns = 1700000000100000000ull;
  p.meta.extra = {{"future_key", "some value"}};
  uint64_t sum = 0;
  for (size_t i = 1; i < nodes.size(); ++i) {
    if (mode == Mode::hcct) {
      if (i % 2) nodes[i].flags |= format::kNodeMonitored;
      else nodes[i].count = 0;
    }
    sum += nodes[i].count;
  }
  p.meta.calls = sum;
  if (mode == Mode::hcct) {
    p.meta.epsilon = 0.25;
    p.meta.counters = 4;
    p.meta.min_count = 1;
  }
  p.nodes = nodes;
  p.modules.push_back({0, 0x400000, 0x402000, "/bin/prog", {1, 2, 3, 4, 5, 6, 7, 8}});
  p.modules.push_back({0x7f0000000000, 0x7f0000001000, 0x7f0000003000, "/lib/libx.so", {}});
  return p;
}

// What tests/analysis/symtest/prog.c prints: its module map and runtime addresses of known
// functions (routines) and return addresses (sites).
struct SymtestFixture {
  std::vector<analysis::Module> modules;
  std::map<std::string, uint64_t> routines, sites;
};

inline SymtestFixture run_symtest_fixture(const std::string &prog, const std::string &lib) {
  SymtestFixture f;
  std::string cmd = prog + " " + lib;
  FILE *pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + cmd);
  char line[8192];
  while (fgets(line, sizeof line, pipe)) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "module") {
      analysis::Module m;
      std::string bias, lo, hi, id;
      in >> bias >> lo >> hi >> id >> m.path;
      m.bias = std::stoull(bias, nullptr, 16);
      m.lo = std::stoull(lo, nullptr, 16);
      m.hi = std::stoull(hi, nullptr, 16);
      for (size_t i = 0; id != "-" && i + 1 < id.size(); i += 2)
        m.build_id.push_back(uint8_t(std::stoul(id.substr(i, 2), nullptr, 16)));
      f.modules.push_back(m);
    } else {
      std::string name, addr;
      in >> name >> addr;
      (kind == "site" ? f.sites : f.routines)[name] = std::stoull(addr, nullptr, 16);
    }
  }
  if (pclose(pipe) != 0) throw std::runtime_error(cmd + " failed");
  return f;
}

// A profile of the fixture's process with real addresses (N = 705):
//   root
//     main                                  1   (call site 0)
//       fixture_leaf     @ site "direct"    500
//       fixture_leaf     @ site "inlined"   3
//       Widget::compute  @ site "lib"       200
//         fixture_leaf   @ site "direct"    1
// In hcct mode everything but main is monitored.
inline ThreadProfile symtest_profile(const SymtestFixture &f, Mode mode, uint64_t pid = 4242, uint64_t seq = 0) {
  std::mt19937_64 rng(1);
  const uint64_t main_fn = f.routines.at("main"), leaf = f.routines.at("leaf"), widget = f.routines.at("widget");
  const uint8_t mon = mode == Mode::hcct ? format::kNodeMonitored : 0;
  std::vector<Node> nodes(6);
  nodes[1] = {main_fn, 0, uint64_t(mode == Mode::hcct ? 0 : 1), 0, 0};
  nodes[2] = {leaf, f.sites.at("direct"), 500, 1, mon};
  nodes[3] = {leaf, f.sites.at("inlined"), 3, 1, mon};
  nodes[4] = {widget, f.sites.at("lib"), 200, 1, mon};
  nodes[5] = {leaf, f.sites.at("direct"), 1, 4, mon};
  ThreadProfile p = make_profile(nodes, Mode::cct, rng, pid, seq);
  p.nodes = nodes;  // make_profile randomizes counts; keep the ones above
  p.meta.mode = mode;
  p.meta.calls = 705;
  if (mode == Mode::hcct) {
    p.meta.counters = 5;  // one counter free, so the estimates need not sum to N
    p.meta.epsilon = 0.2;
    p.meta.min_count = 0;
  }
  p.modules = f.modules;
  p.meta.exe = f.modules.at(0).path;
  p.meta.cmdline = {f.modules.at(0).path, "arg with space"};
  return p;
}

}  // namespace hcct::test
