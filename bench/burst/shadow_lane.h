// bench/burst/inline_shadow_probe.c's prototype contract between probe and runtime: the TLS lane.
#ifndef SHADOW_LANE_H
#define SHADOW_LANE_H
#include <stdint.h>

struct Entry {
  uintptr_t fn, site, sp;
};
struct Lane {
  struct Entry *top;    // the next free entry
  struct Entry *limit;  // pushes at limit go out of line (the stack grows there)
  long countdown;       // enters until the next burst: below zero, out of line
};

extern __thread struct Lane shadow_lane __attribute__((tls_model("initial-exec")));
extern volatile unsigned char shadow_gate;
extern unsigned long slow_calls;

void lane_init(long countdown);
void lane_enter_call(void *fn, void *site);
void lane_exit_call(void *fn);
void lane_enter_slow(void *fn, void *site, uintptr_t sp);
void lane_exit_slow(void *fn, uintptr_t sp);
#endif
