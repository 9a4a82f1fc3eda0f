/* A small function without loops (tests/kpath/test_burst.cc: "f's own body keeps native's
 * frame on the event clock"): between bursts its versioned body should cost what the native code
 * costs plus the start counter and the clock's test, without saving registers for a runtime call.
 * usage: burst_leaf N   prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long leaf(const long *a, long i) {
  if (i > 0) return a[i & 7] + i;
  return a[(-i) & 7] * 2 - i;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000, a[8] = {3, 1, 4, 1, 5, 9, 2, 6}, sum = 0;
  for (long i = -n; i < n; i++) sum += leaf(a, i);
  printf("burst_leaf %ld: %ld\n", n, sum);
  return 0;
}
