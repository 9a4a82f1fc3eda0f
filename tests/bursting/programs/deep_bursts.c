// Burst starts deep in a calling path that changes little between them (the machine stack's
// incremental walk, docs/BURSTING.md "The cost of a burst start"): each round recurses to one of
// three depths, goes through one of two callers of the same shape (`via_a`, `via_b`: the frame
// below them, `mid`'s, has the same stack pointer and return address under either, while the
// frames outside it differ) and opens a burst (burst=manual) right before `leaf`; main closes it.
// tests/bursting/burst_e2e_test.cc checks each round's context against the closed form and the
// exact CCT of the same run, and that the walks reused the frames still on the stack.
//
//   deep_bursts [ROUNDS] [DEPTH]     (defaults 300, 60)
#include <stdio.h>
#include <stdlib.h>

extern void hcct_burst(int on) __attribute__((weak));

__attribute__((no_instrument_function)) static void burst(int on) {
  if (hcct_burst) hcct_burst(on);
}

volatile long sink;
__attribute__((noinline)) void leaf(long i) { sink ^= i; }

__attribute__((noinline)) void open_here(long i) {
  burst(1);
  leaf(i);
  __asm__ volatile("");  // (not a tail call)
}

__attribute__((noinline)) void mid(long i) {
  open_here(i);
  __asm__ volatile("");
}

// Two callers of the same shape: `mid`'s frame is at the same place under either.
__attribute__((noinline)) void via_a(long i) {
  mid(i);
  __asm__ volatile("");
}
__attribute__((noinline)) void via_b(long i) {
  mid(i + 1);
  __asm__ volatile("");
}

__attribute__((noinline)) void descend(int n, long i) {
  if (n > 1)
    descend(n - 1, i);
  else if (i % 2)
    via_b(i);
  else
    via_a(i);
  __asm__ volatile("");
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 300;
  int depth = argc > 2 ? atoi(argv[2]) : 60;
  for (int r = 0; r < rounds; ++r) {
    descend(depth - (r / 2 % 3) * 5, r);  // two rounds at each depth, one through each caller
    burst(0);
  }
  printf("%ld\n", sink);
  return 0;
}
