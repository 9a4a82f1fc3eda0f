/* A test OSR handler (tests/guide/test_osr.cc): one line per call on stderr with the point, the
 * iteration and the loop variables the bodies recorded. */
#include <stdio.h>

#include "hcct/oracle.h"

extern volatile long osr_inner_i, osr_outer_a;

void hcct_osr_handler(hcct_osr_point *point, uint64_t iteration) {
  fprintf(stderr, "osr %s %s %u %llu %llu %ld %ld\n", point->key, point->function, point->version,
          (unsigned long long)point->threshold, (unsigned long long)iteration, osr_inner_i, osr_outer_a);
}
