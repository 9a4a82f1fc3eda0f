// A generator ping-ponging with main through makecontext/swapcontext, behind the usual next/yield
// functions: `pingpong SWITCHES`. Every produce and yield_value runs on the generator's stack, every
// next_value and consume on main's; the profile must keep one calling context per stack, in memory
// that does not grow with the number of switches.
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

static ucontext_t main_ctx, generator_ctx;
static volatile unsigned long value, total;

__attribute__((noinline)) void produce(unsigned long i) { value = i; }
__attribute__((noinline)) void consume(void) { total += value; }

__attribute__((noinline)) void yield_value(void) { swapcontext(&generator_ctx, &main_ctx); }
__attribute__((noinline)) void next_value(void) { swapcontext(&main_ctx, &generator_ctx); }

__attribute__((noinline)) void generator(void) {
  for (unsigned long i = 0;; ++i) {
    produce(i);
    yield_value();
  }
}

int main(int argc, char **argv) {
  static char stack[64 * 1024];
  unsigned long switches = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
  getcontext(&generator_ctx);
  generator_ctx.uc_stack.ss_sp = stack;
  generator_ctx.uc_stack.ss_size = sizeof stack;
  generator_ctx.uc_link = NULL;
  makecontext(&generator_ctx, generator, 0);
  for (unsigned long i = 0; i < switches / 2; ++i) {
    next_value();
    consume();
  }
  printf("%lu\n", (unsigned long)total);
  return 0;
}
