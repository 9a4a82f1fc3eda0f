// 32 long-lived threads, thread churn (CHURN short-lived threads, default 2000), a detached thread
// still running at exit, and an OpenMP team: every thread must be profiled.
//   task: called 1000 times by each long-lived thread, 10 times by each short-lived one,
//   omp_task: 100 times by each of 4 OpenMP threads.
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) void task(unsigned long i) { sink += i; }
__attribute__((noinline)) void omp_task(unsigned long i) { sink += i; }
__attribute__((noinline)) void spin(void) { sink++; }

static void *long_lived(void *arg) {
  (void)arg;
  for (unsigned long i = 0; i < 1000; ++i) task(i);
  return NULL;
}

static void *short_lived(void *arg) {
  (void)arg;
  for (unsigned long i = 0; i < 10; ++i) task(i);
  return NULL;
}

static volatile int started;
static void *forever(void *arg) {
  (void)arg;
  started = 1;
  for (;;) spin();
  return NULL;
}

int main(int argc, char **argv) {
  int churn = argc > 1 ? atoi(argv[1]) : 2000;
  pthread_t live;
  pthread_create(&live, NULL, forever, NULL);
  pthread_detach(live);
  pthread_t threads[32];
  for (int i = 0; i < 32; ++i) pthread_create(&threads[i], NULL, long_lived, NULL);
  for (int i = 0; i < churn; i += 16) {
    pthread_t batch[16];
    int n = churn - i < 16 ? churn - i : 16;
    for (int j = 0; j < n; ++j) pthread_create(&batch[j], NULL, short_lived, NULL);
    for (int j = 0; j < n; ++j) pthread_join(batch[j], NULL);
  }
  for (int i = 0; i < 32; ++i) pthread_join(threads[i], NULL);
#pragma omp parallel num_threads(4)
  {
    for (unsigned long i = 0; i < 100; ++i) omp_task(i);
  }
  while (!started) usleep(1000);
  printf("done\n");
  return 0;
}
