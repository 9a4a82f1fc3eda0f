// Loads the library argv[1], calls its entry from main and from a second thread, unloads it, loads
// argv[2] (same layout: the loader reuses the addresses) and calls that one's entry from both
// threads. The worker thread sleeps through the dlclose and the dlopen, so its first event after
// them is its call into the new library. Prints where each entry was loaded.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

typedef int (*entry_fn)(int);
static entry_fn g_entry;
static pthread_barrier_t g_loaded, g_called;
static int g_worker_total;

static entry_fn load(const char *path, const char *symbol, void **handle) {
  *handle = dlopen(path, RTLD_NOW);
  if (!*handle) {
    fprintf(stderr, "%s\n", dlerror());
    return NULL;
  }
  return (entry_fn)dlsym(*handle, symbol);
}

static void *worker(void *arg) {
  (void)arg;
  for (int round = 0; round < 2; ++round) {
    pthread_barrier_wait(&g_loaded);
    g_worker_total += g_entry(3 + round);
    pthread_barrier_wait(&g_called);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  pthread_barrier_init(&g_loaded, NULL, 2);
  pthread_barrier_init(&g_called, NULL, 2);
  pthread_t thread;
  pthread_create(&thread, NULL, worker, NULL);
  const char *symbols[2] = {"alpha_entry", "gamma_entry"};
  int total = 0;
  for (int round = 0; round < 2; ++round) {
    void *handle;
    g_entry = load(argv[1 + round], symbols[round], &handle);
    if (!g_entry) return 2;
    printf("%s at %p\n", symbols[round] + 0, (void *)g_entry);
    pthread_barrier_wait(&g_loaded);
    pthread_barrier_wait(&g_called);
    total += g_entry(5 + 2 * round);
    dlclose(handle);
  }
  pthread_join(thread, NULL);
  printf("total %d worker %d\n", total, g_worker_total);
  return 0;
}
