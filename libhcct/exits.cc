// Interposed ways out of a process image that skip exit()'s destructors, where the runtime writes
// its profile: _exit and _Exit (a forked child's usual end), the exec family (the image is
// replaced: its threads never reach exit), and daemon() (whose parent leaves with _exit inside
// libc). With option follow=1 (what `hcct record` sets) the exec family and posix_spawn also put
// the runtime's LD_PRELOAD and HCCT_OPTIONS back into a child's explicit environment.
//
// Each interposer finds the next definition with dlsym(RTLD_NEXT) and calls it; none changes what
// the program sees (arguments, errno, return value), except the environment entries follow=1
// adds. A vfork child (posix_spawn's, or the program's own) must not write: it shares the parent's
// memory (lifecycle.h).
#include <dlfcn.h>
#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arena.h"
#include "interpose.h"
#include "lifecycle.h"
#include "options.h"

using namespace hcct::rt;

extern char **environ;

namespace {

// An environment with the runtime's entries put back: in the object itself (on the exec wrapper's
// stack) when it fits, else in mmap'd memory — never the program's malloc (exec may be called in a
// vfork child or a signal handler). Destroyed only when the exec failed or after posix_spawn copied
// it. The stack matters for vfork children, which share the parent's address space: pages one maps
// stay mapped in the parent after its exec (only an environment over kInlineBytes still costs that).
class FollowedEnvironment {
 public:
  explicit FollowedEnvironment(char *const *envp) : result_(const_cast<char **>(envp)) {
    const char *preload = preload_to_follow(), *options = options_to_follow();
    if (!envp || (!preload && !options)) return;
    size_t count = 0;
    bool has_preload = false, has_options = false;
    const char *their_preload = nullptr;
    for (; envp[count]; ++count) {
      if (strncmp(envp[count], "LD_PRELOAD=", 11) == 0) {
        their_preload = envp[count] + 11;
        has_preload = preload && strstr(their_preload, preload + 11);
      }
      if (strncmp(envp[count], "HCCT_OPTIONS=", 13) == 0) has_options = true;  // the child's own
    }
    bool add_preload = preload && !has_preload, add_options = options && !has_options;
    if (!add_preload && !add_options) return;
    // The array, then the new LD_PRELOAD text (ours, then theirs).
    size_t text = add_preload ? strlen(preload) + 2 + (their_preload ? strlen(their_preload) : 0) : 0;
    bytes_ = (count + 3) * sizeof(char *) + text;
    void *mem = inline_;
    if (bytes_ > sizeof inline_) {
      mem = map_pages(bytes_);
      if (!mem) return;
      mem_ = mem;
    }
    char **out = static_cast<char **>(mem);
    char *preload_text = reinterpret_cast<char *>(out + count + 3);
    if (add_preload) {
      strcpy(preload_text, preload);
      if (their_preload && *their_preload) {
        strcat(preload_text, ":");
        strcat(preload_text, their_preload);
      }
    }
    size_t n = 0;
    for (size_t i = 0; i < count; ++i) {
      if (add_preload && strncmp(envp[i], "LD_PRELOAD=", 11) == 0) continue;
      out[n++] = envp[i];
    }
    if (add_preload) out[n++] = preload_text;
    if (add_options) out[n++] = const_cast<char *>(options);
    out[n] = nullptr;
    result_ = out;
  }
  ~FollowedEnvironment() {
    if (mem_) unmap_pages(mem_, bytes_);
  }
  FollowedEnvironment(const FollowedEnvironment &) = delete;
  FollowedEnvironment &operator=(const FollowedEnvironment &) = delete;
  char *const *get() const { return result_; }

 private:
  static constexpr size_t kInlineBytes = 8192;
  char **result_;
  void *mem_ = nullptr;  // mapped, when the inline buffer was too small
  size_t bytes_ = 0;
  alignas(char *) char inline_[kInlineBytes];
};

// Writes the image's profile before an exec and resumes profiling if the exec returns (failed).
class ExecGuard {
 public:
  ExecGuard() {
    int saved = errno;
    resume_ = snapshot_before_exec(&snap_);
    errno = saved;
  }
  ~ExecGuard() {
    int saved = errno;
    if (resume_) resume_after_exec(&snap_);
    errno = saved;
  }
  ExecGuard(const ExecGuard &) = delete;
  ExecGuard &operator=(const ExecGuard &) = delete;

 private:
  ExecSnapshot snap_;
  bool resume_;
};

using ExecveFn = int (*)(const char *, char *const[], char *const[]);
using ExecvpeFn = int (*)(const char *, char *const[], char *const[]);
using FexecveFn = int (*)(int, char *const[], char *const[]);
using ExecveatFn = int (*)(int, const char *, char *const[], char *const[], int);
using ExitFn = void (*)(int);
using DaemonFn = int (*)(int, int);
using SpawnFn = int (*)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]);

ExecveFn g_execve, g_execvpe;
FexecveFn g_fexecve;
ExecveatFn g_execveat;
ExitFn g_exit, g_Exit;
DaemonFn g_daemon;
SpawnFn g_spawn, g_spawnp;

