// The parent calls before() 10 times, forks; the child calls in_child() 20 times and exits with
// status 7; the parent waits and calls after() 30 times. Each process writes its own profile.
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

volatile int sink;
__attribute__((noinline)) void before(void) { sink++; }
__attribute__((noinline)) void in_child(void) { sink++; }
__attribute__((noinline)) void after(void) { sink++; }

__attribute__((noinline)) int spawn(void) {
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 20; ++i) in_child();
    return -1;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

int main(void) {
  for (int i = 0; i < 10; ++i) before();
  int child_status = spawn();
  if (child_status == -1) return 7;  // in the child
  for (int i = 0; i < 30; ++i) after();
  printf("child exited with %d\n", child_status);
  return 0;
}
