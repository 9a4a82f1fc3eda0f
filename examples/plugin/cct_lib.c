// Shared-library half of the plugin end-to-end examples. Analytic call counts per call of the entry
// points are documented in cct_lib.h.
#include "cct_lib.h"

// Not static and not inlined away entirely at -O2 either: the probes keep &lib_step alive whatever
// the optimiser does with its body.
int lib_step(int i) { return i % 7; }

int lib_sum(int n) {
  int s = 0;
  for (int i = 0; i < n; ++i)
    s += lib_step(i);
  return s;
}

int lib_each(int (*cb)(int), int n) {
  int s = 0;
  for (int i = 0; i < n; ++i)
    s += cb(i);
  return s;
}
