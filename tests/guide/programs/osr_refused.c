/* Loops the loop versioner must refuse (tests/guide/test_versions.cc): each gets a remark naming
 * the reason and stays as it is; the program prints the same with and without guidance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>

static jmp_buf env;

__attribute__((noinline)) static unsigned long with_setjmp(unsigned long n) {
  volatile unsigned long s = 0;
  if (setjmp(env)) return s + 1;
  for (unsigned long i = 0; i < n; i++) /* line 12: setjmp */
    s += i * 3;
  return s;
}

__attribute__((noinline)) static unsigned long with_vla(unsigned long n) {
  unsigned long s = 0;
  for (unsigned long i = 0; i < n; i++) { /* line 19: VLA */
    unsigned long v[i % 5 + 1];
    for (unsigned long j = 0; j <= i % 5; j++) v[j] = i + j;
    s += v[i % 5];
  }
  return s;
}

__attribute__((noinline)) static unsigned long with_va_arg(int n, ...) {
  va_list ap;
  va_start(ap, n);
  unsigned long s = 0;
  for (int i = 0; i < n; i++) /* line 31: va_arg */
    s += va_arg(ap, unsigned long);
  va_end(ap);
  return s;
}

__attribute__((noinline)) static unsigned long with_computed_goto(unsigned long n) {
  static void *targets[] = {&&odd, &&even};
  unsigned long s = 0, i = 0;
top: /* line 40: computed goto */
  if (i >= n) return s;
  goto *targets[i & 1];
odd:
  s += 3;
  i++;
  goto top;
even:
  s += i;
  i++;
  goto top;
}

int main(void) {
  unsigned long s = 0;
  for (int r = 0; r < 200; r++) s += with_setjmp(50) + with_vla(40) + with_va_arg(4, 1ul, 2ul, 3ul, 4ul) + with_computed_goto(60);
  printf("%lu\n", s);
  return 0;
}
