/* The online hotness oracle and the OSR-point handler ABI (docs/GUIDE.md, "Online hotness oracle",
 * "OSR points").
 *
 * Oracle: for programs that switch loop versions themselves (the threshold()/oracle() of
 * structured OSR). A loop is registered once under a key, normally the `file:line` that
 * `hcct guide` prints; each entry of the loop opens a run on the caller's stack, every iteration
 * ticks it (an inline increment and compare: no call, no atomic, no allocation), and the tick says
 * "switch now" exactly once per entry, at the threshold-th tick. Thresholds come from the
 * environment (read once, at the first registration):
 *   HCCT_ORACLE=key=T,key=T,...      as printed by `hcct guide` (T = 0: never fire)
 *   HCCT_ORACLE_GUIDE=guide.json     the guidance file itself: every loop's "key" and "threshold"
 * HCCT_ORACLE wins over the guidance file, which wins over the program's default threshold. A
 * malformed value is ignored as a whole, with one line on stderr naming it and the problem.
 * HCCT_ORACLE_REPORT=1 prints every registered loop and every OSR point that fired at exit.
 *
 *   static hcct_oracle_loop *conv;  (or HCCT_ORACLE_LOOP below)
 *   hcct_oracle_run r = hcct_oracle_enter(hcct_oracle_loop_cached(&conv, "masked_conv_osr.c:60", 1000));
 *   for (i = 0; i < n; i++) {
 *     if (hcct_oracle_tick(&r)) break;      // the threshold-th iteration: go to the other version
 *     ...baseline body...
 *   }
 *   for (; i < n; i++) ...specialised body...
 *   hcct_oracle_leave(&r);                  // entries, iterations, fired: per loop, atomically
 *
 * The oracle does not depend on the profiler: it works whatever HCCT_OPTIONS says, with libhcct
 * linked or preloaded. Registration is thread-safe (a lock on that path only); runs are
 * thread-private; the per-loop statistics are updated with relaxed atomics once per entry.
 *
 * OSR points: the kpath plugin with a guidance file (HCCT_GUIDE=guide.json at compile time) puts a
 * per-entry counter at the top of each guided loop's header and, when it reaches the loop's
 * threshold, calls hcct_osr_handler(point, iteration) — the program's if it defines one, else
 * libhcct's weak default, which records the event (point->fired; HCCT_OSR_LOG=1 also prints it).
 * The call site tests the handler's address first: a program that links neither runs unchanged. */
#ifndef HCCT_ORACLE_H
#define HCCT_ORACLE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One registered loop. `key` and `threshold` may be read directly; the counters are updated
 * atomically: read them with __atomic_load_n or hcct_oracle_stats. */
typedef struct hcct_oracle_loop {
  const char *key;       /* the caller's string: must outlive the program's use (a literal) */
  uint64_t threshold;    /* ticks per entry before the oracle fires; 0: never */
  uint64_t entries;      /* runs left (hcct_oracle_leave) */
  uint64_t iterations;   /* ticks of those runs, plus hcct_oracle_count additions */
  uint64_t fired;        /* runs that reached the threshold */
  struct hcct_oracle_loop *next; /* runtime-owned */
} hcct_oracle_loop;

/* One entry of a loop: lives on the caller's stack, used by one thread. */
typedef struct hcct_oracle_run {
  uint64_t iteration; /* ticks so far */
  uint64_t threshold; /* the loop's threshold when the run began */
  hcct_oracle_loop *loop;
} hcct_oracle_run;

typedef struct hcct_oracle_stats {
  uint64_t threshold, entries, iterations, fired;
} hcct_oracle_stats;

/* Registers `key` (or returns the loop already registered under it). Its threshold is the one the
 * environment gives the key, else `default_threshold`. Returns null only when the key is null or
 * empty or memory is exhausted. Not for the per-iteration path: cache the result. */
hcct_oracle_loop *hcct_oracle_register(const char *key, uint64_t default_threshold);
/* The loop registered under `key`, or null. */
hcct_oracle_loop *hcct_oracle_find(const char *key);
/* Replaces the HCCT_ORACLE thresholds by `spec` ("key=T,key=T"; null or "" clears them) and
 * re-applies them to every registered loop; keys not in `spec` go back to the guidance file's
 * threshold or their default. Returns the number of entries, or -1 (nothing changed) if `spec` is
 * malformed (an empty key, a key without =T, T not a decimal integer or above 2^64-1, a trailing
 * ','), gives one key two different thresholds, or is 8 KiB or longer. */
