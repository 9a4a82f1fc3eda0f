// The online hotness oracle and the default OSR-point handler (hcct/oracle.h, docs/GUIDE.md).
// Independent of the profiler: nothing here reads HCCT_OPTIONS or the profiling state. The
// per-iteration path is inline in the header; this file holds registration (under one lock), the
// thresholds from the environment, the default handler and the exit report. Memory: a static pool
// of loop records, then mmap'd chunks; never the program's malloc.
#include "hcct/oracle.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "common.h"
#include "messages.h"

using namespace hcct::rt;

namespace {

constexpr size_t kSpecBytes = 8192;          // HCCT_ORACLE / hcct_oracle_configure
constexpr size_t kGuideBytes = 64 * 1024;    // thresholds taken from HCCT_ORACLE_GUIDE
constexpr size_t kKeyBytes = 4096;           // longest guidance key (a path and a line)
constexpr size_t kPoolLoops = 256;
constexpr size_t kChunkLoops = 256;

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
bool g_env_loaded = false;                 // under g_lock
char g_spec[kSpecBytes];                   // "key=T,key=T" (validated), under g_lock
// The guidance file's thresholds: records `key NUL u64`, in file order, under g_lock. A record of
// its own (not the key=T syntax) so that keys with ',' or '=' work.
char g_guide[kGuideBytes];
size_t g_guide_used = 0;
hcct_oracle_loop g_pool[kPoolLoops];
size_t g_pool_used = 0;                    // under g_lock
hcct_oracle_loop *g_chunk = nullptr;       // current mmap'd chunk, under g_lock
size_t g_chunk_used = kChunkLoops;
hcct_oracle_loop *g_loops = nullptr;       // registry, newest first (atomic head, immutable links)
hcct_osr_point *g_points = nullptr;        // OSR points that fired at least once (atomic head)
int g_osr_log = -1;                        // HCCT_OSR_LOG, read on first use


// Untrusted text (an environment value, a path, a key) shown in a message: at most `shown` bytes,
// control bytes as \xNN (so that the message stays one line), "..." when cut.
HCCT_NOINST const char *printable(char *out, size_t cap, const char *s, size_t shown) {
  size_t n = 0;
  for (; *s && shown && n + 5 < cap; ++s, --shown) {
    unsigned char c = static_cast<unsigned char>(*s);
    if (c < 0x20 || c == 0x7f) n += size_t(snprintf(out + n, cap - n, "\\x%02x", c));
    else out[n++] = char(c);
  }
  if (*s && n + 4 <= cap) memcpy(out + n, "...", 3), n += 3;
  out[n] = 0;
  return out;
}

// ---- "key=T,key=T" ----

// One entry of a spec that validate_spec accepted; advances `s`.
HCCT_NOINST void next_entry(const char *&s, const char **key, size_t *klen, uint64_t *t) {
  *key = s;
  while (*s != '=') ++s;
  *klen = size_t(s - *key);
  ++s;
  *t = 0;
  while (*s >= '0' && *s <= '9') *t = *t * 10 + uint64_t(*s++ - '0');
  if (*s == ',') ++s;
}

// Checks the syntax: non-empty keys without ',' or '=', decimal thresholds that fit in 64 bits, no
// key given two different thresholds. Returns the number of entries, or -1 with the problem and its
// byte offset.
HCCT_NOINST int validate_spec(const char *spec, const char **why, size_t *at) {
  const char *s = spec;
  int n = 0;
  while (*s) {
    const char *key = s;
    while (*s && *s != '=' && *s != ',') ++s;
    *at = size_t(s - spec);
    if (s == key) return *why = "an empty key", -1;
    if (*s != '=') return *why = "a key without =T", -1;
    ++s;
    *at = size_t(s - spec);
    if (*s < '0' || *s > '9') return *why = "a threshold that is not a decimal integer", -1;
    uint64_t t = 0;
    while (*s >= '0' && *s <= '9') {
      uint64_t d = uint64_t(*s - '0');
      if (t > (UINT64_MAX - d) / 10) return *why = "a threshold above 2^64-1", -1;
      t = t * 10 + d;
      ++s;
    }
    *at = size_t(s - spec);
    if (*s == ',') {
      ++s;
      if (!*s) return *why = "a trailing ','", -1;
    } else if (*s) {
      return *why = "a threshold that is not a decimal integer", -1;
    }
    ++n;
  }
  // The same key twice: harmless with the same threshold, ambiguous with two.
  for (const char *a = spec; *a;) {
    const char *ka;
    size_t la;
    uint64_t ta;
    next_entry(a, &ka, &la, &ta);
    for (const char *b = a; *b;) {
      const char *kb;
      size_t lb;
      uint64_t tb;
      next_entry(b, &kb, &lb, &tb);
      if (la == lb && memcmp(ka, kb, la) == 0 && ta != tb) {
        *at = size_t(kb - spec);
        return *why = "a key given a second, different threshold", -1;
      }
    }
  }
  return n;
}

// The threshold `spec` gives `key` (validated: one value per key), if any.
HCCT_NOINST bool spec_lookup(const char *s, const char *key, uint64_t *out) {
  size_t klen = strlen(key);
  while (*s) {
    const char *k;
    size_t n;
    uint64_t t;
    next_entry(s, &k, &n, &t);
    if (n == klen && memcmp(k, key, klen) == 0) {
      *out = t;
      return true;
    }
  }
  return false;
}

// The threshold the guidance file gives `key` (its first loop of that key), if any; `*conflict` is
// set when a later loop of the same key has another threshold.
HCCT_NOINST bool guide_lookup(const char *key, uint64_t *out, bool *conflict) {
  bool found = false;
  *conflict = false;
  for (size_t at = 0; at < g_guide_used;) {
    const char *k = g_guide + at;
    size_t n = strlen(k);
    uint64_t t;
    memcpy(&t, k + n + 1, sizeof t);
    at += n + 1 + sizeof t;
    if (strcmp(k, key) != 0) continue;
    if (!found) *out = t, found = true;
    else if (t != *out) *conflict = true;
  }
  return found;
}

// ---- the guidance file: {"format": "hcct-guide", "version": 1, ..., "loops": [{"key": "f.c:5", "threshold": 1000 | null, ...}]} ----

struct Json {
  const char *p, *end;
  bool too_long = false;  // the last string did not fit its buffer
  bool has_nul = false;   // the last string had a \u0000

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
  HCCT_NOINST bool hex4(uint32_t *v) {
    if (end - p < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i, ++p) {
      char c = *p;
      uint32_t d = c >= '0' && c <= '9' ? uint32_t(c - '0')
                   : c >= 'a' && c <= 'f' ? uint32_t(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? uint32_t(c - 'A' + 10)
                                          : 16;
      if (d == 16) return false;
      *v = *v * 16 + d;
    }
    return true;
  }
  // A string, decoded (escapes resolved, \u as UTF-8) into out[cap] when given; sets too_long and
  // has_nul. False on malformed JSON (an unterminated string, a raw control byte, a bad escape).
  HCCT_NOINST bool string(char *out, size_t cap) {
    ws();
    too_long = has_nul = false;
    if (p >= end || *p != '"') return false;
    ++p;
    size_t n = 0;
    auto put = [&](uint32_t c) {
      if (!out) return;
      if (n + 1 < cap) out[n++] = char(c);
      else too_long = true;
    };
    for (;;) {
      if (p >= end) return false;
      unsigned char c = static_cast<unsigned char>(*p++);
      if (c == '"') break;
      if (c < 0x20) return false;
      if (c != '\\') {
        put(c);
        continue;
      }
      if (p >= end) return false;
      switch (*p++) {
        case '"': put('"'); break;
        case '\\': put('\\'); break;
        case '/': put('/'); break;
        case 'b': put('\b'); break;
        case 'f': put('\f'); break;
        case 'n': put('\n'); break;
        case 'r': put('\r'); break;
        case 't': put('\t'); break;
        case 'u': {
          uint32_t cp, lo;
          if (!hex4(&cp)) return false;
          if (cp >= 0xDC00 && cp < 0xE000) return false;  // a lone low surrogate
          if (cp >= 0xD800 && cp < 0xDC00) {               // a high one: its pair follows
            if (end - p < 2 || p[0] != '\\' || p[1] != 'u') return false;
            p += 2;
            if (!hex4(&lo) || lo < 0xDC00 || lo >= 0xE000) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          if (cp == 0) has_nul = true;
          if (cp < 0x80) {
            put(cp);
          } else if (cp < 0x800) {
            put(0xC0 | (cp >> 6)), put(0x80 | (cp & 0x3F));
          } else if (cp < 0x10000) {
            put(0xE0 | (cp >> 12)), put(0x80 | ((cp >> 6) & 0x3F)), put(0x80 | (cp & 0x3F));
          } else {
            put(0xF0 | (cp >> 18)), put(0x80 | ((cp >> 12) & 0x3F)), put(0x80 | ((cp >> 6) & 0x3F)), put(0x80 | (cp & 0x3F));
          }
          break;
        }
        default: return false;
      }
    }
    if (out) out[n] = 0;
    return true;
  }
  HCCT_NOINST bool literal(const char *word) {
    size_t n = strlen(word);
    if (size_t(end - p) < n || memcmp(p, word, n) != 0) return false;
    p += n;
    return true;
  }
  enum Number { kInteger, kNull, kNotInteger, kTooBig };
  // A non-negative decimal integer that fits in 64 bits, or null.
  HCCT_NOINST Number uint_or_null(uint64_t *v) {
    ws();
    if (literal("null")) return kNull;
    if (p >= end || *p < '0' || *p > '9') return kNotInteger;
    if (*p == '0' && end - p > 1 && p[1] >= '0' && p[1] <= '9') return kNotInteger;  // JSON has no "01"
    uint64_t t = 0;
    bool big = false;
    while (p < end && *p >= '0' && *p <= '9') {
      uint64_t d = uint64_t(*p++ - '0');
      if (t > (UINT64_MAX - d) / 10) big = true;
      else t = t * 10 + d;
    }
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return kNotInteger;
    if (big) return kTooBig;
    *v = t;
    return kInteger;
  }
  // Any value, nested at most 64 deep.
  HCCT_NOINST bool skip(int depth = 0) {
    ws();
    if (p >= end || depth > 64) return false;
    char c = *p;
    if (c == '"') return string(nullptr, 0);
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++p;
      if (eat(close)) return true;
      do {
        if (c == '{' && (!string(nullptr, 0) || !eat(':'))) return false;
        if (!skip(depth + 1)) return false;
      } while (eat(','));
      return eat(close);
    }
    if (literal("true") || literal("false") || literal("null")) return true;
    return number();
  }
  // A JSON number, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? (not just any run of number
  // characters: "+", "1-2" or "01" is not JSON).
  HCCT_NOINST bool number() {
    auto digits = [&] {
      const char *start = p;
      while (p < end && *p >= '0' && *p <= '9') ++p;
      return p != start;
    };
    if (p < end && *p == '-') ++p;
    if (p < end && *p == '0') ++p;
    else if (!digits()) return false;
    if (p < end && *p == '.') {
      ++p;
      if (!digits()) return false;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
      ++p;
      if (p < end && (*p == '+' || *p == '-')) ++p;
      if (!digits()) return false;
    }
    return true;
  }
  // The last string() is exactly what `out` holds: no \u0000 cut it short, nothing was left out.
  HCCT_NOINST bool whole() const { return !too_long && !has_nul; }
};

// Records "key NUL threshold" for every loop of the guidance file with a threshold into
// g_guide. Returns an error text (and its byte offset in *at) or null.
HCCT_NOINST const char *parse_guide(const char *text, size_t len, size_t *at) {
  Json j{text, text + len};
  const char *error = nullptr;
  auto fail = [&](const char *e) {
    *at = size_t(j.p - text);
    return error = e;
  };
  bool format_ok = false, version_ok = false, loops_seen = false;
  g_guide_used = 0;
  if (!j.eat('{')) return fail("not a JSON object");
  if (!j.eat('}')) {
    do {
      char name[64];
      if (!j.string(name, sizeof name) || !j.eat(':')) return fail("malformed JSON");
      if (!j.whole()) name[0] = 0;  // "format\u0000x" is not "format": a member skipped below
      if (strcmp(name, "format") == 0) {
        char fmt[64];
        if (!j.string(fmt, sizeof fmt)) return fail("\"format\" is not a string");
        if (!j.whole() || strcmp(fmt, "hcct-guide") != 0) return fail("\"format\" is not \"hcct-guide\"");
        format_ok = true;
      } else if (strcmp(name, "version") == 0) {
        uint64_t v = 0;
        if (j.uint_or_null(&v) != Json::kInteger || v != 1) return fail("unsupported \"version\" (this reader knows 1)");
        version_ok = true;
      } else if (strcmp(name, "loops") == 0) {
        // A JSON reader keeps one of two "loops" members (nlohmann the last): ambiguous, refused.
        if (loops_seen) return fail("a second \"loops\" array");
        loops_seen = true;
        if (!j.eat('[')) return fail("\"loops\" is not an array");
        if (j.eat(']')) continue;
        do {
          if (!j.eat('{')) return fail("a loop is not an object");
          char key[kKeyBytes] = "";
          uint64_t threshold = 0;
          bool has_threshold = false;
          if (!j.eat('}')) {
            do {
              char member[64];
              if (!j.string(member, sizeof member) || !j.eat(':')) return fail("malformed loop object");
              if (!j.whole()) member[0] = 0;
              if (strcmp(member, "key") == 0) {
                if (!j.string(key, sizeof key)) return fail("a loop's \"key\" is not a string");
                if (j.too_long) return fail("a loop's \"key\" is longer than 4095 bytes");
                if (j.has_nul) return fail("a loop's \"key\" contains \\u0000");
              } else if (strcmp(member, "threshold") == 0) {
                Json::Number n = j.uint_or_null(&threshold);
                if (n == Json::kNotInteger) return fail("a loop's \"threshold\" is not a non-negative integer or null");
                if (n == Json::kTooBig) return fail("a loop's \"threshold\" is above 2^64-1");
                has_threshold = n == Json::kInteger;
              } else if (!j.skip()) {
                return fail("malformed JSON in a loop (or nested deeper than 64)");
              }
            } while (j.eat(','));
            if (!j.eat('}')) return fail("malformed loop object");
          }
          if (key[0] && has_threshold) {
            size_t n = strlen(key);
            if (kGuideBytes - g_guide_used < n + 1 + sizeof threshold) return fail("too many loops (64 KiB of thresholds)");
            memcpy(g_guide + g_guide_used, key, n + 1);
            memcpy(g_guide + g_guide_used + n + 1, &threshold, sizeof threshold);
            g_guide_used += n + 1 + sizeof threshold;
          }
        } while (j.eat(','));
        if (!j.eat(']')) return fail("malformed \"loops\" array");
      } else if (!j.skip()) {
        return fail("malformed JSON (or nested deeper than 64)");
      }
    } while (j.eat(','));
    if (!j.eat('}')) return fail("malformed JSON");
  }
  j.ws();
  if (j.p != j.end) return fail("data after the JSON object");
  if (!format_ok) return fail("no \"format\": \"hcct-guide\"");
  if (!version_ok) return fail("no \"version\": 1");
  return error;
}

// A guidance file lists a few hundred loops at most; anything far larger is not one.
constexpr int kMaxGuideBytes = 64 << 20;

HCCT_NOINST void load_guide(const char *path) {
  char shown[600];
  printable(shown, sizeof shown, path, 256);
  // Non-blocking: a FIFO must not stall the program (it is rejected below).
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: cannot open the file: %s; thresholds ignored\n", shown, strerror(errno));
    return;
  }
  struct stat st;
  const char *problem = nullptr;
  if (fstat(fd, &st) != 0) problem = "cannot stat the file";
  else if (!S_ISREG(st.st_mode)) problem = "not a regular file";
  else if (st.st_size == 0) problem = "empty file";
  if (problem) {
    close(fd);
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: %s; thresholds ignored\n", shown, problem);
    return;
  }
  // Read, not mapped: a file truncated by someone else while it is mapped would kill the program
  // with SIGBUS. The copy lives in anonymous pages, not the program's heap.
  if (st.st_size > kMaxGuideBytes) {
    close(fd);
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: larger than %d MiB; thresholds ignored\n", shown, kMaxGuideBytes >> 20);
    return;
  }
  size_t capacity = size_t(st.st_size);
  void *buffer = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buffer == MAP_FAILED) {
    int map_errno = errno;
    close(fd);
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: cannot allocate %zu bytes: %s; thresholds ignored\n", shown, capacity,
        strerror(map_errno));
    return;
  }
  char *text = static_cast<char *>(buffer);
  size_t length = 0;
  int read_errno = 0;
  while (length < capacity) {
    ssize_t n = read(fd, text + length, capacity - length);
    if (n > 0) {
      length += size_t(n);
    } else if (n == 0) {
      break;  // shorter than it was: parse what is there (a cut file fails to parse)
    } else if (errno != EINTR) {
      read_errno = errno;
      break;
    }
  }
  close(fd);
  size_t at = 0;
  const char *error = read_errno ? nullptr : parse_guide(text, length, &at);
  munmap(buffer, capacity);
  if (read_errno) {
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: cannot read the file: %s; thresholds ignored\n", shown, strerror(read_errno));
    return;
  }
  if (error) {
    g_guide_used = 0;
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: %s at byte %zu; thresholds ignored\n", shown, error, at);
  }
}

