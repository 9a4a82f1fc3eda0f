// The count clock with threads and a module loaded later (docs/BURSTING.md, "The count clock").
//
//   count_threads [THREADS [CALLS [LIB]]]     (defaults 4, 400000, none)
//
// THREADS workers each call step() CALLS times; step calls leaf() every time and other() every
// fourth time: per worker thread, worker>step = CALLS, worker>step>leaf = CALLS,
// worker>step>other = CALLS / 4. Then, if LIB is given, main loads it (dlopen) and calls its
// lib_run(CALLS) itself and from a new thread: main>lib_run>lib_step = CALLS and
// lib_step>lib_leaf = 2 * CALLS under each. Built with clock=count, each thread's first enter in
// each module calls the runtime in (its countdown starts at 0), which arms it. Prints a checksum
// that does not depend on the build.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long calls = 400000;
static volatile unsigned long sink[64];
static void (*lib_run)(long);

__attribute__((noinline)) void leaf(long t, long i) { sink[t] += (unsigned long)i; }
__attribute__((noinline)) void other(long t, long i) { sink[t] ^= (unsigned long)i; }
__attribute__((noinline)) void step(long t, long i) {
  leaf(t, i);
  if ((i & 3) == 0) other(t, i);
}
__attribute__((noinline)) void *worker(void *arg) {
  long t = (long)arg;
  for (long i = 0; i < calls; ++i) step(t, i);
  return NULL;
}
__attribute__((noinline)) void *lib_thread(void *arg) {
  (void)arg;
  lib_run(calls);
  return NULL;
}

int main(int argc, char **argv) {
  long threads = argc > 1 ? atol(argv[1]) : 4;
  if (argc > 2) calls = atol(argv[2]);
  if (threads > 32) threads = 32;
  pthread_t tid[32];
  for (long t = 0; t < threads; ++t) pthread_create(&tid[t], NULL, worker, (void *)(t + 1));
  for (long t = 0; t < threads; ++t) pthread_join(tid[t], NULL);
  unsigned long lib_sum = 0;
  if (argc > 3) {
    void *lib = dlopen(argv[3], RTLD_NOW);
    if (!lib) {
      fprintf(stderr, "count_threads: %s\n", dlerror());
      return 2;
    }
    lib_run = (void (*)(long))dlsym(lib, "lib_run");
    unsigned long (*lib_sum_fn)(void) = (unsigned long (*)(void))dlsym(lib, "lib_sum");
    lib_run(calls);
    pthread_t t;
    pthread_create(&t, NULL, lib_thread, NULL);
    pthread_join(t, NULL);
    lib_sum = lib_sum_fn();
  }
  unsigned long sum = 0;
  for (int t = 0; t < 64; ++t) sum += sink[t];
  printf("%lu %lu\n", sum, lib_sum);
  return 0;
}
