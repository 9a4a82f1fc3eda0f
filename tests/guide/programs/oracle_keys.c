/* Registers each argument as an oracle key (default threshold 1000) and prints "KEY THRESHOLD":
 * what HCCT_ORACLE / HCCT_ORACLE_GUIDE made of them (tests/guide/test_oracle_input.cc). */
#include <stdio.h>

#include "hcct/oracle.h"

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    hcct_oracle_loop *l = hcct_oracle_register(argv[i], 1000);
    printf("%s %llu\n", argv[i], l ? (unsigned long long)l->threshold : 0ULL);
  }
  return 0;
}
