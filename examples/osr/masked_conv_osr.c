/* Worked example of issue 7 (docs/GUIDE.md, "Worked example"): the masked convolution filter of
 * examples/kpath/masked_conv.c with a baseline loop and the specialised loop of the thesis's
 * Fig. 6.4 (§6.1.1), switched at run time
 *   - by an open OSR point that the kpath plugin inserts into the baseline loop from the guidance
 *     file of `hcct guide` (mode `osr`): at the threshold the plugin's counter calls
 *     hcct_osr_handler, which transfers to the specialised loop with the live state rebuilt from
 *     the iteration count (the OSR mapping i = iteration - 1), by longjmp out of the baseline frame;
 *   - by the online hotness oracle of libhcct (mode `oracle`): the structured-OSR pattern, a
 *     tick per iteration of the baseline loop and a break into the specialised one.
 * Modes `base` (baseline only) and `spec` (specialised from the first pixel) bound the two.
 *
 * The 10-IPF of filter_conv shows both paths repeating >= 8 times in most of their runs (copy ~98 %,
 * convolve ~90 %), so the specialised loop tests 8 mask bytes at once and copies, or convolves,
 * 8 pixels behind that one check; any other group of 8 runs the baseline body pixel by pixel. Every mode computes the same image: the
 * checksum line is identical.
 *
 * usage: masked_conv_osr base|spec|osr|oracle [rows cols passes]   (default 600 800 4)
 *        masked_conv_osr key      prints the oracle's key (the filter loop's file:line)
 * Built with -DMASKED_CONV_NO_HANDLER: no OSR handler and no oracle (modes base and spec only),
 * for a build that needs no libhcct. */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MASKED_CONV_NO_HANDLER
#include "hcct/oracle.h"
#endif

#define NEIGHBOR(m, i, dy, dx, w) (*((m) + (i) + (dy) * (w) + (dx)))

#define CONVOLUTION(i)                                                 \
  do {                                                                 \
    val = NEIGHBOR(img_in, (i), -2, -2, cols) * filter[0];           \
    val += NEIGHBOR(img_in, (i), -2, -1, cols) * filter[1];          \
    val += NEIGHBOR(img_in, (i), -2, +0, cols) * filter[2];          \
    val += NEIGHBOR(img_in, (i), -2, +1, cols) * filter[3];          \
    val += NEIGHBOR(img_in, (i), -2, +2, cols) * filter[4];          \
    val += NEIGHBOR(img_in, (i), -1, -2, cols) * filter[5];          \
    val += NEIGHBOR(img_in, (i), -1, -1, cols) * filter[6];          \
    val += NEIGHBOR(img_in, (i), -1, +0, cols) * filter[7];          \
    val += NEIGHBOR(img_in, (i), -1, +1, cols) * filter[8];          \
    val += NEIGHBOR(img_in, (i), -1, +2, cols) * filter[9];          \
    val += NEIGHBOR(img_in, (i), +0, -2, cols) * filter[10];         \
    val += NEIGHBOR(img_in, (i), +0, -1, cols) * filter[11];         \
    val += NEIGHBOR(img_in, (i), +0, +0, cols) * filter[12];         \
    val += NEIGHBOR(img_in, (i), +0, +1, cols) * filter[13];         \
    val += NEIGHBOR(img_in, (i), +0, +2, cols) * filter[14];         \
    val += NEIGHBOR(img_in, (i), +1, -2, cols) * filter[15];         \
    val += NEIGHBOR(img_in, (i), +1, -1, cols) * filter[16];         \
    val += NEIGHBOR(img_in, (i), +1, +0, cols) * filter[17];         \
    val += NEIGHBOR(img_in, (i), +1, +1, cols) * filter[18];         \
    val += NEIGHBOR(img_in, (i), +1, +2, cols) * filter[19];         \
    val += NEIGHBOR(img_in, (i), +2, -2, cols) * filter[20];         \
    val += NEIGHBOR(img_in, (i), +2, -1, cols) * filter[21];         \
    val += NEIGHBOR(img_in, (i), +2, +0, cols) * filter[22];         \
    val += NEIGHBOR(img_in, (i), +2, +1, cols) * filter[23];         \
    val += NEIGHBOR(img_in, (i), +2, +2, cols) * filter[24];         \
    val = (int)(val * factor + bias);                                  \
    img_out[i] = (unsigned char)(val < 0 ? 0 : val > 255 ? 255 : val); \
  } while (0)

/* The filter loop's header line: the key under which `hcct guide` names it (checked by
 * tests/guide/test_osr.cc). */
#define CONV_KEY "masked_conv_osr.c:73"

