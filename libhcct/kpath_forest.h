// The path profiler's per-thread data (docs/KPATH.md, "Runtime"): a forest built from the stream
// of Ball-Larus path IDs — the thesis's k-slab forest (k-SF, Algorithm 4) or the k-window forest
// (kWF) — or, for k = 1 (BLPP), one root per (function, path ID) whose count is the counter, reached
// inline from the previous item's root like a forest's child. Deterministic and free of TLS
// and system calls other than mmap, like profile.h, so unit tests drive it directly.
//
// The stream is per activation: the pass gives every activation of an instrumented function a
// PathFrame in its own stack frame, reset inline at its entry (the ∗ marker), so a callee's paths
// never split its caller's n-grams, recursion needs no shadow stack, and an activation left by an
// exception or longjmp simply stops.
//
// Both forests are driven the same way: every item moves the activation's *window* w (the node
// the previous item was counted in) to the child labelled x of succ(w) and counts it there. One
// item = one child step; the inline fast path (docs/RUNTIME-ABI.md; path_fast_step below is its
// C++ twin) does it through the two children of succ(w) that w caches, guess[0] and guess[1]. The
// emitting site picks the slot from the path ID alone (the pass: the parity of the one bits of the
// ID's loop-body part, docs/KPATH.md, "Guesses"), which the program computed long before, so the
// only step on the loop-carried chain is one load from w's line (a compare-and-select would add two
// cycles to every item: docs/BENCHMARKS.md, "kpath"); the other slot is tried second, out of line.
// Lists and guesses end in the shared sentinel kEnd, never null, so the fast path needs no null
// tests. The forests differ only in succ and in what a new node links to, which the fast path
// never sees:
//
// k-SF (thesis Definition 3.7, Algorithm 4). The activation's items are cut into chunks of k − 1;
// the forest holds every prefix of c1·c2 and every prefix of length >= k of ci·ci+1, so a tree has
// an upper slab (depths 0..k−2) and a lower slab (k−1..2k−3). Algorithm 4 keeps two cursors, τ in
// the upper slab (the current chunk from its start) and β in the lower (the previous chunk and the
// current one), and counts each item in β, or in τ during the first chunk. Here the window is that
// counted node, and every lower node stores `top` = the τ that goes with it (a node of the upper
// slab, fixed by the node's own labels), so the pair (τ, β) is one pointer: succ(w) = w inside a
// chunk and top(w) at the end of a chunk (depth 2k−3; at depth k−2, the end of the first chunk,
// w itself). A chunk boundary then needs no hash lookup (Algorithm 4, line 8, looks up a root every
// k − 1 items): the new β's top *is* that root, found once when β was created. Creating a lower
// node creates its τ too (Algorithm 4's lines 13–17), so the node set is exactly F(L).
//
// kWF. Every item is counted once, in the node whose root path is the last min(k, j) items of the
// activation (j = items so far); succ(w) = w while |w| < k, else link(w), the node for w minus its
// first item (a suffix link, set when w is created). At most one node per distinct n-gram (n <= k)
// of the stream, where the k-SF keeps distinct chunk-aligned windows of up to 2k − 2 items: on
// high-entropy streams far fewer nodes (docs/BENCHMARKS.md, "kpath").
//
// For both, joining below every node to depth K (thesis Algorithms 5-6, analysis/src/
// kpath_ipf.cc) gives the exact K-IPF for every K <= k: each item's count reaches every n-gram
// (n <= K) that ends at it, exactly once.
#ifndef HCCT_RT_KPATH_FOREST_H
#define HCCT_RT_KPATH_FOREST_H

#include "arena.h"
#include "hcct/format.h"
#include "hcct/kpath_abi.h"

