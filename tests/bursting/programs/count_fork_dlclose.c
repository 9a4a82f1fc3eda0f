// The count clock across a fork made inside a dlclose (docs/BURSTING.md, "The count clock"): main
// dlopens FORK_LIB (count_fork_lib.c), makes ROUNDS calls into it and dlcloses it; its destructor
// forks, so the child's only thread is inside the runtime's dlclose interposer when the child
// begins. Back from dlclose, parent and child each make ROUNDS calls of step (each calling leaf),
// the child exits normally and the parent prints its child's exit status.
//
//   count_fork_dlclose FORK_LIB [ROUNDS]     (default 1000000)
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "step_leaf.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: count_fork_dlclose FORK_LIB [ROUNDS]\n");
    return 2;
  }
  long rounds = argc > 2 ? atol(argv[2]) : 1000000;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  void (*run)(long) = lib ? (void (*)(long))dlsym(lib, "fork_lib_run") : NULL;
  if (!run) {
    fprintf(stderr, "count_fork_dlclose: %s\n", dlerror());
    return 2;
  }
  run(rounds);
  const pid_t parent = getpid();
  fflush(stdout);
  if (dlclose(lib) != 0) return 3;
  const int in_child = getpid() != parent;
  for (long i = 0; i < rounds; ++i) step(i);
  if (in_child) return 0;
  int status = 0;
  if (wait(&status) < 0) {
    perror("count_fork_dlclose: wait");
    return 4;
  }
  printf("child %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
