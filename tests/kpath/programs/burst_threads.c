/* Per-thread start counters (tests/kpath/test_burst.cc; docs/KPATH.md, "Bursting"). Two worker
 * threads, each with a loop of its own (own_a, own_b) and both running one shared loop
 * (shared_loop) whose branches each thread takes with a different bias. With
 * HCCT_OPTIONS=burst=manual the workers open and close bursts with the test hook hcct_burst at
 * their own fractions of their iterations: A in 256 of every 1280, B in 1000 of every 2000 (as
 * bursts on a timer would sample a thread that profiling slows down less or more). (The iterations
 * that open a burst run in the uninstrumented copy, so their paths are never sampled: long periods
 * keep them below the hot threshold, a thousandth of a thread's paths.) Each thread's counters
 * are its own, so each thread's trees are scaled by its own T/S; one T/S for the shared loop over
 * both threads would over-count B's sequences and under-count A's.
 *
 * usage: burst_threads N_A N_B [schedule] [concurrent]
 *   schedule 0: no hcct_burst calls; concurrent 1: the workers run at once (default: A, then B,
 *   so that their burst schedules do not overlap); 2: A runs, then B runs its own loop without
 *   end while main exits after 50 ms (B's file is written by the final dump, from main). Prints a
 *   checksum per worker (2: A's only). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void hcct_burst(int on) __attribute__((weak));

static int schedule = 1;
static volatile unsigned sink;

struct job {
  long n;
  int bias;          /* of 8: how often shared_loop takes its first branch */
  long period, open; /* a burst for `open` of every `period` iterations */
  unsigned long long state, acc;
};

static unsigned next(struct job *j) {
  j->state = j->state * 6364136223846793005ull + 1442695040888963407ull;
  return (unsigned)(j->state >> 33);
}

static void schedule_point(const struct job *j, long i) {
  if (!schedule || !hcct_burst) return;
  if (i % j->period == 0) hcct_burst(1);
  if (i % j->period == j->open) hcct_burst(0);
}

__attribute__((noinline)) static unsigned long long shared_loop(struct job *j, long n) {
  unsigned long long acc = 0;
  for (long i = 0; i < n; i++) {
    schedule_point(j, i);
    unsigned r = next(j);
    if (r % 8 < (unsigned)j->bias) {
      acc += r;
      sink = r; /* (a store: the branch stays a branch, not a select) */
    } else {
      acc ^= r >> 3;
    }
    if ((r >> 8) % 4 == 0) {
      acc += 3;
      sink = 0;
    }
  }
  return acc;
}

__attribute__((noinline)) static unsigned long long own_a(struct job *j, long n) {
  unsigned long long acc = 0;
  for (long i = 0; i < n; i++) {
    schedule_point(j, i);
    unsigned r = next(j);
    if (r % 3 == 0) acc += r * 5;
    else if (r % 3 == 1) acc -= r;
  }
  return acc;
}

__attribute__((noinline)) static unsigned long long own_b(struct job *j, long n) {
  unsigned long long acc = 0;
  int mode = 0;
  for (long i = 0; i < n; i++) {
    schedule_point(j, i);
    unsigned r = next(j);
    if (r % 16 == 0) mode = !mode;
    if (mode) acc += (unsigned long long)r * 3;
    else acc ^= r;
  }
  return acc;
}

static void *worker_a(void *arg) {
  struct job *j = arg;
  j->acc = shared_loop(j, j->n) + own_a(j, j->n / 2);
  if (schedule && hcct_burst) hcct_burst(0);
  return NULL;
}

static void *worker_b(void *arg) {
  struct job *j = arg;
  j->acc = shared_loop(j, j->n) + own_b(j, j->n / 2);
  if (schedule && hcct_burst) hcct_burst(0);
  return NULL;
}

static void *worker_b_forever(void *arg) {
  struct job *j = arg;
  for (;;) j->acc += own_b(j, 1000);
  return NULL;
}

int main(int argc, char **argv) {
  struct job a = {argc > 1 ? atol(argv[1]) : 300000, 1, 1280, 256, 88172645463325252ull, 0};
  struct job b = {argc > 2 ? atol(argv[2]) : 100000, 6, 2000, 1000, 2463534242ull, 0};
  if (argc > 3) schedule = atoi(argv[3]);
  int concurrent = argc > 4 ? atoi(argv[4]) : 0;
  pthread_t ta, tb;
  if (concurrent == 2) {
    if (pthread_create(&ta, NULL, worker_a, &a) != 0 || pthread_join(ta, NULL) != 0) return 1;
    if (pthread_create(&tb, NULL, worker_b_forever, &b) != 0) return 1;
    struct timespec wait = {0, 50 * 1000 * 1000};
    nanosleep(&wait, NULL);
    printf("burst_threads %ld: %llu\n", a.n, a.acc);
    exit(0);
  }
  if (pthread_create(&ta, NULL, worker_a, &a) != 0) return 1;
  if (!concurrent && pthread_join(ta, NULL) != 0) return 1;
  if (pthread_create(&tb, NULL, worker_b, &b) != 0) return 1;
  if (concurrent && pthread_join(ta, NULL) != 0) return 1;
  if (pthread_join(tb, NULL) != 0) return 1;
  printf("burst_threads %ld %ld: %llu %llu\n", a.n, b.n, a.acc, b.acc);
  return 0;
}
