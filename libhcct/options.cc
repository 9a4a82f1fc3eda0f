#include "options.h"

#include "hcct/runtime_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace hcct::rt {

namespace {

struct Token {
  const char *begin;
  size_t size;
  HCCT_NOINST bool is(const char *word) const {
    return strlen(word) == size && memcmp(begin, word, size) == 0;
  }
};

HCCT_NOINST bool parse_u64(Token t, uint64_t *out) {
  if (t.size == 0 || t.size > 19) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < t.size; ++i) {
    if (t.begin[i] < '0' || t.begin[i] > '9') return false;
    v = v * 10 + uint64_t(t.begin[i] - '0');
  }
  *out = v;
  return true;
}

HCCT_NOINST bool parse_double(Token t, double *out) {
  char buf[64];
  if (t.size == 0 || t.size >= sizeof buf) return false;
  memcpy(buf, t.begin, t.size);
  buf[t.size] = 0;
  char *end = nullptr;
  double v = strtod(buf, &end);
  if (end != buf + t.size || !(v == v)) return false;
  *out = v;
  return true;
}

// A duration in milliseconds, decimals allowed ("20", "0.5"), as nanoseconds in [1 us, 1 day].
HCCT_NOINST bool parse_ms(Token t, uint64_t *ns) {
  double ms = 0;
  if (!parse_double(t, &ms) || !(ms >= 0.001 && ms <= 86400000.0)) return false;
  *ns = uint64_t(ms * 1e6 + 0.5);
  return true;
}

// `t` as shown in a message, in `buf`: control bytes as \xNN, so that the runtime's message stays
// the one line it promises (found by tests/fuzz/fuzz_options). Cut to what fits.
HCCT_NOINST Token shown(Token t, char *buf, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < t.size && n + 5 <= cap; ++i) {
    unsigned char c = static_cast<unsigned char>(t.begin[i]);
    if (c < 0x20 || c == 0x7f) n += size_t(snprintf(buf + n, cap - n, "\\x%02x", c));
    else buf[n++] = char(c);
  }
  return Token{buf, n};
}

namespace spec = runtime_options;

HCCT_NOINST bool fail(char *error, size_t size, const char *fmt, Token key, Token value) {
  char key_buf[256], value_buf[512];
  key = shown(key, key_buf, sizeof key_buf);
  value = shown(value, value_buf, sizeof value_buf);
  snprintf(error, size, fmt, int(key.size), key.begin, int(value.size), value.begin);
  return false;
}

// "key='value' is not one of a, b" or "key='value' must be <what the table says>".
HCCT_NOINST bool fail_value(char *error, size_t size, const spec::Option &option, Token key, Token value) {
  char fmt[256];
  snprintf(fmt, sizeof fmt, "%%.*s='%%.*s' %s %s", option.choice ? "is not one of" : "must be", option.values);
  return fail(error, size, fmt, key, value);
}

// "unknown option 'x' (known: mode, epsilon, ...)"
HCCT_NOINST bool fail_unknown(char *error, size_t size, Token key) {
  char known[512];
  size_t n = 0;
  for (const spec::Option *o : spec::kAll)
    if (n < sizeof known) n += size_t(snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", o->name));
  char fmt[640];
  snprintf(fmt, sizeof fmt, "unknown option '%%.*s'%%.*s (known: %s)", known);
  return fail(error, size, fmt, key, Token{"", 0});
}

}  // namespace

const char *burst_sync_name(BurstSync s) {
  switch (s) {
    case BurstSync::kAuto: return "auto";
    case BurstSync::kShadow: return "shadow";
    case BurstSync::kUnwind: return "unwind";
  }
  return "?";
}

const char *time_metric_name(TimeMetric t) {
  switch (t) {
    case TimeMetric::kOff: return "off";
    case TimeMetric::kCpu: return "cpu";
    case TimeMetric::kWall: return "wall";
  }
  return "?";
}

bool samples_time(const Options &o) {
  return o.time != TimeMetric::kOff && (o.mode == Mode::kHcct || (o.mode == Mode::kCct && o.time_given));
}

const char *mode_name(Mode m) {
  switch (m) {
    case Mode::kOff: return "off";
    case Mode::kEmpty: return "empty";
    case Mode::kCct: return "cct";
    case Mode::kHcct: return "hcct";
  }
  return "?";
}

