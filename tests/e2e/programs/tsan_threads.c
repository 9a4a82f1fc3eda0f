// Threads for the ThreadSanitizer build of the runtime: short-lived threads that exit (each writes
// its profile), threads still calling instrumented functions when main exits (the final dump stops
// them and reads their trees), and a fork. Built with -fsanitize=thread and the runtime's sources
// built the same way (hcct_runtime_tsan): TSan must report nothing.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static __thread volatile int sink;  // per thread: the program itself has no race
__attribute__((noinline)) void leaf(int i) { sink += i; }
__attribute__((noinline)) void branch(int i) {
  for (int j = 0; j < 8; ++j) leaf(i + j);
}

static void *short_lived(void *arg) {
  for (int i = 0; i < 200; ++i) branch((int)(long)arg + i);
  return NULL;
}

static void *forever(void *arg) {
  for (long i = 0;; ++i) branch((int)(i + (long)arg));
  return NULL;
}

int main(void) {
  pthread_t spinning[2];
  for (long i = 0; i < 2; ++i) pthread_create(&spinning[i], NULL, forever, (void *)i);
  for (int round = 0; round < 20; ++round) {
    pthread_t t[4];
    for (long i = 0; i < 4; ++i) pthread_create(&t[i], NULL, short_lived, (void *)i);
    for (int i = 0; i < 4; ++i) pthread_join(t[i], NULL);
  }
  pid_t pid = fork();
  if (pid == 0) {
    branch(1);
    exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  printf("done\n");
  exit(0);  // the spinning threads are live at exit
}
