// An object with the GCC plugin's probes (probe ABI 2) and no unit descriptor, as objects built
// before descriptors existed (or with -flto) are: the probes are written here by hand, and one
// function, middle, is "inlined" into outer, i.e. its probes run in outer's machine frame. Such an
// object registers nothing, so burst_sync=auto must keep a shadow stack for it (the machine stack
// would give main>outer>leaf).
//
//   old_probes [K]     (default 1000): main > outer > middle opens a burst, calls leaf K times,
//                      closes it. Recorded: main>outer>middle>leaf = K.
#include <stdio.h>
#include <stdlib.h>

extern volatile unsigned char __hcct_gate __attribute__((weak));
extern void __hcct_enter_open(void *fn, void *call_site) __attribute__((weak));
extern void __hcct_exit_open(void *fn) __attribute__((weak));
extern void hcct_burst(int on) __attribute__((weak));

// Inlined into each function, so that __builtin_return_address(0) is the function's, as in the
// plugin's probe.
static inline __attribute__((always_inline)) void enter(void *fn) {
  if (&__hcct_gate && __hcct_gate) __hcct_enter_open(fn, __builtin_return_address(0));
}
static inline __attribute__((always_inline)) void leave(void *fn) {
  if (&__hcct_gate && __hcct_gate) __hcct_exit_open(fn);
  __asm__ volatile("");  // no tail call, as the plugin's exit probe
}

static volatile unsigned long sink;
static int K = 1000;

__attribute__((noinline)) void leaf(void) {
  enter((void *)leaf);
  sink += 1;
  leave((void *)leaf);
}

// Never called: its address is the identity middle's probes pass.
__attribute__((noinline)) void middle(void) { sink += 7; }

__attribute__((noinline)) void outer(void) {
  enter((void *)outer);
  sink += 2;
  enter((void *)middle);  // middle, inlined
  if (hcct_burst) hcct_burst(1);
  for (int i = 0; i < K; ++i) leaf();
  if (hcct_burst) hcct_burst(0);
  leave((void *)middle);
  sink += 3;
  leave((void *)outer);
}

int main(int argc, char **argv) {
  enter((void *)main);
  if (argc > 1) K = atoi(argv[1]);
  outer();
  printf("%lu\n", sink);
  leave((void *)main);
  return 0;
}
