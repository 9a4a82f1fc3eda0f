/* Runs a program and writes its wait4 figures to the file named by its first argument:
 *   "<exit code or -signal> <user s> <sys s> <wall s> <ru_maxrss KB>\n"
 *
 *   spawn_rusage OUT_FILE PROGRAM [ARGS...]
 *
 * Why not from Python directly: ru_maxrss is a high-water mark that survives exec, so a child
 * forked (or vforked) from the bench script starts at the script's own RSS (~13-20 MB) and every
 * program would seem to use at least that. This helper is small (about 1 MB resident), so the
 * child it forks starts below any real program. bench/real/run.py compiles it once. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: spawn_rusage OUT_FILE PROGRAM [ARGS...]\n");
    return 2;
  }
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  pid_t pid = fork();
  if (pid < 0) {
    perror("spawn_rusage: fork");
    return 2;
  }
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    perror("spawn_rusage: exec");
    _exit(127);
  }
  int status;
  struct rusage usage;
  if (wait4(pid, &status, 0, &usage) != pid) {
    perror("spawn_rusage: wait4");
    return 2;
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  FILE *out = fopen(argv[1], "w");
  if (!out) {
    perror(argv[1]);
    return 2;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  double wall = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
  fprintf(out, "%d %.6f %.6f %.6f %ld\n", code, seconds(usage.ru_utime), seconds(usage.ru_stime), wall,
          usage.ru_maxrss);
  return fclose(out) == 0 ? 0 : 2;
}
