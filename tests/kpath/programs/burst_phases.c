/* Static bursting of path profiles under a schedule the program chooses (tests/kpath/test_burst.cc;
 * HCCT_OPTIONS=burst=manual, the test hook hcct_burst). Two phases, each in a loop of its own and
 * sampled at a different fraction of its iterations, as bursts on a timer would sample a phase
 * that profiling slows down less or more: phase A in 128 of every 640 iterations, phase B in 100 of
 * every 200. Their branches follow a fixed pseudo-random sequence, phase B's in runs (a two-state
 * Markov chain), and phase A calls a small looping leaf. One fraction for the whole run would
 * mis-scale both phases; the per-root ratio estimator scales each by its own loop's counters.
 *
 * usage: burst_phases N_A N_B [schedule]   schedule 0: no hcct_burst calls. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

void hcct_burst(int on) __attribute__((weak));

static unsigned long long state = 88172645463325252ull;
static int schedule = 1;

static unsigned next(void) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return (unsigned)(state >> 33);
}

static void burst(int on) {
  if (schedule && hcct_burst) hcct_burst(on);
}

__attribute__((noinline)) static unsigned leaf(unsigned x) {
  unsigned s = 0;
  for (unsigned i = 0; i < (x & 3); i++) s += i * x;
  return s;
}

__attribute__((noinline)) static unsigned long long phase_a(long n) {
  unsigned long long acc = 0;
  for (long i = 0; i < n; i++) {
    if (i % 640 == 0) burst(1);
    if (i % 640 == 128) burst(0);
    unsigned r = next();
    if (r % 4 == 0) acc += r;
    else acc ^= r >> 3;
    if ((r >> 8) % 3 == 0) acc += leaf(r);
  }
  return acc;
}

__attribute__((noinline)) static unsigned long long phase_b(long n) {
  unsigned long long acc = 0;
  int mode = 0;
  for (long i = 0; i < n; i++) {
    if (i % 200 == 0) burst(1);
    if (i % 200 == 100) burst(0);
    unsigned r = next();
    if (r % 16 == 0) mode = !mode;
    if (mode) acc += (unsigned long long)r * 3;
    else acc -= r;
    switch ((r >> 4) % 3) {
      case 0: acc += 1; break;
      case 1: acc ^= 7; break;
      default: break;
    }
  }
  return acc;
}

int main(int argc, char **argv) {
  long na = argc > 1 ? atol(argv[1]) : 300000, nb = argc > 2 ? atol(argv[2]) : 100000;
  if (argc > 3) schedule = atoi(argv[3]);
  unsigned long long a = phase_a(na);
  unsigned long long b = phase_b(nb);
  burst(0);
  printf("burst_phases %ld %ld: %llu %llu\n", na, nb, a, b);
  return 0;
}
