// An instrumented function inlined into its caller (issue 16): the machine stack has no frame for
// it, so a burst that starts inside it cannot find it by unwinding.
//
//   inlined_probe [K]     (default 1000)
//
// main > outer > middle (always inlined into outer, but instrumented: the probes are inserted before
// inlining) opens a burst, calls leaf K times, closes it. Recorded: main>outer>middle>leaf = K.
#include <stdio.h>
#include <stdlib.h>

extern void hcct_burst(int on) __attribute__((weak));

__attribute__((no_instrument_function)) static void burst(int on) {
  if (hcct_burst) hcct_burst(on);
}

static volatile unsigned long sink;
static int K = 1000;

__attribute__((noinline)) void leaf(void) { sink += 1; }

static inline __attribute__((always_inline)) void middle(void) {
  burst(1);
  for (int i = 0; i < K; ++i) leaf();
  burst(0);
}

__attribute__((noinline)) void outer(void) {
  sink += 2;
  middle();
  sink += 3;
}

int main(int argc, char **argv) {
  if (argc > 1) K = atoi(argv[1]);
  outer();
  printf("%lu\n", sink);
  return 0;
}
