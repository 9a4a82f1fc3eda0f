// Memory for the runtime's own data, straight from mmap: never the program's malloc, and released
// wholesale when a thread's profile is gone.
#ifndef HCCT_RT_ARENA_H
#define HCCT_RT_ARENA_H

#include "common.h"

namespace hcct::rt {

// Maps `bytes` (rounded up to pages) of zeroed memory; null on failure.
// A system call made directly, without glibc's wrapper (x86-64): no errno, no thread state. For the
// runtime's own threads, which glibc does not know of (burst_runtime.h, start_raw_thread).
long raw_syscall(long number, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0);
void *map_pages(size_t bytes);
void unmap_pages(void *p, size_t bytes);
// Grows a mapping made by map_pages, possibly moving it; null on failure (the old one stays valid).
void *remap_pages(void *p, size_t old_bytes, size_t new_bytes);

// Process-wide budget for tree memory (option max_mb), charged per chunk, never per call.
bool charge_tree_memory(size_t bytes);
void refund_tree_memory(size_t bytes);
void set_tree_memory_limit(size_t bytes);
size_t tree_memory_limit();
void reset_tree_memory_accounting();
// Says once per process on stderr that the max_mb budget is used up.
void report_memory_exhausted();

// Doubles an array of `count` T made by map_pages (a stack that outgrew it), possibly moving it.
// Null if the kernel says no: reported, and the old array stays valid.
template <typename T>
HCCT_NOINST T *double_pages(T *array, size_t count) {
  auto *moved = static_cast<T *>(remap_pages(array, count * sizeof(T), 2 * count * sizeof(T)));
  if (!moved) report_memory_exhausted();
  return moved;
}

// Bump allocator over a list of mmap'd chunks that double in size, so a thread that makes a few
// calls costs a few pages while a large tree costs few mappings.
class Arena {
 public:
  // Returns null when the memory budget or the kernel says no.
  HCCT_NOINST void *allocate(size_t bytes) {
    bytes = (bytes + 15) & ~size_t(15);
    if (HCCT_UNLIKELY(size_t(end_ - cursor_) < bytes)) return allocate_slow(bytes);
    void *p = cursor_;
    cursor_ += bytes;
    return p;
  }
  void release();
  size_t bytes_mapped() const { return mapped_; }

 private:
  struct Chunk {
    Chunk *next;
    size_t size;
  };
  void *allocate_slow(size_t bytes);

  Chunk *chunks_ = nullptr;
  char *cursor_ = nullptr;
  char *end_ = nullptr;
  size_t mapped_ = 0;
  size_t next_size_ = 16 * 1024;
};

// One thread's calling-context nodes: a contiguous reservation of address space (no memory until
// used), committed in chunks that double in size and are charged to the tree budget, so that any
// two nodes of a thread lie less than 2 GiB apart (nodes link to each other by 32-bit offsets,
// docs/RUNTIME.md, "Node layout") and a 32-bit offset from base() names any node.
class NodeSpace {
 public:
  static constexpr size_t kGranule = 32;           // every piece is 32-byte aligned and sized
  static constexpr size_t kMaxBytes = size_t(1) << 31;  // offsets between nodes fit an int32_t
  // Null when the memory budget or the kernel says no.
  HCCT_NOINST void *allocate() {
    if (HCCT_UNLIKELY(cursor_ == committed_end_)) return allocate_slow();
    void *p = cursor_;
    cursor_ += kGranule;
    return p;
  }
  void release();
  size_t bytes_mapped() const { return size_t(committed_end_ - base_); }
  char *base() const { return base_; }

 private:
  void *allocate_slow();

  char *base_ = nullptr;
  char *cursor_ = nullptr;
  char *committed_end_ = nullptr;
  size_t reserved_ = 0;
  size_t next_size_ = 16 * 1024;
};

}  // namespace hcct::rt

#endif
