// The program the install tests build against an installed hcct: known calls, a known count.
// hcct_install_leaf is entered ROUNDS * N times, hcct_install_middle ROUNDS times.
#include <stdio.h>
#include <stdlib.h>

#include <hcct/hcct.h>  // the installed runtime header, from find_package's or pkg-config's flags

enum { ROUNDS = 7 };

// The store keeps the calls: a pure leaf would let gcc hoist middle's call out of main's loop in
// builds instrumented after optimisation (the GCC plugin's stage=late).
volatile int hcct_install_sink;

__attribute__((noinline)) int hcct_install_leaf(int x) {
  hcct_install_sink = x;
  return x * 3 + 1;
}

__attribute__((noinline)) int hcct_install_middle(int n) {
  int sum = 0;
  for (int i = 0; i < n; ++i) sum += hcct_install_leaf(i);
  return sum;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  hcct_burst(0);  // links against the installed runtime; does nothing without burst=manual
  long total = 0;
  for (int r = 0; r < ROUNDS; ++r) total += hcct_install_middle(n);
  printf("total %ld\n", total);
  return 0;
}
