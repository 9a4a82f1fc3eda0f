// Microbenchmark of probe gate schemes (docs/GCC-PLUGIN.md, "The gate"). The workload is the worst
// case for probes: millions of calls of a function whose body is a compare and two adds.
//
//   PROBE=0  no hand-written probe (build natively, with -fplugin, or with -finstrument-functions)
//   PROBE=1  weak undefined gate: address test, then byte test (two branches)
//   PROBE=2  alternative: a hidden pointer that a constructor points at the gate if present,
//            else at a local zero byte; one load of the pointer, one byte test
//   PROBE=4  the plugin's scheme by hand: select the gate's address or a local zero byte without a
//            branch (cmov), then one byte test
//   PROBE=3  lower bound: a strong reference to the gate (the program cannot run without libhcct)
#include <stdio.h>
#include <stdlib.h>

#if PROBE == 1
extern volatile unsigned char __hcct_gate __attribute__((weak));
extern void __hcct_enter(void *, void *) __attribute__((weak, cold, nothrow));
extern void __hcct_exit(void *, void *) __attribute__((weak, cold, nothrow));
#define GATE_OPEN() (&__hcct_gate != 0 && __hcct_gate)
#elif PROBE == 2
extern volatile unsigned char __hcct_gate __attribute__((weak));
extern void __hcct_enter(void *, void *) __attribute__((weak, cold, nothrow));
extern void __hcct_exit(void *, void *) __attribute__((weak, cold, nothrow));
static volatile unsigned char closed;
__attribute__((visibility("hidden"))) volatile unsigned char *gate_ptr = &closed;
__attribute__((constructor)) static void init_gate_ptr(void) {
  if (&__hcct_gate)
    gate_ptr = &__hcct_gate;
}
#define GATE_OPEN() (*gate_ptr)
#elif PROBE == 4
extern volatile unsigned char __hcct_gate __attribute__((weak));
extern void __hcct_enter(void *, void *) __attribute__((weak, cold, nothrow));
extern void __hcct_exit(void *, void *) __attribute__((weak, cold, nothrow));
static volatile unsigned char closed;
static inline volatile unsigned char *gate_or_closed(void) {
  volatile unsigned char *p = &__hcct_gate;
  if (!p)
    p = &closed;
  return p;
}
#define GATE_OPEN() (*gate_or_closed())
#elif PROBE == 3
extern volatile unsigned char __hcct_gate;
extern void __hcct_enter(void *, void *) __attribute__((cold, nothrow));
extern void __hcct_exit(void *, void *) __attribute__((cold, nothrow));
#define GATE_OPEN() (__hcct_gate)
#endif

#if PROBE
#define ENTER(fn)                                                                                  \
  if (GATE_OPEN())                                                                                 \
  __hcct_enter((void *)fn, __builtin_return_address(0))
// As the plugin does: the exit's call site is read before the gate test (see hcct_plugin.cc).
#define EXIT(fn)                                                                                   \
  do {                                                                                             \
    void *site = __builtin_return_address(0);                                                     \
    if (GATE_OPEN())                                                                               \
      __hcct_exit((void *)fn, site);                                                               \
  } while (0)
#else
#define ENTER(fn) (void)0
#define EXIT(fn) (void)0
#endif

__attribute__((noinline)) long fib(int n) {
  ENTER(fib);
  long r = n < 2 ? n : fib(n - 1) + fib(n - 2);
  EXIT(fib);
  return r;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 32;
  printf("%ld\n", fib(n));
  return 0;
}
