/* Masked image filtering with a 5x5 convolution (thesis §6.1.1, Fig. 6.1, written anew).
 *
 * A grayscale image is blurred only where a mask is black (0): the regions of a few generated
 * "faces" (ellipses), as in face anonymisation. Elsewhere (mask 255) the pixel is copied. Both
 * branches of the loop body therefore repeat in long runs, which the 10-IPF of filter_conv shows.
 *
 * usage: masked_conv [rows cols passes]   (default 600 800 4)
 * Prints a checksum of the output so that runs can be compared. */
#include <stdio.h>
#include <stdlib.h>

#define NEIGHBOR(m, i, dy, dx, w) (*((m) + (i) + (dy) * (w) + (dx)))

/* The 25 products written out, as in the thesis: the loop body stays free of inner loops, so it
 * has exactly two Ball-Larus paths (copy, convolve). */
#define CONVOLUTION(i)                                            \
  do {                                                            \
    val = NEIGHBOR(img_in, (i), -2, -2, cols) * filter[0];      \
    val += NEIGHBOR(img_in, (i), -2, -1, cols) * filter[1];     \
    val += NEIGHBOR(img_in, (i), -2, +0, cols) * filter[2];     \
    val += NEIGHBOR(img_in, (i), -2, +1, cols) * filter[3];     \
    val += NEIGHBOR(img_in, (i), -2, +2, cols) * filter[4];     \
    val += NEIGHBOR(img_in, (i), -1, -2, cols) * filter[5];     \
    val += NEIGHBOR(img_in, (i), -1, -1, cols) * filter[6];     \
    val += NEIGHBOR(img_in, (i), -1, +0, cols) * filter[7];     \
    val += NEIGHBOR(img_in, (i), -1, +1, cols) * filter[8];     \
    val += NEIGHBOR(img_in, (i), -1, +2, cols) * filter[9];     \
    val += NEIGHBOR(img_in, (i), +0, -2, cols) * filter[10];    \
    val += NEIGHBOR(img_in, (i), +0, -1, cols) * filter[11];    \
    val += NEIGHBOR(img_in, (i), +0, +0, cols) * filter[12];    \
    val += NEIGHBOR(img_in, (i), +0, +1, cols) * filter[13];    \
    val += NEIGHBOR(img_in, (i), +0, +2, cols) * filter[14];    \
    val += NEIGHBOR(img_in, (i), +1, -2, cols) * filter[15];    \
    val += NEIGHBOR(img_in, (i), +1, -1, cols) * filter[16];    \
    val += NEIGHBOR(img_in, (i), +1, +0, cols) * filter[17];    \
    val += NEIGHBOR(img_in, (i), +1, +1, cols) * filter[18];    \
    val += NEIGHBOR(img_in, (i), +1, +2, cols) * filter[19];    \
    val += NEIGHBOR(img_in, (i), +2, -2, cols) * filter[20];    \
    val += NEIGHBOR(img_in, (i), +2, -1, cols) * filter[21];    \
    val += NEIGHBOR(img_in, (i), +2, +0, cols) * filter[22];    \
    val += NEIGHBOR(img_in, (i), +2, +1, cols) * filter[23];    \
    val += NEIGHBOR(img_in, (i), +2, +2, cols) * filter[24];    \
    val = (int)(val * factor + bias);                             \
    img_out[i] = (unsigned char)(val < 0 ? 0 : val > 255 ? 255 : val); \
  } while (0)

void filter_conv(const unsigned char *img_in, unsigned char *img_out, const unsigned char *mask,
                 const signed char filter[25], double factor, double bias, int rows, int cols) {
  int val;
  long n = (long)rows * cols, i;
  for (i = 0; i < n; i++)
    if (mask[i]) img_out[i] = img_in[i];
    else CONVOLUTION(i);
}

/* A smooth image with some texture: a deterministic function of the coordinates. */
static void make_image(unsigned char *img, int rows, int cols) {
  unsigned s = 12345;
  for (int y = 0; y < rows; y++)
    for (int x = 0; x < cols; x++) {
      s = s * 1103515245u + 12345u;
      img[(long)y * cols + x] = (unsigned char)((x * 255 / cols + y * 128 / rows + (s >> 28)) & 255);
    }
}

/* White (255) everywhere except inside a few ellipses; a 2-pixel white border keeps the 5x5
 * neighbourhood of every black pixel inside the image (the thesis crops the mask the same way). */
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

int main(int argc, char **argv) {
  int rows = argc > 1 ? atoi(argv[1]) : 600;
  int cols = argc > 2 ? atoi(argv[2]) : 800;
  int passes = argc > 3 ? atoi(argv[3]) : 4;
  if (rows < 5 || cols < 5 || passes < 1) {
    fprintf(stderr, "usage: masked_conv [rows>=5 cols>=5 passes>=1]\n");
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
    filter_conv(in, out, mask, blur, 1.0 / 25, 0.0, rows, cols);
    for (long i = 0; i < n; i++) sum = sum * 31 + out[i];
  }
  printf("masked_conv %dx%d x%d: checksum %lu\n", rows, cols, passes, sum);
  free(in);
  free(out);
  free(mask);
  return 0;
}
