// Instrumented programs for which `hcct record` writes no profile, each for a reason it must name
// (tests/cli/test_record.cc): built static (HINT_STATIC, by the link), with its own probe hooks
// (HINT_OWN_HOOKS), or ending by abort() (HINT_ABORT). Prints a line, so that its output can be
// compared with and without hcct.
#include <stdio.h>
#include <stdlib.h>

#ifdef HINT_OWN_HOOKS
static unsigned long g_entries;
__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *fn, void *site) {
  (void)fn;
  (void)site;
  ++g_entries;
}
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *fn, void *site) {
  (void)fn;
  (void)site;
}
#endif

__attribute__((noinline)) static int hint_work(int n) { return n * 3; }

int main(void) {
  int sum = 0;
  for (int i = 0; i < 10; ++i) sum += hint_work(i);
  printf("%d\n", sum);
  fflush(stdout);
#ifdef HINT_ABORT
  abort();
#endif
  return 0;
}
