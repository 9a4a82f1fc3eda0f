// Drives a generated `void f()` (cfg_gen.h) instrumented by the kpath pass, standing in for the
// runtime's probe ABI. Prints one event per line:
//   R                 a new run of f
//   B <k>             block k executed (its trace call)
//   * <function id>   the activation's first item reached the runtime (owner 0: fresh)
//   P <path id>       __hcct_path_slow (every item: no window is ever handed out, so the inline
//                     fast path always falls through to the call)
//   X                 f left by an exception
// Usage: exec_harness SEED RUNS
#include <cinttypes>
#include <cstdio>
#include <map>
#include <cstdlib>
#include <random>
#include <vector>

#include "hcct/kpath_saving_entries.h"

extern "C" void f();

namespace {
std::vector<uint32_t> g_decisions;
size_t g_next = 0;
}  // namespace

extern "C" {
void trace(int32_t k) { std::printf("B %d\n", k); }
// t0 .. t69: the generated blocks' trace calls.
#define T(k) \
  void t##k() { trace(k); }
#define T10(k) T(k##0) T(k##1) T(k##2) T(k##3) T(k##4) T(k##5) T(k##6) T(k##7) T(k##8) T(k##9)
T(0) T(1) T(2) T(3) T(4) T(5) T(6) T(7) T(8) T(9)
T10(1) T10(2) T10(3) T10(4) T10(5) T10(6)
int32_t decide(int32_t m) { return g_next < g_decisions.size() ? int32_t(g_decisions[g_next++] % uint32_t(m)) : 0; }
void maybe_throw(int32_t v) {
  if (v) throw 1;
}
void die() { throw 2; }
// struct hcct_path_frame: {node, owner}.
__thread uint64_t __hcct_path_token = 0;
__thread void *__hcct_path_roots_v4[1024];  // never filled: every first item calls too
__thread uint64_t __hcct_path_blpp = 0;       // not BLPP: misses call
// BLPP counter arrays are never armed (their pointers stay null): those items call too.
void __hcct_path_counters(const uint64_t *, uint64_t *) {}
void __hcct_path_counted(const uint64_t *, uint64_t *, uint64_t, uint64_t *frame, uint64_t function, uint64_t id) {
  frame[0] = frame[1] = 0;  // a function without loops: its one item is its activation's first
  std::printf("* %" PRIu64 "\nP %" PRIu64 "\n", function, id);
}
void __hcct_path_slow(uint64_t *frame, uint64_t function, uint64_t id, uint64_t slot) {
  if (frame[0] != 0) std::abort();  // the window is only ever what the runtime stored
  // The guess slot is 0 or 1 and a function of the path ID (one ID, one emitting site).
  static std::map<std::pair<uint64_t, uint64_t>, uint64_t> slot_of;
  if (slot > 1 || slot_of.emplace(std::make_pair(function, id), slot).first->second != slot) std::abort();
  if (frame[1] == 0) std::printf("* %" PRIu64 "\n", function);
  frame[1] = 1;
  std::printf("P %" PRIu64 "\n", id);
}
}

// The entries the pass calls on x86-64 (hcct/kpath_saving_entries.h).
#if defined(__x86_64__)
HCCT_KPATH_SAVING_ENTRY(__hcct_path_slow_pm, __hcct_path_slow);
HCCT_KPATH_SAVING_ENTRY(__hcct_path_counters_pm, __hcct_path_counters);
HCCT_KPATH_SAVING_ENTRY(__hcct_path_counted_pm, __hcct_path_counted);
#endif

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  std::mt19937 rng(uint32_t(std::strtoul(argv[1], nullptr, 10)));
  int runs = std::atoi(argv[2]);
  for (int r = 0; r < runs; ++r) {
    g_decisions.resize(rng() % 120);
    for (auto &d : g_decisions) d = rng();
    g_next = 0;
    std::printf("R\n");
    try {
      f();
    } catch (...) {
      std::printf("X\n");
    }
  }
  return 0;
}
