// The dump format's constants and primitive encodings (docs/FORMAT.md).
// Shared by the runtime's writer and the offline readers/writers, so it depends on nothing but
// <stdint.h>/<stddef.h> and never allocates.
#ifndef HCCT_FORMAT_H
#define HCCT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

namespace hcct::format {

inline constexpr char kMagic[8] = {'H', 'C', 'C', 'T', 'D', 'U', 'M', 'P'};
// Version 2 adds the TIME section (per-node time samples) and the time META keys; readers take
// version 1 files as they were (no time metric).
inline constexpr uint32_t kVersion = 2;
inline constexpr uint32_t kOldestVersion = 1;
inline constexpr size_t kHeaderSize = 32;
inline constexpr size_t kMaxVarintBytes = 10;
inline constexpr const char *kFileSuffix = ".hcct";

constexpr uint32_t tag(char a, char b, char c, char d) {
  return uint32_t(uint8_t(a)) | uint32_t(uint8_t(b)) << 8 | uint32_t(uint8_t(c)) << 16 |
         uint32_t(uint8_t(d)) << 24;
}
inline constexpr uint32_t kTagMeta = tag('M', 'E', 'T', 'A');
inline constexpr uint32_t kTagModules = tag('M', 'O', 'D', 'S');
inline constexpr uint32_t kTagTree = tag('C', 'C', 'T', ' ');
// Per-node time samples (version 2; docs/FORMAT.md, "TIME"): only with META `time`.
inline constexpr uint32_t kTagTime = tag('T', 'I', 'M', 'E');
// kpath (docs/FORMAT.md, "KPTH", "KTRC"): the path profile and, with path_trace=1, the raw stream.
inline constexpr uint32_t kTagPaths = tag('K', 'P', 'T', 'H');
inline constexpr uint32_t kTagPathTrace = tag('K', 'T', 'R', 'C');
// Static bursting of path profiles: the exact start counters and the thread's cut windows.
inline constexpr uint32_t kTagPathSampling = tag('K', 'P', 'S', 'C');
// KPTH version 2 adds the forest kind after k (version 1 had none); version 3 the bounded
// forest's ε, budget and error accounting after `lost`; KTRC stays at version 1.
inline constexpr uint64_t kPathsVersion = 3;
inline constexpr uint64_t kPathTraceVersion = 1;
// KPSC version 2 adds per function a flags word (kStartsPerThread); readers accept 1 (no flags).
inline constexpr uint64_t kPathSamplingVersion = 2;
inline constexpr uint64_t kStartsPerThread = 1;  // the counts are the thread's own, not the process's
// KPSC flags: the path gate followed bursts; the bursts were counted in path starts per thread (the
// event clock: interval and length are then numbers of starts, not nanoseconds).
inline constexpr uint64_t kPathSamplingBursting = 1;
inline constexpr uint64_t kPathSamplingEventClock = 2;
// The path profile's structure, one enum for every side: the KPTH section's forest code (its
// value), the runtime's option `forest=ksf|kwf` (option_name), the readers and reports (title).
enum class PathForest : uint8_t {
  kBlpp = 0,       // k = 1: one counter per (function, path ID)
  kSlab = 1,       // the k-slab forest (thesis Algorithm 4)
  kWindow = 2,     // the k-window forest
  kUnknown = 255,  // a version-1 KPTH section (a k-SF or a kWF: it did not say); never written
};
inline constexpr uint64_t kPathForestBlpp = uint64_t(PathForest::kBlpp);
inline constexpr uint64_t kPathForestSlab = uint64_t(PathForest::kSlab);
inline constexpr uint64_t kPathForestWindow = uint64_t(PathForest::kWindow);
constexpr const char *option_name(PathForest f) {
  return f == PathForest::kBlpp ? "blpp" : f == PathForest::kSlab ? "ksf" : f == PathForest::kWindow ? "kwf" : "unknown";
}
constexpr const char *title(PathForest f) {
  return f == PathForest::kBlpp ? "BLPP" : f == PathForest::kSlab ? "k-SF" : f == PathForest::kWindow ? "kWF" : "unknown";
}

// Node flag bits in the CCT section.
inline constexpr uint8_t kNodeMonitored = 1u << 0;
inline constexpr uint8_t kNodeOnPath = 1u << 1;
inline constexpr uint8_t kNodeKnownFlags = kNodeMonitored | kNodeOnPath;

// Separator between arguments in META's cmdline value.
inline constexpr char kArgSeparator = '\x1f';

struct Fnv1a64 {
  uint64_t state = 0xcbf29ce484222325ull;
  __attribute__((no_instrument_function)) void update(const void *data, size_t n) {
    const unsigned char *p = static_cast<const unsigned char *>(data);
    uint64_t h = state;
    for (size_t i = 0; i < n; ++i) {
      h ^= p[i];
      h *= 0x100000001b3ull;
    }
    state = h;
  }
};

// Writes `v` as unsigned LEB128 into `out` (at least kMaxVarintBytes long); returns bytes written.
__attribute__((no_instrument_function)) inline size_t encode_varint(uint64_t v, unsigned char *out) {
  size_t n = 0;
  while (v >= 0x80) {
    out[n++] = static_cast<unsigned char>(v | 0x80);
    v >>= 7;
  }
  out[n++] = static_cast<unsigned char>(v);
  return n;
}

// Decodes one varint from [p, end). Returns bytes consumed, or 0 if truncated, longer than
// kMaxVarintBytes, or carrying bits beyond 64.
__attribute__((no_instrument_function)) inline size_t decode_varint(const unsigned char *p,
                                                                    const unsigned char *end,
                                                                    uint64_t *value) {
  uint64_t v = 0;
  for (size_t i = 0; i < kMaxVarintBytes && p + i < end; ++i) {
    uint64_t byte = p[i];
    if (i == kMaxVarintBytes - 1 && byte > 1) return 0;  // would overflow 64 bits
    v |= (byte & 0x7f) << (7 * i);
    if (!(byte & 0x80)) {
      *value = v;
      return i + 1;
    }
  }
  return 0;
}

}  // namespace hcct::format

#endif
