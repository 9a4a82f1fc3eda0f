// A library built with the GCC plugin (stage=early) that tests/bursting loads with dlopen twice:
// as is, and (a second copy, linked with one more DT_NEEDED) with the same code but its site table
// elsewhere in its data, so that the first copy's table, were it still used once the first copy is
// unloaded, would read other data where its chains were. An instrumented function inlined into
// another one opens a burst.
extern void hcct_burst(int on) __attribute__((weak));

__attribute__((no_instrument_function)) static void burst(int on) {
  if (hcct_burst) hcct_burst(on);
}

static volatile unsigned long sink;

__attribute__((noinline)) void lib_leaf(void) { sink += 1; }

static inline __attribute__((always_inline)) void lib_middle(int k) {
  burst(1);
  for (int i = 0; i < k; ++i) lib_leaf();
  burst(0);
}

__attribute__((noinline)) void lib_outer(int k) {
  sink += 2;
  lib_middle(k);
  sink += 3;
}

void lib_run(int k) { lib_outer(k); }