int hcct_oracle_configure(const char *spec);
/* Sets one loop's threshold (0: never); runs already open keep theirs. */
void hcct_oracle_set_threshold(hcct_oracle_loop *loop, uint64_t threshold);
void hcct_oracle_stats_of(const hcct_oracle_loop *loop, hcct_oracle_stats *out);
/* Writes the registered loops and the OSR points that fired to file descriptor `fd`. */
void hcct_oracle_report(int fd);

/* Registration cached in `*cache` (a static pointer at the call site); safe from any thread. */
static inline hcct_oracle_loop *hcct_oracle_loop_cached(hcct_oracle_loop **cache, const char *key,
                                                        uint64_t default_threshold) {
  hcct_oracle_loop *l = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (__builtin_expect(l == 0, 0)) {
    l = hcct_oracle_register(key, default_threshold);
    __atomic_store_n(cache, l, __ATOMIC_RELEASE);
  }
  return l;
}
/* GNU C / C++: the registered loop for `key`, with a hidden per-call-site cache: the cache keeps
 * the first key it saw, so give each call site one constant key. */
#define HCCT_ORACLE_LOOP(key, default_threshold)                               \
  __extension__({                                                              \
    static hcct_oracle_loop *hcct_oracle_cache_;                               \
    hcct_oracle_loop_cached(&hcct_oracle_cache_, (key), (default_threshold));  \
  })

/* Opens a run for one entry of `loop` (null: a run that never fires). */
static inline hcct_oracle_run hcct_oracle_enter(hcct_oracle_loop *loop) {
  hcct_oracle_run r;
  r.iteration = 0;
  r.threshold = loop ? __atomic_load_n(&loop->threshold, __ATOMIC_RELAXED) : 0;
  r.loop = loop;
  return r;
}
/* One iteration: nonzero exactly once per run, at the threshold-th tick. */
static inline int hcct_oracle_tick(hcct_oracle_run *r) { return ++r->iteration == r->threshold; }
/* Adds iterations that ran without ticking (a specialised version after the switch). */
static inline void hcct_oracle_count(hcct_oracle_run *r, uint64_t iterations) { r->iteration += iterations; }
/* Closes the run: entries += 1, iterations += ticks, fired += (ticks reached the threshold). */
static inline void hcct_oracle_leave(hcct_oracle_run *r) {
  hcct_oracle_loop *l = r->loop;
  if (!l) return;
  __atomic_fetch_add(&l->entries, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&l->iterations, r->iteration, __ATOMIC_RELAXED);
  if (r->threshold && r->iteration >= r->threshold) __atomic_fetch_add(&l->fired, 1, __ATOMIC_RELAXED);
}

/* ---- OSR points (inserted by the kpath plugin; layout fixed: the plugin emits it) ---- */

#define HCCT_OSR_POINT_VERSION 1

typedef struct hcct_osr_point {
  uint32_t version;      /* HCCT_OSR_POINT_VERSION */
  uint32_t line;         /* the loop header's first source line */
  const char *key;       /* "file:line", as in the guidance file */
  const char *function;  /* linkage name */
  uint64_t threshold;    /* header executions per entry at which the handler is called */
  uint32_t header_block; /* the header's block index (the kpath numbering) */
  uint32_t rank;         /* the loop's rank in the guidance */
  uint64_t fired;        /* runtime-owned: events recorded by hcct_osr_record */
  struct hcct_osr_point *next; /* runtime-owned */
} hcct_osr_point;

/* Called at the `threshold`-th execution of a guided loop's header within one entry of the loop
 * (`iteration` == point->threshold). For a `for (i = a; cond; i++)` loop instrumented at the
 * default (early) stage, iterations a .. a + iteration - 2 of the body have run and the header is
 * about to test i = a + iteration - 1. Define it in the program to act (tier up, switch versions
 * by longjmp to a continuation, ...); libhcct's weak default calls hcct_osr_record. */
void hcct_osr_handler(hcct_osr_point *point, uint64_t iteration);
/* Records one event: point->fired += 1 (atomically); HCCT_OSR_LOG=1 prints it on stderr. */
void hcct_osr_record(hcct_osr_point *point, uint64_t iteration);
/* Events recorded for `point`. */
uint64_t hcct_osr_fired(const hcct_osr_point *point);

#ifdef __cplusplus
}
#endif

#endif
