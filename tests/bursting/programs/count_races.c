// The count clock's dlclose races (issue 16, session 15; docs/BURSTING.md, "The count clock"):
//
//   count_races close2 COUNT_LIB RACE_LIB [CALLS]   two threads in dlclose at once
//   count_races reopen COUNT_LIB [CALLS]            a dlopen between a dlclose and its forget step
//   count_races burst  COUNT_LIB OTHER_LIB [SECONDS] bursts ending while a dlclose holds writes off
//   count_races gates  COUNT_LIB OTHER_LIB [ROUNDS]  a burst beginning before its countdowns are armed
//   count_races fork   [CALLS]                       the first count event in a fork's prepare handler
//
// Built with clock=count; work() and leaf() are instrumented, main and the hooks are not. The
// runtime's dlclose (its interposer) calls dladdr and dl_iterate_phdr, which this program exports:
// its hooks run the other thread's part at the chosen point, deterministically (nothing in the
// runtime is there for the test). Each mode prints what the test checks; a run that hangs is ended
// by SIGALRM (a failure).
//
// close2: main dlcloses COUNT_LIB. When the runtime, after that unload, looks up RACE_LIB's unit
// (dladdr), a second thread dlcloses RACE_LIB and stops in its destructor (glibc's loader lock held,
// RACE_LIB still mapped); when main's runtime then finds RACE_LIB listed (dl_iterate_phdr), the
// destructor returns and glibc unmaps RACE_LIB while main sleeps in the hook. Before session 15 the
// runtime then called RACE_LIB's count_tls() to see whether the module was still live: a crash.
//
// reopen: main calls COUNT_LIB's lib_run and work(), dlcloses COUNT_LIB and, when the runtime's
// forget step looks the units up (dladdr), a second thread loads COUNT_LIB again, before the runtime
// has marked the unloaded module dead. Then main calls the new load's lib_run. The thread's `events`
// must be every enter, 2 (3 CALLS + 1) + CALLS + 1 + 1 (lib_sum; work() ends gaps after the first
// lib_run: the enters of an unloaded module since the thread's last take are lost). Before session 15: a hang
// (the forget step held the units lock in dladdr, which waits for the dlopen, whose constructor
// waited for the units lock), and with that fixed alone, the new load deduplicated against the
// unloaded module's entry: its enters miscounted.
//
// burst: main calls work() and COUNT_LIB's lib_run, alternately, for SECONDS; a second thread
// dlopens and dlcloses OTHER_LIB meanwhile, as fast as it can. Each dlclose holds count-TLS writes
// off. A burst whose last enter came then (before session 15) ended with its countdowns still
// holding its enters, and the gap's next take counted them again: `events` too high. Prints the
// exact number of main's enters, which `events` must equal (a stress test).
//
// gates: the same calls, ROUNDS times. The runtime reads the clock at a burst's start and end
// (clock_gettime, which this program exports); a read on main with this module's countdown negative
// and its exit gate closed is a burst starting before its countdowns and exit gates were written
// (before session 15, count_set came after the path's rebuilding and that read). There, a second
// thread dlcloses OTHER_LIB and holds its forget step (dladdr) until main has made 200 rounds of
// calls: the count writes are held off meanwhile, so the burst ran with its exit gates closed.
// Prints whether such a read was seen ("raced") or not ("armed") and main's enters.
//
// fork: a prepare handler registered before the runtime's (.preinit_array) runs after the
// runtime's, which holds the bursting lock, and raises SIGUSR1, whose handler calls work(10): the
// run's first count event, which decides the clock and so takes that lock. The runtime's prepare
// handler also blocks signals until its parent handler has released the lock, so the handler runs
// after it (this passed before session 15 too): a guard, should that ever change.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) void leaf(long i) { sink += (unsigned long)i; }
__attribute__((noinline)) void work(long n) {
  for (long i = 0; i < n; ++i) leaf(i);
}

#define NOINST __attribute__((no_instrument_function))

