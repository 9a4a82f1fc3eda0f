// Functions gcc splits (issue 13, "split functions"): concat's early return is partially inlined
// into main and the loop left in concat.part.0, which ends with `jmp __cyg_profile_func_exit`;
// check_size's unlikely branch goes to a .cold piece that returns. The exact CCT is analytic:
// `split_functions ROUNDS` prints the counts the test expects.
#include <stdio.h>
#include <stdlib.h>

volatile int sink;
__attribute__((noinline)) void heavy(int i) { sink += i; }
__attribute__((noinline, cold)) void complain(int n) { sink -= n; }

void check_size(int n) {
  if (__builtin_expect(n > 1000000, 0)) {
    complain(n);
    fprintf(stderr, "too big: %d\n", n);
    return;
  }
  heavy(n);
}

void concat(int n) {
  if (n < 2) return;  // the part gcc inlines into the caller
  for (int i = 0; i < n; ++i) {
    heavy(i);
    heavy(i * 2);
    heavy(i * 3);
    if (sink > 100000000) {
      printf("reset\n");
      sink = 0;
    }
  }
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1000;
  long loops = 0, short_calls = 0;
  for (int r = 0; r < rounds; ++r) {
    int n = r % 7;
    concat(n);
    if (n < 2) ++short_calls;
    else loops += n;
    check_size(r == 3 ? 2000000 : r);
  }
  printf("concat %d loops %ld short %ld\n", rounds, loops, short_calls);
  return 0;
}
