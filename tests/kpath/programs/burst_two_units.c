/* An executable of two translation units, each with a loop (tests/kpath/test_burst.cc: "the event
 * clock is one countdown per thread for all of an executable's units"). Main counts in this unit,
 * then calls count_other (burst_two_units_other.c), then counts here again.
 * usage: burst_two_units N   prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

long count_other(long n);

__attribute__((noinline)) long count_here(long n) {
  long sum = 0;
  for (long i = 0; i < n; i++) sum += (i % 3 == 0) ? i : 1;
  return sum;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  long sum = count_here(n);
  sum += count_other(n);
  sum += count_here(n / 2);
  printf("burst_two_units %ld: %ld\n", n, sum);
  return 0;
}
