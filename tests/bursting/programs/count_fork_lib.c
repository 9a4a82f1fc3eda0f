// A count module (clock=count) whose destructor forks: count_fork_dlclose's child is born inside
// the dlclose that unloads it (a library that runs system() or popen from its destructor does the
// same). The child goes on from the fork in this destructor, back through the dlclose.
#include <stdlib.h>
#include <unistd.h>

static volatile unsigned long fork_lib_sink;

__attribute__((noinline)) void fork_lib_leaf(long i) { fork_lib_sink += (unsigned long)i; }
void fork_lib_run(long n) {
  for (long i = 0; i < n; ++i) fork_lib_leaf(i);
}

__attribute__((destructor)) static void fork_on_unload(void) {
  if (fork() < 0) abort();
}
