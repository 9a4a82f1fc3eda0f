// Coroutines (makecontext/swapcontext) on a stack of each kind: `coroutines KIND ROUNDS`, KIND one
// of local (an array in main's frame, issue 26), heap, static, mmap.
// 1. foo runs bar as a coroutine; bar returns through uc_link (a switch libc makes itself).
//    Contexts: main;foo;bar;work and, later, main;baz.
// 2. A generator ping-pongs with pingpong ROUNDS times: main;pingpong;consume and
//    main;pingpong;generator;produce, ROUNDS each (the generator is rooted where it was first
//    switched into).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

enum { kStackBytes = 16384 };

static ucontext_t caller_ctx, co_ctx;
static volatile unsigned long sink;
static unsigned long rounds_left;
static int generator_done;

__attribute__((noinline)) void work(void) { sink++; }
__attribute__((noinline)) void bar(void) { work(); }
__attribute__((noinline)) void baz(void) { sink++; }
__attribute__((noinline)) void produce(void) { sink++; }
__attribute__((noinline)) void consume(void) { sink--; }

__attribute__((noinline)) void make_coroutine(char *stack, size_t size, void (*entry)(void)) {
  getcontext(&co_ctx);
  co_ctx.uc_stack.ss_sp = stack;
  co_ctx.uc_stack.ss_size = size;
  co_ctx.uc_link = &caller_ctx;
  makecontext(&co_ctx, entry, 0);
}

__attribute__((noinline)) void foo(char *stack, size_t size) {
  make_coroutine(stack, size, bar);
  swapcontext(&caller_ctx, &co_ctx);  // back here when bar returns
}

__attribute__((noinline)) void generator(void) {
  while (rounds_left) {
    produce();
    --rounds_left;
    swapcontext(&co_ctx, &caller_ctx);
  }
  generator_done = 1;
}

__attribute__((noinline)) void pingpong(char *stack, size_t size, unsigned long rounds) {
  rounds_left = rounds;
  make_coroutine(stack, size, generator);
  for (;;) {
    swapcontext(&caller_ctx, &co_ctx);
    if (generator_done) break;
    consume();
  }
}

int main(int argc, char **argv) {
  static char static_stack[kStackBytes];
  char local_stack[kStackBytes];
  const char *kind = argc > 1 ? argv[1] : "local";
  unsigned long rounds = argc > 2 ? strtoul(argv[2], NULL, 10) : 100;
  char *stack = NULL;
  if (!strcmp(kind, "local")) {
    stack = local_stack;
  } else if (!strcmp(kind, "heap")) {
    stack = malloc(kStackBytes);
  } else if (!strcmp(kind, "static")) {
    stack = static_stack;
  } else if (!strcmp(kind, "mmap")) {
    stack = mmap(NULL, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED) stack = NULL;
  }
  if (!stack) {
    fprintf(stderr, "usage: coroutines local|heap|static|mmap [ROUNDS]\n");
    return 2;
  }
  foo(stack, kStackBytes);
  baz();
  pingpong(stack, kStackBytes, rounds);
  printf("%s %lu\n", kind, sink);
  return 0;
}
