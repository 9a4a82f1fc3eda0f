// A library built with the kpath pass, loaded and unloaded by dl_counted_main.c. Its functions get
// BLPP counter arrays (few paths): step() has no loop (arrays at every k), walk() has one (arrays at
// k = 1).
int step(int x) { return (x & 1) ? 3 * x + 1 : x / 2; }

int walk(int x) {
  int n = 0;
  while (x != 1 && n < 1000) {
    x = step(x);
    ++n;
  }
  return n;
}
