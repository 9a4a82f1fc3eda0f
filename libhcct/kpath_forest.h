// The path profiler's per-thread data (docs/KPATH.md, "Runtime"): the k-slab forest of thesis
// Algorithm 4, built from the stream of Ball-Larus path IDs, or one counter per (function, path ID)
// for k = 1 (BLPP). Deterministic and free of TLS and system calls other than mmap, like
// profile.h, so unit tests drive it directly.
//
// The stream is per activation: the pass gives every activation of an instrumented function a
// PathFrame in its own stack frame, reset by the ∗ marker (__hcct_path_enter), so a callee's paths
// never split its caller's n-grams, recursion needs no shadow stack, and an activation left by an
// exception or longjmp simply stops.
#ifndef HCCT_RT_KPATH_FOREST_H
#define HCCT_RT_KPATH_FOREST_H

#include "arena.h"

namespace hcct::rt {

// A k-SF node: first-child/next-sibling, 32 bytes. The function is implied by the tree (an
// activation only emits its own function's IDs); roots keep it in the root table.
struct KsfNode {
  uint64_t path;
  uint64_t count;
  KsfNode *first_child;
  KsfNode *next_sibling;
};

// struct hcct_path_frame of the ABI: the state of Algorithm 4 for one activation.
struct PathFrame {
  KsfNode *top;      // τ: current node in the upper slab
  KsfNode *bottom;   // β: current node in the lower slab
  uint64_t left;     // items left in the current chunk of k − 1 (0: the next item starts a chunk)
  const void *owner; // the profiler the pointers belong to; anything else means "start afresh"
};

// Open-addressing hash table (function, path) → value, linear probing, on mmap'd memory that
// counts against max_mb. A value of 0 marks a free slot: callers store nonzero values only.
class RootTable {
 public:
  struct Slot {
    uint64_t function;
    uint64_t path;
    uint64_t value;
  };

  bool init(size_t capacity);
  void release();

  // The value slot for the key, inserted (value 0) if absent; null if the table cannot grow.
  HCCT_NOINST uint64_t *find_or_insert(uint64_t function, uint64_t path) {
    size_t i = hash(function, path) & mask_;
    for (;;) {
      Slot &s = slots_[i];
      if (s.value == 0) break;
      if (s.function == function && s.path == path) return &s.value;
      i = (i + 1) & mask_;
    }
    return insert_slow(function, path);
  }

  size_t size() const { return size_; }
  size_t capacity() const { return mask_ + 1; }
  const Slot *slots() const { return slots_; }
  size_t bytes() const { return capacity() * sizeof(Slot); }

 private:
  HCCT_NOINST static uint64_t hash(uint64_t function, uint64_t path) {
    uint64_t h = function ^ (path * 0x9e3779b97f4a7c15ull);
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    return h ^ (h >> 32);
  }
  uint64_t *insert_slow(uint64_t function, uint64_t path);
  bool grow();

  Slot *slots_ = nullptr;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// The raw stream, for path_trace=1: fixed-size records in a list of mmap'd chunks.
class PathTrace {
 public:
  struct Record {
    uint64_t kind;  // 0: ∗ (routine entry), 1: path
    uint64_t frame;
    uint64_t function;
    uint64_t path;
  };
  HCCT_NOINST void add(uint64_t kind, const void *frame, uint64_t function, uint64_t path) {
    if (HCCT_UNLIKELY(!chunk_ || chunk_->used == kPerChunk)) {
      if (!new_chunk()) {
        ++lost_;
        return;
      }
    }
    chunk_->records[chunk_->used++] = {kind, reinterpret_cast<uint64_t>(frame), function, path};
    ++size_;
  }
  void release();
  uint64_t size() const { return size_; }
  uint64_t lost() const { return lost_; }
  // Visits records in order.
  template <typename F>
  HCCT_NOINST void for_each(F f) const {
    for (const Chunk *c = first_; c; c = c->next)
      for (size_t i = 0; i < c->used; ++i) f(c->records[i]);
  }

 private:
  static constexpr size_t kChunkBytes = size_t(1) << 20;
  struct Chunk;
  static constexpr size_t kPerChunk = (kChunkBytes - 64) / sizeof(Record);
  struct Chunk {
    Chunk *next;
    size_t used;
    Record records[kPerChunk];
  };
  bool new_chunk();

