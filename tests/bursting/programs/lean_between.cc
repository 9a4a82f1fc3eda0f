// Between bursts with the default burst_sync (shadow), plugin probes keep the thread's shadow stack
// through the runtime's lean route (runtime.cc, lean_enter/lean_exit): a push or a pop and nothing
// else. Each part below leaves the shadow stack in a state only the recovery rules put right — frames
// skipped by longjmp and by an exception, a signal handler's frames below the interrupted one,
// handlers that interrupt the probes themselves, a recursion far deeper than the stack's first
// allocation — and then opens one burst (burst=manual) that records one call of leaf, so that the
// recorded context is the shadow stack's path at that moment:
//
//   lean_between [DEPTH [STORM_CALLS]]     (defaults 100000, 2000000)
//
//   main>jump_test>after_jump>leaf            1   (longjmp over 50 frames of jumper)
//   main>catch_test>after_catch>leaf          1   (a throw through 50 frames of thrower)
//   main>signal_test>after_signal>leaf        1   (raise: an instrumented handler between bursts)
//   main>storm_test>after_storm>leaf          1   (SIGALRM every 50 µs during STORM_CALLS calls)
//   main>deep_test>deep*(DEPTH+1)>leaf        1   (a recursion DEPTH deep between bursts)
//   thread_body>after_thread>leaf             1   (a second thread: its own shadow stack)
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <sys/time.h>

extern "C" void hcct_burst(int on) __attribute__((weak));

#define NOINLINE __attribute__((noinline))

__attribute__((no_instrument_function)) static void burst(int on) {
  if (hcct_burst) hcct_burst(on);
}

static volatile unsigned long sink;
static std::jmp_buf jump_target;

NOINLINE void leaf() { sink = sink + 1; }

// Each after_* opens a burst, records leaf once and closes it: its context is the path the burst
// started from.
NOINLINE void after_jump() { burst(1); leaf(); burst(0); }
NOINLINE void after_catch() { burst(1); leaf(); burst(0); }
NOINLINE void after_signal() { burst(1); leaf(); burst(0); }
NOINLINE void after_storm() { burst(1); leaf(); burst(0); }
NOINLINE void after_thread() { burst(1); leaf(); burst(0); }

// gcc 12 takes the longjmp branch for a return and warns of infinite recursion.
#pragma GCC diagnostic ignored "-Winfinite-recursion"
NOINLINE void jumper(int d) {
  if (d > 0)
    jumper(d - 1);
  else
    std::longjmp(jump_target, 1);
  sink = sink + 1;  // not a tail call: every level keeps its frame
}
NOINLINE void jump_test() {
  if (!setjmp(jump_target)) jumper(50);
  after_jump();
  sink = sink + 1;  // (each *_test keeps its frame: no sibling call to after_*)
}

NOINLINE void thrower(int d) {
  if (d > 0)
    thrower(d - 1);
  else
    throw d;
  sink = sink + 1;
}
NOINLINE void catch_test() {
  try {
    thrower(50);
  } catch (int) {
  }
  after_catch();
  sink = sink + 1;
}

NOINLINE void in_handler() { leaf(); }
void on_signal(int) {  // instrumented: its frames lie below the interrupted ones
  for (int i = 0; i < 10; ++i) in_handler();
}
NOINLINE void signal_test() {
  std::raise(SIGUSR1);
  after_signal();
  sink = sink + 1;
}

// Calls between bursts while SIGALRM, whose handler makes calls too, arrives every 50 µs: some
// handlers run while the interrupted probe is inside the runtime (their events are dropped).
NOINLINE void storm_call() { sink = sink + 1; }
NOINLINE void storm_test(long calls) {
  itimerval every{{0, 50}, {0, 50}};
  setitimer(ITIMER_REAL, &every, nullptr);
  for (long i = 0; i < calls; ++i) storm_call();
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  after_storm();
  sink = sink + 1;
}

NOINLINE void deep(int d) {
  if (d > 0) {
    deep(d - 1);
  } else {
    burst(1);
    leaf();
    burst(0);
  }
  sink = sink + 1;
}
NOINLINE void deep_test(int depth) {
  deep(depth);
  sink = sink + 1;
}

NOINLINE void *thread_body(void *) {
  for (int i = 0; i < 1000; ++i) leaf();
  after_thread();
  sink = sink + 1;
  return nullptr;
}

int main(int argc, char **argv) {
  int depth = argc > 1 ? std::atoi(argv[1]) : 100000;
  long storm_calls = argc > 2 ? std::atol(argv[2]) : 2000000;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGALRM, &sa, nullptr);
  jump_test();
  catch_test();
  signal_test();
  storm_test(storm_calls);
  deep_test(depth);
  pthread_t t;
  pthread_create(&t, nullptr, thread_body, nullptr);
  pthread_join(t, nullptr);
  std::printf("done\n");  // (sink counts the handlers' calls too: it varies)
  return 0;
}
