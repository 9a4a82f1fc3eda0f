#include "kpath_forest.h"

#include <sys/mman.h>

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

KsfNode g_path_end = {kEndPath, 0, {&g_path_end, &g_path_end}, &g_path_end, {&g_path_end}, {nullptr}, 0, 0};

HCCT_NOINST bool PathProfiler::init(uint32_t k, bool trace, uint64_t token, KsfNode **root_cache, Forest forest) {
  k_ = k < 1 ? 1 : k;
  forest_ = forest;
  root_cache_ = root_cache;
  tracing_ = trace;
  token_ = token;
  return roots_.init(1024);
}

HCCT_NOINST void PathProfiler::destroy() {
  arena_.release();
  release_huge_nodes();
  roots_.release();
  trace_.release();
}

HCCT_NOINST uint64_t PathProfiler::paths() const {
  uint64_t sum = 0;
  for (size_t i = 0; i < roots_.capacity(); ++i) {
    const RootTable::Slot &s = roots_.slots()[i];
    if (s.value == 0) continue;
    // Depth first; each level holds at most one pending sibling, and trees are at most 2k − 2
    // levels deep (k-SF; kWF: k).
    const KsfNode *stack[2 * 256 + 4];
    size_t depth = 0;
    const auto *root = reinterpret_cast<const KsfNode *>(s.value);
    sum += root->count;
    if (root->first_child != kEnd) stack[depth++] = root->first_child;  // a root's sibling field is its function
    while (depth) {
      const KsfNode *n = stack[--depth];
      sum += n->count;
      if (n->next_sibling != kEnd) stack[depth++] = n->next_sibling;
      if (n->first_child != kEnd) stack[depth++] = n->first_child;
    }
  }
  return sum;
}

// Nodes: the first kHugeAfter bytes from the arena (a thread that runs a few loops costs a few
// pages), then from 2 MiB chunks aligned to 2 MiB and advised as transparent huge pages. Every
// item follows a pointer to a different node, so a large forest costs a TLB miss per item on 4 KiB
// pages (docs/BENCHMARKS.md, "kpath": huge pages).
HCCT_NOINST void *PathProfiler::allocate_huge_node() {
  if (HCCT_UNLIKELY(huge_cursor_ == huge_end_)) {
    if (!charge_tree_memory(kHugeChunk)) return nullptr;
    char *raw = static_cast<char *>(map_pages(2 * kHugeChunk));
    if (!raw) {
      refund_tree_memory(kHugeChunk);
      return nullptr;
    }
    char *chunk = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(raw) + kHugeChunk - 1) & ~(kHugeChunk - 1));
    if (chunk > raw) unmap_pages(raw, size_t(chunk - raw));
    if (raw + 2 * kHugeChunk > chunk + kHugeChunk) unmap_pages(chunk + kHugeChunk, size_t(raw + 2 * kHugeChunk - (chunk + kHugeChunk)));
    (void)madvise(chunk, kHugeChunk, MADV_HUGEPAGE);  // advice only: 4 KiB pages still work
    *reinterpret_cast<char **>(chunk) = huge_chunks_;  // the first line links the chunks
    huge_chunks_ = chunk;
    huge_bytes_ += kHugeChunk;
    huge_cursor_ = chunk + sizeof(KsfNode);
    huge_end_ = chunk + kHugeChunk;
  }
  void *p = huge_cursor_;
  huge_cursor_ += sizeof(KsfNode);
  return p;
}

HCCT_NOINST void PathProfiler::release_huge_nodes() {
  for (char *c = huge_chunks_; c;) {
    char *next = *reinterpret_cast<char **>(c);
    unmap_pages(c, kHugeChunk);
    refund_tree_memory(kHugeChunk);
    c = next;
  }
  huge_chunks_ = huge_cursor_ = huge_end_ = nullptr;
  huge_bytes_ = 0;
}

HCCT_NOINST KsfNode *PathProfiler::new_node(uint64_t id) {
  void *p = nullptr;
  if (arena_.bytes_mapped() >= kHugeAfter) {
    p = allocate_huge_node();
  } else {
    // Cache-line aligned where possible: the arena hands out 16-byte aligned pieces, so the first
    // node of a chunk is dropped and the cursor padded (a few bytes per chunk).
    for (int tries = 0; tries < 4; ++tries) {
      p = arena_.allocate(sizeof(KsfNode));
      if (!p || !(reinterpret_cast<uintptr_t>(p) & 63)) break;
      if (!arena_.allocate(64 - (reinterpret_cast<uintptr_t>(p) & 63))) return nullptr;
    }
  }
  auto *n = static_cast<KsfNode *>(p);
  if (!n) return nullptr;
  *n = KsfNode{id, 0, {kEnd, kEnd}, kEnd, {kEnd}, {nullptr}, 0, 0};
  ++nodes_;
  return n;
}