/* Baseline: the loop the guidance is about (and where the plugin puts the OSR point). */
__attribute__((noinline)) void filter_conv(const unsigned char *img_in, unsigned char *img_out, const unsigned char *mask,
                                           const signed char filter[25], double factor, double bias, int rows, int cols) {
  int val;
  long n = (long)rows * cols, i;
  for (i = 0; i < n; i++) /* line 73 */
    if (mask[i]) img_out[i] = img_in[i];
    else CONVOLUTION(i);
}

typedef uint8_t v8u8 __attribute__((vector_size(8)));
typedef int16_t v8i16 __attribute__((vector_size(16)));
typedef int32_t v4i32 __attribute__((vector_size(16)));

/* Nonzero when none of the 8 bytes of m is 0 (the classic has-zero-byte test, negated). */
static inline int no_zero_byte(uint64_t m) {
  return ((m - 0x0101010101010101ull) & ~m & 0x8080808080808080ull) == 0;
}

/* Specialised (Fig. 6.4): from pixel `start` on, 8 pixels behind one check of 8 mask bytes. The
 * guidance recommends x8 for both paths (copy: ~98 % of its runs continue >= 8 times; convolve:
 * ~90 %), so both get a group of their own; mixed groups (the ellipses' borders) run the baseline
 * body pixel by pixel. */
__attribute__((noinline)) void filter_conv8(const unsigned char *img_in, unsigned char *img_out, const unsigned char *mask,
                                            const signed char filter[25], double factor, double bias, int rows, int cols,
                                            long start) {
  int val;
  long n = (long)rows * cols, i = start;
  long off[25];  /* the taps' offsets and weights, hoisted out of the loop */
  v8i16 weight[25];
  for (int t = 0; t < 25; t++) {
    off[t] = (long)(t / 5 - 2) * cols + (t % 5 - 2);
    for (int j = 0; j < 8; j++) weight[t][j] = filter[t];
  }
  for (; i + 8 <= n; i += 8) {
    uint64_t m;
    memcpy(&m, mask + i, 8);
    if (no_zero_byte(m)) {  /* 8 copies */
      memcpy(img_out + i, img_in + i, 8);
      continue;
    }
    if (m == 0) {  /* 8 convolutions at once, tap by tap, in vector registers */
      v4i32 lo = {0, 0, 0, 0}, hi = {0, 0, 0, 0};
      for (int t = 0; t < 25; t++) {
        v8u8 px;
        memcpy(&px, img_in + i + off[t], 8);
        v8i16 prod = __builtin_convertvector(px, v8i16) * weight[t];  /* |u8 x s8| < 2^15: exact */
        lo += __builtin_convertvector(__builtin_shufflevector(prod, prod, 0, 1, 2, 3), v4i32);
        hi += __builtin_convertvector(__builtin_shufflevector(prod, prod, 4, 5, 6, 7), v4i32);
      }
      for (int j = 0; j < 8; j++) {
        val = (int)((j < 4 ? lo[j] : hi[j - 4]) * factor + bias);
        img_out[i + j] = (unsigned char)(val < 0 ? 0 : val > 255 ? 255 : val);
      }
      continue;
    }
    for (long j = i; j < i + 8; j++)
      if (mask[j]) img_out[j] = img_in[j];
      else CONVOLUTION(j);
  }
  for (; i < n; i++)
    if (mask[i]) img_out[i] = img_in[i];
    else CONVOLUTION(i);
}

typedef void filter_fn(const unsigned char *, unsigned char *, const unsigned char *, const signed char *, double, double,
                       int, int);

static void filter_spec(const unsigned char *in, unsigned char *out, const unsigned char *mask, const signed char *filter,
                        double factor, double bias, int rows, int cols) {
  filter_conv8(in, out, mask, filter, factor, bias, rows, cols, 0);
}

#ifndef MASKED_CONV_NO_HANDLER
/* ---- switching by the OSR point (the plugin's, from the guidance file) ---- */

static jmp_buf osr_continuation;
static volatile int osr_armed;   /* a filter_conv call that may be left for filter_conv8 */
static long osr_resume;          /* the first pixel the continuation computes */
static unsigned long osr_switches;

/* Called by the OSR point at the threshold-th execution of a guided loop header in one entry.
 * For filter_conv's loop (instrumented at the default, early stage) iteration j is the test of
 * i = j - 1: pixels 0 .. j - 2 are done, so the continuation resumes at pixel j - 1. */
void hcct_osr_handler(hcct_osr_point *point, uint64_t iteration) {
  if (osr_armed && strcmp(point->function, "filter_conv") == 0) {
    osr_armed = 0;
    osr_resume = (long)iteration - 1;
    ++osr_switches;
    longjmp(osr_continuation, 1);
  }
}

static void filter_osr(const unsigned char *in, unsigned char *out, const unsigned char *mask, const signed char *filter,
                       double factor, double bias, int rows, int cols) {
  if (setjmp(osr_continuation)) {
    filter_conv8(in, out, mask, filter, factor, bias, rows, cols, osr_resume);
    return;
  }
  osr_armed = 1;
  filter_conv(in, out, mask, filter, factor, bias, rows, cols);
  osr_armed = 0;
}

