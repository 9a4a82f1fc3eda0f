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

KsfNode g_path_end = {kEndPath, 0, {&g_path_end, &g_path_end}, &g_path_end, {&g_path_end}, {nullptr}, 0, 0, 0, 0, 0};

namespace {
// Live-node budgets of every bounded profiler, in nodes: a thread's first budget is always granted
// (the guarantee needs it); growth only within the process's share (grow_budget).
uint64_t g_bounded_budget_total = 0;
}  // namespace

HCCT_NOINST uint64_t bounded_budget_total() { return __atomic_load_n(&g_bounded_budget_total, __ATOMIC_RELAXED); }

HCCT_NOINST bool PathProfiler::init(uint32_t k, bool trace, uint64_t token, KsfNode **root_cache, Forest forest,
                                    double epsilon, uint64_t *live_token, uint32_t grow) {
  k_ = k < 1 ? 1 : k;
  forest_ = forest;
  root_cache_ = root_cache;
  tracing_ = trace;
  token_ = token;
  live_token_ = live_token;
  bool boundable = k_ > 1 && forest == Forest::kWindow && epsilon > 0;
  epsilon_ = boundable ? epsilon : 0;
  budget_ = floor_budget_ = boundable ? budget_for(k_, epsilon) : 0;
  grow_ = grow < 1 ? 1 : grow;
  if (budget_) __atomic_add_fetch(&g_bounded_budget_total, budget_, __ATOMIC_RELAXED);
  return roots_.init(1024);
}

HCCT_NOINST uint64_t PathProfiler::budget_for(uint32_t k, double epsilon) {
  double nodes = kBudgetPerK * double(k) / epsilon;
  // At least room for a few full chains, so a sweep always has something to choose from.
  double floor = 4.0 * double(k) * double(k) + 64;
  return uint64_t(nodes < floor ? floor : nodes > 1e15 ? 1e15 : nodes);
}

// On node creation only, when a sweep is due: one atomic add (and a subtraction when refused).
HCCT_NOINST bool PathProfiler::grow_budget() {
  if (grow_ <= 1) return false;
  // (The sum includes this thread's budget, so it also keeps a single thread within grow_ floors.)
  uint64_t limit = uint64_t(grow_) * floor_budget_;
  if (__atomic_add_fetch(&g_bounded_budget_total, floor_budget_, __ATOMIC_RELAXED) > limit) {
    __atomic_sub_fetch(&g_bounded_budget_total, floor_budget_, __ATOMIC_RELAXED);
    return false;
  }
  budget_ += floor_budget_;
  return true;
}

