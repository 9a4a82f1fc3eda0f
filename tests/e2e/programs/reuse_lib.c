// A library loaded, unloaded, and replaced by another at the same addresses (reused_addresses.c).
// Built twice with REUSE_NAME alpha and gamma: names of one length, so both builds have one layout
// and the loader maps the second where the first was.
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
volatile int reuse_sink;
__attribute__((noinline)) int CAT(REUSE_NAME, _work)(int x) { reuse_sink += x; return x + 1; }
int CAT(REUSE_NAME, _entry)(int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += CAT(REUSE_NAME, _work)(i);
  return total;
}