enum Phase {
  kIdle,
  kClose2Armed,     // main's dlclose of COUNT_LIB under way: waiting for the lookup of RACE_LIB
  kClose2Closing,   // the second thread is dlclosing RACE_LIB
  kClose2Inside,    // ... and waits in RACE_LIB's destructor
  kClose2Iterate,   // main's next lookup that finds RACE_LIB lets it go
  kClose2Released,  // RACE_LIB's destructor returned: glibc unmaps it
  kReopenArmed,     // main's dlclose of COUNT_LIB under way: the first dladdr reloads it
  kForkArmed,
  kGatesArmed,    // main's next runtime clock read with its exit gate closed opens a dlclose
  kGatesClosing,  // the second thread is dlclosing OTHER_LIB
  kGatesInside,   // ... and holds the count writes off (in its forget step's dladdr)
  kGatesRelease,  // main has made its calls meanwhile: the dlclose may finish
  kDone,
};
int count_races_exit_gate_open(void);  // (count_races_gate.c)
int count_races_countdown_negative(void);
static void *other_lib;
static _Atomic int phase = kIdle;
static pid_t main_tid;
static const char *count_lib_path, *race_lib_path;
static void *race_lib, *reopened;
static volatile unsigned long in_handler;

NOINST static int on_main_thread(void) { return (pid_t)syscall(SYS_gettid) == main_tid; }

NOINST static int ends_with(const char *s, const char *path) {
  if (!s || !path) return 0;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(s), m = strlen(base);
  return n >= m && strcmp(s + n - m, base) == 0;
}

// Waits (up to 20 s) for another thread to move the phase on.
NOINST static int wait_for(int wanted) {
  for (int i = 0; i < 20000 && atomic_load(&phase) != wanted; ++i) usleep(1000);
  return atomic_load(&phase) == wanted;
}

NOINST static void *close_race_lib(void *arg) {
  (void)arg;
  dlclose(race_lib);
  return NULL;
}

NOINST static void *reopen_count_lib(void *arg) {
  (void)arg;
  reopened = dlopen(count_lib_path, RTLD_NOW);
  return NULL;
}

// RACE_LIB's destructor, on the thread that dlcloses it.
NOINST void count_races_destructor(void) {
  int expected = kClose2Closing;
  if (!atomic_compare_exchange_strong(&phase, &expected, kClose2Inside)) return;
  if (!wait_for(kClose2Released)) fprintf(stderr, "count_races: main never found RACE_LIB\n");
}

NOINST int dladdr(const void *address, Dl_info *info) {
  static int (*real)(const void *, Dl_info *);
  if (!real) real = (int (*)(const void *, Dl_info *))dlsym(RTLD_NEXT, "dladdr");
  int found = real(address, info);
  int now = atomic_load(&phase);
  if (!on_main_thread()) {
    if (now == kGatesClosing) {  // (the dlclose's forget step: the count writes are held off)
      atomic_store(&phase, kGatesInside);
      if (!wait_for(kGatesRelease)) fprintf(stderr, "count_races: main never released the dlclose\n");
    }
    return found;
  }
  if (now == kClose2Armed && found && ends_with(info->dli_fname, race_lib_path)) {
    atomic_store(&phase, kClose2Closing);
    pthread_t closer;
    pthread_create(&closer, NULL, close_race_lib, NULL);
    pthread_detach(closer);
    if (!wait_for(kClose2Inside)) fprintf(stderr, "count_races: RACE_LIB's destructor did not run\n");
    atomic_store(&phase, kClose2Iterate);
  } else if (now == kReopenArmed) {
    atomic_store(&phase, kDone);
    pthread_t opener;
    pthread_create(&opener, NULL, reopen_count_lib, NULL);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    if (pthread_timedjoin_np(opener, NULL, &until) != 0) {
      fprintf(stderr, "count_races: the dlopen during the dlclose did not finish\n");
      _exit(3);
    }
  }
  return found;
}

struct Iteration {
  int (*callback)(struct dl_phdr_info *, size_t, void *);
  void *data;
  int found_race_lib;
};

