/* Tight loops between bursts (docs/KPATH.md, "The event clock"): `scan` is an innermost loop
 * that calls nothing, so f's own body keeps the event clock's countdown in a register there;
 * `scan_calling` is the same loop with a call in it, which keeps it in memory. Both have
 * data-dependent branches and early exits, so that the exits' write-backs are exercised.
 *
 * usage: burst_tight_loop [n]   (default 200000) */
#include <stdio.h>
#include <stdlib.h>

static unsigned table[4096];

__attribute__((noinline)) unsigned long scan(unsigned seed, unsigned limit) {
  unsigned long sum = 0;
  unsigned x = seed;
  for (unsigned i = 0; i < limit; i++) {
    x = x * 1103515245u + 12345u;
    if (x & 0x100) sum += table[x & 4095];
    else sum ^= x;
    if (sum == 0x5eed) break; /* (an exit other than the loop's test) */
  }
  return sum;
}

__attribute__((noinline)) unsigned observe(unsigned v) { return v ^ (v >> 7); }

__attribute__((noinline)) unsigned long scan_calling(unsigned seed, unsigned limit) {
  unsigned long sum = 0;
  unsigned x = seed;
  for (unsigned i = 0; i < limit; i++) {
    x = x * 1103515245u + 12345u;
    if (x & 0x100) sum += observe(x);
    else sum ^= x;
  }
  return sum;
}

int main(int argc, char **argv) {
  unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], 0, 10) : 200000;
  for (unsigned i = 0; i < 4096; i++) table[i] = i * 2654435761u;
  unsigned long total = 0;
  for (unsigned round = 0; round < n / 100; round++) {
    total += scan(round, 1 + round % 200);
    total += scan_calling(round, 1 + round % 50);
  }
  printf("tight %u: %lu\n", n, total);
  return 0;
}