// A next definition that cannot be found (a static program) fails the call with ENOSYS.
template <typename F, typename... Args>
HCCT_NOINST int call_next(const char *name, F *cache, Args... args) {
  if (F f = next_definition(name, cache)) return f(args...);
  errno = ENOSYS;
  return -1;
}

// Without a next definition (a static program: no dlsym), the system call itself.
[[noreturn]] HCCT_NOINST void leave(const char *name, ExitFn *cache, int status) {
  finish_before_leaving();
  if (ExitFn f = next_definition(name, cache)) f(status);
  for (;;) syscall(SYS_exit_group, status);
}

HCCT_NOINST int do_execve(const char *path, char *const argv[], char *const envp[]) {
  ExecGuard guard;
  FollowedEnvironment env(envp);
  if (ExecveFn f = next_definition("execve", &g_execve)) return f(path, argv, env.get());
  return int(syscall(SYS_execve, path, argv, env.get()));
}

HCCT_NOINST int do_execvpe(const char *file, char *const argv[], char *const envp[]) {
  ExecGuard guard;
  FollowedEnvironment env(envp);
  return call_next("execvpe", &g_execvpe, file, argv, env.get());
}



}  // namespace

// dlsym takes the loader's lock: the ways out may be taken in a signal handler or a vfork child,
// so their next definitions are found once, at start-up.
HCCT_NOINST void hcct::rt::resolve_ways_out() {
  next_definition("_exit", &g_exit);
  next_definition("_Exit", &g_Exit);
  next_definition("execve", &g_execve);
  next_definition("execvpe", &g_execvpe);
  next_definition("fexecve", &g_fexecve);
  next_definition("execveat", &g_execveat);
  next_definition("daemon", &g_daemon);
  next_definition("posix_spawn", &g_spawn);
  next_definition("posix_spawnp", &g_spawnp);
}

HCCT_EXPORT [[noreturn]] void _exit(int status) { leave("_exit", &g_exit, status); }
HCCT_EXPORT [[noreturn]] void _Exit(int status) { leave("_Exit", &g_Exit, status); }

HCCT_EXPORT int daemon(int nochdir, int noclose) {
  mark_leaving_after_fork(true);
  int r = call_next("daemon", &g_daemon, nochdir, noclose);
  int saved = errno;
  mark_leaving_after_fork(false);  // the child, or a parent whose fork failed
  errno = saved;
  return r;
}

HCCT_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  return do_execve(path, argv, envp);
}

HCCT_EXPORT int execv(const char *path, char *const argv[]) { return do_execve(path, argv, environ); }

HCCT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  return do_execvpe(file, argv, envp);
}

HCCT_EXPORT int execvp(const char *file, char *const argv[]) { return do_execvpe(file, argv, environ); }

HCCT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  ExecGuard guard;
  FollowedEnvironment env(envp);
  return call_next("fexecve", &g_fexecve, fd, argv, env.get());
}

HCCT_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags) {
  ExecGuard guard;
  FollowedEnvironment env(envp);
  return call_next("execveat", &g_execveat, dirfd, path, argv, env.get(), flags);
}

namespace {

// execl, execlp, execle: `first` then the variadic arguments up to the null; execle's envp after.
// Counted first, then collected into an array of exactly that size on the stack, as glibc does
// (a fixed large array would overflow a small thread stack or a sigaltstack).
template <bool kPath, bool kEnv>
HCCT_NOINST int exec_list(const char *file, const char *first, va_list ap) {
  size_t n = 1;
  va_list count;
  va_copy(count, ap);
  for (const char *arg = first; arg; arg = va_arg(count, const char *)) ++n;
  va_end(count);
  char *argv[n];
  argv[0] = const_cast<char *>(first);
  for (size_t i = 1; i < n; ++i) argv[i] = va_arg(ap, char *);
  char *const *envp = kEnv ? va_arg(ap, char *const *) : environ;
  return kPath ? do_execvpe(file, argv, envp) : do_execve(file, argv, envp);
}

}  // namespace

HCCT_EXPORT int execl(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int r = exec_list<false, false>(path, arg, ap);
  va_end(ap);
  return r;
}

HCCT_EXPORT int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int r = exec_list<true, false>(file, arg, ap);
  va_end(ap);
  return r;
}

HCCT_EXPORT int execle(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int r = exec_list<false, true>(path, arg, ap);
  va_end(ap);
  return r;
}

// posix_spawn replaces nothing here (its child is a vfork-like clone that execs inside libc): it
// only passes the runtime on to a child given its own environment.
HCCT_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
                            const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
  FollowedEnvironment env(envp);
  return call_next("posix_spawn", &g_spawn, pid, path, actions, attr, argv, env.get());
}

HCCT_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
                             const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
  FollowedEnvironment env(envp);
  return call_next("posix_spawnp", &g_spawnp, pid, file, actions, attr, argv, env.get());
}
