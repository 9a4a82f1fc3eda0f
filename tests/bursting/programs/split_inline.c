// Bursts that start where the machine stack alone gives a wrong path (issue 16): inside an
// instrumented function inlined into its caller, inside the `.part` piece of a function gcc split
// (its header, with the enter probe, partially inlined into main), inside a `.cold` piece, and in a
// function reached by a tail call. The program opens each burst itself (burst=manual) at such a
// point and closes it a few calls later; tests/bursting/burst_e2e_test.cc checks that every
// context the bursts recorded is one of the exact CCT's of the same run (exact=1), and that the
// paths through the inlined and split functions are there.
//
//   split_inline [ROUNDS]     (default 2000)
#include <stdio.h>
#include <stdlib.h>

extern void hcct_burst(int on) __attribute__((weak));

__attribute__((no_instrument_function)) static void burst(int on) {
  if (hcct_burst) hcct_burst(on);
}

volatile int sink;
__attribute__((noinline)) void heavy(int i) { sink += i; }
__attribute__((noinline, cold)) void complain(int n) { sink -= n; }
__attribute__((noinline)) void leaf(int i) { sink ^= i; }

// Its unlikely branch goes to a .cold piece; the burst opens there.
__attribute__((noinline)) void check_size(int n) {
  if (__builtin_expect(n > 1000000, 0)) {
    burst(1);
    complain(n);
    complain(n + 1);
    burst(0);
    fprintf(stderr, "too big: %d\n", n);
    return;
  }
  heavy(n);
}

// Split by gcc (ipa-split): the test is inlined into main, the unlikely rest left in
// check_big.part.0, which runs in a frame of its own; the burst opens there.
void check_big(int n) {
  if (__builtin_expect(n > 1000000, 0)) {
    burst(1);
    complain(n);
    complain(n + 2);
    burst(0);
    fprintf(stderr, "too big: %d\n", n);
    return;
  }
  heavy(n);
}

// Split by gcc: the early return is inlined into the caller, the loop left in concat.part.0,
// where the bursts open.
void concat(int n) {
  if (n < 2) return;
  for (int i = 0; i < n; ++i) {
    if (i == 1) burst(1);
    heavy(i);
    heavy(i * 2);
    if (i == 3) burst(0);
    if (sink > 100000000) {
      printf("reset\n");
      sink = 0;
    }
  }
  burst(0);
}

// Instrumented, always inlined into outer: no machine frame.
static inline __attribute__((always_inline)) void middle(int r) {
  burst(1);
  for (int i = 0; i < 3; ++i) leaf(r + i);
  burst(0);
}

__attribute__((noinline)) void outer(int r) {
  sink += 2;
  middle(r);
  sink += 3;
}

// A tail call (stage=late keeps it: the exit probe runs before the jump, and `twice`'s frame is
// gone when `heavy2` runs, as on the machine stack).
__attribute__((noinline)) void heavy2(int i) {
  burst(1);
  heavy(i);
  burst(0);
}
__attribute__((noinline)) void twice(int i) {
  sink += i;
  heavy2(i + 1);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 2000;
  for (int r = 0; r < rounds; ++r) {
    concat(r % 7);
    check_size(r % 500 == 3 ? 2000000 : r);
    check_big(r % 500 == 7 ? 2000000 : r);
    if (r % 10 == 0) outer(r);
    if (r % 10 == 5) twice(r);
  }
  printf("%d\n", sink);
  return 0;
}