HCCT_NOINST bool parse_options(const char *text, Options *o, char *error, size_t error_size) {
  *o = Options{};
  if (!text) return true;
  const char *p = text;
  while (*p) {
    const char *end = strchr(p, ':');
    if (!end) end = p + strlen(p);
    if (end == p) {  // tolerate empty items ("a=b::c=d", trailing ':')
      p = *end ? end + 1 : end;
      continue;
    }
    const char *eq = static_cast<const char *>(memchr(p, '=', size_t(end - p)));
    if (!eq) {
      Token item{p, size_t(end - p)};
      return fail(error, error_size, "option '%.*s%.*s' has no value (expected key=value)", item,
                  Token{"", 0});
    }
    Token key{p, size_t(eq - p)};
    Token value{eq + 1, size_t(end - eq - 1)};
    if (key.is(spec::kMode.name)) {
      if (value.is("off")) o->mode = Mode::kOff;
      else if (value.is("empty")) o->mode = Mode::kEmpty;
      else if (value.is("cct")) o->mode = Mode::kCct;
      else if (value.is("hcct")) o->mode = Mode::kHcct;
      else return fail_value(error, error_size, spec::kMode, key, value);
    } else if (key.is(spec::kKey.name)) {
      if (value.is("site")) o->key = KeyBy::kSite;
      else if (value.is("routine")) o->key = KeyBy::kRoutine;
      else return fail_value(error, error_size, spec::kKey, key, value);
    } else if (key.is(spec::kEpsilon.name)) {
      // Below 1e-7 the counter array alone would exceed a gigabyte per thread.
      if (!parse_double(value, &o->epsilon) || !(o->epsilon >= 1e-7 && o->epsilon < 1))
        return fail_value(error, error_size, spec::kEpsilon, key, value);
    } else if (key.is(spec::kMaxMb.name)) {
      if (!parse_u64(value, &o->max_mb) || o->max_mb == 0 || o->max_mb > (uint64_t(1) << 30))
        return fail_value(error, error_size, spec::kMaxMb, key, value);
    } else if (key.is(spec::kVerbose.name)) {
      if (value.is("1")) o->verbose = true;
      else if (value.is("0")) o->verbose = false;
      else return fail_value(error, error_size, spec::kVerbose, key, value);
    } else if (key.is(spec::kFollow.name)) {
      if (value.is("1")) o->follow = true;
      else if (value.is("0")) o->follow = false;
      else return fail_value(error, error_size, spec::kFollow, key, value);
    } else if (key.is(spec::kExact.name)) {
      if (value.is("1")) o->exact = true;
      else if (value.is("0")) o->exact = false;
      else return fail_value(error, error_size, spec::kExact, key, value);
    } else if (key.is(spec::kK.name)) {
      uint64_t k = 0;
      if (!parse_u64(value, &k) || k < 1 || k > kMaxPathK)
        return fail_value(error, error_size, spec::kK, key, value);
      o->path_k = uint32_t(k);
    } else if (key.is(spec::kPathTrace.name)) {
      if (value.is("1")) o->path_trace = true;
      else if (value.is("0")) o->path_trace = false;
      else return fail_value(error, error_size, spec::kPathTrace, key, value);
    } else if (key.is(spec::kPathEpsilon.name)) {
      // Below 1e-6 the budget (k/ε nodes of 64 bytes) would exceed 16 GB per thread at k = 256.
      if (!parse_double(value, &o->path_epsilon) || !(o->path_epsilon == 0 || (o->path_epsilon >= 1e-6 && o->path_epsilon <= 0.5)))
        return fail_value(error, error_size, spec::kPathEpsilon, key, value);
    } else if (key.is(spec::kPathGrow.name)) {
      uint64_t grow = 0;
      if (!parse_u64(value, &grow) || grow < 1 || grow > 64)
        return fail_value(error, error_size, spec::kPathGrow, key, value);
      o->path_grow = uint32_t(grow);
    } else if (key.is(spec::kPathBurstStarts.name)) {
      if (!parse_u64(value, &o->path_burst_starts) || o->path_burst_starts == 0 ||
          o->path_burst_starts > (uint64_t(1) << 40))
        return fail_value(error, error_size, spec::kPathBurstStarts, key, value);
      o->path_burst_starts_given = true;
    } else if (key.is(spec::kPathBurstInterval.name)) {
      if (!parse_u64(value, &o->path_burst_interval) || o->path_burst_interval == 0 ||
          o->path_burst_interval > (uint64_t(1) << 40))
        return fail_value(error, error_size, spec::kPathBurstInterval, key, value);
      o->path_burst_interval_given = true;
    } else if (key.is(spec::kForest.name)) {
      if (value.is(format::option_name(PathForest::kSlab))) o->path_forest = PathForest::kSlab;
      else if (value.is(format::option_name(PathForest::kWindow))) o->path_forest = PathForest::kWindow;
      else return fail_value(error, error_size, spec::kForest, key, value);
    } else if (key.is(spec::kBurst.name)) {
      if (value.is("1")) o->burst = Burst::kTimer;
      else if (value.is("0")) o->burst = Burst::kOff;
      else if (value.is("manual")) o->burst = Burst::kManual;
      else return fail_value(error, error_size, spec::kBurst, key, value);
    } else if (key.is(spec::kBurstInterval.name)) {
      if (!parse_ms(value, &o->burst_interval_ns))
        return fail_value(error, error_size, spec::kBurstInterval, key, value);
      o->burst_interval_given = true;
    } else if (key.is(spec::kBurstLength.name)) {
      if (!parse_ms(value, &o->burst_length_ns))
        return fail_value(error, error_size, spec::kBurstLength, key, value);
      o->burst_length_given = true;
    } else if (key.is(spec::kBurstSync.name)) {
      if (value.is("auto")) o->burst_sync = BurstSync::kAuto;
      else if (value.is("shadow")) o->burst_sync = BurstSync::kShadow;
      else if (value.is("unwind")) o->burst_sync = BurstSync::kUnwind;
      else return fail_value(error, error_size, spec::kBurstSync, key, value);
    } else if (key.is(spec::kTime.name)) {
      if (value.is("off")) o->time = TimeMetric::kOff;
      else if (value.is("cpu")) o->time = TimeMetric::kCpu;
      else if (value.is("wall")) o->time = TimeMetric::kWall;
      else return fail_value(error, error_size, spec::kTime, key, value);
      o->time_given = true;
    } else if (key.is(spec::kSampleHz.name)) {
      uint64_t hz = 0;
      if (!parse_u64(value, &hz) || hz < 1 || hz > 10000)
        return fail_value(error, error_size, spec::kSampleHz, key, value);
      o->sample_hz = uint32_t(hz);
    } else if (key.is(spec::kSampleSignal.name)) {
      // Signals whose default action or meaning the program relies on are refused; SIGPROF and
      // SIGVTALRM are accepted for programs that never use them (gprof's and setitimer's signals).
      uint64_t sig = 0;
      if (!parse_u64(value, &sig) || !(sig == 26 || sig == 27 || (sig >= 34 && sig <= 64)))
        return fail_value(error, error_size, spec::kSampleSignal, key, value);
      o->sample_signal = int(sig);
    } else if (key.is(spec::kOut.name)) {
      if (value.size == 0 || value.size >= kMaxPath)
        return fail_value(error, error_size, spec::kOut, key, value);
      memcpy(o->out, value.begin, value.size);
      o->out[value.size] = 0;
    } else if (key.is(spec::kLog.name)) {
      if (value.size == 0 || value.size >= kMaxPath)
        return fail_value(error, error_size, spec::kLog, key, value);
      memcpy(o->log, value.begin, value.size);
      o->log[value.size] = 0;
    } else {
      return fail_unknown(error, error_size, key);
    }
    p = *end ? end + 1 : end;
  }
  if (o->exact && o->mode != Mode::kHcct) {
    snprintf(error, error_size, "exact=1 needs mode=hcct (it keeps the exact CCT beside the HCCT)");
    return false;
  }
  if (o->burst != Burst::kOff && o->mode != Mode::kCct && o->mode != Mode::kHcct) {
    snprintf(error, error_size, "burst needs mode=cct or mode=hcct");
    return false;
  }
  if (o->burst_interval_given != o->burst_length_given) {
    // One given alone: the other at the defaults' ratio (a length of at least 1 µs, the options' floor).
    if (o->burst_interval_given) {
      uint64_t length = o->burst_interval_ns / Options::kBurstRatio;
      o->burst_length_ns = length < 1000 ? 1000 : length;
    } else {
      constexpr uint64_t kLongestNs = uint64_t(86400000) * 1000000;  // parse_ms's bound: a day
      uint64_t interval = o->burst_length_ns * Options::kBurstRatio;
      o->burst_interval_ns = interval > kLongestNs ? kLongestNs : interval;
    }
  }
  if (o->path_burst_starts_given && !o->path_burst_interval_given)
    o->path_burst_interval = o->path_burst_starts * Options::kPathBurstRatio;  // (both at most 2^40: no overflow)
  else if (o->path_burst_interval_given && !o->path_burst_starts_given)
    o->path_burst_starts = o->path_burst_interval < Options::kPathBurstRatio ? 1 : o->path_burst_interval / Options::kPathBurstRatio;
  if (o->path_burst_starts > o->path_burst_interval) {
    snprintf(error, error_size, "path_burst_starts (%llu) must not exceed path_burst_interval (%llu)",
             (unsigned long long)o->path_burst_starts, (unsigned long long)o->path_burst_interval);
    return false;
  }
  if (o->burst_length_ns > o->burst_interval_ns) {
    snprintf(error, error_size, "burst_length (%.3f ms) must not exceed burst_interval (%.3f ms)",
             double(o->burst_length_ns) / 1e6, double(o->burst_interval_ns) / 1e6);
    return false;
  }
  return true;
}

}  // namespace hcct::rt
