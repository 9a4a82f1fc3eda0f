// Calls before() 5 times, then execs itself with the argument "again", which calls after() 7 times.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

volatile int sink;
__attribute__((noinline)) void before(void) { sink++; }
__attribute__((noinline)) void after(void) { sink++; }

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "again") == 0) {
    for (int i = 0; i < 7; ++i) after();
    printf("after exec\n");
    return 3;
  }
  for (int i = 0; i < 5; ++i) before();
  fflush(stdout);
  char *args[] = {argv[0], (char *)"again", NULL};
  execv(argv[0], args);
  perror("execv");
  return 1;
}
