// Two phases whose in-burst slowdowns differ (issue 16): one global sampled fraction over-counts
// one of them and under-counts the other; an unbiased estimator gets both right.
//
//   two_phase [DENSE [SPARSE [LEAF_WORK]]]     (defaults 32000000, 500000, 0)
//
// 1. dense: DENSE calls, dense() calling leaf0 .. leaf31 in turn. Cheap calls from a node with 32
//    children: profiled, most of them leave the inline fast path (which scans 4 siblings), so the
//    program runs several times slower during a burst than between bursts.
// 2. sparse: SPARSE calls of work(), each a fraction of a microsecond of arithmetic: the profiler's cost per
//    call is lost in it, so bursts barely slow this phase down.
// LEAF_WORK > 0 gives each leaf that many steps of arithmetic, for dense phases that bursts slow
// down less (the in-burst slowdown is what time-only estimators must measure; docs/BURSTING.md).
// Exact counts: main>dense>leafK = DENSE / 32 each (DENSE is rounded down to a multiple of 32),
// main>sparse>work = SPARSE.
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static volatile unsigned long sink;
static int leaf_work;

#define LEAF(n) \
  NOINLINE void leaf##n(void) {                                                         \
    unsigned long x = sink + n;                                                          \
    for (int i = 0; i < leaf_work; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul; \
    sink = x;                                                                            \
  }
LEAF(0) LEAF(1) LEAF(2) LEAF(3) LEAF(4) LEAF(5) LEAF(6) LEAF(7)
LEAF(8) LEAF(9) LEAF(10) LEAF(11) LEAF(12) LEAF(13) LEAF(14) LEAF(15)
LEAF(16) LEAF(17) LEAF(18) LEAF(19) LEAF(20) LEAF(21) LEAF(22) LEAF(23)
LEAF(24) LEAF(25) LEAF(26) LEAF(27) LEAF(28) LEAF(29) LEAF(30) LEAF(31)

NOINLINE void dense(long rounds) {
  for (long i = 0; i < rounds; ++i) {
    leaf0(); leaf1(); leaf2(); leaf3(); leaf4(); leaf5(); leaf6(); leaf7();
    leaf8(); leaf9(); leaf10(); leaf11(); leaf12(); leaf13(); leaf14(); leaf15();
    leaf16(); leaf17(); leaf18(); leaf19(); leaf20(); leaf21(); leaf22(); leaf23();
    leaf24(); leaf25(); leaf26(); leaf27(); leaf28(); leaf29(); leaf30(); leaf31();
  }
}

NOINLINE void work(void) {
  unsigned long x = sink;
  for (int i = 0; i < 300; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
}

NOINLINE void sparse(long calls) {
  for (long i = 0; i < calls; ++i) work();
}

int main(int argc, char **argv) {
  long dense_calls = argc > 1 ? atol(argv[1]) : 32000000;
  long sparse_calls = argc > 2 ? atol(argv[2]) : 500000;
  leaf_work = argc > 3 ? atoi(argv[3]) : 0;
  dense(dense_calls / 32);
  sparse(sparse_calls);
  printf("%lu\n", sink & 0xff);
  return 0;
}
