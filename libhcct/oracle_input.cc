// Where the online hotness oracle's thresholds come from (hcct/oracle.h, docs/GUIDE.md "Online
// hotness oracle"): HCCT_ORACLE ("key=T,key=T"), then HCCT_ORACLE_GUIDE (the thresholds file that
// `hcct guide --thresholds` writes, hcct/guide_format.h), then the program's default. Untrusted
// input: a value that cannot be used is ignored as a whole, with one line on stderr that names it.
// Memory: static buffers and anonymous pages, never the program's malloc.
#include "oracle_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hcct/guide_format.h"
#include "messages.h"

namespace hcct::rt::oracle {

namespace {

constexpr size_t kGuideBytes = 64 * 1024;  // thresholds taken from HCCT_ORACLE_GUIDE

bool g_env_loaded = false;  // under the registry's lock, as everything here
char g_spec[kSpecBytes];    // "key=T,key=T" (validated)
// The thresholds file's: records `key NUL u64`, in file order. A record of its own (not the key=T
// syntax) so that keys with ',' or '=' work.
char g_guide[kGuideBytes];
size_t g_guide_used = 0;

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

}  // namespace

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

namespace {

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

// The threshold the thresholds file gives `key` (its first loop of that key), if any; `*conflict` is
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

// ---- the thresholds file (hcct/guide_format.h) ----

// One line's "KEY=T" (no newline): T follows the last '='. Null, or the problem and its offset in
// the line.
HCCT_NOINST const char *parse_threshold_line(const char *line, size_t n, size_t *key_bytes, uint64_t *t, size_t *at) {
  const char *eq = static_cast<const char *>(memrchr(line, '=', n));
  if (!eq) return *at = n, "a line without =T";
  *key_bytes = size_t(eq - line);
  *at = 0;
  if (*key_bytes == 0) return "an empty key";
  if (*key_bytes > guide_format::kMaxKeyBytes) return "a key longer than 4095 bytes";
  const char *p = eq + 1, *end = line + n;
  *at = size_t(p - line);
  if (p == end) return "a threshold that is not a decimal integer";
  *t = 0;
  for (; p < end; ++p) {
    *at = size_t(p - line);
    if (*p < '0' || *p > '9') return "a threshold that is not a decimal integer";
    uint64_t d = uint64_t(*p - '0');
    if (*t > (UINT64_MAX - d) / 10) return "a threshold above 2^64-1";
    *t = *t * 10 + d;
  }
  return nullptr;
}

// Records "key NUL threshold" for every line of a thresholds file into g_guide. Returns an error
// text (and its byte offset in *at) or null; on an error nothing is kept.
HCCT_NOINST const char *parse_thresholds(const char *text, size_t len, size_t *at) {
  using namespace guide_format;
  g_guide_used = 0;
  auto fail = [&](size_t offset, const char *problem) {
    g_guide_used = 0;
    *at = offset;
    return problem;
  };
  if (const void *nul = memchr(text, 0, len)) return fail(size_t(static_cast<const char *>(nul) - text), "a NUL byte");
  size_t header = sizeof kThresholdsHeader - 1, prefix = sizeof kThresholdsHeaderPrefix - 1;
  if (len <= header || memcmp(text, kThresholdsHeader, header) != 0 || text[header] != '\n') {
    if (len > 0 && text[0] == '{')
      return fail(0, "JSON, not a thresholds file (the JSON guidance is the kpath plugin's; `hcct guide --thresholds FILE` "
                     "writes the oracle's)");
    if (len > prefix && memcmp(text, kThresholdsHeaderPrefix, prefix) == 0) {
      size_t digits = prefix;  // "# hcct-thresholds N\n" with N other than 1: a version from elsewhere
      while (digits < len && text[digits] >= '0' && text[digits] <= '9') ++digits;
      if (digits > prefix && digits < len && text[digits] == '\n')
        return fail(prefix, "unsupported thresholds file version (this reader knows 1)");
    }
    return fail(0, "not a thresholds file (its first line is not '# hcct-thresholds 1'; `hcct guide --thresholds FILE` "
                   "writes one)");
  }
  const char *end = text + len;
  bool ended = false;
  for (const char *line = text + header + 1; line < end;) {
    size_t start = size_t(line - text);
    const char *nl = static_cast<const char *>(memchr(line, '\n', size_t(end - line)));
    if (!nl) return fail(start, "a last line without a newline (a cut file?)");
    size_t n = size_t(nl - line);
    if (ended) return fail(start, "data after '# end'");
    if (n == sizeof kThresholdsEnd - 1 && memcmp(line, kThresholdsEnd, n) == 0) {
      ended = true;
    } else if (n > 0 && line[0] != '#') {
      size_t key_bytes = 0, offset = 0;
      uint64_t t = 0;
      if (const char *problem = parse_threshold_line(line, n, &key_bytes, &t, &offset)) return fail(start + offset, problem);
      if (kGuideBytes - g_guide_used < key_bytes + 1 + sizeof t) return fail(start, "too many thresholds (64 KiB of them)");
      memcpy(g_guide + g_guide_used, line, key_bytes);
      g_guide[g_guide_used + key_bytes] = 0;
      memcpy(g_guide + g_guide_used + key_bytes + 1, &t, sizeof t);
      g_guide_used += key_bytes + 1 + sizeof t;
    }
    line = nl + 1;
  }
  if (!ended) return fail(len, "no '# end' line (a cut file?)");
  return nullptr;
}

// A thresholds file lists a few hundred loops at most; anything far larger is not one.
constexpr int kMaxGuideBytes = 64 << 20;

HCCT_NOINST void load_thresholds_file(const char *path) {
  char shown[600];
  printable(shown, sizeof shown, path, 256);
  // Non-blocking: a FIFO must not stall the program (it is rejected below).
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: cannot open the file: %s; thresholds ignored\n", shown, error_text(errno));
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
        error_text(map_errno));
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
  const char *error = read_errno ? nullptr : parse_thresholds(text, length, &at);
  munmap(buffer, capacity);
  if (read_errno) {
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: cannot read the file: %s; thresholds ignored\n", shown, error_text(read_errno));
    return;
  }
  if (error) {
    say("hcct oracle: HCCT_ORACLE_GUIDE=%s: %s at byte %zu; thresholds ignored\n", shown, error, at);
  }
}

}  // namespace

HCCT_NOINST void load_environment() {
  if (g_env_loaded) return;
  g_env_loaded = true;
  if (const char *path = getenv("HCCT_ORACLE_GUIDE"); path && *path) load_thresholds_file(path);
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

HCCT_NOINST void set_spec(const char *spec, size_t len) { memcpy(g_spec, spec, len + 1); }

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

}  // namespace hcct::rt::oracle