namespace hcct::rt {

// A forest node (both forests), 64 bytes, one cache line (allocated line-aligned). The function is
// implied by the tree (an activation only emits its own function's IDs); roots keep it in
// `root_function`. The inline fast path reads `guess[slot]` and the picked node's `path`, and
// increments its `count`; for an activation's first item it also reads a root's `root_function`:
// these offsets are ABI (kpath/src/PathInstrumenter.cpp emits the same loads).
struct KsfNode {
  uint64_t path;  // kEndPath in the sentinel only
  uint64_t count;
  // Children of succ(this), or kEnd: two that the runtime looked up from this window, each in its
  // site's slot where it can be; once both are taken, the two that counted most, mostly
  // (PathProfiler::set_guess).
  KsfNode *guess[2];
  KsfNode *first_child;  // kEnd if none
  union {
    KsfNode *next_sibling;   // kEnd after the last
    uint64_t root_function;  // a root (in no list): its function ID, for the root cache
  };
  union {
    KsfNode *link;  // kWF: the node for this window minus its first item; null for a root
    KsfNode *top;   // k-SF: the upper node τ that goes with a lower-slab node; null in the upper slab
  };
  uint16_t depth;  // the root is 0 (k <= 256)
  uint8_t slot : 1;  // the guess slot of this node's label (its site's choice), once it was a guess
  // As a window: children found since its guesses last changed that were too rare to displace one
  // (PathProfiler::set_guess).
  uint8_t refusals : 7;
  uint8_t mark;    // bounded kWF: kMarkVictim from its eviction until its reuse (free or in quarantine), else 0
  // Bounded kWF: the epoch (sweeps so far) in which this node was last created or evicted. A frame
  // whose owner says epoch e may keep its window n after later sweeps iff stamp(n) <= e: n was
  // neither evicted nor recycled since the frame last used it (PathProfiler::resumes).
  uint32_t stamp;
};
namespace abi = kpath_abi;
static_assert(sizeof(KsfNode) == abi::kNodeWords * 8, "the pass emits these offsets");
static_assert(offsetof(KsfNode, path) == abi::kPathWord * 8);
static_assert(offsetof(KsfNode, count) == abi::kCountWord * 8);
static_assert(offsetof(KsfNode, guess) == abi::kGuessWord * 8);
static_assert(offsetof(KsfNode, root_function) == abi::kRootFunctionWord * 8);

// The end of every child list and the guess "none": matches no path ID (IDs are below 2^62), its
// own next sibling and guesses, never written.
inline constexpr uint64_t kEndPath = ~uint64_t(0);
extern KsfNode g_path_end;
#define kEnd (&::hcct::rt::g_path_end)

// struct hcct_path_frame of the ABI: one activation's window, as handed to the runtime. The
// instrumented code keeps both words in registers and stores them only around a slow call.
// The per-thread root cache (__hcct_path_roots_v4 in the ABI): a direct-mapped table of roots, so that
// an activation's first item needs no call either. A root r sits at root_slot(F, r->path); an
// entry is used only if both its path and root_function match.
using abi::kRootCacheSize;
using abi::root_slot;

struct PathFrame {
  KsfNode *node;   // the current window; null at the activation's start and after a restart
  uint64_t owner;  // 0 at the activation's start; else the owner value of the profiler that set `node`
};
static_assert(sizeof(PathFrame) == abi::kFrameWords * 8, "the pass allocates these words");
static_assert(offsetof(PathFrame, node) == abi::kFrameNodeWord * 8);
static_assert(offsetof(PathFrame, owner) == abi::kFrameOwnerWord * 8);

// The inline fast path as the pass emits it (C++ twin, for tests and documentation). An
// activation's first item: the root cache entry for (function, id), if it is that root, gets the
// count and becomes the window (owner = token). Later items: the window's guess in `slot` (the
// site's choice for `id`), or else its other guess, if its label is `id`, gets the count and becomes the window. No
// reordering, no allocation; the first check is the well-predicted branch, the second is out of
// line. False if the runtime must be called: no fast path (`fast` false, the pass's
// -kpath-fast-path=0), another owner, no such root cached, or neither guess is `id`. `token` and
// `roots` are the calling thread's __hcct_path_token and __hcct_path_roots_v4.
HCCT_NOINST inline bool path_fast_step(PathFrame *frame, uint64_t token, KsfNode *const *roots, uint64_t function,
                                       uint64_t id, unsigned slot, bool fast = true, bool blpp = false) {
  if (!fast) return false;
  KsfNode *w = frame->node;
  KsfNode *pick;
  auto cached_root = [&]() -> KsfNode * {
    KsfNode *root = roots[root_slot(function, id)];
    return root && root->path == id && root->root_function == function ? root : nullptr;
  };
  if (!w) {
    if (!(pick = cached_root())) return false;
    frame->owner = token;
  } else {
    if (frame->owner != token) return false;
    pick = w->guess[slot];
    if (pick->path != id) pick = w->guess[slot ^ 1];
    // BLPP (`blpp`: the thread's __hcct_path_blpp): every item is a root, so on a miss of both
    // guesses the root cache may still have it.
    if (pick->path != id) {
      if (!blpp || !(pick = cached_root())) return false;
      w->guess[slot] = pick;  // learnt inline, so that a repeated transition takes the first guess
    }
  }
  ++pick->count;
  frame->node = pick;
  return true;
}

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

// The bounded forests' budgets, summed over the process (PathProfiler::grow_budget). Every
// profiler's destroy() gives its budget back, also those of a parent's other threads that a forked
// child frees (runtime.cc, on_fork_child).
uint64_t bounded_budget_total();

class PathProfiler {
 public:
  // The structure for k >= 2.
  using Forest = format::PathForest;  // kSlab or kWindow
  // k = 1: BLPP counters; k >= 2: the k-SF or the kWF (`forest`). `token` (even, nonzero) is what
  // frames owned by this profiler carry while the inline fast path may use them.
  // `root_cache` (kRootCacheSize entries, or null): the thread's root cache, filled here.
  // `epsilon` > 0 bounds a kWF (docs/KPATH.md, "Bounded forests"): at most budget_for(k, epsilon)
  // non-root nodes (plus k while one item's chain is made), every n-gram count at most
  // error_bound() below the truth; 0 keeps every node (exact). Ignored for k = 1 and the k-SF.
  // `live_token`: the thread's __hcct_path_token, which a sweep moves to the new epoch's token
  // (null in tests: they pass token() to the fast path themselves). Tokens of different profilers
  // must differ by at least 2^32 (an epoch lives in the low 32 bits).
  // `grow` (bounded kWF): the budget may grow, budget_for(k, ε) nodes at a time, while the budgets
  // of every bounded profiler of the process together stay within grow · budget_for(k, ε)
  // (docs/KPATH.md, "Growing budgets"); 1 keeps the budget fixed.
  bool init(uint32_t k, bool trace, uint64_t token = 2, KsfNode **root_cache = nullptr,
            Forest forest = Forest::kWindow, double epsilon = 0, uint64_t *live_token = nullptr, uint32_t grow = 1);
  void destroy();
  // The non-root node budget of a bounded kWF: kBudgetPerK · k / ε (docs/KPATH.md, "Bounded
  // forests": why k / ε, and the measurement that chose the factor).
  static uint64_t budget_for(uint32_t k, double epsilon);
  // Live nodes; with the quarantine (up to 3/4 of them), node memory is at most 1.75 × budget =
  // 0.875 k/ε nodes (docs/KPATH.md: 1 would put zstd's four workers 65 MB over native at k = 16).
  static constexpr double kBudgetPerK = 0.5;

