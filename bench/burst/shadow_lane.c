// The runtime side of bench/burst/inline_shadow_probe.c (a prototype, not the runtime): a per-thread
// shadow stack "lane" in initial-exec TLS of a shared library, as libhcct.so's would be, and the
// out-of-line entry points the probes call.
#include <stdint.h>
#include <stdlib.h>

#include "shadow_lane.h"

__thread struct Lane shadow_lane __attribute__((tls_model("initial-exec")));
volatile unsigned char shadow_gate;  // 1: probes take their open path
unsigned long slow_calls;

static struct Entry *entries;
enum { kEntries = 1 << 16 };

void lane_init(long countdown) {
  entries = calloc(kEntries, sizeof *entries);
  shadow_lane.top = entries;
  shadow_lane.limit = entries + kEntries - 1;
  shadow_lane.countdown = countdown;
  shadow_gate = 1;
}

// The lean route's floor: one out-of-line call per event doing the same push or pop.
void lane_enter_call(void *fn, void *site) {
  struct Lane *l = &shadow_lane;
  uintptr_t sp = (uintptr_t)__builtin_dwarf_cfa();
  struct Entry *t = l->top;
  if (__builtin_expect(t == l->limit || --l->countdown < 0, 0)) {
    lane_enter_slow(fn, site, sp);
    return;
  }
  t->fn = (uintptr_t)fn;
  t->site = (uintptr_t)site;
  t->sp = sp;
  l->top = t + 1;
}

void lane_exit_call(void *fn) {
  struct Lane *l = &shadow_lane;
  uintptr_t sp = (uintptr_t)__builtin_dwarf_cfa();
  struct Entry *t = l->top - 1;
  if (__builtin_expect(t->fn != (uintptr_t)fn || t->sp < sp, 0)) {
    lane_exit_slow(fn, sp);
    return;
  }
  l->top = t;
}

// Where a burst would start (countdown over) or the stack would grow: here only counted and
// re-armed, so that every variant makes the same pushes and pops.
void lane_enter_slow(void *fn, void *site, uintptr_t sp) {
  struct Lane *l = &shadow_lane;
  ++slow_calls;
  l->countdown = 1000000;
  struct Entry *t = l->top;
  t->fn = (uintptr_t)fn;
  t->site = (uintptr_t)site;
  t->sp = sp;
  l->top = t + 1;
}

void lane_exit_slow(void *fn, uintptr_t sp) {
  (void)fn;
  (void)sp;
  ++slow_calls;
  struct Lane *l = &shadow_lane;
  if (l->top != entries) --l->top;
}
