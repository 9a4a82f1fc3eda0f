// A call-intensive C program whose calling-context counts are known in closed form.
//
//   calls [N [R]]     (defaults: N = 30, R = 20000000)
//
// Contexts (by routine) and their counts:
//   main                          1
//   main > fib^d                  number of fib calls at recursion depth d of fib(N)
//   main > work                   1
//   main > work > square          R
//   main > work > cube            R
//   main > work > cube > square   R
#include <stdio.h>
#include <stdlib.h>

// noinline keeps each call a real call at every optimisation level, so the counts above hold for
// any build.
__attribute__((noinline)) unsigned square(unsigned x) { return x * x; }

__attribute__((noinline)) unsigned cube(unsigned x) { return square(x) * x; }

__attribute__((noinline)) unsigned fib(unsigned n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__attribute__((noinline)) unsigned long work(unsigned rounds) {
  unsigned long acc = 0;
  for (unsigned i = 0; i < rounds; ++i) acc += square(i) + cube(i);
  return acc;
}

int main(int argc, char **argv) {
  unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 30;
  unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 20000000;
  unsigned f = fib(n);
  unsigned long w = work(rounds);
  printf("fib(%u) = %u, work(%u) = %lu\n", n, f, rounds, w);
  return 0;
}