NOINST static int see_callback(struct dl_phdr_info *info, size_t size, void *arg) {
  struct Iteration *it = arg;
  int result = it->callback(info, size, it->data);
  if (result && ends_with(info->dlpi_name, race_lib_path)) it->found_race_lib = 1;
  return result;
}

NOINST int dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *), void *data) {
  static int (*real)(int (*)(struct dl_phdr_info *, size_t, void *), void *);
  if (!real) real = (int (*)(int (*)(struct dl_phdr_info *, size_t, void *), void *))dlsym(RTLD_NEXT, "dl_iterate_phdr");
  if (atomic_load(&phase) != kClose2Iterate || !on_main_thread()) return real(callback, data);
  struct Iteration it = {callback, data, 0};
  int result = real(see_callback, &it);
  if (it.found_race_lib) {  // (the runtime's lookup found RACE_LIB still listed)
    atomic_store(&phase, kClose2Released);
    usleep(300000);  // glibc unmaps RACE_LIB meanwhile
  }
  return result;
}

NOINST static void *close_other_lib(void *arg) {
  (void)arg;
  dlclose(other_lib);
  return NULL;
}

// The runtime reads the clock at a burst's start and end. One with this module's countdown negative
// and its exit gate closed is a burst starting before its countdowns were armed (before session
// 15: count_set came after the path's rebuilding and this read); a dlclose then holds the count
// writes off until main has made its calls.
NOINST int clock_gettime(clockid_t clock, struct timespec *ts) {
  int result = (int)syscall(SYS_clock_gettime, clock, ts);
  if (atomic_load(&phase) == kGatesArmed && on_main_thread() && !count_races_exit_gate_open() &&
      count_races_countdown_negative()) {
    atomic_store(&phase, kGatesClosing);
    pthread_t closer;
    pthread_create(&closer, NULL, close_other_lib, NULL);
    pthread_detach(closer);
    if (!wait_for(kGatesInside)) fprintf(stderr, "count_races: the dlclose never reached its forget step\n");
  }
  return result;
}

NOINST static void on_signal(int sig) {
  (void)sig;
  work(10);
  in_handler = sink;
}

NOINST static void prepare_fork(void) {
  int expected = kForkArmed;
  if (atomic_compare_exchange_strong(&phase, &expected, kDone)) raise(SIGUSR1);
}
// Registered before the runtime's handlers, so run after its prepare handler (they run in reverse).
NOINST static void register_early(void) { pthread_atfork(prepare_fork, NULL, NULL); }
__attribute__((section(".preinit_array"), used)) static void (*const early)(void) = register_early;

static _Atomic int stop_churn;
NOINST static void *churn(void *arg) {
  const char *path = arg;
  while (!atomic_load(&stop_churn)) {
    void *h = dlopen(path, RTLD_NOW);
    if (h) dlclose(h);
  }
  return NULL;
}

NOINST static void *open_or_die(const char *path) {
  void *h = dlopen(path, RTLD_NOW);
  if (!h) {
    fprintf(stderr, "count_races: %s\n", dlerror());
    exit(2);
  }
  return h;
}

