// Ways a process image ends, leaves or is replaced, for the runtime's lifecycle tests
// (tests/e2e/lifecycle_test.cc). `ways_out CASE [ARGS]`; every case prints what it did on stdout,
// so the tests can compare output with and without the runtime.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
volatile int sink;
static const char *self_path;

__attribute__((noinline)) void work(void) { sink++; }
__attribute__((noinline)) void in_child(void) { sink++; }
__attribute__((noinline)) void in_thread(void) { sink++; }
__attribute__((noinline)) void after(void) { sink++; }
__attribute__((noinline)) void leaf(int i) { sink += i; }

// exit() from a signal handler while the main thread calls instrumented functions in a loop: the
// handler very likely interrupts the runtime itself.
static void leave_now(int sig) {
  (void)sig;
  exit(0);
}
__attribute__((noinline)) static int exit_in_handler(void) {
  signal(SIGALRM, leave_now);
  struct itimerval t = {{0, 0}, {0, 50000}};  // 50 ms
  setitimer(ITIMER_REAL, &t, NULL);
  printf("looping\n");
  fflush(stdout);
  for (;;) work();
  return 0;
}

// Many distinct contexts (a profile of several KB), and output the program writes itself.
__attribute__((noinline)) void level(int depth, int i) {
  if (depth == 0) return leaf(i);
  level(depth - 1, i);
}
__attribute__((noinline)) static int many_contexts(void) {
  for (int i = 0; i < 2000; ++i) level(i % 50, i);
  printf("done %d\n", sink);
  return 0;
}

// Threads that start and exit in a loop (each exiting thread writes its profile, holding the
// runtime's module-list lock for a while) while the main thread forks children that exit at once:
// no child may hang at exit on a lock another thread of the parent held at the fork.
static volatile int stop_churning;
static void *short_thread(void *arg) {
  (void)arg;
  in_thread();
  return NULL;
}
static void *churn(void *arg) {
  (void)arg;
  while (!stop_churning) {
    pthread_t t;
    if (pthread_create(&t, NULL, short_thread, NULL) == 0) pthread_join(t, NULL);
  }
  return NULL;
}
__attribute__((noinline)) static int fork_while_dumping(void) {
  pthread_t t;
  pthread_create(&t, NULL, churn, NULL);
  int hung = 0;
  for (int i = 0; i < 150 && !hung; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      in_child();
      exit(0);
    }
    int status = 0;
    for (int waited = 0; waited < 5000; ++waited) {  // 5 s
      if (waitpid(pid, &status, WNOHANG) == pid) break;
      if (waited == 4999) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        hung = 1;
      }
      usleep(1000);
    }
  }
  stop_churning = 1;
  pthread_join(t, NULL);
  printf(hung ? "a child hung at exit\n" : "150 children exited\n");
  return hung;
}

// Plants the names the runtime's temporaries of this process's main thread could have (the
// current and the older naming) as symlinks to `victim`: the dump must not write through them.
__attribute__((noinline)) static int plant(const char *dir, const char *victim) {
  char name[4096];
  snprintf(name, sizeof name, "%s/.%d.0.hcct.%ld.tmp", dir, getpid(), (long)syscall(SYS_gettid));
  if (symlink(victim, name) != 0) perror("symlink");
  snprintf(name, sizeof name, "%s/.%d.0.hcct.tmp", dir, getpid());
  if (symlink(victim, name) != 0) perror("symlink");
  work();
  printf("planted\n");
  return 0;
}

