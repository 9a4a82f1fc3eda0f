// End-to-end workload for `hcct record`: instrumented with -finstrument-functions. Counts are known
// exactly: main 1, mid 100 (main thread) + 20 (worker), leaf 100*100 + 20*100, rare 1, worker 1.
#include <pthread.h>
#include <stdio.h>

volatile int sink;

__attribute__((noinline)) void leaf(int x) {  // MARK:leaf_def
  sink += x;
}

__attribute__((noinline)) void mid(int n) {
  for (int i = 0; i < n; ++i) leaf(i);  // MARK:mid_calls_leaf
}

__attribute__((noinline)) void rare(void) { sink += 1; }

void *worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 20; ++i) mid(100);
  return NULL;
}

int main(void) {
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  for (int i = 0; i < 100; ++i) mid(100);
  rare();
  pthread_join(t, NULL);
  printf("%d\n", sink);
  return 0;
}
