// The online hotness oracle and the default OSR-point handler (hcct/oracle.h, docs/GUIDE.md).
// Independent of the profiler: nothing here reads HCCT_OPTIONS or the profiling state. The
// per-iteration path is inline in the header; this file holds registration (under one lock), the
// thresholds from the environment, the default handler and the exit report. Memory: a static pool
// of loop records, then mmap'd chunks; never the program's malloc.
#include "hcct/oracle.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "common.h"

using namespace hcct::rt;

namespace {

constexpr size_t kSpecBytes = 8192;          // HCCT_ORACLE / hcct_oracle_configure
constexpr size_t kGuideSpecBytes = 64 * 1024; // thresholds taken from HCCT_ORACLE_GUIDE
constexpr size_t kPoolLoops = 256;
constexpr size_t kChunkLoops = 256;

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
bool g_env_loaded = false;                 // under g_lock
char g_spec[kSpecBytes];                   // "key=T,key=T" (validated), under g_lock
char g_guide_spec[kGuideSpecBytes];        // same syntax, from the guidance file, under g_lock
hcct_oracle_loop g_pool[kPoolLoops];
size_t g_pool_used = 0;                    // under g_lock
hcct_oracle_loop *g_chunk = nullptr;       // current mmap'd chunk, under g_lock
size_t g_chunk_used = kChunkLoops;
hcct_oracle_loop *g_loops = nullptr;       // registry, newest first (atomic head, immutable links)
hcct_osr_point *g_points = nullptr;        // OSR points that fired at least once (atomic head)
int g_osr_log = -1;                        // HCCT_OSR_LOG, read on first use

HCCT_NOINST void say(const char *fmt, const char *a, const char *b) {
  char msg[1024];
  int n = snprintf(msg, sizeof msg, fmt, a, b);
  if (n > 0) (void)!write(2, msg, size_t(n) < sizeof msg ? size_t(n) : sizeof msg - 1);
}

// ---- "key=T,key=T" ----

// Checks the syntax: non-empty keys without ',' or '=', decimal thresholds. Returns the number of
// entries or -1.
HCCT_NOINST int validate_spec(const char *s) {
  int n = 0;
  while (*s) {
    const char *key = s;
    while (*s && *s != '=' && *s != ',') ++s;
    if (*s != '=' || s == key) return -1;
    ++s;
    if (*s < '0' || *s > '9') return -1;
    uint64_t t = 0;
    while (*s >= '0' && *s <= '9') {
      uint64_t d = uint64_t(*s - '0');
      if (t > (UINT64_MAX - d) / 10) return -1;
      t = t * 10 + d;
      ++s;
    }
    if (*s == ',') {
      ++s;
      if (!*s) return -1;
    } else if (*s) {
      return -1;
    }
    ++n;
  }
  return n;
}

// The threshold `spec` gives `key` (first match), if any.
HCCT_NOINST bool spec_lookup(const char *s, const char *key, uint64_t *out) {
  size_t klen = strlen(key);
  while (*s) {
    const char *k = s;
    while (*s != '=') ++s;
    bool match = size_t(s - k) == klen && memcmp(k, key, klen) == 0;
    ++s;
    uint64_t t = 0;
    while (*s >= '0' && *s <= '9') t = t * 10 + uint64_t(*s++ - '0');
    if (*s == ',') ++s;
    if (match) {
      *out = t;
      return true;
    }
  }
  return false;
}

// ---- the guidance file: {"format": "hcct-guide", ..., "loops": [{"key": "f.c:5", "threshold": 1000 | null, ...}]} ----

struct Json {
  const char *p, *end;
  bool ok = true;

  HCCT_NOINST void ws() {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
  }
  HCCT_NOINST bool eat(char c) {
    ws();
    if (p < end && *p == c) {
      ++p;
      return true;
    }
    return false;
  }
  // A string; its raw bytes (escapes kept as written) into out[cap] when given.
  HCCT_NOINST bool string(char *out, size_t cap) {
    ws();
    if (p >= end || *p != '"') return ok = false;
    ++p;
    size_t n = 0;
    while (p < end && *p != '"') {
      if (*p == '\\' && p + 1 < end) {
        if (out && n + 1 < cap) out[n++] = *p;
        ++p;
      }
      if (out && n + 1 < cap) out[n++] = *p;
      ++p;
    }
    if (p >= end) return ok = false;
    ++p;
    if (out) out[n] = 0;
    return true;
  }
  HCCT_NOINST bool literal(const char *word) {
    size_t n = strlen(word);
    if (size_t(end - p) < n || memcmp(p, word, n) != 0) return false;
    p += n;
    return true;
  }
  // A non-negative integer, or null (returns false, *is_null set); anything else fails.
  HCCT_NOINST bool uint_or_null(uint64_t *v, bool *is_null) {
    ws();
    *is_null = false;
    if (literal("null")) return *is_null = true, false;
    if (p >= end || *p < '0' || *p > '9') return ok = false;
    uint64_t t = 0;
    while (p < end && *p >= '0' && *p <= '9') t = t * 10 + uint64_t(*p++ - '0');
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return ok = false;
    *v = t;
    return true;
  }
  HCCT_NOINST bool skip(int depth = 0) {
    ws();
    if (p >= end || depth > 64) return ok = false;
    char c = *p;
    if (c == '"') return string(nullptr, 0);
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++p;
      if (eat(close)) return true;
      do {
        if (c == '{' && (!string(nullptr, 0) || !eat(':'))) return ok = false;
        if (!skip(depth + 1)) return false;
      } while (eat(','));
      return eat(close) || (ok = false);
    }
    if (literal("true") || literal("false") || literal("null")) return true;
    const char *start = p;
    while (p < end && (strchr("+-.eE", *p) || (*p >= '0' && *p <= '9'))) ++p;
    return p != start || (ok = false);
  }
};

