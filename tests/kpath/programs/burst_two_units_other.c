/* The second unit of burst_two_units (see burst_two_units.c). */
__attribute__((noinline)) long count_other(long n) {
  long sum = 0;
  for (long i = 0; i < n; i++) sum += (i & 1) ? i : 2;
  return sum;
}
