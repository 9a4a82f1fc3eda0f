// How cheap can the shadow stack kept between bursts be? examples/calls.c's functions (fib and a
// loop of square/cube calls: a call every few instructions) with hand-written probes of four
// shapes, selected at compile time by SHAPE:
//   0  no probes (native)
//   1  the plugin's gated probe, gate closed (profiling off; `burst_sync=auto` between bursts)
//   2  the gated probe, gate open, calling an out-of-line push/pop (shadow_lane.c): the floor of a
//      lean runtime route, option (a) of docs/BURSTING.md "The cost between bursts"
//   3  the gated probe, gate open, with the push/pop and the event clock's countdown inline on a
//      TLS lane of the runtime's shared library, calling out only at the countdown's end or a full
//      lane: option (b)
// Run by bench/burst/inline_shadow_probe.sh (callgrind instructions per call, CPU time).
#include <stdio.h>
#include <stdlib.h>

#include "shadow_lane.h"

#ifndef SHAPE
#define SHAPE 0
#endif

static volatile unsigned char gate_closed;
static volatile unsigned char *volatile gate_ptr = &gate_closed;

__attribute__((always_inline)) static inline uintptr_t stack_pointer(void) {
  uintptr_t sp;
  __asm__ volatile("mov %%rsp, %0" : "=r"(sp));
  return sp;
}

__attribute__((always_inline)) static inline void probe_enter(void *fn) {
  if (SHAPE == 0) return;
  if (__builtin_expect(*gate_ptr, 0)) {
    void *site = __builtin_return_address(0);
    if (SHAPE == 2) {
      lane_enter_call(fn, site);
    } else if (SHAPE == 3) {
      struct Lane *l = &shadow_lane;
      struct Entry *t = l->top;
      uintptr_t sp = stack_pointer();
      if (__builtin_expect(t == l->limit || --l->countdown < 0, 0)) {
        lane_enter_slow(fn, site, sp);
      } else {
        t->fn = (uintptr_t)fn;
        t->site = (uintptr_t)site;
        t->sp = sp;
        l->top = t + 1;
      }
    }
  }
}

__attribute__((always_inline)) static inline void probe_exit(void *fn) {
  if (SHAPE == 0) return;
  if (__builtin_expect(*gate_ptr, 0)) {
    if (SHAPE == 2) {
      lane_exit_call(fn);
      __asm__ volatile("");
    } else if (SHAPE == 3) {
      struct Lane *l = &shadow_lane;
      struct Entry *t = l->top - 1;
      uintptr_t sp = stack_pointer();
      if (__builtin_expect(t->fn != (uintptr_t)fn || t->sp < sp, 0))
        lane_exit_slow(fn, sp);
      else
        l->top = t;
    }
  }
}

__attribute__((noinline)) unsigned square(unsigned x) {
  probe_enter((void *)square);
  unsigned r = x * x;
  probe_exit((void *)square);
  return r;
}

__attribute__((noinline)) unsigned cube(unsigned x) {
  probe_enter((void *)cube);
  unsigned r = square(x) * x;
  probe_exit((void *)cube);
  return r;
}

__attribute__((noinline)) unsigned fib(unsigned n) {
  probe_enter((void *)fib);
  unsigned r = n < 2 ? n : fib(n - 1) + fib(n - 2);
  probe_exit((void *)fib);
  return r;
}

__attribute__((noinline)) unsigned long work(unsigned rounds) {
  probe_enter((void *)work);
  unsigned long acc = 0;
  for (unsigned i = 0; i < rounds; ++i) acc += square(i) + cube(i);
  probe_exit((void *)work);
  return acc;
}

int main(int argc, char **argv) {
  unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 30;
  unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 20000000;
  if (SHAPE >= 2) {
    lane_init(1000000);
    gate_ptr = &shadow_gate;
  }
  unsigned f = fib(n);
  unsigned long w = work(rounds);
  printf("fib(%u) = %u, work(%u) = %lu\n", n, f, rounds, w);
  if (SHAPE >= 2) fprintf(stderr, "slow calls %lu\n", slow_calls);
  return 0;
}
