// How to sample wall-clock time per thread (issue 17, time=wall): the two mechanisms the runtime
// could use, measured on what a program would see and on what they cost. Not instrumented; the
// runtime is not involved. Usage: wall_mechanism MODE [HZ]
//   none     no sampling (the baseline)
//   signals  per-thread CLOCK_MONOTONIC timers (timer_create, SIGEV_THREAD_ID) at HZ, handler
//            installed with SA_RESTART, as time=cpu does with CPU-time clocks
//   thread   one sampler thread that wakes HZ times a second (absolute CLOCK_MONOTONIC deadlines)
//            and reads each thread's published "current context" (a pointer), as time=wall does
// Two threads run: a compute thread (a fixed amount of work) and a waiting thread that blocks in
// nanosleep, poll, epoll_wait and read() on a pipe, 200 ms each, and counts the calls that failed
// with EINTR. Prints one line: mode, EINTR counts, samples taken, compute wall seconds, process CPU
// seconds (user + system).
// Build: gcc -O2 -pthread bench/programs/wall_mechanism.c -o wall_mechanism
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_s(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long g_hz = 1000;
static int g_mode;  // 0 none, 1 signals, 2 thread
static volatile long g_samples;
static volatile int g_done;
// Each thread's published "current context" (what the sampler thread reads).
static void *volatile g_context[2];
static int g_pipe[2];
static int g_eintr_sleep, g_eintr_poll, g_eintr_epoll, g_eintr_read;

static void on_sample(int sig, siginfo_t *info, void *uc) {
  (void)sig, (void)info, (void)uc;
  int saved = errno;
  __atomic_add_fetch(&g_samples, 1, __ATOMIC_RELAXED);
  errno = saved;
}

static void start_signal_timer(void) {
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGRTMAX - 3;
  ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
  timer_t timer;
  if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) {
    perror("timer_create");
    exit(1);
  }
  struct itimerspec spec;
  memset(&spec, 0, sizeof spec);
  spec.it_interval.tv_nsec = 1000000000L / g_hz;
  spec.it_value.tv_nsec = 1000000000L / g_hz;
  timer_settime(timer, 0, &spec, NULL);
}

static void *sampler_main(void *arg) {
  (void)arg;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  while (!g_done) {
    next.tv_nsec += 1000000000L / g_hz;
    if (next.tv_nsec >= 1000000000L) next.tv_nsec -= 1000000000L, ++next.tv_sec;
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    for (int i = 0; i < 2; ++i)
      if (g_context[i]) __atomic_add_fetch(&g_samples, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

static double g_compute_wall;
static volatile double g_sink;

static void *compute_main(void *arg) {
  (void)arg;
  if (g_mode == 1) start_signal_timer();
  g_context[0] = (void *)&g_context[0];
  double t0 = now_s(CLOCK_MONOTONIC), x = 0;
  for (long i = 0; i < 600000000L; ++i) x += (double)(i & 1023) * 0.5;
  g_sink = x;
  g_compute_wall = now_s(CLOCK_MONOTONIC) - t0;
  return NULL;
}

static void *feeder_main(void *arg) {
  (void)arg;
  struct timespec ts = {0, 200 * 1000 * 1000};
  nanosleep(&ts, NULL);
  if (write(g_pipe[1], "x", 1) != 1) exit(1);
  return NULL;
}

static void *waiter_main(void *arg) {
  (void)arg;
  if (g_mode == 1) start_signal_timer();
  g_context[1] = (void *)&g_context[1];
  for (int round = 0; round < 5; ++round) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0)
      if (errno == EINTR) ++g_eintr_sleep;
    // poll: a 200 ms timeout; a call that returns early with EINTR is what the program would see.
    double end = now_s(CLOCK_MONOTONIC) + 0.2;
    for (double left; (left = end - now_s(CLOCK_MONOTONIC)) > 0;)
      if (poll(NULL, 0, (int)(left * 1000) + 1) < 0 && errno == EINTR) ++g_eintr_poll;
    int ep = epoll_create1(0);
    end = now_s(CLOCK_MONOTONIC) + 0.2;
    struct epoll_event event;
    for (double left; (left = end - now_s(CLOCK_MONOTONIC)) > 0;)
      if (epoll_wait(ep, &event, 1, (int)(left * 1000) + 1) < 0 && errno == EINTR) ++g_eintr_epoll;
    close(ep);
    pthread_t feeder;
    pthread_create(&feeder, NULL, feeder_main, NULL);
    char c;
    while (read(g_pipe[0], &c, 1) < 0)
      if (errno == EINTR) ++g_eintr_read;
    pthread_join(feeder, NULL);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s none|signals|thread [hz]\n", argv[0]);
    return 2;
  }
  g_mode = !strcmp(argv[1], "signals") ? 1 : !strcmp(argv[1], "thread") ? 2 : 0;
  if (argc > 2) g_hz = atol(argv[2]);
  if (pipe(g_pipe) != 0) return 1;
  if (g_mode == 1) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sample;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGRTMAX - 3, &action, NULL);
  }
  pthread_t sampler, compute, waiter;
  if (g_mode == 2) pthread_create(&sampler, NULL, sampler_main, NULL);
  pthread_create(&compute, NULL, compute_main, NULL);
  pthread_create(&waiter, NULL, waiter_main, NULL);
  pthread_join(compute, NULL);
  pthread_join(waiter, NULL);
  g_done = 1;
  if (g_mode == 2) pthread_join(sampler, NULL);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec * 1e-6;
  printf("%s eintr nanosleep %d poll %d epoll_wait %d read %d samples %ld compute_wall %.3f cpu %.3f\n",
         argv[1], g_eintr_sleep, g_eintr_poll, g_eintr_epoll, g_eintr_read, g_samples, g_compute_wall, cpu);
  return 0;
}
