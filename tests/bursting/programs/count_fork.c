// The count clock across fork (docs/BURSTING.md, "The count clock"): ROUNDS calls of step (each
// calling leaf) before a fork, then ROUNDS more in the parent and in the child. The child inherits
// the forking thread's countdowns in the middle of a gap; its events are its own: exactly
// 2 * ROUNDS enters (step and leaf), the parent's 4 * ROUNDS + 1 (main).
//
//   count_fork [ROUNDS]     (default 300000)
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "step_leaf.h"

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 300000;
  for (long i = 0; i < rounds; ++i) step(i);
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) return 2;
  for (long i = 0; i < rounds; ++i) step(i);
  if (child) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status)) return 3;
  }
  printf("%s %lu\n", child ? "parent" : "child", sink & 0xff);
  return 0;
}
