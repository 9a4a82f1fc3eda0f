// Writes a synthetic calling-context tree of a given size, for the analysis benchmarks
// (bench/suites/analysis.py): hcct_synth OUT_DIR NODES [cct|hcct] [SEED]
// or two processes of a program with many modules, for the merge benchmark:
// hcct_synth OUT_DIR MODULES modules (below, write_many_modules).
//
// The tree has the shape of real CCTs: a random walk over depth (mean about 9, at most 64), 5,000
// functions each calling one of 8 of its own (a call graph of at most 40,000 arcs under a tree of
// millions of contexts), call sites inside the caller, heavy-tailed counts
// (most contexts run a few times, 1% up to 10^5 times). In hcct mode every 50th node is monitored.
// The module map names a file that does not exist, so that tools print module+offset placeholders
// (and warn once) without depending on some binary's symbols.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "hcct/analysis/writer.h"

using namespace hcct::analysis;

// Processes 4242 and 4243 of one program with `modules` shared objects of 64 KiB each (the second
// process loads them 1 TiB higher, as ASLR would), one context per module: what `hcct merge` must
// line up module by module. cct mode, N = modules per process.
int write_many_modules(const std::filesystem::path &dir, uint64_t modules) {
  std::filesystem::create_directories(dir);
  for (uint64_t pid : {4242, 4243}) {
    const uint64_t base = 0x7e0000000000 + (pid - 4242) * (uint64_t(1) << 40);
    ThreadProfile p;
    p.meta.runtime = "hcct-synth 1";
    p.meta.pid = pid;
    p.meta.ppid = 1;
    p.meta.tid = pid;
    p.meta.mode = Mode::cct;
    p.meta.exe = "/nonexistent/synth";
    p.meta.cmdline = {"synth", std::to_string(modules), "modules"};
    p.nodes.emplace_back();
    for (uint64_t k = 0; k < modules; ++k) {
      const uint64_t lo = base + (k << 16);
      p.modules.push_back({lo, lo, lo + 0x10000, "/nonexistent/lib" + std::to_string(k) + ".so",
                           {uint8_t(k), uint8_t(k >> 8), uint8_t(k >> 16)}});
      Node v;
      v.routine = lo + 0x100;
      v.call_site = 0;
      v.count = 1;
      p.nodes.push_back(v);
    }
    p.meta.calls = modules;
    p.meta.max_depth = 1;
    p.meta.nodes_peak = modules + 1;
    write_profile(dir / profile_file_name(pid, 0), p);
  }
  std::printf("%s: 2 processes of %llu modules\n", dir.c_str(), (unsigned long long)modules);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 3 && std::string(argv[3]) == "modules") return write_many_modules(argv[1], std::strtoull(argv[2], nullptr, 10));
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR NODES [cct|hcct] [SEED]\n", argv[0]);
    return 1;
  }
  const std::filesystem::path dir = argv[1];
  const uint64_t n = std::strtoull(argv[2], nullptr, 10);
  const bool hcct = argc > 3 && std::string(argv[3]) == "hcct";
  std::mt19937_64 rng(argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1);
  if (n < 1 || n > UINT32_MAX) {
    std::fprintf(stderr, "synth: NODES must be in [1, 2^32-1]\n");
    return 1;
  }
  const uint64_t base = 0x555555554000, text = base + 0x1000;
  ThreadProfile p;
  p.meta.runtime = "hcct-synth 1";
  p.meta.pid = 4242;
  p.meta.ppid = 1;
  p.meta.tid = 4242;
  p.meta.mode = hcct ? Mode::hcct : Mode::cct;
  p.meta.exe = "/nonexistent/synth";
  p.meta.cmdline = {"synth", std::to_string(n)};
  p.modules.push_back({base, base, base + 0x1000000, "/nonexistent/synth", {0x5a, 0x17}});
  p.nodes.reserve(n);
  p.nodes.emplace_back();
  std::vector<uint32_t> path{0};
  std::vector<uint64_t> routine_of_path{0};
  uint64_t calls = 0, monitored = 0, max_depth = 0, depth_sum = 0;
  std::geometric_distribution<int> pop(0.47);
  for (uint64_t i = 1; i < n; ++i) {
    size_t up = size_t(pop(rng));
    if (path.size() > 64) up += path.size() - 64;
    while (up-- && path.size() > 1) {
      path.pop_back();
      routine_of_path.pop_back();
    }
    // As in real programs, the call graph is small and the CCT large: each function calls one of
    // 8 callees of its own (the first ones more often); the program's entry calls skewed ones.
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    uint64_t caller = routine_of_path.back();
    uint64_t f;
    if (caller == 0) {
      f = uint64_t(5000 * u * u * u);
    } else {
      uint64_t k = uint64_t(8 * u * u);
      f = ((caller - text) / 0x100 * 2654435761ull + k * 40503 + 7) % 5000;
    }
    Node v;
    v.parent = path.back();
    v.routine = text + 0x100 * f;
    v.call_site = caller ? caller + 0x10 + 5 * (rng() % 8) : base + 0x20;
    uint64_t c = 1 + (rng() % 100 == 0 ? rng() % 100000 : rng() % 10);
    if (hcct) {
      if (i % 50 == 0) {
        v.flags = hcct::format::kNodeMonitored;
        ++monitored;
      } else {
        c = 0;
      }
    }
    v.count = c;
    calls += c;
    p.nodes.push_back(v);
    path.push_back(uint32_t(i));
    routine_of_path.push_back(v.routine);
    max_depth = std::max<uint64_t>(max_depth, path.size() - 1);
    depth_sum += path.size() - 1;
  }
  p.meta.calls = calls;
  p.meta.max_depth = max_depth;
  p.meta.nodes_peak = n;
  p.meta.tree_bytes = n * 48;
  if (hcct) {
    p.meta.counters = monitored + 1;
    p.meta.epsilon = 1.0 / double(p.meta.counters);
    p.meta.min_count = 1;
  }
  std::filesystem::create_directories(dir);
  write_profile(dir / profile_file_name(p.meta.pid, 0), p);
  std::printf("%s: %llu nodes, N = %llu, depth %llu (mean %.1f)\n", (dir / profile_file_name(p.meta.pid, 0)).c_str(),
              (unsigned long long)n, (unsigned long long)calls, (unsigned long long)max_depth,
              double(depth_sum) / double(n > 1 ? n - 1 : 1));
  return 0;
}
