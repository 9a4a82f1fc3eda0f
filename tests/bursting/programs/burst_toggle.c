// Toggles bursts itself through the runtime's test hook hcct_burst (HCCT_OPTIONS burst=manual), at
// chosen events, so that what each burst records is known exactly:
//
//   burst_toggle [DEPTH [THREADS [K]]]     (defaults 100000, 4, 1000)
//
// 1. main > outer > middle > inner opens a burst, calls leaf K times and other() once (other calls
//    leaf), closes it, calls leaf K more times. Recorded: inner>leaf = K, inner>other = 1,
//    inner>other>leaf = 1; main, outer, middle, inner only as uncounted path.
// 2. rec recurses DEPTH deep: the burst opens in rec(3D/10) and closes in rec(7D/10) on the way
//    down, opens again in rec(D/2) and closes in rec(D/5) on the way back up, where every rec calls
//    leaf after its callee returns. Recorded: rec at call depths 3D/10+2 .. 7D/10+1 (one each) and
//    leaf below rec at depths D/5+2 .. D/2+1 (one each).
// 3. THREADS workers enter worker > level1 > level2 between bursts, wait; main opens a burst; each
//    calls leaf K times and other() once; main closes it; each calls leaf K more times. Recorded per
//    worker: level2>leaf = K, level2>other = 1, level2>other>leaf = 1.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

extern void hcct_burst(int on) __attribute__((weak));

#define NOINLINE __attribute__((noinline))

__attribute__((no_instrument_function)) static void burst(int on) {
  if (hcct_burst) hcct_burst(on);
}

static volatile unsigned long sink;
static int K = 1000, DEPTH = 100000;
static pthread_barrier_t opened, closed, ready, done;

NOINLINE void leaf(void) { __atomic_add_fetch(&sink, 1, __ATOMIC_RELAXED); }
NOINLINE void other(void) { leaf(); }

NOINLINE void inner(void) {
  burst(1);
  for (int i = 0; i < K; ++i) leaf();
  other();
  burst(0);
  for (int i = 0; i < K; ++i) leaf();
}
NOINLINE void middle(void) { inner(); }
NOINLINE void outer(void) {
  for (int i = 0; i < 3; ++i) leaf();
  middle();
}

NOINLINE void rec(int d) {
  if (d == DEPTH * 3 / 10) burst(1);
  if (d == DEPTH * 7 / 10) burst(0);
  if (d < DEPTH) rec(d + 1);
  if (d == DEPTH / 2) burst(1);
  if (d == DEPTH / 5) burst(0);
  leaf();
}

NOINLINE void level2(void) {
  pthread_barrier_wait(&ready);
  pthread_barrier_wait(&opened);
  for (int i = 0; i < K; ++i) leaf();
  other();
  pthread_barrier_wait(&closed);
  pthread_barrier_wait(&done);
  for (int i = 0; i < K; ++i) leaf();
}
NOINLINE void level1(void) { level2(); }
NOINLINE void *worker(void *arg) {
  level1();
  return arg;
}

int main(int argc, char **argv) {
  if (argc > 1) DEPTH = atoi(argv[1]);
  int threads = argc > 2 ? atoi(argv[2]) : 4;
  if (argc > 3) K = atoi(argv[3]);
  outer();
  rec(0);
  pthread_barrier_init(&ready, NULL, threads + 1);
  pthread_barrier_init(&opened, NULL, threads + 1);
  pthread_barrier_init(&closed, NULL, threads + 1);
  pthread_barrier_init(&done, NULL, threads + 1);
  pthread_t t[64];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  for (int i = 0; i < threads && i < 64; ++i) pthread_create(&t[i], &attr, worker, NULL);
  pthread_barrier_wait(&ready);  // every worker is inside level2, entered between bursts
  burst(1);
  pthread_barrier_wait(&opened);
  pthread_barrier_wait(&closed);
  burst(0);
  pthread_barrier_wait(&done);
  for (int i = 0; i < threads && i < 64; ++i) pthread_join(t[i], NULL);
  printf("sink %lu\n", (unsigned long)sink);
  return 0;
}
