// Bounded forests' budgets after a fork (docs/KPATH.md, "Growing budgets"): three threads each take
// a forest (a budget of one floor) and wait, blocked, while main forks; the child has only its
// forking thread, so all of the process's allowance is its own, and its forest, which needs more
// than one floor, grows instead of sweeping. Each process prints its pid and its result.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int release_pipe[2];

// One of 32 paths per iteration, chosen by the low bits of a periodic sequence of `period`
// pseudo-random values: the kWF at k = 4 holds about 3 · period non-root nodes.
__attribute__((noinline)) static unsigned long loop(unsigned long n, unsigned long period) {
  unsigned long a = 0, b = 0, c = 0, d = 0, e = 0;
  for (unsigned long i = 0; i < n; ++i) {
    unsigned long x = ((i % period) * 2654435761u) >> 7;
    if (x & 1) { __asm__ volatile("" ::: "memory"); a += 3; }
    if (x & 2) { __asm__ volatile("" ::: "memory"); b ^= i; }
    if (x & 4) { __asm__ volatile("" ::: "memory"); c += b; }
    if (x & 8) { __asm__ volatile("" ::: "memory"); d -= a; }
    if (x & 16) { __asm__ volatile("" ::: "memory"); e += c ^ d; }
  }
  return a + b + c + d + e;
}

static void *waiter(void *arg) {
  unsigned long r = loop(1000, 10);  // a profiler, so a budget, for this thread
  char byte;
  while (read(release_pipe[0], &byte, 1) < 0) {
  }
  return (void *)r;
}

int main(int argc, char **argv) {
  unsigned long period = argc > 1 ? strtoul(argv[1], 0, 10) : 100;
  if (pipe(release_pipe) != 0) return 1;
  pthread_t threads[3];
  for (int i = 0; i < 3; ++i) pthread_create(&threads[i], 0, waiter, 0);
  usleep(100000);  // (the threads' first paths made their forests)
  pid_t child = fork();
  if (child == 0) {
    printf("child %d: %lu\n", (int)getpid(), loop(200 * period, period));
    return 0;
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (write(release_pipe[1], "xxx", 3) != 3) return 1;
  for (int i = 0; i < 3; ++i) pthread_join(threads[i], 0);
  printf("parent %d: child exited %d\n", (int)getpid(), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