// daemon(): the parent leaves with _exit inside libc; the child works, then says it is done by
// creating `done` (the test waits for it).
__attribute__((noinline)) static int become_daemon(const char *done) {
  work();
  if (daemon(1, 1) != 0) return 1;
  for (int i = 0; i < 5; ++i) in_child();
  int fd = open(done, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  close(fd);
  return 0;
}

// A forked child that ends with _exit (or _Exit).
__attribute__((noinline)) static int fork_then_underscore_exit(int capital) {
  work();
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 20; ++i) in_child();
    if (capital) _Exit(3);
    _exit(3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  for (int i = 0; i < 30; ++i) after();
  printf("child exited with %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

// The main thread works and waits; a second thread works, then execs this program's `after` case.
static void *exec_from_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 3; ++i) in_thread();
  execl(self_path, self_path, "after", (char *)NULL);
  perror("execl");
  return NULL;
}
__attribute__((noinline)) static int exec_in_thread(void) {
  for (int i = 0; i < 2; ++i) work();
  fflush(stdout);
  pthread_t t;
  pthread_create(&t, NULL, exec_from_thread, NULL);
  pthread_join(t, NULL);
  return 1;  // not reached: the exec replaces the image
}
__attribute__((noinline)) static int run_after(void) {
  for (int i = 0; i < 7; ++i) after();
  printf("after exec\n");
  return 0;
}

// An exec that fails, then more work: the final profile has all of it.
__attribute__((noinline)) static int failed_exec(void) {
  for (int i = 0; i < 4; ++i) work();
  execl("/nonexistent/hcct-no-such-program", "x", (char *)NULL);
  int err = errno;
  for (int i = 0; i < 6; ++i) after();
  printf("exec failed: %s\n", strerror(err));
  return 0;
}

// Children given an environment of their own: posix_spawn and fork + execve.
__attribute__((noinline)) static int spawn_with_own_environment(void) {
  char *env[] = {"PATH=/usr/bin:/bin", "HOME=/nonexistent", NULL};
  char *argv[] = {(char *)self_path, "leaf", NULL};
  work();
  pid_t a;
  int status_a = -1, status_b = -1;
  if (posix_spawn(&a, self_path, NULL, NULL, argv, env) == 0) waitpid(a, &status_a, 0);
  pid_t b = fork();
  if (b == 0) {
    execve(self_path, argv, env);
    _exit(127);
  }
  waitpid(b, &status_b, 0);
  printf("children exited with %d %d\n", WEXITSTATUS(status_a), WEXITSTATUS(status_b));
  return 0;
}
// /usr/bin/env started with an environment of one entry: it prints what the child really got.
__attribute__((noinline)) static int spawn_env_printer(void) {
  char *env[] = {"A=1", NULL};
  char *argv[] = {"env", NULL};
  pid_t pid;
  int status = -1;
  fflush(stdout);
  if (posix_spawn(&pid, "/usr/bin/env", NULL, NULL, argv, env) == 0) waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
__attribute__((noinline)) static int just_leaf(void) {
  leaf(1);
  return 0;
}

// vfork + exec: the child must not write anything for (or into) the parent's profile.
__attribute__((noinline)) static int vfork_exec(void) {
  work();
  pid_t pid = vfork();
  if (pid == 0) {
    execl("/bin/true", "true", (char *)NULL);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  for (int i = 0; i < 3; ++i) after();
  printf("vfork child exited with %d\n", WEXITSTATUS(status));
  return 0;
}

// Threads that finish while the process exits: each thread's profile is written once, by the
// thread or by the final dump, never by neither (the final dump used to miss a thread that had
// claimed its state but not yet said it was writing it).
enum { kExitingThreads = 24 };
static pthread_barrier_t exit_barrier;
static void *exiting_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 5; ++i) in_thread();
  pthread_barrier_wait(&exit_barrier);
  return NULL;
}
__attribute__((noinline)) static int exit_while_threads_exit(void) {
  pthread_barrier_init(&exit_barrier, NULL, kExitingThreads + 1);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (int i = 0; i < kExitingThreads; ++i) {
    pthread_t t;
    if (pthread_create(&t, &attr, exiting_thread, NULL) != 0) return 3;
  }
  pthread_barrier_wait(&exit_barrier);
  printf("exiting\n");
  exit(0);  // the threads are leaving at the same moment
}

// Two threads whose execs fail at the same time, round after round: profiling goes on afterwards.
// One exec fails at once, the other only after searching a long PATH, so the slow one returns
// last; when it had started after the fast one closed the gate, it used to restore the gate closed.
enum { kExecRounds = 12 };
static pthread_barrier_t exec_barrier;
static void *failing_execs(void *arg) {
  int slow = arg != NULL;
  for (int i = 0; i < kExecRounds; ++i) {
    pthread_barrier_wait(&exec_barrier);
    if (slow) execlp("hcct-no-such-program", "x", (char *)NULL);
    else execl("/nonexistent/hcct-no-such-program", "x", (char *)NULL);
    pthread_barrier_wait(&exec_barrier);
  }
  return NULL;
}
__attribute__((noinline)) static int failed_execs_concurrently(void) {
  static char path[64 * 1024];
  strcpy(path, "PATH=/nonexistent/0");
  for (int i = 1; i < 3000; ++i) sprintf(path + strlen(path), ":/nonexistent/%d", i);
  putenv(path);
  pthread_barrier_init(&exec_barrier, NULL, 2);
  pthread_t a, b;
  if (pthread_create(&a, NULL, failing_execs, NULL) || pthread_create(&b, NULL, failing_execs, (void *)1)) return 3;
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  for (int i = 0; i < 6; ++i) after();
  printf("execs failed\n");
  return 0;
}

// Threads that exit while another thread's exec is writing the image's profile (and then fails):
// each is written as a thread that exited, once, and its state is freed.
enum { kRoundThreads = 6 };
static pthread_barrier_t round_barrier;
static void *round_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 3; ++i) in_thread();
  pthread_barrier_wait(&round_barrier);
  return NULL;
}
__attribute__((noinline)) static int threads_exit_during_exec(void) {
  for (int round = 0; round < 10; ++round) {
    pthread_t t[kRoundThreads];
    pthread_barrier_init(&round_barrier, NULL, kRoundThreads + 1);
    for (int i = 0; i < kRoundThreads; ++i)
      if (pthread_create(&t[i], NULL, round_thread, NULL) != 0) return 3;
    pthread_barrier_wait(&round_barrier);
    execl("/nonexistent/hcct-no-such-program", "x", (char *)NULL);
    for (int i = 0; i < kRoundThreads; ++i) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&round_barrier);
  }
  for (int i = 0; i < 2; ++i) after();
  printf("rounds done\n");
  return 0;
}

