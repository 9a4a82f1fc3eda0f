// A program with a known time split (issue 17's acceptance), measured by the program itself: each
// phase's CPU time is read with clock_gettime(CLOCK_THREAD_CPUTIME_ID) around it and printed as
//   cpu <thread> <phase> <seconds>
// so the test compares hcct's per-context self-time shares with this independent oracle.
// Phases: the same function `work` reached through distinct contexts (alpha 3 units, beta 1
// unit); `long_call`, one call that runs long (hot by time, cold by calls); `many_calls`, a loop of
// short calls to `tiny` (hot by calls); two threads with different loads; a thread that sleeps.
// argv[1]: the unit of CPU time in seconds (default 0.25); argv[2]: "spread" to also make 600
// contexts called often (so that in hcct mode with a small epsilon long_call's call counter is
// evicted).
// For time=wall the program also prints each phase's wall-clock time (CLOCK_MONOTONIC), as
//   wall <thread> <phase> <seconds>
// and its sleeping thread sleeps (nanosleep) and then blocks in `read` on a pipe until the main
// thread's phases end; it counts the calls that failed with EINTR ("eintr <n>": must be 0, the
// program would see a profiler's signal there).
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__attribute__((no_instrument_function)) static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((no_instrument_function)) static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

volatile double g_sink;
static int g_pipe[2];
static int g_eintr;

// Spins for `seconds` of this thread's CPU time, without calls that are instrumented.
__attribute__((noinline)) void work(double seconds) {
  double end = cpu_now() + seconds, x = 0;
  while (cpu_now() < end)
    for (int i = 0; i < 200; ++i) x += i * 0.5;
  g_sink = x;
}

__attribute__((noinline)) void alpha(double unit) { work(3 * unit); }
__attribute__((noinline)) void beta(double unit) { work(unit); }
__attribute__((noinline)) void long_call(double unit) { work(2 * unit); }
__attribute__((noinline)) void tiny(int i) { g_sink += i; }

__attribute__((noinline)) void many_calls(double unit) {
  double end = cpu_now() + unit;
  int i = 0;
  while (cpu_now() < end)
    for (int k = 0; k < 100; ++k) tiny(i++);
}

// 600 contexts (two call sites of 300 functions' worth: leaf_<n> by depth), each called often.
__attribute__((noinline)) void leaf(int depth) {
  if (depth > 0) leaf(depth - 1);
}
__attribute__((noinline)) void spread(void) {
  for (int round = 0; round < 200; ++round)
    for (int d = 0; d < 300; ++d) leaf(d % 40);
}

static double g_unit = 0.25;

__attribute__((noinline)) void light_load(void) { work(g_unit); }
__attribute__((noinline)) void heavy_load(void) { work(3 * g_unit); }
// One nanosleep of 300 ms (nanosleep is never restarted after a signal handler, SA_RESTART or not).
__attribute__((noinline)) void sleeper(void) {
  struct timespec ts = {0, 300 * 1000 * 1000};
  while (nanosleep(&ts, &ts) != 0)
    if (errno == EINTR) ++g_eintr;
}

// Blocks in read() on a pipe until the main thread's phases are over.
__attribute__((noinline)) void wait_pipe(void) {
  char c;
  while (read(g_pipe[0], &c, 1) < 0)
    if (errno == EINTR) ++g_eintr;
}

static void *run_light(void *arg) {
  (void)arg;
  double t0 = cpu_now();
  light_load();
  printf("cpu light light_load %.6f\n", cpu_now() - t0);
  printf("cpu light total %.6f\n", cpu_now());
  return NULL;
}

static void *run_heavy(void *arg) {
  (void)arg;
  double t0 = cpu_now();
  heavy_load();
  printf("cpu heavy heavy_load %.6f\n", cpu_now() - t0);
  printf("cpu heavy total %.6f\n", cpu_now());
  return NULL;
}

static void *run_sleeper(void *arg) {
  (void)arg;
  double w0 = wall_now();
  sleeper();
  double w1 = wall_now();
  wait_pipe();
  double w2 = wall_now();
  printf("wall sleepy sleeper %.6f\nwall sleepy wait_pipe %.6f\nwall sleepy total %.6f\n", w1 - w0, w2 - w1,
         w2 - w0);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) g_unit = atof(argv[1]);
  int with_spread = argc > 2 && strcmp(argv[2], "spread") == 0;
  double start = wall_now();
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (pipe(g_pipe) != 0) return 1;
  pthread_t light, heavy, sleepy;
  pthread_create(&light, NULL, run_light, NULL);
  pthread_create(&heavy, NULL, run_heavy, NULL);
  pthread_create(&sleepy, NULL, run_sleeper, NULL);
  double t0 = cpu_now(), w0 = wall_now();
  alpha(g_unit);
  double t1 = cpu_now(), w1 = wall_now();
  beta(g_unit);
  double t2 = cpu_now(), w2 = wall_now();
  long_call(g_unit);
  double t3 = cpu_now(), w3 = wall_now();
  many_calls(g_unit);
  double t4 = cpu_now(), w4 = wall_now();
  if (with_spread) spread();
  printf("cpu main alpha %.6f\ncpu main beta %.6f\ncpu main long_call %.6f\ncpu main many_calls %.6f\n",
         t1 - t0, t2 - t1, t3 - t2, t4 - t3);
  printf("wall main alpha %.6f\nwall main beta %.6f\nwall main long_call %.6f\nwall main many_calls %.6f\n",
         w1 - w0, w2 - w1, w3 - w2, w4 - w3);
  if (write(g_pipe[1], "x", 1) != 1) return 1;
  pthread_join(light, NULL);
  pthread_join(heavy, NULL);
  pthread_join(sleepy, NULL);
  printf("cpu main total %.6f\n", cpu_now());
  printf("wall main total %.6f\neintr %d\n", wall_now() - start, g_eintr);
  return 0;
}