  // The ∗ marker, as the pass emits it inline at every function entry.
  HCCT_NOINST static void enter(PathFrame *frame) {
    frame->node = nullptr;
    frame->owner = 0;
  }

  // One path ID of the activation owning `frame` that the fast path did not take; `slot` is the
  // guess slot its site chose (0 or 1).
  HCCT_NOINST void path(PathFrame *frame, uint64_t function, uint64_t id, unsigned slot) {
    ++slow_;
    if (HCCT_UNLIKELY(frame->owner != owner_value())) {
      if (resumes(frame)) {
        // A window of this profiler from before a sweep that is still the same node: the stream
        // goes on (the token changed, not the window).
        frame->owner = owner_value();
      } else if (frame->node && ours(frame->owner)) {
        // A window a sweep evicted: the stream goes on from here with a fresh window, so up to
        // k − 1 of the n-grams ending at its next items are not counted (error_bound() says so).
        frame->node = nullptr;
        frame->owner = owner_value();
        ++cuts_;
      } else {
        // Fresh (the inline ∗ left owner 0), or a window of another profiler (another thread's,
        // after a coroutine moved its stack): a new stream starts here.
        frame->node = nullptr;
        frame->owner = owner_value();
        ++enters_;
        if (HCCT_UNLIKELY(tracing_)) trace_.add(0, frame, function, 0);
      }
    }
    if (HCCT_UNLIKELY(tracing_)) trace_.add(1, frame, function, id);
    KsfNode *w = frame->node;
    // k = 1 (BLPP): every item is a root, its count the path's counter; the window is the previous
    // item's root, whose guesses hold the roots that followed it, so the inline fast path counts
    // BLPP items like forest items (one load and compare from the previous root, no hash).
    KsfNode *next = !w || k_ == 1 ? root(function, id)
                                  : forest_ == Forest::kSlab ? slab_child(w, function, id) : child(w, function, id);
    if (HCCT_LIKELY(next) && w) set_guess(w, next, slot);
    if (HCCT_UNLIKELY(!next)) return lose(frame);
    // BLPP: every item is a root, and the fast path looks any of them up in the cache when the
    // guesses miss (blpp in path_fast_step), so every item the runtime takes is cached.
    if ((!w || k_ == 1) && root_cache_ && !tracing_) root_cache_[root_slot(function, id)] = next;
    ++next->count;
    frame->node = next;
    frame->owner = owner_value();  // (a sweep during this item moved the token on)
  }

