/* Calls the event clock's tick (hcct/kpath_abi.h) as a versioned module's code does, and prints
 * what it returned and left in the word (tests/kpath/test_burst.cc: "the tick leaves a burst that
 * began elsewhere as it is"). usage: tick_probe VALUE...   one line per VALUE: "ret word". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

uint8_t __hcct_path_tick(int64_t *countdown);

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    int64_t word = strtoll(argv[i], NULL, 10);
    uint8_t open = __hcct_path_tick(&word);
    printf("%u %lld\n", (unsigned)open, (long long)word);
  }
  return 0;
}
