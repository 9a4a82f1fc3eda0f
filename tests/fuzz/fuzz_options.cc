// Fuzz harness: the runtime's HCCT_OPTIONS parser (libhcct/options.cc parse_options; the options
// are listed in README.md).
//
// Invariants beyond "no crash":
//  - accepted: every value is in its documented range (epsilon in [1e-7, 1), max_mb in [1, 2^30],
//    k in [1, 256], burst durations in [1 us, 1 day] with burst_length <= burst_interval, `out` a
//    non-empty NUL-terminated path without ':'), the cross-option rules hold (exact=1 only with
//    mode=hcct, bursting only with cct or hcct), and the options written back as HCCT_OPTIONS parse to
//    the same values;
//  - rejected: one message, NUL-terminated within the buffer however small, on one line with no
//    control bytes (the runtime prints it as the single line a bad option gives).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "options.h"

namespace rt = hcct::rt;
using hcct::fuzz::require;

namespace {

bool same(const rt::Options &a, const rt::Options &b) {
  return a.mode == b.mode && a.key == b.key && a.epsilon == b.epsilon && a.max_mb == b.max_mb &&
         a.verbose == b.verbose && a.path_k == b.path_k && a.path_trace == b.path_trace &&
         a.path_forest == b.path_forest && a.exact == b.exact && a.burst == b.burst &&
         a.burst_interval_ns == b.burst_interval_ns && a.burst_length_ns == b.burst_length_ns &&
         a.burst_sync == b.burst_sync && std::strcmp(a.out, b.out) == 0;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The options as HCCT_OPTIONS text.
std::string render(const rt::Options &o) {
  std::string s = "mode=" + std::string(rt::mode_name(o.mode));
  s += ":key=" + std::string(o.key == rt::KeyBy::kSite ? "site" : "routine");
  s += ":epsilon=" + number(o.epsilon);
  s += ":max_mb=" + std::to_string(o.max_mb);
  s += ":verbose=" + std::to_string(int(o.verbose));
  s += ":exact=" + std::to_string(int(o.exact));
  s += ":k=" + std::to_string(o.path_k);
  s += ":path_trace=" + std::to_string(int(o.path_trace));
  s += ":forest=" + std::string(o.path_forest == rt::PathForest::kSlab ? "ksf" : "kwf");
  s += ":burst=" + std::string(o.burst == rt::Burst::kOff ? "0" : o.burst == rt::Burst::kTimer ? "1" : "manual");
  s += ":burst_interval=" + number(double(o.burst_interval_ns) / 1e6);
  s += ":burst_length=" + number(double(o.burst_length_ns) / 1e6);
  s += ":burst_sync=" + std::string(rt::burst_sync_name(o.burst_sync));
  s += ":out=" + std::string(o.out);
  return s;
}

void check_accepted(const rt::Options &o) {
  require(o.epsilon >= 1e-7 && o.epsilon < 1, "epsilon in [1e-7, 1)");
  require(o.max_mb >= 1 && o.max_mb <= (uint64_t(1) << 30), "max_mb in [1, 2^30]");
  require(o.path_k >= 1 && o.path_k <= rt::kMaxPathK, "k in [1, 256]");
  for (uint64_t ns : {o.burst_interval_ns, o.burst_length_ns})
    require(ns >= 1000 && ns <= uint64_t(86400000) * 1000000, "burst durations in [1 us, 1 day]");
  require(o.burst_length_ns <= o.burst_interval_ns, "burst_length <= burst_interval");
  require(!o.exact || o.mode == rt::Mode::kHcct, "exact=1 only with mode=hcct");
  require(o.burst == rt::Burst::kOff || o.mode == rt::Mode::kCct || o.mode == rt::Mode::kHcct,
          "bursting only with mode=cct or hcct");
  size_t out_len = strnlen(o.out, rt::kMaxPath);
  require(out_len > 0 && out_len < rt::kMaxPath, "out is a non-empty NUL-terminated path");
  require(std::memchr(o.out, ':', out_len) == nullptr, "out has no ':' (the item separator)");

  std::string text = render(o);
  rt::Options again;
  char error[512];
  require(rt::parse_options(text.c_str(), &again, error, sizeof error), "written-back options parse", error);
  require(same(o, again), "written-back options parse to the same values", text);
}

void check_rejected(const char *text, const char *error, size_t size) {
  size_t n = strnlen(error, size);
  require(n < size, "the message is NUL-terminated within its buffer");
  if (size < 2) return;
  require(n > 0, "a rejected option says why");
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(error[i]);
    require(c >= 0x20 && c != 0x7f, "the message is one line without control bytes",
            std::string("HCCT_OPTIONS=") + text + " -> " + error);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  text.resize(std::strlen(text.c_str()));  // an environment value ends at its first NUL
  rt::Options o;
  char error[512];
  std::memset(error, 0x7f, sizeof error);
  if (rt::parse_options(text.c_str(), &o, error, sizeof error)) {
    check_accepted(o);
    return 0;
  }
  check_rejected(text.c_str(), error, sizeof error);
  // The same rejection into small buffers: cut, still terminated.
  for (size_t small : {size_t(1), size_t(9)}) {
    char cut[16];
    std::memset(cut, 0x7f, sizeof cut);
    require(!rt::parse_options(text.c_str(), &o, cut, small), "rejection does not depend on the buffer");
    require(cut[small] == 0x7f, "the message stays within its buffer");
    check_rejected(text.c_str(), cut, small);
  }
  return 0;
}
