// longjmp out of several frames to two different setjmp points, with known calling-context counts
// of its noinline functions in every build (before or after inlining, gcc or clang).
//
//   longjmp_deep [R]      (default R = 300)
//
// Round i (0 <= i < R) calls top(i) from main, then after(i). top sets a jump point and calls
// d1 > middle; middle sets its own and calls d2 > d3 > leaf. leaf jumps to middle's point when
// i is odd (O of them: middle then calls recover_mid), to top's point when i % 10 == 0 (X of them:
// top then calls recover_top; middle and d1 are left without returning), else returns. middle
// calls after_mid whenever control comes back to it.
//
// Contexts of the noinline functions (key = routine) and their counts:
//   main                                                 1
//   main > top                                           R
//   main > top > d1                                      R
//   main > top > d1 > middle                             R
//   main > top > d1 > middle > d2                        R
//   main > top > d1 > middle > d2 > d3                   R
//   main > top > d1 > middle > d2 > d3 > leaf            R
//   main > top > d1 > middle > recover_mid               O
//   main > top > d1 > middle > after_mid                 R - X
//   main > top > recover_top                             X
//   main > after                                         R
// and nothing else below main among these functions.
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static jmp_buf top_env, mid_env;
volatile int sink;

NOINLINE void leaf(int i) {
  if (i % 2)
    longjmp(mid_env, 1);
  if (i % 10 == 0)
    longjmp(top_env, 1);
  sink = sink + i;
}

NOINLINE void d3(int i) {
  leaf(i);
  __asm__ volatile("" ::: "memory");  // keeps the call a call, not a tail call
}

NOINLINE void d2(int i) {
  d3(i);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void recover_mid(int i) { sink = sink + 2 * i; }
NOINLINE void after_mid(int i) { sink = sink + 3 * i; }

NOINLINE void middle(int i) {
  if (setjmp(mid_env) == 0)
    d2(i);
  else
    recover_mid(i);
  after_mid(i);
}

NOINLINE void d1(int i) {
  middle(i);
  __asm__ volatile("" ::: "memory");
}

NOINLINE void recover_top(int i) { sink = sink + 5 * i; }

NOINLINE void top(int i) {
  if (setjmp(top_env) == 0)
    d1(i);
  else
    recover_top(i);
}

NOINLINE void after(int i) { sink = sink + i; }

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 300;
  for (int i = 0; i < rounds; ++i) {
    top(i);
    after(i);
  }
  printf("%d\n", sink);
  return 0;
}