// Under g_lock.
HCCT_NOINST void load_env() {
  if (g_env_loaded) return;
  g_env_loaded = true;
  if (const char *path = getenv("HCCT_ORACLE_GUIDE"); path && *path) load_guide(path);
  if (const char *spec = getenv("HCCT_ORACLE"); spec && *spec) {
    char shown[400];
    const char *why = nullptr;
    size_t at = 0, len = strnlen(spec, kSpecBytes);
    if (len >= kSpecBytes)
      say("hcct oracle: HCCT_ORACLE='%s' is longer than %zu bytes; ignored\n", printable(shown, sizeof shown, spec, 64),
          kSpecBytes - 1);
    else if (validate_spec(spec, &why, &at) < 0)
      say("hcct oracle: HCCT_ORACLE='%s' is not key=T,key=T,... (T a non-negative integer): %s at byte %zu; ignored\n",
          printable(shown, sizeof shown, spec, 64), why, at);
    else
      memcpy(g_spec, spec, len + 1);
  }
}

// Under g_lock. `warn`: say when the guidance file gives the key several thresholds.
HCCT_NOINST uint64_t threshold_for(const char *key, uint64_t fallback, bool warn) {
  uint64_t t = 0;
  bool conflict = false;
  if (spec_lookup(g_spec, key, &t)) return t;
  if (guide_lookup(key, &t, &conflict)) {
    if (conflict && warn) {
      char shown[400];
      say("hcct oracle: HCCT_ORACLE_GUIDE gives loop key '%s' several thresholds; the first, %llu, applies\n",
          printable(shown, sizeof shown, key, 256), (unsigned long long)t);
    }
    return t;
  }
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
    l->threshold = threshold_for(key, default_threshold, true);
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
  size_t len = strnlen(spec, kSpecBytes);
  const char *why;
  size_t at;
  if (len >= kSpecBytes) return -1;
  int n = validate_spec(spec, &why, &at);
  if (n < 0) return -1;
  pthread_mutex_lock(&g_lock);
  load_env();
  memcpy(g_spec, spec, len + 1);
  for (hcct_oracle_loop *l = g_loops; l; l = l->next)
    __atomic_store_n(&l->threshold, threshold_for(l->key, default_of(l), false), __ATOMIC_RELAXED);
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
