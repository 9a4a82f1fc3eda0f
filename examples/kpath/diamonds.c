/* Two branches in a loop, the first data-dependent and the second always the same way: the two hot
 * paths differ only in the first branch. Their Ball-Larus IDs differ by the second branch's path
 * count, 2, so they have the same low bit and prefer the same guess slot of the path profiler's
 * fast path (docs/KPATH.md, "Guesses"): the adversarial case of that design, kept for the tests and
 * the benchmarks.
 *
 * usage: diamonds [iterations [anything: take the second branch the other way]]   (default 1000000) */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000, s = 0;
  unsigned r = 1;
  int flag = argc > 2;
  for (long i = 0; i < n; i++) {
    r = r * 1103515245u + 12345u;
    if ((r >> 16) & 1) s += i;
    else s ^= i;
    if (flag) s -= 3;
    else s += 1;
  }
  printf("diamonds %ld: %ld\n", n, s);
  return 0;
}
