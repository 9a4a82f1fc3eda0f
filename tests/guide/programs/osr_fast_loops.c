// Fast loops of specialised loop versions (docs/GUIDE.md, "Specialisation from the path profile"):
// each loop's hot path repeats in long runs, so the guidance recommends it x8.
//   clamp:      a 3-tap filter whose clamp branches depend on the iteration's own result: they stay
//               in the fast loop, which the loop vectoriser takes;
//   pure_call:  a call on the path (readonly): no vectoriser hint, so no "loop not vectorized" warning;
//   carried:    state that is no reduction (s feeds a shift of itself);
//   kept_load:  a kept branch whose block loads: no hint either.
#include <stdio.h>
#include <stdlib.h>

enum { N = 4096 };
static unsigned char mask[N], in[N + 2], out[N];
static long table[64];

__attribute__((noinline)) void clamp(double gain) {
  for (long i = 0; i < N; i++)
    if (mask[i]) out[i] = in[i];
    else {
      int v = (int)((in[i] + 2 * in[i + 1] + in[i + 2]) * gain);
      out[i] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

__attribute__((noinline, pure)) long weight(long x) { return x * 3 + (x >> 2); }

__attribute__((noinline)) long pure_call(void) {
  long s = 0;
  for (long i = 0; i < N; i++)
    if (mask[i] == 0) s += weight(i) * 7;
    else s ^= i;
  return s;
}

__attribute__((noinline)) long carried(void) {
  long s = 1;
  for (long i = 0; i < N; i++)
    if (mask[i] == 0) s += (s >> 3) + in[i];
    else s -= i;
  return s;
}

__attribute__((noinline)) long kept_load(void) {
  long s = 0;
  for (long i = 0; i < N; i++)
    if (mask[i] == 0) {
      long v = in[i] * 5;
      if (v > 1000) v = table[in[i] & 63];  // depends on the iteration's own value
      s += v;
    }
  return s;
}

int main(int argc, char **argv) {
  double gain = argc > 1 ? atof(argv[1]) : 0.5;
  unsigned seed = 7;
  for (long i = 0; i < N + 2; i++) in[i] = (unsigned char)((seed = seed * 1103515245u + 12345u) >> 26);
  for (long i = 0; i < N; i++) mask[i] = (i / 40) % 3 == 0 ? 255 : 0;  // runs of 40
  for (long i = 0; i < 64; i++) table[i] = i * i;
  unsigned long h = 0;
  for (int round = 0; round < 20; round++) {
    clamp(gain + round * 0.02);  // the sum stays below 256: the clamp is rarely taken
    for (long i = 0; i < N; i++) h = h * 131 + out[i];
    h ^= (unsigned long)pure_call() + (unsigned long)carried() * 3 + (unsigned long)kept_load() * 5;
  }
  printf("%lx\n", h);
  return 0;
}
