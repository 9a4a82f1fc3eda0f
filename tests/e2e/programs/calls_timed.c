// examples/calls.c with the program's own CPU clock read around its two phases (issue 17's
// independent oracle): clock_gettime(CLOCK_THREAD_CPUTIME_ID) before and after fib(N) and
// work(R), printed as
//   cpu main <phase> <seconds>
// and the thread's whole CPU time as `cpu main total`. The phases are the subtrees main > fib
// (fib calls only fib: its self time) and main > work (work, square, cube).
//   calls_timed [N [R]]
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((no_instrument_function)) static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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
  double t0 = cpu_now();
  unsigned f = fib(n);
  double t1 = cpu_now();
  unsigned long w = work(rounds);
  double t2 = cpu_now();
  printf("fib(%u) = %u, work(%u) = %lu\n", n, f, rounds, w);
  printf("cpu main fib %.6f\ncpu main work %.6f\ncpu main total %.6f\n", t1 - t0, t2 - t1, cpu_now());
  return 0;
}
