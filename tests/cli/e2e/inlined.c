// Instrumented functions that the compiler inlines (tests/cli/test_export_truth.cc): at -O2 `ltnum`
// is inlined into `compare` and `step` into `run`. With probes before inlining (gcc
// -finstrument-functions, the plugin's early stage) an inlined copy keeps its probes, and the
// probe inside it reports the return address of the function it was inlined into; after inlining
// (the plugin's late stage) they have none and appear only in call sites' inline chains. `rec`
// recurses. Counts: main 1, rec 123, run 50, step 500, compare 500, ltnum 500, leaf 50.
#include <stdio.h>

volatile int sink;

__attribute__((noinline)) void leaf(int x) { sink += x; }

static inline int ltnum(int a, int b) {
  if (a == 3) leaf(a);
  return a < b;
}

__attribute__((noinline)) int compare(int a, int b) { return ltnum(a, b) + (a & 1); }

static inline int step(int i) { return compare(i, 5); }

__attribute__((noinline)) int run(int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += step(i);
  return s;
}

__attribute__((noinline)) int rec(int d) {
  if (d == 0) return run(10);
  return rec(d - 1) + 1;
}

int main(void) {
  int s = 0;
  for (int i = 0; i < 50; ++i) s += rec(i % 4);
  printf("%d\n", s);
  return 0;
}