  Chunk *first_ = nullptr;
  Chunk *chunk_ = nullptr;
  uint64_t size_ = 0;
  uint64_t lost_ = 0;
};

class PathProfiler {
 public:
  // k = 1: BLPP counters; k >= 2: k-SF.
  bool init(uint32_t k, bool trace, bool move_to_front = true);
  void destroy();

  // The ∗ marker: a new activation of `function` starts with `frame`.
  HCCT_NOINST void enter(PathFrame *frame, uint64_t function) {
    frame->top = frame->bottom = nullptr;
    frame->left = 0;
    frame->owner = this;
    ++enters_;
    if (HCCT_UNLIKELY(tracing_)) trace_.add(0, frame, function, 0);
  }

  // Algorithm 4 (process_bl_path_id) for one path ID of the activation owning `frame`.
  HCCT_NOINST void path(PathFrame *frame, uint64_t function, uint64_t id) {
    if (HCCT_UNLIKELY(tracing_)) trace_.add(1, frame, function, id);
    if (k_ == 1) return count_blpp(function, id);
    if (HCCT_UNLIKELY(frame->owner != this)) {
      // Entered while events were ignored (gate closed, re-entrant), or another thread's frame.
      frame->top = frame->bottom = nullptr;
      frame->left = 0;
      frame->owner = this;
    }
    // At a chunk boundary β moves to the old τ (Algorithm 4, line 7) and τ to a root.
    bool boundary = frame->left == 0;
    KsfNode *below = boundary ? frame->top : frame->bottom;
    KsfNode *top = boundary ? root(function, id) : child(frame->top, id);
    KsfNode *bottom = below ? child(below, id) : nullptr;
    if (HCCT_UNLIKELY(!top || (below && !bottom))) return lose(frame);
    if (boundary) frame->left = k_ - 1;
    --frame->left;
    frame->top = top;
    frame->bottom = bottom;
    ++(bottom ? bottom : top)->count;
    ++paths_;
  }

  uint32_t k() const { return k_; }
  uint64_t paths() const { return paths_; }
  uint64_t enters() const { return enters_; }
  uint64_t lost() const { return lost_; }
  uint64_t nodes() const { return nodes_; }
  size_t bytes() const { return arena_.bytes_mapped() + roots_.bytes(); }
  const RootTable &roots() const { return roots_; }
  const PathTrace &trace() const { return trace_; }
  bool tracing() const { return tracing_; }
  // Average number of siblings scanned per child lookup (for tuning).
  uint64_t scans() const { return scans_; }
  uint64_t lookups() const { return lookups_; }

 private:
  HCCT_NOINST void count_blpp(uint64_t function, uint64_t id) {
    uint64_t *count = roots_.find_or_insert(function, id);
    if (HCCT_UNLIKELY(!count)) {
      ++lost_;
      return;
    }
    if (*count == 0) ++nodes_;
    ++*count;
    ++paths_;
  }
  HCCT_NOINST KsfNode *root(uint64_t function, uint64_t id) {
    uint64_t *slot = roots_.find_or_insert(function, id);
    if (HCCT_UNLIKELY(!slot)) return nullptr;
    if (HCCT_UNLIKELY(*slot == 0)) return new_root(slot, id);
    return reinterpret_cast<KsfNode *>(*slot);
  }
  // The common case inline: the first child is the one (move-to-front keeps it there).
  HCCT_NOINST KsfNode *child(KsfNode *parent, uint64_t id) {
    KsfNode *first = parent->first_child;
    if (HCCT_LIKELY(first && first->path == id)) return first;
    return child_slow(parent, id);
  }
  KsfNode *child_slow(KsfNode *parent, uint64_t id);
  KsfNode *new_root(uint64_t *slot, uint64_t id);
  KsfNode *new_node(uint64_t id);
  void lose(PathFrame *frame);

  uint32_t k_ = 2;
  bool tracing_ = false;
  bool move_to_front_ = true;
  Arena arena_;
  RootTable roots_;
  PathTrace trace_;
  uint64_t paths_ = 0, enters_ = 0, lost_ = 0, nodes_ = 0;
  uint64_t scans_ = 0, lookups_ = 0;
};

}  // namespace hcct::rt

#endif
