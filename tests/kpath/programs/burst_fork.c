// Forks in the middle of a loop, inside a burst (burst=manual: the parent opens one before the
// loop): the child finishes the loop and runs a phase of its own; the parent finishes the loop.
// Each process prints how many iterations of each loop it ran itself, and its results, so that a
// test can check that each process's profile (start counters and forest) holds its own paths only.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void hcct_burst(int on) __attribute__((weak));
static void burst(int on) {
  if (hcct_burst) hcct_burst(on);
}

static unsigned long mix(unsigned long x, int i) {
  return (i % 3 == 0) ? x * 31 + (unsigned long)i : (i % 3 == 1) ? x ^ (x >> 7) : x + 0x9e37;
}

__attribute__((noinline)) static unsigned long child_phase(int n) {
  unsigned long h = 7;
  for (int i = 0; i < n; ++i) h = (h & 1) ? h * 3 + 1 : h / 2 + (unsigned long)i;
  return h;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100000, at = argc > 2 ? atoi(argv[2]) : 40000;
  unsigned long x = 1;
  pid_t child = -1;
  long mine = 0;  // iterations of main's loop run by this process after the fork (or all, in the parent)
  burst(1);
  for (int i = 0; i < n; ++i) {
    if (i == at) {
      fflush(stdout);
      child = fork();
      if (child < 0) return 2;
      mine = 0;
      if (child > 0) mine = at;  // the parent ran the first part too
    }
    if (i == at + 1000) burst(0);  // both processes close the burst opened before the fork
    if (i == at + 20000) burst(1);
    if (i == at + 22000) burst(0);
    x = mix(x, i);
    ++mine;
  }
  if (child == 0) {
    burst(1);
    unsigned long h = child_phase(30000);
    burst(0);
    printf("child loop %ld x %lu phase %lu\n", mine, x, h);
    return 0;
  }
  int status = 0;
  waitpid(child, &status, 0);
  printf("parent loop %ld x %lu child %d\n", mine, x, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
