// End-to-end workload for the time exports (record with time=cpu): CPU time in known contexts.
// main -> hot -> spin burns ~3/4 of the time in one call (hot by time, cold by calls); main -> warm
// -> spin ~1/4; main -> tick is called 20000 times and costs almost nothing (hot by calls, cold by
// time). The spin length comes from argv[1] in milliseconds of thread CPU time (default 200).
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

// Not instrumented: its probes (kept by gcc when it inlines it) would make it a context of its own,
// and the kernel delivers many of the CPU-time timer's signals as the clock_gettime system call
// returns: how spin's time split between spin and spin > cpu_ms followed the scheduling (up to
// 30 of hot()'s 150 samples under load).
__attribute__((no_instrument_function)) static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) void spin(double ms) {
  const double end = cpu_ms() + ms;
  while (cpu_ms() < end)
    for (int i = 0; i < 1000; ++i) sink += i;
}

__attribute__((noinline)) void hot(double ms) { spin(ms); }
__attribute__((noinline)) void warm(double ms) { spin(ms); }
__attribute__((noinline)) void tick(int i) { sink += i; }

int main(int argc, char **argv) {
  const double ms = argc > 1 ? atof(argv[1]) : 200;
  for (int i = 0; i < 20000; ++i) tick(i);
  hot(ms * 3 / 4);
  warm(ms / 4);
  return 0;
}
