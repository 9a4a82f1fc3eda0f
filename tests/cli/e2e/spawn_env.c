// Starts two children with an environment of their own (posix_spawn, and fork + execve), as
// programs that sanitise their children's environment do: `hcct record` must follow them anyway
// (unless --no-follow). `spawn_env child` is what the children run.
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

volatile int sink;
__attribute__((noinline)) void in_child(void) { sink++; }
__attribute__((noinline)) void in_parent(void) { sink++; }

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) {
    in_child();
    return 0;
  }
  in_parent();
  char *env[] = {"PATH=.", "HOME=/nonexistent", NULL};
  char *child_argv[] = {argv[0], "child", NULL};
  pid_t a, b;
  int sa = -1, sb = -1;
  if (posix_spawn(&a, argv[0], NULL, NULL, child_argv, env) == 0) waitpid(a, &sa, 0);
  if ((b = fork()) == 0) {
    execve(argv[0], child_argv, env);
    _exit(127);
  }
  waitpid(b, &sb, 0);
  printf("children exited with %d %d\n", WEXITSTATUS(sa), WEXITSTATUS(sb));
  return 0;
}
