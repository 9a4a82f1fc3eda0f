// Counts paths in a dlopen'd library (dl_counted_lib.c), from the main thread and from a second
// thread, then unloads it before the threads' profiles are written: the runtime must not read the
// library's counter table or write its thread-local words once the library is gone. An optional
// second argument repeats the work (rounds), so that a run lasts long enough for timed bursts.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int (*walk)(int);
static int rounds = 1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int stage;  // 1: the thread has counted; 2: the library is unloaded

static void wait_for(int s) {
  pthread_mutex_lock(&lock);
  while (stage < s) pthread_cond_wait(&changed, &lock);
  pthread_mutex_unlock(&lock);
}
static void advance(int s) {
  pthread_mutex_lock(&lock);
  stage = s;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
}

static void *worker(void *arg) {
  long sum = 0;
  for (int r = 0; r < rounds; ++r)
    for (int i = 1; i <= 100; ++i) sum += walk(i);
  *(long *)arg = sum;
  advance(1);
  wait_for(2);  // exits after the library is gone
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  walk = (int (*)(int))dlsym(lib, "walk");
  if (argc > 2) rounds = atoi(argv[2]);
  long mine = 0, theirs = 0;
  for (int r = 0; r < rounds; ++r)
    for (int i = 1; i <= 100; ++i) mine += walk(i);
  pthread_t t;
  pthread_create(&t, NULL, worker, &theirs);
  wait_for(1);
  dlclose(lib);
  advance(2);
  pthread_join(t, NULL);
  printf("steps %ld %ld\n", mine, theirs);
  return 0;
}
