// A library built with clock=count, loaded by count_threads with dlopen: its countdown is static
// TLS that exists in no thread's first arming (tests/bursting/burst_e2e_test.cc, "count clock").
static volatile unsigned long lib_sink;

__attribute__((noinline)) void lib_leaf(long i) { lib_sink += (unsigned long)i; }
__attribute__((noinline)) void lib_step(long i) {
  lib_leaf(i);
  lib_leaf(i + 1);
}
void lib_run(long n) {
  for (long i = 0; i < n; ++i) lib_step(i);
}
unsigned long lib_sum(void) { return lib_sink; }