  // Adds `count` items of path `id` of `function` that the inline code counted in a counter array
  // (hcct/kpath_abi.h) to its root: at k = 1 the root is the path's BLPP counter; at k >= 2 only
  // functions without loops count in arrays, and their activations' single items are exactly
  // their roots' counts. False (the items counted in `lost`) if the root table cannot grow.
  HCCT_NOINST bool add_root_count(uint64_t function, uint64_t id, uint64_t count) {
    KsfNode *r = root(function, id);
    if (HCCT_UNLIKELY(!r)) {
      lost_ += count;
      return false;
    }
    r->count += count;
    return true;
  }

  // What this profiler's frames carry in `owner`: the token, or token + 1 (no thread's token)
  // while tracing, so that every item reaches `path` and is recorded.
  uint64_t owner_value() const { return tracing_ ? token() + 1 : token(); }
  // The token of the current epoch: the initial token + 2 · sweeps so far.
  uint64_t token() const { return token_ + 2 * uint64_t(epoch_); }
  uint32_t k() const { return k_; }
  Forest forest() const { return forest_; }
  // Items counted = the sum of all counters (the fast path counts without telling the profiler).
  uint64_t paths() const;
  uint64_t slow_paths() const { return slow_; }
  uint64_t enters() const { return enters_; }
  uint64_t lost() const { return lost_; }
  uint64_t nodes() const { return nodes_; }
  size_t bytes() const {
    return arena_.bytes_mapped() + huge_bytes_ + roots_.bytes() + kScratchWordsPerEntry * scratch_capacity_ * 8 +
           recycled_capacity_ * sizeof(KsfNode *);
  }
  const RootTable &roots() const { return roots_; }
  const PathTrace &trace() const { return trace_; }
  bool tracing() const { return tracing_; }
  // Siblings scanned by the runtime per child lookup (for tuning).
  uint64_t scans() const { return scans_; }
  uint64_t lookups() const { return lookups_; }
  // Bounded kWF (all 0 when exact). The guarantee (docs/KPATH.md, "Bounded forests"): every n-gram
  // (n <= k) of the stream with a node in the forest has a k-IPF count c with
  // c <= true count <= c + error_bound(n), and every n-gram without one ran at most
  // error_bound(n) times; error_bound(n) = delta() + (n − 1) · cuts() + n · lost(), and
  // delta() <= εN unless a sweep found too little under εN to free (forced_sweeps()).
  double epsilon() const { return epsilon_; }
  // The live node budget now: budget_for(k, ε) times one plus the times it grew (grown()).
  uint64_t budget() const { return budget_; }
  uint64_t grown() const { return floor_budget_ ? budget_ / floor_budget_ - 1 : 0; }
  uint64_t delta() const { return delta_; }
  uint64_t cuts() const { return cuts_; }
  uint64_t error_bound(uint32_t n) const {
    return delta_ + (n > 1 ? uint64_t(n - 1) * cuts_ : 0) + (bounded() ? uint64_t(n) * lost_ : 0);
  }
  uint64_t sweeps() const { return epoch_; }
  uint64_t forced_sweeps() const { return forced_; }
  // Sweeps that took their threshold from the previous sweep's ranks (one pass over the nodes).
  uint64_t one_pass_sweeps() const { return one_pass_; }
  uint64_t evicted() const { return evicted_; }
  // Times a sweep's scratch was mapped: once per thread, unless the budget grew after a sweep or a
  // failed sweep let the nodes outgrow it (a sweep does not map and unmap it each time).
  uint64_t scratch_maps() const { return scratch_maps_; }
  uint64_t nodes_peak() const { return nodes_peak_; }
  bool bounded() const { return budget_ != 0; }

