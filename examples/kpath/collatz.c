/* Collatz trajectories: a tight loop whose body alternates between two branches in
 * data-dependent patterns (an odd step is always followed by an even one), the kind of
 * correlation across iterations that only multi-iteration paths show.
 *
 * usage: collatz [limit]   (default 300000) */
#include <stdio.h>
#include <stdlib.h>

static unsigned steps(unsigned long x) {
  unsigned n = 0;
  while (x != 1) {
    if (x & 1) x = 3 * x + 1;
    else x /= 2;
    n++;
  }
  return n;
}

int main(int argc, char **argv) {
  unsigned long limit = argc > 1 ? strtoul(argv[1], 0, 10) : 300000;
  unsigned long best = 1, total = 0;
  unsigned most = 0;
  for (unsigned long x = 1; x <= limit; x++) {
    unsigned s = steps(x);
    total += s;
    if (s > most) {
      most = s;
      best = x;
    }
  }
  printf("collatz %lu: longest %lu (%u steps), total %lu\n", limit, best, most, total);
  return 0;
}
