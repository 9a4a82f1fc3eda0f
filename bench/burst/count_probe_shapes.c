// Shapes of the count clock's probes (docs/BURSTING.md, "The count clock's probe"), on the loop of
// examples/calls (square and cube, three calls per round), built once per shape with -DSHAPE=N:
//   0  no probe (native)
//   1  the plugin's shape: entry `subq $1, countdown; js`, exit `if (exit_gate) call` (a byte next to
//      the countdown)
//   2  entry only: `subq $1, countdown; js`
//   3  entry `subq`, exit `if (countdown < 0) call`: the exit tests the word the entry decremented
// bench/burst/count_probe_shapes.sh builds and times them (CPU seconds, interleaved rounds).
#include <stdio.h>
#include <stdlib.h>

__thread long countdown __attribute__((tls_model("initial-exec"))) = 1L << 60;
__thread unsigned char exit_gate __attribute__((tls_model("initial-exec")));
static volatile unsigned long misses;

__attribute__((noinline)) void miss(void) { ++misses; }

#if SHAPE == 0
#define ENTER
#define EXIT
#else
#define ENTER \
  if (__builtin_expect(--countdown < 0, 0)) miss();
#if SHAPE == 1
#define EXIT \
  if (__builtin_expect(*(volatile unsigned char *)&exit_gate, 0)) miss();
#elif SHAPE == 3
#define EXIT \
  if (__builtin_expect(*(volatile long *)&countdown < 0, 0)) miss();
#else
#define EXIT
#endif
#endif

__attribute__((noinline)) unsigned square(unsigned x) {
  ENTER unsigned r = x * x;
  EXIT return r;
}
__attribute__((noinline)) unsigned cube(unsigned x) {
  ENTER unsigned r = square(x) * x;
  EXIT return r;
}

int main(int argc, char **argv) {
  unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 100000000;
  unsigned long acc = 0;
  for (unsigned i = 0; i < n; ++i) acc += square(i) + cube(i);
  printf("%lu %lu\n", acc, misses);
  return 0;
}
