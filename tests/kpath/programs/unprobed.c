// Functions with one path and no loop carry no probe (docs/KPATH.md, "Functions without probes"):
// `mix` (inlined into its callers' loop at -O2) and `twice` (kept out of line) have one path each;
// `low_byte` has two, but one is ruled out by a test of a function that returns a constant (as
// zstd's MEM_readLE64 tests MEM_isLittleEndian); `pick` and main's loop have several. The program
// prints its result and how often `twice` ran.
#include <stdio.h>
#include <stdlib.h>

static unsigned twice_calls;

static inline unsigned mix(unsigned x) { return (x * 2654435761u) ^ (x >> 13); }

__attribute__((noinline)) static unsigned twice(unsigned x) {
  ++twice_calls;
  return x + x;
}

static unsigned little_endian(void) { return 1; }

__attribute__((noinline)) static unsigned low_byte(unsigned x) {
  if (little_endian())
    return x & 0xff;
  return x >> 24;
}

__attribute__((noinline)) static unsigned pick(unsigned x) { return (x & 3) ? mix(x) : twice(x) + 1; }

int main(int argc, char **argv) {
  unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 1000, acc = 1;
  for (unsigned i = 0; i < n; ++i) {
    acc = mix(acc + i);
    if (acc & 8)
      acc += pick(acc);
    else
      acc ^= twice(i) + low_byte(acc);
  }
  printf("%u %u\n", acc, twice_calls);
  return 0;
}
