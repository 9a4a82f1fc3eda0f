// A compute-bound program with few calls (issue 17's benchmark of time sampling): `rounds` calls
// of a kernel that runs about `work` million multiply-adds each, through two contexts.
//   compute [rounds [work]]     (defaults: 40, 50)
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) double kernel(unsigned millions, double seed) {
  double x = seed, y = 1.0;
  for (unsigned long i = 0; i < millions * 1000000ul; ++i) {
    x = x * 1.0000001 + 1e-9;
    y += x * 0.5;
  }
  return y;
}

__attribute__((noinline)) double left(unsigned work) { return kernel(work, 1.0); }
__attribute__((noinline)) double right(unsigned work) { return kernel(work / 2, 2.0); }

int main(int argc, char **argv) {
  unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 40;
  unsigned work = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 50;
  double acc = 0;
  for (unsigned r = 0; r < rounds; ++r) acc += left(work) + right(work);
  printf("%g\n", acc);
  return 0;
}
