// Bounds-checked little-endian reading of one region of a file (dump sections, kpath metadata
// blobs): every failure is a FormatError naming the file and the region. Private to analysis/.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "hcct/analysis/reader.h"
#include "hcct/format.h"

namespace hcct::analysis {

class ByteCursor {
 public:
  // Failures read "<file>: <where>: <problem>".
  ByteCursor(std::span<const unsigned char> bytes, std::string file, std::string where)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()), file_(std::move(file)), where_(std::move(where)) {}

  size_t remaining() const { return size_t(end_ - p_); }
  bool done() const { return p_ == end_; }
  void set_where(std::string where) { where_ = std::move(where); }

  [[noreturn]] void fail(const std::string &problem) const {
    throw FormatError(file_ + ": " + where_ + ": " + problem);
  }

  // A little-endian unsigned integer of sizeof(T) bytes.
  template <class T>
  T fixed(const char *what) {
    if (remaining() < sizeof(T)) fail(std::string("truncated ") + what);
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= T(p_[i]) << (8 * i);
    p_ += sizeof(T);
    return v;
  }

  // Malformed: truncated, over 10 bytes or over 64 bits.
  uint64_t varint(const char *what) {
    uint64_t v;
    size_t n = format::decode_varint(p_, end_, &v);
    if (n == 0) fail(std::string("malformed varint for ") + what);
    p_ += n;
    return v;
  }

  uint32_t u32v(const char *what) {
    uint64_t v = varint(what);
    if (v > UINT32_MAX) fail(std::string(what) + " out of range");
    return uint32_t(v);
  }

  // A count of elements that each take at least `min_bytes`: bounded by the bytes left, so that a
  // hostile count cannot make the caller reserve more than the input could hold.
  uint64_t count(const char *what, size_t min_bytes) {
    uint64_t n = varint(what);
    if (n > remaining() / min_bytes) fail(std::string(what) + " exceeds the bytes left");
    return n;
  }

  std::span<const unsigned char> bytes(size_t n, const char *what) {
    if (remaining() < n) fail(std::string("truncated ") + what);
    std::span<const unsigned char> s(p_, n);
    p_ += n;
    return s;
  }

  // A varint length, then that many bytes.
  std::string str(const char *what) {
    uint64_t n = varint(what);
    if (n > remaining()) fail(std::string("truncated ") + what);
    auto s = bytes(size_t(n), what);
    return std::string(reinterpret_cast<const char *>(s.data()), s.size());
  }

  // Bytes up to (not including) the next NUL, which is consumed.
  std::string_view cstring(const char *what) {
    const void *nul = std::memchr(p_, 0, remaining());
    if (!nul) fail(std::string("unterminated ") + what);
    std::string_view s(reinterpret_cast<const char *>(p_), size_t(static_cast<const unsigned char *>(nul) - p_));
    p_ += s.size() + 1;
    return s;
  }

 private:
  const unsigned char *p_;
  const unsigned char *end_;
  std::string file_;
  std::string where_;
};

}  // namespace hcct::analysis
