// A count module (clock=count) for count_races: it tells the program when its destructor runs, so
// that the program can hold a dlclose of it between its destructors and the unmapping.
static volatile unsigned long race_sink;

__attribute__((noinline)) void race_leaf(long i) { race_sink += (unsigned long)i; }
void race_run(long n) {
  for (long i = 0; i < n; ++i) race_leaf(i);
}
unsigned long race_sum(void) { return race_sink; }

void count_races_destructor(void) __attribute__((weak));  // (count_races exports it)
__attribute__((destructor, no_instrument_function)) static void on_unload(void) {
  if (count_races_destructor) count_races_destructor();
}
