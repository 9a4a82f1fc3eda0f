/* A test program for the inline fast path (tests/kpath/test_e2e.cc): loops with data-dependent
 * branches, recursion (one function's activations nested in each other), three threads, and
 * optionally a profiling timer whose handler runs instrumented loops at arbitrary points — inside
 * the inline fast path and inside the runtime's slow path of the interrupted code.
 *
 * usage: fastpath [timer]   Prints a checksum. Deterministic apart from the handler's activations. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long handler_work(int n) {
  unsigned long s = 0;
  for (int i = 0; i < n; i++) s += (i % 3 == 0) ? (unsigned long)i : (unsigned long)i * 2;
  return s;
}

static void on_timer(int sig) {
  (void)sig;
  sink += handler_work(40);
}

__attribute__((noinline)) static unsigned long walk(unsigned long x, int depth) {
  unsigned long s = 0;
  for (int i = 0; i < 24; i++) {
    if ((x >> (i % 13)) & 1) s += x * (unsigned long)i;
    else if (i % 5 == 0) s ^= (unsigned long)i << 3;
    else s -= 1;
    if (i % 9 == 8 && depth > 0) s += walk(x * 31 + (unsigned long)i, depth - 1);
  }
  return s;
}

static void *thread_main(void *arg) {
  unsigned long seed = (unsigned long)arg, s = 0;
  for (int r = 0; r < 4000; r++) s += walk(seed * 1000003 + (unsigned long)r, 2);
  return (void *)s;
}

int main(int argc, char **argv) {
  if (argc > 1 && atoi(argv[1])) {
    struct sigaction sa = {0};
    sa.sa_handler = on_timer;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, 0);
    struct itimerval it = {{0, 50}, {0, 50}};
    setitimer(ITIMER_PROF, &it, 0);
  }
  pthread_t t[2];
  for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, thread_main, (void *)(i + 1));
  unsigned long sum = (unsigned long)thread_main((void *)3);
  for (int i = 0; i < 2; i++) {
    void *r;
    pthread_join(t[i], &r);
    sum += (unsigned long)r;
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, 0);
  printf("fastpath: %lu\n", sum);
  return 0;
}
