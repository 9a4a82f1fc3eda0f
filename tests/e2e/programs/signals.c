// An instrumented SIGALRM handler fires every 50 µs while instrumented code runs, first on the
// thread's stack, then on a sigaltstack. Prints how often the handler ran.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static volatile sig_atomic_t handled;
volatile unsigned long sink;

__attribute__((noinline)) void in_handler(void) { sink++; }
static void on_alarm(int sig) {
  (void)sig;
  in_handler();
  handled++;
}

__attribute__((noinline)) unsigned long leaf(unsigned long x) { return x * 3 + 1; }
__attribute__((noinline)) unsigned long busy(unsigned long n) {
  unsigned long acc = 0;
  for (unsigned long i = 0; i < n; ++i) acc += leaf(i);
  return acc;
}

static void run(int on_altstack, unsigned long target) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART | (on_altstack ? SA_ONSTACK : 0);
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval tv = {{0, 50}, {0, 50}};
  setitimer(ITIMER_REAL, &tv, NULL);
  sig_atomic_t start = handled;
  while (handled - start < (sig_atomic_t)target) sink += busy(1000);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
}

int main(void) {
  static char altstack[1 << 16];
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  run(0, 2000);
  run(1, 2000);
  printf("handled %d\n", (int)handled);
  return 0;
}
