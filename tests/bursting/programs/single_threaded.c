// Whether glibc still takes its single-threaded paths while static bursting runs on the time clock
// (its timer thread is made with clone(), which glibc does not count: docs/BURSTING.md, "Time base
// and timer"). Makes calls for a while, so that bursts open and close, then prints glibc's
// __libc_single_threaded (1: malloc, free and stdio skip their atomic locks) and the sum.
//
//   single_threaded [CALLS]     (default 20000000)
#include <stdio.h>
#include <stdlib.h>
#include <sys/single_threaded.h>

volatile long sink;
__attribute__((noinline)) void leaf(long i) { sink += i; }
__attribute__((noinline)) void work(long n) {
  for (long i = 0; i < n; ++i) leaf(i);
}

int main(int argc, char **argv) {
  long calls = argc > 1 ? atol(argv[1]) : 20000000;
  work(calls);
  printf("single_threaded %d sum %ld\n", (int)__libc_single_threaded, (long)sink);
  return 0;
}
