// Programs that must behave the same with the time sampler running (issue 17, robustness). Each
// mode prints what the test checks and exits 0 when the program saw nothing wrong.
//   sigprof   its own SIGPROF handler and setitimer(ITIMER_PROF): its ticks still arrive
//   blocked   a thread that blocks every signal burns CPU; the program runs to its end
//   pipe      blocking reads on a pipe fed slowly while both threads burn CPU: no read sees EINTR.
//             A CPU-time timer seldom expires while its thread is blocked (it uses no CPU then), so
//             with TIME_TEST_SIGNAL=<n> the feeder also sends signal n (the sampler's) to the
//             reader every 10 bytes, as an expiry landing in read() would: the runtime's handler
//             takes it (not one of its timers' samples) and read() must resume.
//   fork      the child burns CPU in child_work and exits; the parent waits
//   exec      burns CPU, then execs itself as "exec-child", which burns CPU and exits
//   threads   1,000 short threads, one after another
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__attribute__((no_instrument_function)) static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

volatile double g_sink;

__attribute__((noinline)) void burn(double seconds) {
  double end = cpu_now() + seconds, x = 0;
  while (cpu_now() < end)
    for (int i = 0; i < 200; ++i) x += i * 0.5;
  g_sink = x;
}

static volatile sig_atomic_t g_prof_ticks;
static void on_prof(int sig) {
  (void)sig;
  ++g_prof_ticks;
}

__attribute__((noinline)) int own_sigprof(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_prof;
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval it = {{0, 10000}, {0, 10000}};  // 10 ms of process CPU time
  setitimer(ITIMER_PROF, &it, NULL);
  burn(0.4);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  printf("prof ticks %d\n", (int)g_prof_ticks);
  return g_prof_ticks > 0 ? 0 : 1;
}

__attribute__((noinline)) void blocked_work(void) { burn(0.3); }
static void *run_blocked(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  blocked_work();
  return NULL;
}
__attribute__((noinline)) void open_work(void) { burn(0.3); }
__attribute__((noinline)) int blocked_signals(void) {
  pthread_t t;
  pthread_create(&t, NULL, run_blocked, NULL);
  open_work();
  pthread_join(t, NULL);
  printf("blocked done\n");
  return 0;
}

static int g_pipe[2];
static pthread_t g_reader;
static int g_poke_signal;
enum { kBytes = 3000 };
static void *feed(void *arg) {
  (void)arg;
  for (int i = 0; i < kBytes; ++i) {
    burn(0.0002);  // the reader blocks in read() while this thread runs
    if (g_poke_signal && i % 10 == 0) pthread_kill(g_reader, g_poke_signal);
    char c = (char)i;
    while (write(g_pipe[1], &c, 1) != 1) {
    }
  }
  return NULL;
}
__attribute__((noinline)) int pipe_reads(void) {
  if (pipe(g_pipe) != 0) return 2;
  const char *poke = getenv("TIME_TEST_SIGNAL");
  g_poke_signal = poke ? atoi(poke) : 0;
  g_reader = pthread_self();
  pthread_t t;
  pthread_create(&t, NULL, feed, NULL);
  int eintr = 0, got = 0;
  while (got < kBytes) {
    char c;
    ssize_t r = read(g_pipe[0], &c, 1);
    if (r == 1) {
      ++got;
      burn(0.0001);
    } else if (r < 0 && errno == EINTR) {
      ++eintr;
    } else {
      break;
    }
  }
  pthread_join(t, NULL);
  printf("pipe bytes %d eintr %d\n", got, eintr);
  return got == kBytes && eintr == 0 ? 0 : 1;
}

__attribute__((noinline)) void child_work(void) { burn(0.3); }
__attribute__((noinline)) void parent_work(void) { burn(0.1); }
__attribute__((noinline)) int forks(void) {
  parent_work();
  pid_t pid = fork();
  if (pid == 0) {
    child_work();
    exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  parent_work();
  printf("child status %d\n", status);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

__attribute__((noinline)) void before_exec(void) { burn(0.2); }
__attribute__((noinline)) void after_exec(void) { burn(0.2); }
__attribute__((noinline)) int execs(const char *self) {
  before_exec();
  execl(self, self, "exec-child", (char *)NULL);
  perror("execl");
  return 1;
}

__attribute__((noinline)) void short_work(void) { burn(0.0005); }
static void *run_short(void *arg) {
  (void)arg;
  short_work();
  return NULL;
}
__attribute__((noinline)) int many_threads(void) {
  for (int i = 0; i < 1000; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, run_short, NULL) != 0) return 1;
    pthread_join(t, NULL);
  }
  printf("threads 1000\n");
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "sigprof")) return own_sigprof();
  if (!strcmp(mode, "blocked")) return blocked_signals();
  if (!strcmp(mode, "pipe")) return pipe_reads();
  if (!strcmp(mode, "fork")) return forks();
  if (!strcmp(mode, "exec")) return execs(argv[0]);
  if (!strcmp(mode, "exec-child")) {
    after_exec();
    printf("exec child done\n");
    return 0;
  }
  if (!strcmp(mode, "threads")) return many_threads();
  fprintf(stderr, "unknown mode '%s'\n", mode);
  return 2;
}
