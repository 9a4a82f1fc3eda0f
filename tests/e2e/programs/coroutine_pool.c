// A coroutine pool reusing the stack of an abandoned coroutine: `coroutine_pool ROUNDS`. Each round
// a generator starts on the pool's one stack and is abandoned while suspended inside produce; the
// stack is then made again (makecontext) for a worker that runs to its end and returns through
// uc_link. Contexts, ROUNDS each: main;abandon;start;generator;produce and
// main;reuse;start;worker;work (each coroutine rooted where it was first switched into, the
// worker never under the generator's frames left on the stack).
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

enum { kStackBytes = 65536 };

static ucontext_t caller_ctx, co_ctx;
static char *pool_stack;
static volatile unsigned long sink;

__attribute__((noinline)) void produce(void) {
  sink++;
  swapcontext(&co_ctx, &caller_ctx);  // suspended here for good
}
__attribute__((noinline)) void generator(void) { produce(); }
__attribute__((noinline)) void work(void) { sink += 2; }
__attribute__((noinline)) void worker(void) { work(); }

__attribute__((noinline)) void start(void (*entry)(void)) {
  getcontext(&co_ctx);
  co_ctx.uc_stack.ss_sp = pool_stack;
  co_ctx.uc_stack.ss_size = kStackBytes;
  co_ctx.uc_link = &caller_ctx;
  makecontext(&co_ctx, entry, 0);
  swapcontext(&caller_ctx, &co_ctx);
}

__attribute__((noinline)) void abandon(void) { start(generator); }
__attribute__((noinline)) void reuse(void) { start(worker); }

int main(int argc, char **argv) {
  unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 10;
  pool_stack = malloc(kStackBytes);
  if (!pool_stack) return 1;
  for (unsigned long i = 0; i < rounds; ++i) {
    abandon();
    reuse();
  }
  printf("%lu\n", sink);
  return 0;
}
