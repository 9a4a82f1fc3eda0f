// A program whose one versioned module runs on the event clock (an executable's default) or on the
// time gate (built with -kpath-burst-event-clock=0): after some looping it prints how many threads
// the process has. On the event clock the runtime needs no timer thread for the paths.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned long mix(unsigned long n) {
  unsigned long h = 1469598103934665603ul;
  for (unsigned long i = 0; i < n; ++i) h = (h ^ (i & 0xff ? i : i >> 3)) * 1099511628211ul;
  return h;
}

static int threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

int main(int argc, char **argv) {
  unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 100000;
  unsigned long h = 0;
  for (int round = 0; round < 20; ++round) h ^= mix(n + round);
  printf("%lu\nthreads %d\n", h & 0xffff, threads());
  return 0;
}