 private:
  HCCT_NOINST KsfNode *root(uint64_t function, uint64_t id) {
    uint64_t *slot = roots_.find_or_insert(function, id);
    if (HCCT_UNLIKELY(!slot)) return nullptr;
    if (HCCT_UNLIKELY(*slot == 0)) return new_root(slot, function, id);
    return reinterpret_cast<KsfNode *>(*slot);
  }
  KsfNode *child(KsfNode *window, uint64_t function, uint64_t id);
  template <typename Make>
  KsfNode *step_to_child(KsfNode *parent, uint64_t id, Make make);
  KsfNode *make_child(KsfNode *parent, uint64_t function, uint64_t id, bool scanned = false);
  // After a lookup from `window` found `found`, whose site chose `slot`: with a free guess it takes
  // that slot, and the child it displaces moves to the other slot if that one holds nothing that
  // belongs there. With both guesses taken, it displaces the one with the smaller count only if it
  // counted as many, or after kGuessRefusals lookups that did not displace one.
  static void set_guess(KsfNode *window, KsfNode *found, unsigned slot);
  static constexpr unsigned kGuessRefusals = 4;
  // k-SF (Algorithm 4): the next window after `window`, and a child of a node (creating its τ).
  KsfNode *slab_child(KsfNode *window, uint64_t function, uint64_t id);
  KsfNode *make_slab_child(KsfNode *parent, uint64_t function, uint64_t id, bool scanned = false);
  KsfNode *new_root(uint64_t *slot, uint64_t function, uint64_t id);
  KsfNode *new_node(uint64_t id);
  KsfNode *fresh_node();
  void *allocate_huge_node();
  void release_huge_nodes();
  void lose(PathFrame *frame);
  // Bounded kWF.
  bool ours(uint64_t owner) const {
    uint64_t d = owner - token_;
    return owner >= token_ && d < (uint64_t(1) << 32) && (d & 1) == uint64_t(tracing_);
  }
  bool resumes(const PathFrame *frame) const {
    if (!bounded() || !frame->node || !ours(frame->owner)) return false;
    return frame->node->stamp <= uint32_t((frame->owner - token_) >> 1);
  }
  void sweep(KsfNode *pinned);
  // Raises the budget by one floor (budget_for) if the process's budgets leave room; the forest
  // then makes nodes instead of sweeping, and sweeps less often from then on.
  bool grow_budget();
  bool reserve_scratch(size_t entries);
  void release_scratch();
  // Room in recycled_ for `victims` more, after moving the unused free nodes to its front.
  bool reserve_recycled(size_t victims);
  void release_recycled();
  // Every node ever allocated (live, free or in quarantine), in address order within each piece of
  // memory: a sweep reads node memory front to back instead of following child lists, whose nodes
  // (recycled through the free list) are scattered: a cache miss per node (docs/KPATH.md).
  template <typename Visit>
  void for_each_allocated_node(Visit visit);
  // A sweep's scratch: two arrays of scratch_capacity_ words (listed nodes, then the same by depth),
  // mapped at the first sweep and kept.
  static constexpr size_t kScratchWordsPerEntry = 2;
  static constexpr size_t kMaxDepthLevels = 256;  // a kWF's depth is below k <= 256
  static constexpr size_t kHugeChunk = size_t(2) << 20;
  static constexpr size_t kHugeAfter = size_t(1) << 20;
  // The arena hands out nodes from chunks that double in size up to kHugeAfter bytes: a handful of
  // contiguous runs, recorded so that a sweep can walk them (more never happen; past the last,
  // nodes come from huge chunks).
  static constexpr size_t kMaxArenaRuns = 16;
  struct NodeRun {
    KsfNode *begin, *end;
  };

