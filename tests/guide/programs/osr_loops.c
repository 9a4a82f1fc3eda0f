/* OSR-point insertion (tests/guide/test_osr.cc): loops with known header executions per entry.
 * Built at -O0 and -O2 with the kpath plugin; the test makes the guidance from a profile of the
 * same build, sets each loop's threshold and checks where the handler fires. The bodies record
 * their loop variable so that a handler can check where in the loop it was called. */
#include <stdio.h>
#include <stdlib.h>

volatile long osr_inner_i = -1;  /* the last body iteration of f, g and the inner loop of h */
volatile long osr_outer_a = -1;  /* the last body iteration of h's outer loop */

/* n + 1 header executions per entry. */
__attribute__((noinline)) static unsigned long f(int n) {
  unsigned long s = 0;
  for (int i = 0; i < n; i++) {
    osr_inner_i = i;
    s += i % 3;
  }
  return s;
}

__attribute__((noinline)) static unsigned long g(long n) {
  unsigned long s = 0;
  for (long i = 0; i < n; i++) {
    osr_inner_i = i;
    s += i ^ (s >> 3);
  }
  return s;
}

/* Outer: rows + 1 header executions in one entry; inner: cols + 1 per entry, `rows` entries. */
__attribute__((noinline)) static unsigned long h(int rows, int cols) {
  unsigned long s = 0;
  for (int a = 0; a < rows; a++) {
    for (int b = 0; b < cols; b++) {
      osr_inner_i = b;
      s += a * b;
    }
    osr_outer_a = a;
  }
  return s;
}

int main(int argc, char **argv) {
  long scale = argc > 1 ? atol(argv[1]) : 1;
  unsigned long t = f(5) + f(10) + f(20);
  t += g(100000 * scale);
  t += h(4, 50);
  printf("osr_loops: %lu\n", t);
  return 0;
}
