/* A function with many loops in sequence, each using values loaded before the first one
 * (tests/kpath/test_burst.cc): in a versioned build at the late stage every loop header is a place
 * where f joins f.kpath with the values live into it. Their buffers must share one stack slot: the
 * frame of f must not grow with the number of loops (SQLite's sqlite3VdbeExec: 79 headers, a
 * 181 KB frame against native's 472 bytes before they did).
 *
 * usage: burst_many_loops N   Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

struct state {
  long a, b, c, d, e, f, g, h;
  long out[16];
};

/* One loop: its body reads the eight values loaded before all the loops, and writes a field. */
#define LOOP(k)                                                              \
  for (long i = 0; i < n + (k); i++) {                                       \
    acc += (i * a + b) ^ (c + (k)) ^ (d * i) ^ (e >> (k & 7)) ^ (f + g * h); \
    s->out[(k) & 15] += acc & 0xff;                                          \
  }

__attribute__((noinline)) long many_loops(struct state *s, long n) {
  long a = s->a, b = s->b, c = s->c, d = s->d, e = s->e, f = s->f, g = s->g, h = s->h;
  long acc = 0;
  LOOP(0) LOOP(1) LOOP(2) LOOP(3) LOOP(4) LOOP(5) LOOP(6) LOOP(7)
  LOOP(8) LOOP(9) LOOP(10) LOOP(11) LOOP(12) LOOP(13) LOOP(14) LOOP(15)
  LOOP(16) LOOP(17) LOOP(18) LOOP(19) LOOP(20) LOOP(21) LOOP(22) LOOP(23)
  LOOP(24) LOOP(25) LOOP(26) LOOP(27) LOOP(28) LOOP(29) LOOP(30) LOOP(31)
  return acc + a + b + c + d + e + f + g + h;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  struct state s = {3, 5, 7, 11, 13, 17, 19, 23, {0}};
  long sum = 0;
  for (int r = 0; r < 20; r++) {
    sum += many_loops(&s, n);
    s.a += s.out[r & 15] & 7;
  }
  for (int i = 0; i < 16; i++) sum += s.out[i];
  printf("checksum %ld\n", sum);
  return 0;
}