HCCT_NOINST KsfNode *PathProfiler::new_root(uint64_t *slot, uint64_t function, uint64_t id) {
  KsfNode *n = new_node(id);
  if (!n) return nullptr;  // a slot left at 0 stays free for the next attempt
  n->root_function = function;
  *slot = reinterpret_cast<uint64_t>(n);
  return n;
}

// The next window after `window` for item `id`: a child of succ(window), created if new.
HCCT_NOINST KsfNode *PathProfiler::child(KsfNode *window, uint64_t function, uint64_t id) {
  ++lookups_;
  KsfNode *parent = window->depth + 1 < k_ ? window : window->link;
  return step_to_child(parent, id, [&] { return make_child(parent, function, id, /*scanned=*/true); });
}

// The scan both forests share: the child `id` of `parent`, else the one `make` creates (in front);
// (path() then makes it one of the window's guesses). Lists keep insertion order: a scan happens
// only when both guesses are wrong, and a guess then holds the child found.
template <typename Make>
HCCT_NOINST KsfNode *PathProfiler::step_to_child(KsfNode *parent, uint64_t id, Make make) {
  KsfNode *found = nullptr;
  for (KsfNode *n = parent->first_child; n != kEnd; n = n->next_sibling) {
    ++scans_;
    if (n->path == id) {
      found = n;
      break;
    }
  }
  if (!found) found = make();
  return found;
}

// Two hot next windows that chose one slot then both stay inline: the fast path tries their slot
// first and the other second.
HCCT_NOINST void PathProfiler::set_guess(KsfNode *window, KsfNode *found, unsigned slot) {
  found->slot = slot;
  KsfNode *&home = window->guess[slot], *&spare = window->guess[slot ^ 1];
  if (home == found) return;
  if (home != kEnd && home->slot == slot && (spare == kEnd || spare->slot == slot)) spare = home;
  home = found;
}

// Finds or creates the child `id` of `parent` (null = the roots; `scanned`: the caller just looked
// for it in the list). A new node gets its link first (the child `id` of link(parent), found or
// created the same way), so every node's link exists.
HCCT_NOINST KsfNode *PathProfiler::make_child(KsfNode *parent, uint64_t function, uint64_t id, bool scanned) {
  if (!parent) return root(function, id);
  if (!scanned)
    for (KsfNode *n = parent->first_child; n != kEnd; n = n->next_sibling)
      if (n->path == id) return n;
  KsfNode *link = make_child(parent->link, function, id);
  if (!link) return nullptr;
  KsfNode *n = new_node(id);
  if (!n) return nullptr;
  n->link = link;
  n->depth = parent->depth + 1;
  n->next_sibling = parent->first_child;
  compiler_fence();  // complete before anything can reach it
  parent->first_child = n;
  return n;
}

// ---- k-SF (thesis Algorithm 4)

// One item r after window w (the node the previous item was counted in: β, or τ in the first
// chunk). Inside a chunk β and τ both step to their child r (lines 13–18 and 21–26); the new β's τ
// is its `top`, set when it was created. At the end of a chunk (w at depth 2k − 3, or at k − 2 in
// the first chunk, where β is null and w = τ) β moves to τ (line 7) and steps to its child r; τ
// becomes the root r (line 8), which is the new β's `top`. So the next window is always the child r
// of succ(w) = (depth(w) == 2k − 3 ? top(w) : w), and line 27 (or 29) counts it.
HCCT_NOINST KsfNode *PathProfiler::slab_child(KsfNode *window, uint64_t function, uint64_t id) {
  ++lookups_;
  KsfNode *parent = window->depth == 2 * k_ - 3 ? window->top : window;
  return step_to_child(parent, id, [&] { return make_slab_child(parent, function, id, /*scanned=*/true); });
}

// Finds or creates the child `id` of `parent` (`scanned` as for make_child). A new node of the
// lower slab gets its τ first: the root `id` at depth k − 1 (Algorithm 4, lines 8–11), else the
// child `id` of top(parent) (lines 13–17), found or created the same way.
HCCT_NOINST KsfNode *PathProfiler::make_slab_child(KsfNode *parent, uint64_t function, uint64_t id, bool scanned) {
  if (!scanned)
    for (KsfNode *n = parent->first_child; n != kEnd; n = n->next_sibling)
      if (n->path == id) return n;
  uint64_t depth = parent->depth + 1;
  KsfNode *top = nullptr;
  if (depth == k_ - 1) top = root(function, id);
  else if (depth > k_ - 1) top = make_slab_child(parent->top, function, id);
  if (depth >= k_ - 1 && !top) return nullptr;
  KsfNode *n = new_node(id);
  if (!n) return nullptr;
  n->top = top;
  n->depth = depth;
  n->next_sibling = parent->first_child;
  compiler_fence();  // complete before anything can reach it
  parent->first_child = n;
  return n;
}

// Tree memory ran out: the item is not counted and the activation starts over as after ∗ (without
// a new stream), so every counted n-gram still occurred.
HCCT_NOINST void PathProfiler::lose(PathFrame *frame) {
  ++lost_;
  frame->node = nullptr;
  report_memory_exhausted();
}

}  // namespace hcct::rt
