// Where an activation runs after a burst (docs/KPATH.md, "The way back"): `work` has two outermost
// loops, the first with an inner loop, and each iteration of either calls `note`, which records its
// return address: one call site in `work`'s own body, others in `work.kpath`'s copies. The program
// prints its result, and writes to SITES how many iterations returned to each address (as an
// offset from `work`).
//   burst_way_back REPS N SITES
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_SITES 16
static uintptr_t site[MAX_SITES];
static long calls_from[MAX_SITES];

__attribute__((noinline)) static void note(long *acc, long v) {
  uintptr_t from = (uintptr_t)__builtin_return_address(0);
  // (A scan of fixed length: how many sites there are must not change how often a loop here
  // iterates, which the test compares with an exhaustive run.)
  int found = -1, free_slot = -1;
  for (int s = 0; s < MAX_SITES; ++s) {
    if (site[s] == from) found = s;
    if (!site[s] && free_slot < 0) free_slot = s;
  }
  if (found < 0 && free_slot >= 0) site[found = free_slot] = from;
  if (found >= 0) ++calls_from[found];
  *acc += v;
}

// acc's address escapes (a variable both copies share), n and scale live across both loops, i and
// j are header phis, mid is defined between the loops.
__attribute__((noinline)) long work(long n, long scale) {
  long acc = 0;
  for (long i = 0; i < n; ++i) {
    long inner = 0;
    for (long j = 0; j <= (i & 3); ++j) inner += j * scale + i;
    note(&acc, inner);
  }
  long mid = acc % 1000 + scale;
  for (long i = n; i > 0; i -= 2) note(&acc, mid ^ i);
  return acc;
}

int main(int argc, char **argv) {
  long reps = argc > 1 ? atol(argv[1]) : 1000, n = argc > 2 ? atol(argv[2]) : 50, total = 0;
  for (long r = 0; r < reps; ++r) total += work(n + (r & 7), r & 15);
  printf("result %ld\n", total);
  FILE *sites = argc > 3 ? fopen(argv[3], "w") : NULL;
  for (int s = 0; sites && s < MAX_SITES; ++s)  // (all of them: as often in every run)
    if (site[s]) fprintf(sites, "site %ld %ld\n", (long)(site[s] - (uintptr_t)&work), calls_from[s]);
  if (sites) fclose(sites);
  return 0;
}