NOINST int main(int argc, char **argv) {
  alarm(60);
  main_tid = (pid_t)syscall(SYS_gettid);
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "close2") == 0 && argc > 3) {
    long calls = argc > 4 ? atol(argv[4]) : 100000;
    count_lib_path = argv[2];
    race_lib_path = argv[3];
    void *count_lib = open_or_die(count_lib_path);
    race_lib = open_or_die(race_lib_path);
    void (*lib_run)(long) = (void (*)(long))dlsym(count_lib, "lib_run");
    void (*race_run)(long) = (void (*)(long))dlsym(race_lib, "race_run");
    work(calls);
    lib_run(calls);
    race_run(calls);
    atomic_store(&phase, kClose2Armed);
    dlclose(count_lib);
    int reached = atomic_load(&phase);
    work(calls);
    printf("close2 %s work %lu\n", reached == kClose2Released ? "raced" : "did not race", sink);
    return 0;
  }
  if (strcmp(mode, "reopen") == 0 && argc > 2) {
    long calls = argc > 3 ? atol(argv[3]) : 100000;
    count_lib_path = argv[2];
    void *count_lib = open_or_die(count_lib_path);
    void (*lib_run)(long) = (void (*)(long))dlsym(count_lib, "lib_run");
    lib_run(calls);
    work(calls);  // (a gap ends in this module: COUNT_LIB's enters are taken before it is unloaded)
    atomic_store(&phase, kReopenArmed);
    dlclose(count_lib);
    if (!reopened) {
      fprintf(stderr, "count_races: the runtime called no dladdr, or the reload failed\n");
      return 2;
    }
    lib_run = (void (*)(long))dlsym(reopened, "lib_run");
    unsigned long (*lib_sum)(void) = (unsigned long (*)(void))dlsym(reopened, "lib_sum");
    lib_run(calls);
    unsigned long sum = lib_sum();
    printf("reopen events %lu sum %lu\n", 2 * (3 * (unsigned long)calls + 1) + (unsigned long)calls + 2, sum);
    return 0;
  }
  if (strcmp(mode, "burst") == 0 && argc > 3) {
    double seconds = argc > 4 ? atof(argv[4]) : 2.0;
    void *count_lib = open_or_die(argv[2]);
    void (*lib_run)(long) = (void (*)(long))dlsym(count_lib, "lib_run");
    pthread_t churner;
    pthread_create(&churner, NULL, churn, argv[3]);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    unsigned long enters = 0;
    do {
      for (int i = 0; i < 100; ++i) {
        work(3);  // 4 enters
        lib_run(2);  // 7 enters
        enters += 11;
      }
      clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((double)(now.tv_sec - start.tv_sec) + 1e-9 * (double)(now.tv_nsec - start.tv_nsec) < seconds);
    atomic_store(&stop_churn, 1);
    pthread_join(churner, NULL);
    printf("burst events %lu\n", enters);
    return 0;
  }
  if (strcmp(mode, "gates") == 0 && argc > 3) {
    long rounds = argc > 4 ? atol(argv[4]) : 200000;
    void *count_lib = open_or_die(argv[2]);
    other_lib = open_or_die(argv[3]);
    void (*lib_run)(long) = (void (*)(long))dlsym(count_lib, "lib_run");
    unsigned long enters = 0;
    for (long r = 0; r < rounds; ++r) {
      if (r == rounds / 4) atomic_store(&phase, kGatesArmed);  // (the clock decided, bursts running)
      work(3);  // 4 enters
      lib_run(2);  // 7 enters
      enters += 11;
      if (atomic_load(&phase) == kGatesInside) {  // calls while the dlclose holds the writes off
        for (int i = 0; i < 200; ++i) {
          work(3);
          lib_run(2);
          enters += 11;
        }
        atomic_store(&phase, kGatesRelease);
      }
    }
    int reached = atomic_load(&phase);
    printf("gates %s events %lu\n", reached == kGatesRelease ? "raced" : reached == kGatesArmed ? "armed" : "?", enters);
    return 0;
  }
  if (strcmp(mode, "fork") == 0) {
    long calls = argc > 2 ? atol(argv[2]) : 2000000;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigaction(SIGUSR1, &action, NULL);
    atomic_store(&phase, kForkArmed);
    pid_t child = fork();
    if (child == 0) _exit(0);
    int status = 0;
    waitpid(child, &status, 0);
    work(calls);
    printf("fork handler %lu child %d work %lu\n", in_handler, WIFEXITED(status) ? WEXITSTATUS(status) : -1, sink);
    return 0;
  }
  fprintf(stderr,
          "usage: count_races close2 COUNT_LIB RACE_LIB [CALLS] | reopen COUNT_LIB [CALLS] | "
          "burst COUNT_LIB OTHER_LIB [SECONDS] | fork [CALLS]\n");
  return 2;
}