// daemon() whose fork fails (a seccomp filter makes clone fail with EAGAIN): daemon returns -1 and
// the process goes on, profiled (its fork's parent handler used to end profiling).
__attribute__((noinline)) static int daemon_fork_fails(void) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAGAIN),
  };
  struct sock_fprog prog = {sizeof filter / sizeof filter[0], filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
    printf("no seccomp\n");
    return 77;
  }
  work();
  int r = daemon(1, 1);
  int err = errno;
  for (int i = 0; i < 6; ++i) after();
  printf("daemon returned %d: %s\n", r, strerror(err));
  return 0;
}

// vfork children that exec with an environment of their own (follow=1 rebuilds it with the
// runtime's entries): the parent's address space must not grow with each one.
static long vm_size_kb(void) {
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  const char *at = strstr(buf, "VmSize:");
  return at ? strtol(at + 7, NULL, 10) : -1;
}
__attribute__((noinline)) static int vfork_exec_own_env(void) {
  char *env[] = {"A=1", NULL};
  char *argv[] = {"true", NULL};
  long before = 0;
  for (int i = 0; i < 201; ++i) {
    if (i == 1) before = vm_size_kb();  // after the first: the runtime's own first-use mappings
    pid_t pid = vfork();
    if (pid == 0) {
      execve("/bin/true", argv, env);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
  }
  long grown = vm_size_kb() - before;
  work();
  printf("address space grew by %s\n", grown < 64 ? "less than 64 KB" : "64 KB or more");
  if (grown >= 64) fprintf(stderr, "grew by %ld KB over 200 vfork+exec\n", grown);
  return 0;
}

// A fork child whose pid an earlier process had (in a new pid namespace the pids are known: the
// namespace's first process is 1, its first child 2): its file must not replace that process's.
__attribute__((noinline)) static int fork_in_pid_namespace(void) {
  if (unshare(CLONE_NEWPID) != 0) {
    printf("no pid namespace\n");
    return 77;
  }
  fflush(stdout);
  pid_t first = fork();
  if (first == 0) {  // pid 1 of the namespace
    pid_t second = fork();
    if (second == 0) {  // pid 2
      for (int i = 0; i < 4; ++i) in_child();
      exit(0);
    }
    int status = 0;
    waitpid(second, &status, 0);
    exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  }
  int status = 0;
  waitpid(first, &status, 0);
  printf("children exited with %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

// stdout only: with stderr on a dead pipe, or fd 2 closed and reused for a data file that stays
// open until exit, the runtime's messages must change nothing.
__attribute__((noinline)) static int quiet_stdout(void) {
  for (int i = 0; i < 100; ++i) level(i % 20, i);
  printf("ok %d\n", sink);
  return 0;
}
__attribute__((noinline)) static int reuse_fd2(const char *data) {
  close(2);
  int fd = open(data, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd != 2) return 9;
  for (int i = 0; i < 100; ++i) level(i % 20, i);
  const char text[] = "data written by the program\n";
  if (write(fd, text, sizeof text - 1) != (ssize_t)(sizeof text - 1)) return 8;
  printf("ok\n");
  return 0;  // fd 2 stays open: the runtime's exit-time message comes after this
}

int main(int argc, char **argv) {
  self_path = argv[0];
  const char *c = argc > 1 ? argv[1] : "";
  if (!strcmp(c, "exit-in-handler")) return exit_in_handler();
  if (!strcmp(c, "many-contexts")) return many_contexts();
  if (!strcmp(c, "fork-while-dumping")) return fork_while_dumping();
  if (!strcmp(c, "plant") && argc > 3) return plant(argv[2], argv[3]);
  if (!strcmp(c, "daemon") && argc > 2) return become_daemon(argv[2]);
  if (!strcmp(c, "fork-_exit")) return fork_then_underscore_exit(0);
  if (!strcmp(c, "fork-_Exit")) return fork_then_underscore_exit(1);
  if (!strcmp(c, "exec-in-thread")) return exec_in_thread();
  if (!strcmp(c, "after")) return run_after();
  if (!strcmp(c, "failed-exec")) return failed_exec();
  if (!strcmp(c, "spawn-own-env")) return spawn_with_own_environment();
  if (!strcmp(c, "leaf")) return just_leaf();
  if (!strcmp(c, "spawn-env-printer")) return spawn_env_printer();
  if (!strcmp(c, "vfork-exec")) return vfork_exec();
  if (!strcmp(c, "quiet")) return quiet_stdout();
  if (!strcmp(c, "exit-while-threads-exit")) return exit_while_threads_exit();
  if (!strcmp(c, "failed-execs-concurrently")) return failed_execs_concurrently();
  if (!strcmp(c, "threads-exit-during-exec")) return threads_exit_during_exec();
  if (!strcmp(c, "daemon-fork-fails")) return daemon_fork_fails();
  if (!strcmp(c, "vfork-exec-own-env")) return vfork_exec_own_env();
  if (!strcmp(c, "fork-in-pid-namespace")) return fork_in_pid_namespace();
  if (!strcmp(c, "reuse-fd2") && argc > 2) return reuse_fd2(argv[2]);
  fprintf(stderr, "ways_out: unknown case '%s'\n", c);
  return 2;
}
