// C end-to-end example for the GCC plugin: the calling-context tree of a run is known exactly.
//
// Contexts (routine keys, counts per run):
//   main                                  1
//   main > apply                         10
//   main > apply > square                 5   (odd i)
//   main > apply > cube                   5   (even i)
//   main > fib (recursive)               fib(15) makes 2*F(16)-1 = 1973 calls in all, spread over
//                                        a chain main>fib>fib>... 15 deep
//   main > lib_sum                        1   (shared library)
//   main > lib_sum > lib_step           100
//   main > lib_each                       1   (shared library)
//   main > lib_each > square             20   (callback into the program)
//   main > quiet                          1   (its callee `hidden` is no_instrument_function)
//   main > quiet > leaf_under_hidden      3   (hidden is skipped, so its callee appears under quiet)
#include <stdio.h>

#include "cct_lib.h"

static int square(int x) { return x * x; }
static int cube(int x) { return x * x * x; }
static int apply(int (*f)(int), int x) { return f(x); }

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int leaf_under_hidden(int x) { return x + 7; }
__attribute__((no_instrument_function)) int hidden(int x) {
  return leaf_under_hidden(x) + leaf_under_hidden(x + 1) + leaf_under_hidden(x + 2);
}
int quiet(int x) { return hidden(x); }

int main(void) {
  // volatile: keep the call counts independent of what the optimiser can prove.
  volatile int n = 10;
  long s = 0;
  for (int i = 0; i < n; ++i)
    s += apply(i % 2 ? square : cube, i);
  s += fib(n + 5);
  s += lib_sum(n * 10);
  s += lib_each(square, n * 2);
  s += quiet(n);
  printf("%ld\n", s);
  return 0;
}
