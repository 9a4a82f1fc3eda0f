// OSR points that fired, the default OSR handler and the oracle's exit report (hcct/oracle.h,
// docs/GUIDE.md "OSR points"). Lock-free: a point joins the report list once, by compare-and-swap,
// the first time it fires.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "oracle_internal.h"

namespace {

hcct_osr_point *g_points = nullptr;  // OSR points that fired at least once (atomic head)
int g_osr_log = -1;                  // HCCT_OSR_LOG, read on first use

HCCT_NOINST void write_all(int fd, const char *s, size_t n) {
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= size_t(w);
  }
}

__attribute__((destructor)) HCCT_NOINST void report_at_exit() {
  const char *r = getenv("HCCT_ORACLE_REPORT");
  if (r && *r && strcmp(r, "0") != 0) hcct_oracle_report(2);
}

}  // namespace

HCCT_EXPORT void hcct_oracle_report(int fd) {
  char line[1024];
  hcct_oracle_loop *loops = hcct::rt::oracle::registered_loops();
  hcct_osr_point *points = __atomic_load_n(&g_points, __ATOMIC_ACQUIRE);
  if (loops) write_all(fd, "hcct oracle: loop  threshold  entries  iterations  fired\n", 57);
  for (hcct_oracle_loop *l = loops; l; l = l->next) {
    hcct_oracle_stats s;
    hcct_oracle_stats_of(l, &s);
    int n = snprintf(line, sizeof line, "hcct oracle: %s  %llu  %llu  %llu  %llu\n", l->key,
                     (unsigned long long)s.threshold, (unsigned long long)s.entries,
                     (unsigned long long)s.iterations, (unsigned long long)s.fired);
    if (n > 0) write_all(fd, line, size_t(n) < sizeof line ? size_t(n) : sizeof line - 1);
  }
  for (hcct_osr_point *p = points; p; p = p->next) {
    int n = snprintf(line, sizeof line, "hcct osr: %s (%s, header block %u, threshold %llu) fired %llu times\n", p->key,
                     p->function, p->header_block, (unsigned long long)p->threshold,
                     (unsigned long long)hcct_osr_fired(p));
    if (n > 0) write_all(fd, line, size_t(n) < sizeof line ? size_t(n) : sizeof line - 1);
  }
}

HCCT_EXPORT void hcct_osr_record(hcct_osr_point *point, uint64_t iteration) {
  if (!point) return;
  if (__atomic_fetch_add(&point->fired, 1, __ATOMIC_RELAXED) == 0) {
    // First event of this point: exactly one thread gets here; push it on the report list.
    hcct_osr_point *head = __atomic_load_n(&g_points, __ATOMIC_RELAXED);
    do point->next = head;
    while (!__atomic_compare_exchange_n(&g_points, &head, point, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
  }
  int log = __atomic_load_n(&g_osr_log, __ATOMIC_RELAXED);
  if (log < 0) {
    const char *v = getenv("HCCT_OSR_LOG");
    log = v && *v && strcmp(v, "0") != 0;
    __atomic_store_n(&g_osr_log, log, __ATOMIC_RELAXED);
  }
  if (log) {
    char msg[512];
    int n = snprintf(msg, sizeof msg, "hcct osr: %s (%s) fired at iteration %llu\n", point->key, point->function,
                     (unsigned long long)iteration);
    if (n > 0) write_all(2, msg, size_t(n) < sizeof msg ? size_t(n) : sizeof msg - 1);
  }
}

HCCT_EXPORT uint64_t hcct_osr_fired(const hcct_osr_point *point) {
  return point ? __atomic_load_n(&point->fired, __ATOMIC_RELAXED) : 0;
}

// The default handler: weak, so that the program's own definition wins, in a static link too.
extern "C" __attribute__((weak, visibility("default"), no_instrument_function)) void hcct_osr_handler(
    hcct_osr_point *point, uint64_t iteration) {
  hcct_osr_record(point, iteration);
}
