/* Loops whose hot paths repeat in long runs, for the specialised loop versions
 * (tests/guide/test_versions.cc): each loop's guidance recommends "unroll xF" for a path, and the
 * loop version's clone runs F copies of that path behind one guard. Every case where the guard
 * must say no is here: a run that ends inside a window, the end of the array inside a window,
 * stores that overwrite the memory the guard reads (the same array, one element ahead, and an
 * output that is the mask itself), a pointer induction variable, and loops whose specialisation is
 * refused (a branch on a value carried across iterations, an exit off the path).
 * usage: osr_runs [all]   Prints one checksum line per function. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5003

static unsigned char mask[N], in[N], out[N], shared[N + 8], zeros[N];

/* The masked copy of the worked example: the guard reads mask[i .. i+F-1]. */
__attribute__((noinline)) static void masked(const unsigned char *m, const unsigned char *src, unsigned char *dst, long n) {
  for (long i = 0; i < n; i++)
    if (m[i]) dst[i] = src[i];
    else dst[i] = (unsigned char)(src[i] / 2 + 1);
}

/* A branch on the induction variable only: runs of 64. */
__attribute__((noinline)) static unsigned long by_index(long n) {
  unsigned long s = 0;
  for (long i = 0; i < n; i++)
    if ((i >> 6) & 1) s += (unsigned long)i * 3;
    else s ^= (unsigned long)i;
  return s;
}

/* Pointer induction variable; writes two elements ahead of what the branch reads, and now and
 * then a nonzero byte into a run of zeros: a guard that read p[2] before the iteration that
 * stores it ran would take the zero path where the loop does not. */
__attribute__((noinline)) static void ahead(unsigned char *a, long n) {
  for (unsigned char *p = a; p < a + n - 2; p++)
    if (*p) p[2] = (unsigned char)(*p + 1);
    else p[2] = (unsigned char)((p - a) % 61 == 0);
}

/* A branch on a value carried across iterations: not specialised (remark), still versioned. */
__attribute__((noinline)) static unsigned long carried(const unsigned char *m, long n) {
  unsigned long s = 0;
  for (long i = 0; i < n; i++)
    if (s & 1024) s = s - 1000 + m[i];
    else s = s + m[i] + 1;
  return s;
}

/* An exit off the hot path (a break on memory): not specialised (remark). */
__attribute__((noinline)) static long search(const unsigned char *m, long n) {
  long found = -1;
  for (long i = 0; i < n; i++) {
    if (m[i] == 7) {
      found = i;
      break;
    }
    out[i] = (unsigned char)(m[i] + 1);
  }
  return found;
}

static unsigned long sum(const unsigned char *a, long n) {
  unsigned long s = 0;
  for (long i = 0; i < n; i++) s = s * 31 + a[i];
  return s;
}

int main(int argc, char **argv) {
  /* `osr_runs all` adds the calls whose stores overwrite what the guard reads; the profile (no
   * argument) is made without them, as a training input would be. */
  int hostile = argc > 1 && strcmp(argv[1], "all") == 0, rounds = 20;
  for (long i = 0; i < N; i++) {
    mask[i] = ((i / 37) % 5) ? 255 : 0; /* runs of 37 and 148 */
    in[i] = (unsigned char)(i * 7 + 3);
  }
  unsigned long c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0;
  for (int r = 0; r < rounds; r++) {
    masked(mask, in, out, N - r); /* lengths that end anywhere in a window */
    c1 = c1 * 31 + sum(out, N);
    if (hostile) {
      memcpy(shared, mask, N);
      masked(shared, in, shared, N - r); /* the output is the mask: every window overlaps */
      c1 = c1 * 31 + sum(shared, N);
      memcpy(shared, mask, N);
      masked(shared, shared + 1, shared + 3, N - r - 3); /* writes 3 ahead of the mask it reads */
      c1 = c1 * 31 + sum(shared, N);
      memcpy(shared, mask, N);
      masked(shared, zeros, shared + 1, N - r - 1); /* 1 ahead, and what it writes changes the path */
      c1 = c1 * 31 + sum(shared, N);
    }
    c2 += by_index(N + r);
    memcpy(shared, mask, N);
    ahead(shared, N - r);
    c3 = c3 * 31 + sum(shared, N);
    c4 += carried(mask, N - r);
    memset(shared, 1, N);
    shared[N - 10 - r] = 7;
    c5 += (unsigned long)search(shared, N);
  }
  printf("masked %lu\nby_index %lu\nahead %lu\ncarried %lu\nsearch %lu\n", c1, c2, c3, c4, c5);
  return 0;
}
