// Bursts that open where a machine frame's stack pointer at its call differs from the one its
// probes passed, and where a frame stays on the machine stack after its function's exit probe ran
// (issue 16, the unmatched exits of burst_sync=auto): the program opens each burst itself
// (burst=manual) at such a point and closes it once the frames around it have returned, so that
// their exits are processed inside the burst. tests/bursting/burst_e2e_test.cc checks, against the
// exact CCT of the same run (exact=1), that every sampled context is a true one, that no exit went
// unmatched, and the windows' counts.
//
//   machine_frames [ROUNDS]     (default 1000)
#include <stdio.h>
#include <stdlib.h>

extern void hcct_burst(int on) __attribute__((weak));

__attribute__((no_instrument_function)) static void burst(int on) {
  if (hcct_burst) hcct_burst(on);
}

volatile long sink;
__attribute__((noinline)) void leaf(long i) { sink ^= i; }

// Eight integer arguments: the last two go on the stack, pushed right before the call, so the
// caller's stack pointer at this call is 16 bytes below the one its probes passed.
__attribute__((noinline)) long many(long a, long b, long c, long d, long e, long f, long g, long h) {
  burst(1);
  leaf(a);
  return a + b + c + d + e + f + g + h;
}

__attribute__((noinline)) long pusher(long x) {
  long r = many(x, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6, x + 7);
  leaf(r);
  return r;
}

// The frame grows by alloca after its enter probe: its stack pointer at the call below is lower.
__attribute__((noinline)) void take(volatile char *p) {
  burst(1);
  leaf(p[0]);
}

__attribute__((noinline)) void grower(int n) {
  volatile char *p = __builtin_alloca(n);
  p[0] = (char)n;
  take(p);
  sink += p[0];
}

// A call in tail position whose callee needs stack arguments its caller did not receive: gcc's
// tail-call pass marks it, so stage=late puts forwarder's exit probe before it, but the expander
// cannot make it a jump and emits an ordinary call: forwarder's frame stays on the machine stack
// while target runs, after forwarder has left.
__attribute__((noinline)) long target(long a, long b, long c, long d, long e, long f, long g, long h) {
  burst(1);
  leaf(h);
  return a ^ b ^ c ^ d ^ e ^ f ^ g ^ h;
}

__attribute__((noinline)) long forwarder(long a, long b) { return target(a, b, a + b, a - b, 4, 5, 6, 7); }

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1000;
  long total = 0;
  for (int r = 0; r < rounds; ++r) {
    total += pusher(r);
    burst(0);
    grower(16 + r % 64);
    burst(0);
    total += forwarder(r, 3);
    burst(0);
  }
  printf("%ld\n", total + sink);
  return 0;
}
