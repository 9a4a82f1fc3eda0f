/* The oracle through libhcct.so (tests/guide/test_osr.cc): thresholds from HCCT_ORACLE and
 * HCCT_ORACLE_GUIDE, the report at exit, with the profiler off or on. Prints, per entry that
 * fired, the loop's key and the iteration at which the oracle said "switch". */
#include <stdio.h>

#include "hcct/oracle.h"

static void run(const char *key, int n) {
  /* Not HCCT_ORACLE_LOOP: its cache belongs to the call site, and this one serves three keys. */
  hcct_oracle_run r = hcct_oracle_enter(hcct_oracle_register(key, 1000));
  for (int i = 0; i < n; i++)
    if (hcct_oracle_tick(&r)) printf("fired %s %d\n", key, i + 1);
  hcct_oracle_leave(&r);
}

int main(void) {
  for (int e = 0; e < 3; e++) run("prog.c:1", 50);
  run("prog.c:2", 50);
  run("prog.c:3", 2000);
  return 0;
}
