// Recursion DEPTH frames deep (default 1,000,000), on a thread with a stack large enough for it.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) unsigned long descend(unsigned long n) {
  if (n == 0) return 0;
  unsigned long r = descend(n - 1) + 1;
  __asm__ volatile("" ::: "memory");  // not a tail call
  return r;
}

static void *run(void *arg) {
  unsigned long depth = *(unsigned long *)arg;
  printf("depth %lu\n", descend(depth - 1) + 1);
  return NULL;
}

int main(int argc, char **argv) {
  unsigned long depth = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)1 << 30);
  pthread_t t;
  if (pthread_create(&t, &attr, run, &depth) != 0) return 2;
  pthread_join(t, NULL);
  return 0;
}