  uint32_t k_ = 2;
  Forest forest_ = Forest::kWindow;
  bool tracing_ = false;
  uint64_t token_ = 2;
  KsfNode **root_cache_ = nullptr;
  Arena arena_;
  char *huge_chunks_ = nullptr, *huge_cursor_ = nullptr, *huge_end_ = nullptr;
  size_t huge_bytes_ = 0;
  NodeRun arena_runs_[kMaxArenaRuns] = {};
  size_t arena_run_count_ = 0;
  RootTable roots_;
  PathTrace trace_;
  uint64_t slow_ = 0, enters_ = 0, lost_ = 0, nodes_ = 0;
  uint64_t scans_ = 0, lookups_ = 0;
  // Bounded kWF: the budget of non-root nodes (0: exact), the sweeps' state and their scratch (two
  // arrays of scratch_capacity_ words), the evicted nodes (recycled_, below; the last sweep's
  // victims, at most 3/4 of the budget, wait in quarantine there until the next sweep).
  double epsilon_ = 0;
  uint64_t budget_ = 0, floor_budget_ = 0;
  uint32_t grow_ = 1;
  uint64_t *live_token_ = nullptr;
  uint32_t epoch_ = 0;
  uint64_t non_roots_ = 0, nodes_peak_ = 0;
  uint64_t delta_ = 0, cuts_ = 0, forced_ = 0, evicted_ = 0;
  // The totals of ranks 1/8 and 3/4 at the last sweep, which gives the next one its threshold
  // (sweep(): one pass instead of two) while predicted_.
  bool predicted_ = false;
  uint64_t predicted_eighth_ = 0, predicted_three_quarters_ = 0, one_pass_ = 0;
  // Evicted nodes, an array of pointers rather than a list through the nodes, so that node creation
  // fetches the ones it will reuse ahead of time (a list is a chain of cache misses: new_node took
  // 15 % of Lua's time at k = 16). recycled_[recycle_next_, free_end_) are free;
  // recycled_[free_end_, recycled_end_) are the last sweep's victims (the quarantine), reusable
  // after the next sweep.
  KsfNode **recycled_ = nullptr;
  size_t recycle_next_ = 0, free_end_ = 0, recycled_end_ = 0, recycled_capacity_ = 0;
  uint64_t *scratch_ = nullptr;
  size_t scratch_capacity_ = 0;
  uint64_t scratch_maps_ = 0;
};

}  // namespace hcct::rt

#endif
