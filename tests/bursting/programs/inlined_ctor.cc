// Bursts that open inside a function called from an inlined C++ constructor and destructor (issue
// 16, the unmatched exits of burst_sync=auto on a C++ program): with the plugin's stage=early the
// inlined constructor keeps its probes, which pass the constructor's clone (C1/C2) whose body was
// inlined, while the debug scope of the inlined body names the abstract constructor. The program
// opens each burst itself (burst=manual) and closes it after the object is gone, so that the
// constructor's and destructor's exits are processed inside the burst.
// tests/bursting/burst_e2e_test.cc checks every sampled context against the exact CCT of the same
// run (exact=1), that no exit went unmatched, and the windows' counts.
//
//   inlined_ctor [ROUNDS]     (default 1000)
#include <cstdio>
#include <cstdlib>

extern "C" void hcct_burst(int on) __attribute__((weak));

__attribute__((no_instrument_function)) static void burst(int on) {
  if (hcct_burst) hcct_burst(on);
}

volatile long sink;
__attribute__((noinline)) void leaf(long i) { sink = sink ^ i; }

__attribute__((noinline)) long make(long x) {
  burst(1);
  leaf(x);
  return 2 * x;
}

__attribute__((noinline)) void drop(long v) {
  burst(1);
  leaf(v);
}

struct Holder {
  long value;
  __attribute__((always_inline)) explicit Holder(long x) : value(make(x)) {}
  __attribute__((always_inline)) ~Holder() { drop(value); }
};

__attribute__((noinline)) void use(long r) {
  Holder h(r);
  sink = sink + h.value;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1000;
  for (int r = 0; r < rounds; ++r) {
    use(r);
    burst(0);
  }
  std::printf("%ld\n", static_cast<long>(sink));
  return 0;
}
