// longjmp out of 10 instrumented frames, ROUNDS times (default 100), back to the same setjmp in a
// loop in main, which then calls after(). Expected contexts: main > l1 > ... > l10 (ROUNDS each)
// and main > after (ROUNDS); nothing else below main.
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf env;

__attribute__((noinline)) void l10(int i) { longjmp(env, i + 1); }
#define LEVEL(n, next) \
  __attribute__((noinline)) void l##n(int i) { next(i); __asm__ volatile("" ::: "memory"); }
LEVEL(9, l10)
LEVEL(8, l9)
LEVEL(7, l8)
LEVEL(6, l7)
LEVEL(5, l6)
LEVEL(4, l5)
LEVEL(3, l4)
LEVEL(2, l3)
LEVEL(1, l2)

volatile int sink;
__attribute__((noinline)) void after(void) { sink++; }

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 100;
  volatile int jumps = 0;
  for (volatile int i = 0; i < rounds; ++i) {
    if (setjmp(env) == 0) l1(i);
    else ++jumps;
    after();
  }
  printf("jumps %d\n", jumps);
  return 0;
}
