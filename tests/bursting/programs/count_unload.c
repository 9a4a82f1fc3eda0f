// The count clock around a dlclose (docs/BURSTING.md, "The count clock", "Limits"):
//
//   count_unload COUNT_LIB TLS_LIB [CALLS [signal|quiet]]
//
// Built with clock=count. main and the signal handler are not instrumented; work() is. main loads
// COUNT_LIB (a count module: its countdown is static TLS), then unloads it. The runtime's dlclose
// looks the unloaded units up with dladdr, then, holding its units lock, checks the count modules
// with dl_iterate_phdr; this program's dladdr and dl_iterate_phdr (exported: the runtime calls
// them) do two things there, once:
//  - dladdr loads TLS_LIB (not instrumented, an initial-exec TLS array) before the runtime has
//    looked: glibc gives it the static TLS the count module had, and maps it where the module was
//    (before the fix: the module, found "still mapped" by its address, stayed live, and its
//    countdown and exit gate were written into TLS_LIB's array);
//  - the next dl_iterate_phdr raises SIGUSR1, whose handler calls work(): the run's first count
//    event, which decides the clock, interrupting the holder of the units lock on the same thread
//    (before the fix: the decision spun on that lock for ever). (Until session 15 the runtime
//    called dladdr under the units lock, and dladdr raised the signal.)
// (`quiet`: without the signal, main's first call of work() decides the clock.)
// Then main calls work() CALLS times (bursts: the countdowns are written) and prints the handler's
// sum, work's and the sum of TLS_LIB's array in this thread, which must be 0. A run that hangs is
// ended by SIGALRM after 60 s.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile int armed, signal_armed;
static int with_signal = 1;
static volatile unsigned long in_handler;
static const char *tls_lib_path;
static void *tls_lib;

__attribute__((noinline)) void leaf(long i) { sink += (unsigned long)i; }
__attribute__((noinline)) void work(long n) {
  for (long i = 0; i < n; ++i) leaf(i);
}

__attribute__((no_instrument_function)) static void on_signal(int sig) {
  (void)sig;
  work(10);
  in_handler = sink;
}

__attribute__((no_instrument_function)) int dladdr(const void *address, Dl_info *info) {
  static int (*real)(const void *, Dl_info *);
  if (!real) real = (int (*)(const void *, Dl_info *))dlsym(RTLD_NEXT, "dladdr");
  if (armed) {
    armed = 0;
    tls_lib = dlopen(tls_lib_path, RTLD_NOW);
    signal_armed = with_signal;
  }
  return real(address, info);
}

__attribute__((no_instrument_function)) int dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *),
                                                            void *data) {
  static int (*real)(int (*)(struct dl_phdr_info *, size_t, void *), void *);
  if (!real) real = (int (*)(int (*)(struct dl_phdr_info *, size_t, void *), void *))dlsym(RTLD_NEXT, "dl_iterate_phdr");
  if (signal_armed) {
    signal_armed = 0;
    raise(SIGUSR1);
  }
  return real(callback, data);
}

__attribute__((no_instrument_function)) int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: count_unload COUNT_LIB TLS_LIB [CALLS]\n");
    return 2;
  }
  alarm(60);  // a run that hangs (the deadlock) fails instead
  long calls = argc > 3 ? atol(argv[3]) : 2000000;
  with_signal = !(argc > 4 && strcmp(argv[4], "quiet") == 0);
  tls_lib_path = argv[2];
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigaction(SIGUSR1, &action, NULL);
  void *count_lib = dlopen(argv[1], RTLD_NOW);
  if (!count_lib) {
    fprintf(stderr, "count_unload: %s\n", dlerror());
    return 2;
  }
  armed = 1;
  dlclose(count_lib);
  if (armed) {  // (no runtime: nobody called dladdr)
    armed = 0;
    if (with_signal) raise(SIGUSR1);
    tls_lib = dlopen(tls_lib_path, RTLD_NOW);
  }
  if (!tls_lib) {
    fprintf(stderr, "count_unload: %s\n", dlerror());
    return 2;
  }
  unsigned long (*tls_sum)(void) = (unsigned long (*)(void))dlsym(tls_lib, "tls_sum");
  work(calls);
  printf("handler %lu work %lu tls %lu\n", in_handler, sink, tls_sum());
  return 0;
}