// Appends "key=T," for every loop of the guidance file with a threshold. Returns an error text or
// null.
HCCT_NOINST const char *parse_guide(const char *text, size_t len, char *spec, size_t cap) {
  Json j{text, text + len};
  size_t used = strlen(spec);
  bool format_ok = false;
  if (!j.eat('{')) return "not a JSON object";
  if (j.eat('}')) return "no \"format\": \"hcct-guide\"";
  do {
    char name[64];
    if (!j.string(name, sizeof name) || !j.eat(':')) return "malformed JSON";
    if (strcmp(name, "format") == 0) {
      char fmt[64];
      if (!j.string(fmt, sizeof fmt)) return "malformed \"format\"";
      if (strcmp(fmt, "hcct-guide") != 0) return "\"format\" is not \"hcct-guide\"";
      format_ok = true;
    } else if (strcmp(name, "loops") == 0) {
      if (!j.eat('[')) return "\"loops\" is not an array";
      if (j.eat(']')) continue;
      do {
        if (!j.eat('{')) return "a loop is not an object";
        char key[512] = "";
        uint64_t threshold = 0;
        bool has_threshold = false;
        if (!j.eat('}')) {
          do {
            char member[64];
            if (!j.string(member, sizeof member) || !j.eat(':')) return "malformed loop object";
            if (strcmp(member, "key") == 0) {
              if (!j.string(key, sizeof key)) return "a loop's \"key\" is not a string";
            } else if (strcmp(member, "threshold") == 0) {
              bool is_null;
              has_threshold = j.uint_or_null(&threshold, &is_null);
              if (!has_threshold && !is_null) return "a loop's \"threshold\" is not an integer or null";
            } else if (!j.skip()) {
              return "malformed JSON in a loop";
            }
          } while (j.eat(','));
          if (!j.eat('}')) return "malformed loop object";
        }
        if (key[0] && has_threshold && !strpbrk(key, ",=")) {
          int n = snprintf(spec + used, cap - used, "%s%s=%llu", used ? "," : "", key, (unsigned long long)threshold);
          if (n < 0 || size_t(n) >= cap - used) return "too many loops (64 KiB of thresholds)";
          used += size_t(n);
        }
      } while (j.eat(','));
      if (!j.eat(']')) return "malformed \"loops\" array";
    } else if (!j.skip()) {
      return "malformed JSON";
    }
  } while (j.eat(','));
  if (!j.eat('}')) return "malformed JSON";
  if (!format_ok) return "no \"format\": \"hcct-guide\"";
  return nullptr;
}

HCCT_NOINST void load_guide(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: cannot open the file%s\n", path, "");
    return;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size == 0) {
    close(fd);
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: empty or unreadable%s\n", path, "");
    return;
  }
  void *text = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (text == MAP_FAILED) {
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: cannot map the file%s\n", path, "");
    return;
  }
  const char *error = parse_guide(static_cast<const char *>(text), size_t(st.st_size), g_guide_spec, sizeof g_guide_spec);
  munmap(text, size_t(st.st_size));
  if (error) {
    g_guide_spec[0] = 0;
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: %s: thresholds ignored\n", path, error);
  }
}

// Under g_lock.
HCCT_NOINST void load_env() {
  if (g_env_loaded) return;
  g_env_loaded = true;
  if (const char *path = getenv("HCCT_ORACLE_GUIDE"); path && *path) load_guide(path);
  if (const char *spec = getenv("HCCT_ORACLE"); spec && *spec) {
    if (strlen(spec) >= sizeof g_spec || validate_spec(spec) < 0)
      say("hcct oracle: HCCT_ORACLE='%s' is not key=T,key=T,... (T a non-negative integer)%s: ignored\n", spec, "");
    else
      strcpy(g_spec, spec);
  }
}

// Under g_lock.
HCCT_NOINST uint64_t threshold_for(const char *key, uint64_t fallback) {
  uint64_t t;
  if (spec_lookup(g_spec, key, &t)) return t;
  if (spec_lookup(g_guide_spec, key, &t)) return t;
  return fallback;
}

