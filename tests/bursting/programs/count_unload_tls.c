// Loaded by count_unload right after a count module was unloaded: an initial-exec TLS array larger
// than the module's TLS (its countdown and exit gate), so that it covers the static TLS the module
// had, and relocated read-only data that spans the address of the module's unit descriptor when
// glibc maps this library where the module was (both take 5 pages). Nothing but this library
// writes the array: its sum in any thread stays 0.
__thread unsigned long words[64] __attribute__((tls_model("initial-exec")));
static unsigned long one = 1;
unsigned long *const ones[64] = {&one, &one, &one, &one};

unsigned long tls_sum(void) {
  unsigned long sum = 0;
  for (int i = 0; i < 64; ++i) sum += words[i];
  return sum + *ones[0] - 1;
}
