// Irreducible loops (a cycle with two entries, made with goto), nested in a reducible one, with
// a call inside: both copies of a versioned build must compute the same, and each loop header
// the DFS picks must count exactly the paths that start there.
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static unsigned step(unsigned x) { return x * 1103515245u + 12345u; }

static unsigned tangle(unsigned seed, int rounds) {
  unsigned x = seed, acc = 0;
  int n = 0;
  if (x & 1) goto right;
left:
  acc += x >> 3;
  x = step(x);
  if (++n >= rounds) goto done;
  if (x & 4) goto left;
right:
  acc ^= x;
  x = x * 5 + 1;
  if (++n >= rounds) goto done;
  if (x & 8) goto right;
  goto left;
done:
  return acc + (unsigned)n;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  unsigned total = 0;
  for (int i = 0; i < n; ++i) total += tangle((unsigned)i * 2654435761u, 1 + i % 97);
  printf("%u\n", total);
  return 0;
}
