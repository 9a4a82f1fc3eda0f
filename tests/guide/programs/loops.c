/* Loops with hand-computed statistics (tests/guide/test_guide.cc). Built at -O0 so that each
 * loop keeps clang's shape: the header is the condition, evaluated n + 1 times for n iterations
 * of the body. Keep the line numbers of the two `for` lines: the test names them. */
__attribute__((noinline)) static int f(int n) {
  int s = 0;
  for (int i = 0; i < n; i++) { /* line 6 */
    if (i % 4 == 3) s += 7;
    else s += 1;
  }
  return s;
}

__attribute__((noinline)) static long g(long n) {
  long s = 0;
  for (long i = 0; i < n; i++) s += i; /* line 15 */
  return s;
}

int main(void) {
  volatile long t = 0;
  t += f(5);
  t += f(10);
  t += f(20);
  t += g(100000);
  return t == 0;
}
