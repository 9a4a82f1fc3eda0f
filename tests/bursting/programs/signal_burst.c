// Bursts that open inside a signal handler (the machine stack's walk by unwind rules meets the
// signal frame, `__restore_rt`, whose FDE has the `S` augmentation and no rule the runtime's table
// holds: libgcc's unwinder walks instead; docs/BURSTING.md "The cost of a burst start"). Each round
// recurses to one of three depths and raises SIGUSR1; the handler opens a burst (burst=manual) and
// calls `leaf`. tests/bursting/burst_e2e_test.cc checks the contexts against the exact CCT.
//
//   signal_burst [ROUNDS]     (default 200)
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

extern void hcct_burst(int on) __attribute__((weak));

__attribute__((no_instrument_function)) static void burst(int on) {
  if (hcct_burst) hcct_burst(on);
}

volatile long sink;
__attribute__((noinline)) void leaf(long i) { sink += i; }

__attribute__((noinline)) void in_handler(long i) {
  burst(1);
  leaf(i);
  __asm__ volatile("");
}

void handler(int sig) {
  in_handler(sig);
  __asm__ volatile("");
}

__attribute__((noinline)) void deep(int n) {
  if (n)
    deep(n - 1);
  else
    raise(SIGUSR1);
  __asm__ volatile("");
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200;
  signal(SIGUSR1, handler);
  for (int r = 0; r < rounds; ++r) {
    deep(20 + r % 3);
    burst(0);
  }
  printf("%ld\n", sink);
  return 0;
}
