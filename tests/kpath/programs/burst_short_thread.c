/* A thread that lives wholly between bursts (tests/kpath/test_burst.cc; docs/KPATH.md, "The event
 * clock"). A worker runs a short loop and exits before main opens its one burst (burst=manual:
 * hcct_burst around main's loop only), so no burst ever samples the worker. Its start counters
 * still say how many paths it ran: the runtime must know the thread to write them, and `hcct paths`
 * must say that it ran unsampled, and how much.
 *
 * usage: burst_short_thread N_MAIN N_WORKER
 *   prints both loops' checksums. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void hcct_burst(int on) __attribute__((weak));

static volatile unsigned sink;

__attribute__((noinline)) static unsigned long long short_loop(long n) {
  unsigned long long acc = 0, x = 88172645463325252ull;
  for (long i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if (x % 3 == 0) {
      acc += x;
      sink = (unsigned)x;
    } else {
      acc ^= x >> 5;
    }
  }
  return acc;
}

__attribute__((noinline)) static unsigned long long main_loop(long n) {
  unsigned long long acc = 0, x = 2463534242ull;
  for (long i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    if ((x >> 33) % 4 == 0) {
      acc += x >> 7;
      sink = 0;
    } else {
      acc -= x >> 40;
    }
  }
  return acc;
}

static unsigned long long worker_acc;

static void *worker(void *arg) {
  worker_acc = short_loop(*(long *)arg);
  return NULL;
}

int main(int argc, char **argv) {
  long n_main = argc > 1 ? atol(argv[1]) : 100000, n_worker = argc > 2 ? atol(argv[2]) : 5000;
  pthread_t t;
  if (pthread_create(&t, NULL, worker, &n_worker) != 0 || pthread_join(t, NULL) != 0) return 1;
  if (hcct_burst) hcct_burst(1);
  unsigned long long acc = main_loop(n_main);
  if (hcct_burst) hcct_burst(0);
  printf("burst_short_thread %ld %ld: %llu %llu\n", n_main, n_worker, acc, worker_acc);
  return 0;
}