/* ---- switching by the oracle (structured OSR: loop1, oracle(), loop2) ---- */

static void filter_oracle(const unsigned char *img_in, unsigned char *img_out, const unsigned char *mask,
                          const signed char *filter, double factor, double bias, int rows, int cols) {
  hcct_oracle_run r = hcct_oracle_enter(HCCT_ORACLE_LOOP(CONV_KEY, 1000));
  int val;
  long n = (long)rows * cols, i;
  for (i = 0; i < n; i++) {
    if (hcct_oracle_tick(&r)) break;  /* hot: continue in the specialised loop at pixel i */
    if (mask[i]) img_out[i] = img_in[i];
    else CONVOLUTION(i);
  }
  if (i < n) {
    filter_conv8(img_in, img_out, mask, filter, factor, bias, rows, cols, i);
    hcct_oracle_count(&r, (uint64_t)(n - i - 1));  /* iterations = pixels: the firing tick was pixel i */
  }
  hcct_oracle_leave(&r);
}
#endif

/* A smooth image with some texture: a deterministic function of the coordinates. */
static void make_image(unsigned char *img, int rows, int cols) {
  unsigned s = 12345;
  for (int y = 0; y < rows; y++)
    for (int x = 0; x < cols; x++) {
      s = s * 1103515245u + 12345u;
      img[(long)y * cols + x] = (unsigned char)((x * 255 / cols + y * 128 / rows + (s >> 28)) & 255);
    }
}

/* White (255) everywhere except inside a few ellipses, with a 2-pixel white border. */
static void make_mask(unsigned char *mask, int rows, int cols) {
  struct { double cy, cx, ry, rx; } faces[] = {
      {0.30, 0.25, 0.18, 0.12}, {0.35, 0.65, 0.20, 0.13}, {0.75, 0.45, 0.15, 0.10}};
  for (int y = 0; y < rows; y++)
    for (int x = 0; x < cols; x++) {
      unsigned char m = 255;
      for (unsigned f = 0; f < sizeof faces / sizeof faces[0]; f++) {
        double dy = (y - faces[f].cy * rows) / (faces[f].ry * rows);
        double dx = (x - faces[f].cx * cols) / (faces[f].rx * cols);
        if (dy * dy + dx * dx <= 1.0) m = 0;
      }
      if (y < 2 || y >= rows - 2 || x < 2 || x >= cols - 2) m = 255;
      mask[(long)y * cols + x] = m;
    }
}

/* The filter of a mode, or null (a function of its own: main's CFG, and so the block numbers of
 * its loops in the guidance, are the same with and without MASKED_CONV_NO_HANDLER). */
static filter_fn *pick(const char *mode) {
  if (strcmp(mode, "base") == 0) return filter_conv;
  if (strcmp(mode, "spec") == 0) return filter_spec;
#ifndef MASKED_CONV_NO_HANDLER
  if (strcmp(mode, "osr") == 0) return filter_osr;
  if (strcmp(mode, "oracle") == 0) return filter_oracle;
#endif
  return NULL;
}

static void report(void) {
#ifndef MASKED_CONV_NO_HANDLER
  if (getenv("MASKED_CONV_VERBOSE")) fprintf(stderr, "masked_conv_osr: %lu OSR switches\n", osr_switches);
#endif
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "key") == 0) {
    printf("%s\n", CONV_KEY);
    return 0;
  }
  filter_fn *filter = pick(mode);
  int rows = argc > 2 ? atoi(argv[2]) : 600;
  int cols = argc > 3 ? atoi(argv[3]) : 800;
  int passes = argc > 4 ? atoi(argv[4]) : 4;
  if (!filter || rows < 5 || cols < 5 || passes < 1) {
    fprintf(stderr, "usage: masked_conv_osr base|spec|osr|oracle|key [rows>=5 cols>=5 passes>=1]\n");
    return 2;
  }
  long n = (long)rows * cols;
  unsigned char *in = malloc(n), *out = malloc(n), *mask = malloc(n);
  if (!in || !out || !mask) return 1;
  static const signed char blur[25] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  make_image(in, rows, cols);
  make_mask(mask, rows, cols);
  unsigned long sum = 0;
  for (int p = 0; p < passes; p++) {
    memset(out, 0, n);  /* every pass must write every pixel */
    filter(in, out, mask, blur, 1.0 / 25, 0.0, rows, cols);
    for (long i = 0; i < n; i++) sum = sum * 31 + out[i];
  }
  printf("masked_conv %dx%d x%d: checksum %lu\n", rows, cols, passes, sum);
  report();
  free(in);
  free(out);
  free(mask);
  return 0;
}
