#include "kpath_forest.h"

namespace hcct::rt {

// ---- RootTable

HCCT_NOINST bool RootTable::init(size_t capacity) {
  size_t bytes = capacity * sizeof(Slot);
  if (!charge_tree_memory(bytes)) return false;
  slots_ = static_cast<Slot *>(map_pages(bytes));
  if (!slots_) {
    refund_tree_memory(bytes);
    return false;
  }
  mask_ = capacity - 1;
  size_ = 0;
  return true;
}

HCCT_NOINST void RootTable::release() {
  if (slots_) {
    unmap_pages(slots_, bytes());
    refund_tree_memory(bytes());
  }
  *this = RootTable{};
}

// Doubles the table; at most half full, so probes stay short.
HCCT_NOINST bool RootTable::grow() {
  RootTable bigger;
  if (!bigger.init(capacity() * 2)) return false;
  for (size_t i = 0; i <= mask_; ++i) {
    const Slot &s = slots_[i];
    if (s.value == 0) continue;
    size_t j = hash(s.function, s.path) & bigger.mask_;
    while (bigger.slots_[j].value != 0) j = (j + 1) & bigger.mask_;
    bigger.slots_[j] = s;
  }
  bigger.size_ = size_;
  release();
  *this = bigger;
  return true;
}

HCCT_NOINST uint64_t *RootTable::insert_slow(uint64_t function, uint64_t path) {
  if ((size_ + 1) * 2 > capacity() && !grow()) return nullptr;
  size_t i = hash(function, path) & mask_;
  while (slots_[i].value != 0) i = (i + 1) & mask_;
  slots_[i].function = function;
  slots_[i].path = path;
  ++size_;
  return &slots_[i].value;
}

// ---- PathTrace

HCCT_NOINST bool PathTrace::new_chunk() {
  if (!charge_tree_memory(kChunkBytes)) return false;
  auto *c = static_cast<Chunk *>(map_pages(kChunkBytes));
  if (!c) {
    refund_tree_memory(kChunkBytes);
    return false;
  }
  c->next = nullptr;
  c->used = 0;
  if (chunk_) chunk_->next = c;
  else first_ = c;
  chunk_ = c;
  return true;
}

HCCT_NOINST void PathTrace::release() {
  for (Chunk *c = first_; c;) {
    Chunk *next = c->next;
    unmap_pages(c, kChunkBytes);
    refund_tree_memory(kChunkBytes);
    c = next;
  }
  *this = PathTrace{};
}

// ---- PathProfiler

HCCT_NOINST bool PathProfiler::init(uint32_t k, bool trace, bool move_to_front) {
  k_ = k < 1 ? 1 : k;
  tracing_ = trace;
  move_to_front_ = move_to_front;
  return roots_.init(1024);
}

HCCT_NOINST void PathProfiler::destroy() {
  arena_.release();
  roots_.release();
  trace_.release();
}

HCCT_NOINST KsfNode *PathProfiler::new_node(uint64_t id) {
  auto *n = static_cast<KsfNode *>(arena_.allocate(sizeof(KsfNode)));
  if (!n) return nullptr;
  *n = KsfNode{id, 0, nullptr, nullptr};
  ++nodes_;
  return n;
}

HCCT_NOINST KsfNode *PathProfiler::new_root(uint64_t *slot, uint64_t id) {
  KsfNode *n = new_node(id);
  // A slot left at 0 stays free for the next attempt (the key is overwritten then).
  if (n) *slot = reinterpret_cast<uint64_t>(n);
  return n;
}

// Scans the siblings; a found child moves to the front so that the next lookup of the same ID
// (the common case in loops) is the inline first-child test. New children go in front too.
HCCT_NOINST KsfNode *PathProfiler::child_slow(KsfNode *parent, uint64_t id) {
  ++lookups_;
  KsfNode *prev = parent->first_child;
  if (prev) {
    for (KsfNode *n = prev->next_sibling; n; prev = n, n = n->next_sibling) {
      ++scans_;
      if (n->path != id) continue;
      if (move_to_front_) {
        prev->next_sibling = n->next_sibling;
        n->next_sibling = parent->first_child;
        parent->first_child = n;
      }
      return n;
    }
  }
  KsfNode *n = new_node(id);
  if (!n) return nullptr;
  n->next_sibling = parent->first_child;
  parent->first_child = n;
  return n;
}

// Tree memory ran out: the item is not counted and the activation starts over as after ∗, so
// every counted n-gram is still one that occurred.
HCCT_NOINST void PathProfiler::lose(PathFrame *frame) {
  ++lost_;
  frame->top = frame->bottom = nullptr;
  frame->left = 0;
  report_memory_exhausted();
}

}  // namespace hcct::rt
