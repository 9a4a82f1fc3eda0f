// A program with its own malloc, built with -finstrument-functions like the rest of it, whose lock
// is held when its first instrumented function runs: registering the thread with the runtime must
// not call malloc (it would wait for this very lock for ever).
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;  // not recursive
static char *arena, *cursor, *end;
volatile int sink;

__attribute__((noinline)) static void account(size_t n) { sink += (int)n; }

// The allocator's entry points carry no probes; the helper it calls under its lock does.
__attribute__((no_instrument_function)) void *malloc(size_t n) {
  pthread_mutex_lock(&lock);
  account(n);  // the program's first event, under the lock
  if (!arena) {
    arena = cursor = mmap(NULL, 64 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    end = arena + (64 << 20);
  }
  n = (n + 15) & ~(size_t)15;
  void *p = NULL;
  if (cursor + n + 16 <= end) {
    memcpy(cursor, &n, sizeof n);
    p = cursor + 16;
    cursor += n + 16;
  }
  pthread_mutex_unlock(&lock);
  return p;
}
__attribute__((no_instrument_function)) void free(void *p) { (void)p; }
__attribute__((no_instrument_function)) void *calloc(size_t a, size_t b) {
  void *p = malloc(a * b);
  if (p) memset(p, 0, a * b);
  return p;
}
__attribute__((no_instrument_function)) void *realloc(void *old, size_t n) {
  void *p = malloc(n);
  if (p && old) {
    size_t had;
    memcpy(&had, (char *)old - 16, sizeof had);
    memcpy(p, old, had < n ? had : n);
  }
  return p;
}

__attribute__((no_instrument_function)) int main(void) {
  char *p = malloc(100);
  strcpy(p, "allocated");
  printf("%s\n", p);
  return 0;
}
