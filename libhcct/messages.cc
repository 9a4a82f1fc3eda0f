#include "messages.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "options.h"

namespace hcct::rt {

namespace {

// What fd 2 was at start-up. Plain data, constant-initialised. Code that runs without the
// runtime's constructor (the unit tests link the core alone) takes fd 2 as it is at its first
// message.
struct StderrIdentity {
  bool initialised;
  bool open;  // fd 2 was open at start-up: with `2>&-`, messages go nowhere (or to log=PATH)
  dev_t dev;
  ino_t ino;
};
StderrIdentity g_stderr{};
char g_log_path[kMaxPath];  // empty: stderr

HCCT_NOINST bool same_file_as_at_start(int fd) {
  if (!g_stderr.initialised) messages_init();
  struct stat st;
  return g_stderr.open && fstat(fd, &st) == 0 && st.st_dev == g_stderr.dev &&
         st.st_ino == g_stderr.ino;
}

// Ready to take a message without blocking (a pipe with room, a terminal, a file).
HCCT_NOINST bool ready_for_writing(int fd) {
  pollfd p{fd, POLLOUT, 0};
  int r;
  do r = poll(&p, 1, 0);
  while (r < 0 && errno == EINTR);
  return r == 1 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

HCCT_NOINST void write_once(int fd, const char *text, size_t size) {
  ssize_t w;
  do w = write(fd, text, size);
  while (w < 0 && errno == EINTR);
}

}  // namespace

HCCT_NOINST void messages_init() {
  struct stat st;
  g_stderr.open = fstat(2, &st) == 0;
  g_stderr.dev = g_stderr.open ? st.st_dev : 0;
  g_stderr.ino = g_stderr.open ? st.st_ino : 0;
  g_stderr.initialised = true;
}

HCCT_NOINST void messages_to_file(const char *path) {
  if (!path || !*path) {
    g_log_path[0] = 0;
    return;
  }
  snprintf(g_log_path, sizeof g_log_path, "%s", path);
}

HCCT_NOINST void say_text(const char *text, size_t size) {
  if (!size) return;
  int saved_errno = errno;  // a message never changes what the program sees in errno
  {
    QuietWrites quiet;
    if (g_log_path[0]) {
      int fd = open(g_log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
      if (fd >= 0) {
        write_once(fd, text, size);
        close(fd);
      }
    } else if (same_file_as_at_start(2) && ready_for_writing(2)) {
      write_once(2, text, size);
    }
  }
  errno = saved_errno;
}

HCCT_NOINST void say(const char *format, ...) {
  char text[kMaxPath + 1024];
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(text, sizeof text, format, ap);
  va_end(ap);
  if (n <= 0) return;
  if (size_t(n) >= sizeof text) {  // cut, the newline kept
    n = int(sizeof text - 1);
    text[n - 1] = '\n';
  }
  say_text(text, size_t(n));
}

constexpr int kQuietSignals[] = {SIGPIPE, SIGXFSZ};

HCCT_NOINST QuietWrites::QuietWrites() {
  sigset_t quiet;
  sigemptyset(&quiet);
  for (int sig : kQuietSignals) sigaddset(&quiet, sig);
  pthread_sigmask(SIG_BLOCK, &quiet, &old_mask_);
  sigpending(&pending_before_);
}

HCCT_NOINST QuietWrites::~QuietWrites() {
  // Discard what the runtime's own writes raised (pending now, not before); a signal that was
  // already pending stays for the program.
  sigset_t pending;
  sigpending(&pending);
  const timespec no_wait{0, 0};
  for (int sig : kQuietSignals) {
    if (!sigismember(&pending, sig) || sigismember(&pending_before_, sig)) continue;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    while (sigtimedwait(&one, nullptr, &no_wait) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

HCCT_NOINST const char *error_text(int err) {
  const char *text = strerrordesc_np(err);
  return text ? text : "unknown error";
}

}  // namespace hcct::rt