HCCT_NOINST void PathProfiler::destroy() {
  if (budget_) __atomic_sub_fetch(&g_bounded_budget_total, budget_, __ATOMIC_RELAXED);
  budget_ = floor_budget_ = 0;
  release_scratch();
  release_recycled();
  arena_.release();
  arena_run_count_ = 0;
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

// A node that was never used: from the arena's first MiB, then from huge chunks.
HCCT_NOINST KsfNode *PathProfiler::fresh_node() {
  void *p = nullptr;
  if (arena_.bytes_mapped() >= kHugeAfter || arena_run_count_ == kMaxArenaRuns) {
    p = allocate_huge_node();
  } else {
    // Cache-line aligned where possible: the arena hands out 16-byte aligned pieces, so the first
    // node of a chunk is dropped and the cursor padded (a few bytes per chunk).
    for (int tries = 0; tries < 4; ++tries) {
      p = arena_.allocate(sizeof(KsfNode));
      if (!p || !(reinterpret_cast<uintptr_t>(p) & 63)) break;
      if (!arena_.allocate(64 - (reinterpret_cast<uintptr_t>(p) & 63))) return nullptr;
    }
    if (p) {  // recorded for the sweeps' walk in address order
      auto *node = static_cast<KsfNode *>(p);
      if (arena_run_count_ && arena_runs_[arena_run_count_ - 1].end == node) ++arena_runs_[arena_run_count_ - 1].end;
      else arena_runs_[arena_run_count_++] = {node, node + 1};
    }
  }
  return static_cast<KsfNode *>(p);
}

// Inline in its callers: under a bounded kWF's churn nearly every node is a recycled one, made in
// chains (make_child), and a call per node cost as much as the rest of its making (tcc at k = 16).
[[gnu::always_inline]] HCCT_NOINST inline KsfNode *PathProfiler::new_node(uint64_t id) {
  KsfNode *n;
  if (recycle_next_ < free_end_) {  // bounded kWF: a node a sweep evicted (its count was zeroed then)
    constexpr size_t kAhead = 8;    // creations come in bursts: a window's chain of links
    n = recycled_[recycle_next_++];
    if (recycle_next_ + kAhead < free_end_) __builtin_prefetch(recycled_[recycle_next_ + kAhead], 1);
    lost_ += n->count;
  } else if (HCCT_UNLIKELY(!(n = fresh_node()))) {
    return nullptr;
  }
  *n = KsfNode{id, 0, {kEnd, kEnd}, kEnd, {kEnd}, {nullptr}, 0, 0, 0, 0, epoch_};
  if (++nodes_ > nodes_peak_) nodes_peak_ = nodes_;
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
  KsfNode *parent = uint32_t(window->depth) + 1 < k_ ? window : window->link;
  return step_to_child(parent, id, [&] {
    // Bounded: room for the new node and its chain of links (at most k nodes) first. The window
    // stays, and with it `parent` (itself or its link) and the chain's nodes (its suffixes).
    if (budget_ && non_roots_ + k_ > budget_ && !grow_budget()) sweep(window);
    return make_child(parent, function, id, /*scanned=*/true);
  });
}

// The child `id` of `parent`, or null; `scans` counts the siblings read. A child found behind
// others moves to the front of the list: a scan happens only when both of a window's guesses are
// wrong, and on a stream whose windows have many next items (a lexer's, a compiler's: tcc at k = 8
// scanned 5.2 siblings per lookup in insertion order) the ones that come back are then found
// first (docs/BENCHMARKS.md, "Seventh pass"). Only the runtime reads the lists (the inline fast
// path reads guesses), and it is never re-entered, so the order may change at any time.
HCCT_NOINST static KsfNode *find_child(KsfNode *parent, uint64_t id, uint64_t &scans) {
  KsfNode **at = &parent->first_child;
  for (KsfNode *n = *at; n != kEnd; at = &n->next_sibling, n = *at) {
    ++scans;
    if (n->path != id) continue;
    if (at != &parent->first_child) {
      *at = n->next_sibling;
      n->next_sibling = parent->first_child;
      parent->first_child = n;
    }
    return n;
  }
  return nullptr;
}

// The scan both forests share: the child `id` of `parent`, else the one `make` creates (in front);
// (path() then makes it one of the window's guesses).
template <typename Make>
HCCT_NOINST KsfNode *PathProfiler::step_to_child(KsfNode *parent, uint64_t id, Make make) {
  KsfNode *found = find_child(parent, id, scans_);
  if (!found) found = make();
  return found;
}

// Two hot next windows that chose one slot then both stay inline: the fast path tries their slot
// first and the other second. A window with more next windows than guesses (a lexer's state after
// a delimiter, a compiler's symbol-chain walk) keeps the two that counted most: a rare one no
// longer displaces a hot one at every lookup, which then missed in turn (tcc at k = 8: 14.8 M of
// its 16.1 M runtime calls were such lookups; docs/BENCHMARKS.md, "Session 14"). Counts only grow,
// so a child that is hot now but was rare before would never get in by count alone: after
// kGuessRefusals lookups that displaced nothing, the next one displaces the weaker guess anyway.
// Guesses never change what is counted, only which items the fast path takes.
HCCT_NOINST void PathProfiler::set_guess(KsfNode *window, KsfNode *found, unsigned slot) {
  found->slot = slot;
  KsfNode *&home = window->guess[slot], *&spare = window->guess[slot ^ 1];
  if (home == found) return;
  if (home != kEnd && spare != kEnd && spare != found) {
    KsfNode *&weaker = home->count <= spare->count ? home : spare;
    if (found->count < weaker->count && window->refusals < kGuessRefusals) {
      ++window->refusals;
      return;
    }
    window->refusals = 0;
    weaker = found;
    return;
  }
  if (home != kEnd && home->slot == slot && (spare == kEnd || spare->slot == slot)) spare = home;
  home = found;
}

// Finds or creates the child `id` of `parent` (null = the roots; `scanned`: the caller just looked
// for it in the list). A new node gets its link first (the child `id` of link(parent), found or
// created the same way), so every node's link exists. One loop rather than a recursion: the
// parents down the link chain that lack the child, then their new children shortest first, each
// linking to the one before (a window re-created after a sweep brings ~5 of its suffixes back
// with it: tcc at k = 16, docs/BENCHMARKS.md, "Seventh pass"). The same nodes in the same order.
HCCT_NOINST KsfNode *PathProfiler::make_child(KsfNode *parent, uint64_t function, uint64_t id, bool scanned) {
  KsfNode *lacking[kMaxDepthLevels + 1];  // depth falls by one per link: at most k of them
  size_t count = 0;
  uint64_t link_scans = 0;
  KsfNode *found = nullptr;
  for (KsfNode *p = parent;; p = p->link) {
    if (!p) {
      found = root(function, id);
      break;
    }
    if ((count > 0 || !scanned) && (found = find_child(p, id, link_scans))) break;
    lacking[count++] = p;
  }
  while (found && count > 0) {
    KsfNode *p = lacking[--count];
    KsfNode *n = new_node(id);
    if (!n) return nullptr;
    n->link = found;
    n->depth = uint16_t(p->depth + 1);
    n->next_sibling = p->first_child;
    compiler_fence();  // complete before anything can reach it
    p->first_child = n;
    ++non_roots_;
    found = n;
  }
  return found;
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
  KsfNode *parent = uint32_t(window->depth) == 2 * k_ - 3 ? window->top : window;
  return step_to_child(parent, id, [&] { return make_slab_child(parent, function, id, /*scanned=*/true); });
}

// Finds or creates the child `id` of `parent` (`scanned` as for make_child). A new node of the
// lower slab gets its τ first: the root `id` at depth k − 1 (Algorithm 4, lines 8–11), else the
// child `id` of top(parent) (lines 13–17), found or created the same way.
HCCT_NOINST KsfNode *PathProfiler::make_slab_child(KsfNode *parent, uint64_t function, uint64_t id, bool scanned) {
  uint64_t link_scans = 0;
  if (!scanned)
    if (KsfNode *n = find_child(parent, id, link_scans)) return n;
  uint64_t depth = parent->depth + 1;
  KsfNode *top = nullptr;
  if (depth == k_ - 1) top = root(function, id);
  else if (depth > k_ - 1) top = make_slab_child(parent->top, function, id);
  if (depth >= k_ - 1 && !top) return nullptr;
  KsfNode *n = new_node(id);
  if (!n) return nullptr;
  n->top = top;
  n->depth = uint16_t(depth);
  n->next_sibling = parent->first_child;
  compiler_fence();  // complete before anything can reach it
  parent->first_child = n;
  return n;
}

// ---- Bounded kWF (docs/KPATH.md, "Bounded forests")

namespace {

constexpr uint8_t kMarkVictim = 1;
constexpr uint32_t kMaxEpoch = (uint32_t(1) << 31) - 2;  // the token holds 2 · epoch below 2^32

// During a sweep a node's two guess words hold its total T (the items counted at it and at every
// node whose sequence ends with its own: the k-IPF count of its sequence) and its references
// (children in the low half, nodes whose link it is in the high half); kEnd again at the end.
HCCT_NOINST inline uint64_t word(KsfNode *const &p) {
  uint64_t v;
  __builtin_memcpy(&v, &p, sizeof v);
  return v;
}
HCCT_NOINST inline void set_word(KsfNode *&p, uint64_t v) { __builtin_memcpy(&p, &v, sizeof v); }
HCCT_NOINST inline uint64_t total(const KsfNode *n) { return word(n->guess[0]); }
HCCT_NOINST inline void add_total(KsfNode *n, uint64_t v) { set_word(n->guess[0], word(n->guess[0]) + v); }
HCCT_NOINST inline void add_refs(KsfNode *n, int64_t v) { set_word(n->guess[1], word(n->guess[1]) + uint64_t(v)); }
constexpr int64_t kChildRef = 1, kLinkRef = int64_t(1) << 32;

// The value of rank `rank` (0-based) of v[0..n), which it reorders (Hoare's selection).
HCCT_NOINST uint64_t select_rank(uint64_t *v, size_t n, size_t rank) {
  ptrdiff_t lo = 0, hi = ptrdiff_t(n) - 1, r = ptrdiff_t(rank);
  while (lo < hi) {
    uint64_t pivot = v[lo + (hi - lo) / 2];
    ptrdiff_t i = lo, j = hi;
    while (i <= j) {
      while (v[i] < pivot) ++i;
      while (v[j] > pivot) --j;
      if (i <= j) {
        uint64_t t = v[i];
        v[i++] = v[j];
        v[j--] = t;
      }
    }
    if (r <= j) hi = j;
    else if (r >= i) lo = i;
    else return v[r];
  }
  return v[r];
}

// The values of ranks `low` <= `high` of v[0..n) (0-based, ascending), as select_rank gives them.
// Most totals a sweep sees are small (cold windows ran a few times), so one pass of a histogram of
// the values below kExact finds both ranks when they are small, with a quickselect only for a rank
// beyond it: zstd at k = 16 spent 6 % of its instructions in two quickselects per sweep.
HCCT_NOINST void ranks_of(uint64_t *v, size_t n, size_t low, size_t high, uint64_t *at_low, uint64_t *at_high) {
  constexpr uint64_t kExact = 512;
  uint32_t histogram[kExact + 1] = {};
  for (size_t i = 0; i < n; ++i) ++histogram[v[i] < kExact ? v[i] : kExact];
  bool low_found = false, high_found = false;
  size_t below = 0;  // values < t
  for (uint64_t t = 0; t < kExact && !high_found; ++t) {
    below += histogram[t];  // now: values <= t
    if (!low_found && below > low) *at_low = t, low_found = true;
    if (below > high) *at_high = t, high_found = true;
  }
  if (!low_found) *at_low = select_rank(v, n, low);
  if (!high_found) *at_high = select_rank(v, n, high);
}

}  // namespace

HCCT_NOINST bool PathProfiler::reserve_scratch(size_t entries) {
  if (entries <= scratch_capacity_) return true;
  size_t capacity = entries + 2 * size_t(k_) + 64;
  size_t bytes = kScratchWordsPerEntry * capacity * sizeof(uint64_t);
  if (!charge_tree_memory(bytes)) return false;
  void *p = map_pages(bytes);
  if (!p) {
    refund_tree_memory(bytes);
    return false;
  }
  release_scratch();
  scratch_ = static_cast<uint64_t *>(p);
  scratch_capacity_ = capacity;
  ++scratch_maps_;
  return true;
}

HCCT_NOINST void PathProfiler::release_scratch() {
  if (!scratch_) return;
  size_t bytes = kScratchWordsPerEntry * scratch_capacity_ * sizeof(uint64_t);
  unmap_pages(scratch_, bytes);
  refund_tree_memory(bytes);
  scratch_ = nullptr;
  scratch_capacity_ = 0;
}

HCCT_NOINST bool PathProfiler::reserve_recycled(size_t victims) {
  if (recycle_next_) {
    __builtin_memmove(recycled_, recycled_ + recycle_next_, (recycled_end_ - recycle_next_) * sizeof(KsfNode *));
    free_end_ -= recycle_next_;
    recycled_end_ -= recycle_next_;
    recycle_next_ = 0;
  }
  if (recycled_end_ + victims <= recycled_capacity_) return true;
  size_t capacity = recycled_end_ + victims;
  if (capacity < 2 * recycled_capacity_) capacity = 2 * recycled_capacity_;
  size_t bytes = capacity * sizeof(KsfNode *);
  if (!charge_tree_memory(bytes)) return false;
  auto *bigger = static_cast<KsfNode **>(map_pages(bytes));
  if (!bigger) {
    refund_tree_memory(bytes);
    return false;
  }
  if (recycled_) __builtin_memcpy(bigger, recycled_, recycled_end_ * sizeof(KsfNode *));
  size_t end = recycled_end_, free_end = free_end_;
  release_recycled();
  recycled_ = bigger;
  recycled_capacity_ = capacity;
  recycled_end_ = end;
  free_end_ = free_end;
  return true;
}

HCCT_NOINST void PathProfiler::release_recycled() {
  if (recycled_) {
    unmap_pages(recycled_, recycled_capacity_ * sizeof(KsfNode *));
    refund_tree_memory(recycled_capacity_ * sizeof(KsfNode *));
  }
  recycled_ = nullptr;
  recycle_next_ = free_end_ = recycled_end_ = recycled_capacity_ = 0;
}

template <typename Visit>
HCCT_NOINST void PathProfiler::for_each_allocated_node(Visit visit) {
  for (size_t r = 0; r < arena_run_count_; ++r)
    for (KsfNode *u = arena_runs_[r].begin; u != arena_runs_[r].end; ++u) visit(u);
  for (char *c = huge_chunks_; c; c = *reinterpret_cast<char **>(c)) {
    // The first line links the chunks; the newest chunk (the list's head) is used up to the cursor.
    auto *end = reinterpret_cast<KsfNode *>(c == huge_chunks_ ? huge_cursor_ : c + kHugeChunk);
    for (auto *u = reinterpret_cast<KsfNode *>(c) + 1; u < end; ++u) visit(u);
  }
}

namespace {

// A sweep lists a node as one word: its address (below 2^48 in user space) and its depth above.
constexpr unsigned kDepthShift = 48;
HCCT_NOINST inline uint64_t listed_word(const KsfNode *u) {
  return reinterpret_cast<uint64_t>(u) | uint64_t(u->depth) << kDepthShift;
}
HCCT_NOINST inline KsfNode *listed_node(uint64_t w) {
  return reinterpret_cast<KsfNode *>(w & ((uint64_t(1) << kDepthShift) - 1));
}
HCCT_NOINST inline size_t listed_depth(uint64_t w) { return size_t(w >> kDepthShift); }

}  // namespace

// Evicts the non-root nodes whose total T is at most a threshold θ, leaves first, merging each
// one's count into its link (the items keep counting for every shorter suffix, which stays), and
// adds the largest T evicted to delta_. θ: the slack εN − delta_ when that frees at least an
// eighth of the nodes, at most what frees three quarters of them (a sweep visits every node, so
// fewer, larger sweeps cost less: 115 instead of 168 sweeps on Lua); else what frees an eighth (a forced
// sweep: delta_ may then exceed εN, and the profile says by how much). The proof that every count
// is then within delta_ of the truth is in docs/KPATH.md, "Bounded forests". `pinned`, the window
// the caller is stepping from, stays, and with it every node its sequence needs (its prefixes are
// ancestors, its suffixes links of links).
//
// The sweep reads node memory in address order (for_each_allocated_node) and then visits the live
// nodes deepest first, each depth in address order, with the nodes a few steps ahead prefetched:
// the walk of the child lists it replaces took a dependent cache miss per node (Lua at k = 16: 37 %
// of the sweep's time, docs/BENCHMARKS.md). Without parent pointers a node's children are counted
// as they are needed: a node is visited after every deeper node, so when its child list has been
// cleared of the victims, what is left are the children that stay.
HCCT_NOINST void PathProfiler::sweep(KsfNode *pinned) {
  // The scratch holds the budget's nodes (and more if a failed sweep let them outgrow it), so it is
  // mapped once, at the first sweep.
  if (epoch_ >= kMaxEpoch || !reserve_scratch(non_roots_ > budget_ ? non_roots_ : budget_) ||
      !reserve_recycled(non_roots_))
    return;  // (never in practice; max_mb still caps)
  ++epoch_;
  // The previous sweep's victims become reusable now, not then: instrumented code in a signal
  // handler may have run that sweep while it interrupted a fast path between loading a node and
  // counting in it; that fast path has long finished. (An increment it made in a victim after the
  // victim's count went to its link is an item counted nowhere: new_node adds it to `lost`.)
  free_end_ = recycled_end_;
  // From here frames of earlier epochs leave the fast path (their owner is not the token) and the
  // root cache is empty, so instrumented code in a signal handler that interrupts the sweep
  // reaches the runtime, which ignores it while this event runs, instead of a node being moved.
  if (live_token_) *live_token_ = token();
  if (root_cache_)
    for (size_t i = 0; i < kRootCacheSize; ++i) root_cache_[i] = nullptr;
  compiler_fence();

  // 1. Every live node, in address order: its total starts at its count, its references at 0;
  // non-roots are listed, then ordered deepest first (counting sort on depth). Free nodes and
  // the quarantine's carry the victim mark.
  uint64_t *listed = scratch_, *by_depth = scratch_ + scratch_capacity_;
  size_t n = 0;
  uint64_t items = 0;
  size_t at_depth[kMaxDepthLevels + 1] = {};
  for_each_allocated_node([&](KsfNode *u) {
    if (u->mark == kMarkVictim) return;
    set_word(u->guess[0], u->count);
    set_word(u->guess[1], 0);
    items += u->count;
    if (u->depth == 0 || n == scratch_capacity_) return;  // a root (the capacity holds every non-root)
    listed[n++] = listed_word(u);
    ++at_depth[u->depth];
  });
  size_t start = 0;  // deepest first
  for (size_t d = kMaxDepthLevels + 1; d-- > 0;) {
    size_t c = at_depth[d];
    at_depth[d] = start;
    start += c;
  }
  for (size_t i = 0; i < n; ++i) by_depth[at_depth[listed_depth(listed[i])]++] = listed[i];

  // Nodes kAhead steps ahead are fetched, and what they point to kAhead / 2 steps ahead.
  constexpr size_t kAhead = 16;
  auto fetch_ahead = [&](size_t i, auto pointee) {
    if (i + kAhead < n) __builtin_prefetch(listed_node(by_depth[i + kAhead]), 1);
    if (i + kAhead / 2 < n) __builtin_prefetch(pointee(listed_node(by_depth[i + kAhead / 2])), 1);
  };

  // Evicts u (its total `t`): its count goes to its link, its memory into quarantine, in the order
  // of this walk (deepest first, each depth in address order), which node creation follows later.
  uint64_t largest = 0;
  size_t victims = 0;
  auto evict = [&](KsfNode *u, uint64_t t) {
    u->mark = kMarkVictim;
    u->stamp = epoch_;
    u->link->count += u->count;
    u->count = 0;
    if (t > largest) largest = t;
    ++victims;
    recycled_[recycled_end_++] = u;  // (room reserved above)
  };
  // A node's child list without the victims (all deeper than it, so decided before it).
  auto tidy = [](KsfNode *u) {
    KsfNode **next = &u->first_child;
    while (*next != kEnd) {
      if ((*next)->mark == kMarkVictim) *next = (*next)->next_sibling;
      else next = &(*next)->next_sibling;
    }
  };
  // θ: within the slack, at most the total of rank 3/4 (what frees three quarters), at least that
  // of rank 1/8 (else a forced sweep).
  uint64_t allowed = uint64_t(epsilon_ * double(items));
  uint64_t slack = allowed > delta_ ? allowed - delta_ : 0;
  auto threshold = [&](uint64_t at_eighth, uint64_t at_three_quarters) {
    uint64_t theta = slack < at_three_quarters ? slack : at_three_quarters;
    return theta < at_eighth ? at_eighth : theta;
  };
  uint64_t *totals = listed;  // `listed` is done with

  if (predicted_ && slack >= predicted_eighth_) {
    // One pass (the usual case): θ from the ranks of the previous sweep's totals, which change
    // little from sweep to sweep, so every node is read once and its link once (two passes, the
    // first to find the ranks, cost each of them twice: Lua at k = 16, 15 % of the sweep's time).
    // Deepest first, a node's total is final when it is reached (every node that links to it is
    // deeper), and so are its references: the nodes that link to it and stayed.
    uint64_t theta = threshold(predicted_eighth_, predicted_three_quarters_);
    ++one_pass_;
    for (size_t i = 0; i < n; ++i) {
      fetch_ahead(i, [](KsfNode *u) { return u->link; });
      if (i + kAhead / 2 < n) __builtin_prefetch(listed_node(by_depth[i + kAhead / 2])->first_child);
      KsfNode *u = listed_node(by_depth[i]);
      if (u->first_child != kEnd) tidy(u);
      uint64_t t = total(u);
      totals[i] = t;
      bool stays = u == pinned || t > theta || word(u->guess[1]) != 0 || u->first_child != kEnd;
      u->guess[0] = u->guess[1] = kEnd;
      u->refusals = 0;
      add_total(u->link, t);  // (whether u stays or its count moves there, the link's total is the same)
      if (stays) add_refs(u->link, kLinkRef);
      else evict(u, t);
    }
    // The ranks of this sweep's totals (evictions moved counts, not totals) for the next one;
    // if too few went (the totals changed more than usual), the next sweep finds its own first.
    predicted_ = n > 0 && victims >= n / 8;
    if (predicted_) ranks_of(totals, n, n / 8, n - n / 4, &predicted_eighth_, &predicted_three_quarters_);
  } else {
    // 2. Totals and references to links, longer sequences before their links (so a node's total
    // is final when it is reached, and is copied for the selection).
    for (size_t i = 0; i < n; ++i) {
      fetch_ahead(i, [](KsfNode *u) { return u->link; });
      KsfNode *u = listed_node(by_depth[i]);
      totals[i] = total(u);
      add_total(u->link, total(u));
      add_refs(u->link, kLinkRef);
    }
    // 3. The threshold.
    uint64_t theta = 0;
    if (n > 0) {
      ranks_of(totals, n, n / 8, n - n / 4, &predicted_eighth_, &predicted_three_quarters_);
      theta = threshold(predicted_eighth_, predicted_three_quarters_);
    }
    // 4. Evict, leaves first: a node goes if its total is at most θ and nothing refers to it any
    // more — no node links to it (references) and no child stays (its list, cleared of the deeper
    // victims, is empty). Every node's guesses go back to none.
    for (size_t i = 0; i < n; ++i) {
      fetch_ahead(i, [](KsfNode *u) { return u->first_child; });
      KsfNode *u = listed_node(by_depth[i]);
      tidy(u);
      uint64_t t = total(u);
      bool stays = u == pinned || t > theta || word(u->guess[1]) != 0 || u->first_child != kEnd;
      u->guess[0] = u->guess[1] = kEnd;
      u->refusals = 0;
      if (stays) continue;
      add_refs(u->link, -kLinkRef);
      evict(u, t);
    }
    predicted_ = n > 0;  // the next sweep's threshold: this one's ranks
  }
  for (size_t i = 0; i < roots_.capacity(); ++i)
    if (roots_.slots()[i].value) {
      auto *root = reinterpret_cast<KsfNode *>(roots_.slots()[i].value);
      tidy(root);
      root->guess[0] = root->guess[1] = kEnd;
      root->refusals = 0;
    }
  non_roots_ -= victims;
  nodes_ -= victims;
  evicted_ += victims;
  delta_ += largest;
  if (delta_ > allowed) ++forced_;
  // The scratch (a quarter of the live nodes' memory) stays mapped until the thread's profile is
  // written: mapping it for each sweep and unmapping it after cost Lua at k = 16 6 % of its CPU
  // time in page faults and their kernel locks (docs/BENCHMARKS.md, "Sixth pass").
}

// Tree memory ran out: the item is not counted and the activation starts over as after ∗ (without
// a new stream), so every counted n-gram still occurred.
HCCT_NOINST void PathProfiler::lose(PathFrame *frame) {
  ++lost_;
  frame->node = nullptr;
  report_memory_exhausted();
}

}  // namespace hcct::rt