// Under g_lock.
HCCT_NOINST hcct_oracle_loop *new_loop() {
  if (g_pool_used < kPoolLoops) return &g_pool[g_pool_used++];
  if (g_chunk_used == kChunkLoops) {
    auto *chunk = static_cast<hcct_oracle_loop *>(map_pages(kChunkLoops * sizeof(hcct_oracle_loop)));
    if (!chunk) return nullptr;
    g_chunk = chunk;
    g_chunk_used = 0;
  }
  return &g_chunk[g_chunk_used++];
}

HCCT_NOINST hcct_oracle_loop *find_locked(const char *key) {
  for (hcct_oracle_loop *l = __atomic_load_n(&g_loops, __ATOMIC_ACQUIRE); l; l = l->next)
    if (strcmp(l->key, key) == 0) return l;
  return nullptr;
}

// The program's default threshold of each loop, in registration order (index = position from the
// oldest); the same pool/chunk discipline as the loops. Under g_lock.
uint64_t g_default_pool[kPoolLoops];
struct DefaultChunk {
  DefaultChunk *next;
  const hcct_oracle_loop *loops[kChunkLoops];
  uint64_t values[kChunkLoops];
  size_t used;
};
DefaultChunk *g_default_chunks = nullptr;

HCCT_NOINST bool remember_default(const hcct_oracle_loop *l, uint64_t value) {
  if (l >= g_pool && l < g_pool + kPoolLoops) {
    g_default_pool[l - g_pool] = value;
    return true;
  }
  if (!g_default_chunks || g_default_chunks->used == kChunkLoops) {
    auto *c = static_cast<DefaultChunk *>(map_pages(sizeof(DefaultChunk)));
    if (!c) return false;
    c->next = g_default_chunks;
    g_default_chunks = c;
  }
  g_default_chunks->loops[g_default_chunks->used] = l;
  g_default_chunks->values[g_default_chunks->used++] = value;
  return true;
}

HCCT_NOINST uint64_t default_of(const hcct_oracle_loop *l) {
  if (l >= g_pool && l < g_pool + kPoolLoops) return g_default_pool[l - g_pool];
  for (DefaultChunk *c = g_default_chunks; c; c = c->next)
    for (size_t i = 0; i < c->used; ++i)
      if (c->loops[i] == l) return c->values[i];
  return 0;
}

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

HCCT_EXPORT hcct_oracle_loop *hcct_oracle_register(const char *key, uint64_t default_threshold) {
  if (!key || !*key) return nullptr;
  pthread_mutex_lock(&g_lock);
  load_env();
  hcct_oracle_loop *l = find_locked(key);
  if (!l && (l = new_loop()) != nullptr) {
    if (!remember_default(l, default_threshold)) {
      pthread_mutex_unlock(&g_lock);
      return nullptr;
    }
    l->key = key;
    l->threshold = threshold_for(key, default_threshold);
    l->next = g_loops;
    __atomic_store_n(&g_loops, l, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_lock);
  return l;
}

HCCT_EXPORT hcct_oracle_loop *hcct_oracle_find(const char *key) {
  if (!key) return nullptr;
  return find_locked(key);  // the list only grows, links never change: no lock needed
}

HCCT_EXPORT int hcct_oracle_configure(const char *spec) {
  if (!spec) spec = "";
  int n = validate_spec(spec);
  if (n < 0 || strlen(spec) >= kSpecBytes) return -1;
  pthread_mutex_lock(&g_lock);
  load_env();
  strcpy(g_spec, spec);
  for (hcct_oracle_loop *l = g_loops; l; l = l->next)
    __atomic_store_n(&l->threshold, threshold_for(l->key, default_of(l)), __ATOMIC_RELAXED);
  pthread_mutex_unlock(&g_lock);
  return n;
}

HCCT_EXPORT void hcct_oracle_set_threshold(hcct_oracle_loop *loop, uint64_t threshold) {
  if (loop) __atomic_store_n(&loop->threshold, threshold, __ATOMIC_RELAXED);
}

HCCT_EXPORT void hcct_oracle_stats_of(const hcct_oracle_loop *loop, hcct_oracle_stats *out) {
  if (!out) return;
  if (!loop) {
    *out = hcct_oracle_stats{0, 0, 0, 0};
    return;
  }
  out->threshold = __atomic_load_n(&loop->threshold, __ATOMIC_RELAXED);
  out->entries = __atomic_load_n(&loop->entries, __ATOMIC_RELAXED);
  out->iterations = __atomic_load_n(&loop->iterations, __ATOMIC_RELAXED);
  out->fired = __atomic_load_n(&loop->fired, __ATOMIC_RELAXED);
}

HCCT_EXPORT void hcct_oracle_report(int fd) {
  char line[1024];
  hcct_oracle_loop *loops = __atomic_load_n(&g_loops, __ATOMIC_ACQUIRE);
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
