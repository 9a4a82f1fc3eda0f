// One loop per kind of exit test, for the split trigger of loop versions (docs/GUIDE.md, "Trigger"):
// each body mixes the index into a checksum, so a wrong bound shows in the output.
#include <stdio.h>
#include <stdlib.h>

static unsigned long h = 1469598103934665603ul;
static void mix(long v) { h = (h ^ (unsigned long)v) * 1099511628211ul; }

__attribute__((noinline)) void up_less(long n) { for (long i = 0; i < n; ++i) mix(i); }
__attribute__((noinline)) void up_less_equal(long n) { for (long i = 1; i <= n; ++i) mix(i * 3); }
__attribute__((noinline)) void up_not_equal(long n) { for (long i = 0; i != n; ++i) mix(i ^ 5); }
__attribute__((noinline)) void up_unsigned_less(unsigned long n) { for (unsigned long i = 2; i < n; ++i) mix((long)i); }
__attribute__((noinline)) void up_by_three(long n) { for (long i = -7; i < n; i += 3) mix(i); }
__attribute__((noinline)) void down_greater(long n) { for (long i = n; i > 0; --i) mix(i + 11); }
__attribute__((noinline)) void down_greater_equal(long n) { for (long i = n; i >= -2; --i) mix(i * 7); }
__attribute__((noinline)) void down_by_two(long n) { for (long i = n; i >= -2; i += -2) mix(i * 5); }
__attribute__((noinline)) void down_not_equal(long n) { for (long i = n; i != -4; --i) mix(i - 1); }
static unsigned char bytes[64];
static int ints[64];
__attribute__((noinline)) void up_pointer(long n) { for (unsigned char *p = bytes; p < bytes + n; ++p) mix(*p + (p - bytes)); }
__attribute__((noinline)) void up_pointer_not_equal(long n) { for (int *p = ints; p != ints + n; ++p) mix(*p ^ (p - ints)); }
__attribute__((noinline)) void down_pointer(long n) { for (unsigned char *p = bytes + n; p > bytes; --p) mix(p[-1] * 3); }
// `!=` with a step that divides the distance (SCEV proves it): x meets n exactly.
__attribute__((noinline)) void up_not_equal_by_two(long n) { for (long i = 0; i != 2 * n; i += 2) mix(i); }
// Not splittable, the counter: `!=` with a step of 2 that SCEV cannot prove to divide the distance
// (x might jump over n); an unsigned `<=` (i wraps when n is the largest value: no nuw); `i -= 2`
// (clang 14's SCEV drops a sub's nsw).
__attribute__((noinline)) void up_not_equal_unproven(long even) { for (long i = 0; i != even; i += 2) mix(i + 1); }
__attribute__((noinline)) void up_unsigned_less_equal(unsigned long n) { for (unsigned long i = 2; i <= n; ++i) mix((long)i); }
__attribute__((noinline)) void down_minus_two(long n) { for (long i = n; i >= -2; i -= 2) mix(i * 9); }

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 40;
  if (n > 60) n = 60;  // the pointer loops walk 64-element arrays
  for (int k = 0; k < 64; ++k) bytes[k] = (unsigned char)(k * 7), ints[k] = k * 13;
  for (long round = 0; round < 3; ++round) {
    long m = n + round;  // entries of several lengths
    up_less(m);
    up_less_equal(m);
    up_not_equal(m);
    up_unsigned_less((unsigned long)m);
    up_by_three(m);
    down_greater(m);
    down_greater_equal(m);
    down_not_equal(m);
    down_by_two(m);
    up_not_equal_by_two(m);
    up_not_equal_unproven(2 * m);
    up_unsigned_less_equal((unsigned long)m);
    down_minus_two(m);
    up_pointer(m);
    up_pointer_not_equal(m);
    down_pointer(m);
  }
  printf("%lx\n", h);
  return 0;
}
