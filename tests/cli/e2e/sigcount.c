// Logs every SIGINT it gets, with how it was sent (si_code: SI_KERNEL from a terminal, SI_USER from
// kill), one line each to the file argv[1]; exits 0 on SIGTERM. Writes argv[1].ready once its
// handlers are in place.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int g_log = -1;
static volatile sig_atomic_t g_done;

static void on_int(int sig, siginfo_t *info, void *ctx) {
  (void)sig;
  (void)ctx;
  char line[32];
  int n = snprintf(line, sizeof line, "INT %s\n", info->si_code == SI_KERNEL ? "terminal" : "kill");
  if (write(g_log, line, (size_t)n) < 0) _exit(3);
}

static void on_term(int sig) {
  (void)sig;
  g_done = 1;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  g_log = open(argv[1], O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (g_log < 0) return 2;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_int;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGINT, &sa, NULL);
  signal(SIGTERM, on_term);
  char ready[4096];
  snprintf(ready, sizeof ready, "%s.ready", argv[1]);
  close(open(ready, O_WRONLY | O_CREAT, 0644));
  while (!g_done) pause();
  return 0;
}
