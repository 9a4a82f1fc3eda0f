// One thread's calling-context profile: the exact CCT or the MCCT of the (phi, epsilon)-HCCT
// (thesis §3.1.3), driven by enter/exit events. Deterministic and free of threads, TLS and system
// calls other than mmap, so unit tests drive it directly with chosen stack pointers.
#ifndef HCCT_RT_PROFILE_H
#define HCCT_RT_PROFILE_H

#include "arena.h"
#include "options.h"

namespace hcct::rt {

// Low bit of Node::parent_bits: the node's counter is incremented on entry. In hcct mode this is
// Space-Saving's monitored flag, packed into the parent link as in the thesis (nodes are 32-byte
// aligned, so a link has five free low bits) so an MCCT node costs no more than a CCT node; in cct
// mode every node has it.
inline constexpr uint32_t kCountsDirectly = 1;
// Bit 2 of Node::parent_bits: the node's children are also in the thread's ChildIndex (it is a
// wide node: its sibling list outgrew kIndexAfter). Bit 1 is the dump writer's.
inline constexpr uint32_t kIndexedChildren = 4;
// Bit 3: the node is the deepest context of a suspended machine stack (a coroutine not running, or
// the stack that switched to one): pruning must keep it, and so its whole path. The profile's pin
// map counts how many suspended stacks stop there.
inline constexpr uint32_t kPinned = 8;
// Bit 4: the node has time samples, kept beside the tree in the profile's sample map (most nodes
// never get one: time samples are not worth 8 bytes in every node). In hcct mode: it holds one of
// the time summary's counters, which keeps it from being pruned.
inline constexpr uint32_t kHasSamples = 16;
inline constexpr uint32_t kParentFlagBits = 31;

// A calling context: 32 bytes, two to a cache line (docs/RUNTIME.md, "Node layout"). The links
// (parent, first child, next sibling) are byte offsets from the node itself to the other one, 0 for
// none: a thread's nodes lie in one NodeSpace, less than 2 GiB apart, and a self-relative link
// needs no base register in the probes. The call counter keeps its low 32 bits here; the profile
// keeps the high bits of the rare counter past 2^32 beside the tree (ThreadProfile::count_of).
struct alignas(32) Node {
  uintptr_t routine;
  uintptr_t call_site;
  uint32_t count_low;
  uint32_t parent_bits;  // the parent's offset (a multiple of 32, two's complement) | flags
  int32_t first_child_offset;
  int32_t next_sibling_offset;

  HCCT_NOINST Node *at(int32_t offset) const {
    return offset ? reinterpret_cast<Node *>(reinterpret_cast<uintptr_t>(this) + intptr_t(offset)) : nullptr;
  }
  HCCT_NOINST int32_t offset_to(const Node *other) const {
    return other ? int32_t(reinterpret_cast<intptr_t>(other) - reinterpret_cast<intptr_t>(this)) : 0;
  }
  HCCT_NOINST Node *parent() const { return at(int32_t(parent_bits & ~kParentFlagBits)); }
  HCCT_NOINST Node *first_child() const { return at(first_child_offset); }
  HCCT_NOINST Node *next_sibling() const { return at(next_sibling_offset); }
  HCCT_NOINST void set_first_child(const Node *child) { first_child_offset = offset_to(child); }
  HCCT_NOINST void set_next_sibling(const Node *sibling) { next_sibling_offset = offset_to(sibling); }
  HCCT_NOINST void set_parent(const Node *parent, uint32_t flags) {
    parent_bits = uint32_t(offset_to(parent)) | flags;
  }
  HCCT_NOINST bool indexed() const { return parent_bits & kIndexedChildren; }
  HCCT_NOINST bool monitored() const { return parent_bits & kCountsDirectly; }
  HCCT_NOINST void set_monitored(bool on) {
    parent_bits = (parent_bits & ~uint32_t(1)) | uint32_t(on);
  }
};
static_assert(sizeof(Node) == 32 && NodeSpace::kGranule == sizeof(Node));

// A shadow-stack frame: the context entered and the stack pointer (the probe's CFA) at entry, which
// tells at any later event whether the machine frame still exists.
struct Frame {
  Node *node;
  uintptr_t sp;
};

// Stack-pointer tag of frames on a stack other than the thread's own (sigaltstack, coroutines):
// never popped by the stack-pointer rule, only by their own exits.
inline constexpr uintptr_t kForeignStack = ~uintptr_t(0);

// One frame of a calling path given from outside the tree (static bursting re-synchronises the
// cursor from such a path): the routine, its call site and the stack pointer tag of its frame.
struct PathEntry {
  uintptr_t fn;    // 0: unknown (a frame of the memory-exhaustion sink)
  uintptr_t site;
  uintptr_t sp;
};

// The children of wide nodes, found by (parent, routine, call site) in O(1) whatever the fan-out
// (interpreter dispatch, virtual calls, callback tables: thousands of callees from one call site).
// Open addressing with linear probing and backward-shift deletion (no tombstones, so probe chains
// stay short however many children Space-Saving evicts). Each slot is 32 bits: the child's place
// in the thread's node space (its offset / 32, 26 bits: the space is at most 2 GiB) under 6 bits of
// its key's hash, so a probe that lands on another key seldom touches its node; 0 is an empty slot
// (the root, at offset 0, is nobody's child). A parallel array holds each child's previous
// sibling (its offset; 0 for none), so that unlinking a child of a wide node does not scan its
// siblings either; only unlinks read it, so lookups touch 4 bytes per slot, sixteen to a cache
// line. mmap'd and charged to the tree budget; never the program's malloc.
class ChildIndex {
 public:
  static constexpr size_t kNone = ~size_t(0);
  // The node space's base: slots name nodes by their offset from it.
  void set_base(const char *base) { base_ = base; }
  // The slot of parent's child (fn, site), or kNone. `steps` counts the slots probed.
  size_t find(const Node *parent, uintptr_t fn, uintptr_t site, uint64_t &steps) const;
  size_t find(const Node *child, uint64_t &steps) const {
    return find(child->parent(), child->routine, child->call_site, steps);
  }
  Node *node(size_t slot) const { return node_of(slots_[slot]); }
  Node *prev(size_t slot) const {
    uint32_t offset = slots_[mask_ + 1 + slot];
    return offset ? reinterpret_cast<Node *>(const_cast<char *>(base_) + offset) : nullptr;
  }
  void set_prev(size_t slot, const Node *prev) { slots_[mask_ + 1 + slot] = offset_of(prev); }
  // find() for the probes' fast path: inline, and it counts no steps (the fast path's sibling scan
  // counts none either). The parent (the node of `top`) and the masked call site are read again
  // where a tag matches, and the table's address and mask at every probe (L1 hits): kept in
  // registers, they made the caller, which holds the probe's four arguments for the general path,
  // save six registers on every call. The parent is compared through the node's raw parent link
  // (a child always has one: no null case), which with self-relative links is one add.
  [[gnu::always_inline]] HCCT_NOINST Node *lookup(const Frame *const &top, uintptr_t fn, uintptr_t site,
                                                  const uintptr_t &site_mask) const {
    uint64_t h = hash(top->node, fn, site & site_mask);
    uint32_t tag = tag_of(h);
    for (size_t i = home(h);; i = (i + 1) & mask_) {
      compiler_fence();
      uint32_t slot = slots_[i];
      if (!slot) return nullptr;
      if ((slot & ~kNodeBits) != tag) continue;
      Node *n = node_of(slot);
      if (n->routine == fn && n->call_site == (site & site_mask) &&
          reinterpret_cast<uintptr_t>(n) + intptr_t(int32_t(n->parent_bits & ~kParentFlagBits)) ==
              reinterpret_cast<uintptr_t>(top->node))
        return n;
    }
  }
  // Makes room for `more` entries (load factor at most 1/2). False if the budget or kernel refuses.
  bool reserve(size_t more);
  // After reserve(); the child must not be in the index.
  void insert(Node *child, Node *prev);
  void erase(size_t slot);
  void release();
  size_t size() const { return size_; }
  size_t bytes() const { return slots_ ? (mask_ + 1) * kSlotBytes : 0; }

 private:
  static constexpr uint32_t kNodeBits = (uint32_t(1) << 26) - 1;
  static constexpr size_t kSlotBytes = 2 * sizeof(uint32_t);  // the slot and its previous sibling
  // One multiply of the three key words folded together (the call site multiplied first, so that
  // a routine and a call site that differ in the same low bits do not cancel). The home slot is
  // the product's low bits folded with its high half (low bits alone depend only on the key's low
  // bits: handlers 16 bytes apart clustered); its top 6 bits are the tag kept in the slot. Two
  // chained multiply-xorshift rounds cost the wide lookup eight instructions more on every call for
  // no fewer probes (docs/BENCHMARKS.md, "Wide call sites").
  HCCT_NOINST static uint64_t hash(const Node *parent, uintptr_t fn, uintptr_t site) {
    uint64_t key = (site * 0x9e3779b97f4a7c15ull) ^ fn ^ reinterpret_cast<uintptr_t>(parent);
    return key * 0xbf58476d1ce4e5b9ull;
  }
  size_t home(uint64_t h) const { return size_t(h ^ (h >> 32)) & mask_; }
  static uint32_t tag_of(uint64_t h) { return uint32_t(h >> 32) & ~kNodeBits; }
  Node *node_of(uint32_t slot) const {
    return reinterpret_cast<Node *>(const_cast<char *>(base_) + (size_t(slot & kNodeBits) << 5));
  }
  uint32_t offset_of(const Node *n) const {
    return n ? uint32_t(reinterpret_cast<const char *>(n) - base_) : 0;
  }

  uint32_t *slots_ = nullptr;  // mask_ + 1 slots, then as many previous siblings
  size_t mask_ = 0;            // capacity - 1 (a power of two)
  size_t size_ = 0;
  const char *base_ = nullptr;
};
static_assert(NodeSpace::kMaxBytes / sizeof(Node) <= (size_t(1) << 26), "a node's place fits a slot's 26 bits");

// A map from nonzero words to words: open addressing, linear probing, backward-shift deletion.
// mmap'd and charged to the tree budget. Holds how many suspended stacks pin a node, and which
// stack record starts at a given address.
class WordMap {
 public:
  uintptr_t *find(uintptr_t key) const;  // the value's address, or null
  // The value of `key`, inserted as 0 if absent; null if memory is refused.
  uintptr_t *find_or_insert(uintptr_t key);
  void erase(uintptr_t key);
  void release();
  bool empty() const { return size_ == 0; }
  size_t bytes() const { return entries_ ? (mask_ + 1) * sizeof(Entry) : 0; }

 private:
  struct Entry {
    uintptr_t key;  // 0: empty
    uintptr_t value;
  };
  size_t home(uintptr_t key) const { return size_t((key * 0x9e3779b97f4a7c15ull) >> 20) & mask_; }
  bool grow();

  Entry *entries_ = nullptr;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// One machine stack's shadow stack while another one runs: the thread's own stack, or a coroutine's
// (makecontext/swapcontext, fibers). Each keeps its own calling context, rooted where it was first
// switched into (docs/RUNTIME.md, "Stacks").
struct StackState {
  Frame *frames;  // frames[0]: the base, the context the stack was first switched into from
  Frame *top;
  Frame *end;
  uintptr_t lo, size;  // the stack's memory: frames with sp in (lo, lo + size] are this stack's
};

// What the MCCT's upkeep did (hcct mode, off the fast path only: none of these is counted on a hit),
// said per thread with verbose=1 (docs/RUNTIME.md, "Space-Saving's upkeep"): what makes a program
// with more contexts than counters cost more than the exact tree.
struct UpkeepCounts {
  uint64_t general_enters = 0;  // enters that took ThreadProfile::enter
  uint64_t general_exits = 0;   // exits that took ThreadProfile::exit
  uint64_t evictions = 0;       // counters taken from the minimum's context
  uint64_t rescans = 0;         // full rescans of the counters (the lazy scan found none left)
  uint64_t rescan_reads = 0;    // nodes the rescans read (the others skipped by their floors)
  uint64_t pruned = 0;          // nodes freed
  uint64_t index_erases = 0;    // children of wide nodes taken out of the index
};

struct ProfileConfig {
  Mode mode = Mode::kCct;
  KeyBy key = KeyBy::kSite;
  double epsilon = 2e-5;
  bool timed = false;  // nodes carry time samples (option time=cpu)
  // The thread's stack: frames whose sp lies outside [stack_lo, stack_lo + stack_size) are foreign.
  uintptr_t stack_lo = 0;
  uintptr_t stack_size = ~uintptr_t(0);
};

class ThreadProfile {
 public:
  // Maps the initial memory. False if the kernel or the memory budget refuses.
  bool init(const ProfileConfig &config);
  void destroy();

  // The common case: a call into a context that is the current one's first child, or its hint,
  // or (out of line, in the probes' miss path) among its first kFastSiblings children, whose
  // counter counts directly, with no stale frame to pop. kFastSiblings covers every narrow list but
  // the rare one of kIndexAfter + 1 (an interpreter's dispatch loop calls a dozen functions from
  // one context: scanning only 4 sent 31% of Lua's calls to enter()). The children of a wide node
  // are in no useful order: past the hint, its calls go to enter_wide(). The scan does not
  // reorder: a loop that calls a few functions in turn keeps them where they are (move-to-front on
  // every call would make them swap places on every call). False means: call enter_wide() at a
  // wide node, then enter().
  static constexpr int kFastSiblings = 8;
  [[gnu::always_inline]] HCCT_NOINST bool enter_fast(uintptr_t fn, uintptr_t site, uintptr_t sp) {
    return fast_frame(sp) && (enter_fast_child(fn, site, sp) || enter_scanned_child(fn, site, sp));
  }
  // enter_fast in steps, so that the probes leave for the general path when the frame test fails
  // and for the miss path (scan, wide node) only when the inline tests do (different jump targets,
  // the same instructions): the frame test (on the running stack, no stale frame, room to push)...
  // (The last frame's address is kept, not the end's: `top == frames_end - 1` cost a load, a
  // subtraction and a compare where this is one compare with memory; `top + 1 == frames_end` kept
  // `top + 1` for the push in a register, and the hint's lookup then needed one more, saved and
  // restored on every call.)
  // An enter at the top frame's own tag (a callee that gcc inlined, whose probes run in its
  // caller's machine frame) is on the running stack without the bounds test: see exit_fast_with.
  [[gnu::always_inline]] HCCT_NOINST bool fast_frame(uintptr_t sp) const {
    const Frame *top = top_;
    uintptr_t tag = top->sp;
    if (tag != sp && HCCT_UNLIKELY(sp - stack_lo_ >= stack_size_ || tag < sp)) return false;
    return !HCCT_UNLIKELY(top == frames_last_);
  }
  // ... and, once it held, the first child, then the hint (inline in the probes: one dependent
  // load past the parent for the first child, where most calls go, and for the others a hash and
  // three compares that go the same way on almost every call, in place of a scan whose compares
  // go either way from call to call)...
  [[gnu::always_inline]] HCCT_NOINST bool enter_fast_child(uintptr_t fn, uintptr_t site, uintptr_t sp) {
    Frame *top = top_;
    site &= site_mask_;
    Node *parent = top->node;
    int32_t offset = parent->first_child_offset;
    Node *first = reinterpret_cast<Node *>(reinterpret_cast<char *>(parent) + offset);
    if (offset && first->routine == fn && first->call_site == site) return push_counted(top, first, sp);
    Node *hinted = node_at(hints_[hint_slot(parent, fn, site)]);
    return is_counting_child(hinted, parent, fn, site) && push_count(top, hinted, sp);
  }
  // ... then, where both missed, the other children, in the probes' out-of-line miss path (which
  // sets the hint on a hit).
  [[gnu::always_inline]] HCCT_NOINST bool enter_scanned_child(uintptr_t fn, uintptr_t site, uintptr_t sp) {
    Frame *top = top_;
    site &= site_mask_;
    Node *node = top->node;
    int32_t offset = node->first_child_offset;
    if (!offset) return false;
    // Unrolled: no loop counter to keep and test on the way. Each step adds a link's offset to the
    // node it is in (self-relative links: no base register); every hit leaves the loop to one
    // push, so the node stays in one register. No test for the end of the list: the last
    // sibling's link is 0, which leads back to itself, a node already compared, so a miss costs the
    // remaining steps and a hit past the first child one instruction less per sibling passed.
#pragma GCC unroll 8
    for (int i = 0; i < kFastSiblings; ++i) {
      node = reinterpret_cast<Node *>(reinterpret_cast<char *>(node) + offset);
      if (node->routine == fn && node->call_site == site) goto hit;
      offset = node->next_sibling_offset;
    }
    return false;
  hit:
    remember(top->node, fn, site, node);
    return push_counted(top, node, sp);
  }

  // The fast path under a wide node: the child from the index, else false. Inline in the probes'
  // out-of-line miss path (runtime.cc, enter_missed), which the probes tail-call: inlined into the
  // probes themselves the hash would cost them six register saves on every call.
  [[gnu::always_inline]] HCCT_NOINST bool at_wide_node() const { return top_->node->indexed(); }
  bool enter_wide(uintptr_t fn, uintptr_t site, uintptr_t sp) {
    return fast_frame(sp) && at_wide_node() && enter_wide_child(fn, site, sp);
  }
  // enter_wide once fast_frame(sp) and at_wide_node() held (the probes' way: no second frame test).
  // Few values live across the lookup (the frame is read again after it), so that the miss path,
  // which keeps the probe's four arguments for the general path, saves no register on the way.
  [[gnu::always_inline]] HCCT_NOINST bool enter_wide_child(uintptr_t fn, uintptr_t site, uintptr_t sp) {
    Node *node = index_.lookup(top_, fn, site, site_mask_);
    if (!node) return false;
    remember(top_->node, fn, site, node);
    return push_counted(top_, node, sp);
  }

  // Every enter event (the fast path's fallback).
  void enter(uintptr_t fn, uintptr_t site, uintptr_t sp);

 private:
  // The hint table (docs/RUNTIME.md, "Hints"): per thread, kHintSlots entries, each the place in
  // the node space (offset from its base) of the child last found for a (parent, routine, call
  // site) whose hash selects the entry; 0 (the root, nobody's child) until one is. The probes try
  // it after the first child, before the scan of the others (and, at a wide node, the index). An entry
  // is only a guess, checked against the node's own key, parent link and counts-directly flag, so
  // it needs no invalidation: a pruned node never counts directly (prune frees only those), a node
  // reused from the free list is checked by its new key, and only a tree dropped whole (a fork's
  // fresh start) clears the table. Direct-mapped: a collision costs the scan, as without hints.
  static constexpr unsigned kHintBits = 12;
  static constexpr size_t kHintSlots = size_t(1) << kHintBits;
  // A 32-bit multiply of the key words' low halves (what varies between contexts: code addresses
  // within a program, nodes within one 2 GiB space), the slot the product's top bits: an `imul`
  // with an immediate and a shift. (A 64-bit multiplier takes a register, which the probe has none
  // left for: it then saved two on every call.)
  static constexpr uint32_t kHintMultiplier = 0x9e3779b1;
  [[gnu::always_inline]] static HCCT_NOINST size_t hint_slot(const Node *parent, uintptr_t fn, uintptr_t site) {
    return size_t(uint32_t(uint32_t(reinterpret_cast<uintptr_t>(parent) ^ fn ^ site) * kHintMultiplier) >> (32 - kHintBits));
  }
  // Whether `n` is parent's child (fn, site) and counts directly. The parent link and the flag are
  // tested in one compare of the link's word, flags but kCountsDirectly masked off, against the
  // link that parent's child would have (the root's link is 0, itself: never a parent of its own).
  [[gnu::always_inline]] static HCCT_NOINST bool is_counting_child(const Node *n, const Node *parent, uintptr_t fn,
                                                                  uintptr_t site) {
    uint32_t link = uint32_t(reinterpret_cast<uintptr_t>(parent) - reinterpret_cast<uintptr_t>(n)) | kCountsDirectly;
    return n->routine == fn && n->call_site == site && (n->parent_bits & ~(kParentFlagBits & ~kCountsDirectly)) == link;
  }
  // Points the hint of (parent, fn, site) at `node`, parent's child (fn, site & site_mask_).
  [[gnu::always_inline]] HCCT_NOINST void remember(const Node *parent, uintptr_t fn, uintptr_t site, const Node *node) {
    hints_[hint_slot(parent, fn, site & site_mask_)] = offset_of(node);
  }

  // One more call in the node's 32-bit counter; false (the counter unchanged) when it would wrap,
  // which the general path's add_call carries. On x86-64 one `add` and the carry flag's branch: in
  // C++ gcc loads, tests, adds and stores (four instructions more on every call).
  [[gnu::always_inline]] static HCCT_NOINST bool count_call(Node *node) {
#if defined(__x86_64__)
    asm goto("addl $1, %0\n\tjc %l[wrapped]" : "+m"(node->count_low) : : "cc" : wrapped);
    return true;
  wrapped:
    node->count_low = ~uint32_t(0);
    return false;
#else
    if (HCCT_UNLIKELY(node->count_low == ~uint32_t(0))) return false;
    ++node->count_low;
    return true;
#endif
  }
  [[gnu::always_inline]] HCCT_NOINST bool push_counted(Frame *top, Node *node, uintptr_t sp) {
    if (HCCT_UNLIKELY(!(node->parent_bits & kCountsDirectly))) return false;
    return push_count(top, node, sp);
  }
  // push_counted once the node is known to count directly.
  [[gnu::always_inline]] HCCT_NOINST bool push_count(Frame *top, Node *node, uintptr_t sp) {
    // The low 32 bits of the counter: their carry (once per 2^32 calls of a context) is the
    // general path's (count_of), which then counts this call.
    if (HCCT_UNLIKELY(!count_call(node))) return false;
    top[1].node = node;
    top[1].sp = sp;
    // The time sampler's signal handler reads top_->node on this thread: the frame is written
    // before it is published (no instruction; only the compiler's order).
    compiler_fence();
    top_ = top + 1;
    return true;
  }

 public:

  // The common exit: the top frame is the function's own, it counts directly (so nothing can need
  // pruning), and nothing stale lies below. False means: call exit().
  HCCT_NOINST bool exit_fast(uintptr_t fn, uintptr_t sp, bool torn_down) {
    return exit_fast_with(fn, sp, [torn_down] { return torn_down; });
  }
  // The same, where `torn_down()` says whether the probe was tail-called (see exit() below). A
  // frame's enter and exit probes see the same tag, so the common exit is the one whose `sp` is
  // the top frame's tag, and it needs neither the running stack's bounds nor `torn_down()`: every
  // frame of the running stack's array was tagged with a stack pointer of that stack, or with
  // kForeignStack, which no stack pointer equals; and a tail-called exit at its frame's own tag is
  // a split function's, which exit() pops as well (exit_torn_down). Elsewhere both are asked.
  // (Asked first, they cost every exit four instructions for the bounds, and in -finstrument-
  // functions builds a compare and a branch that goes either way from function to function; gcc
  // still loads the return address on every exit.)
  template <typename TornDown>
  [[gnu::always_inline]] HCCT_NOINST bool exit_fast_with(uintptr_t fn, uintptr_t sp, TornDown torn_down) {
    Frame *top = top_;
    uintptr_t tag = top->sp;
    if (HCCT_UNLIKELY(tag != sp)) {
      if (sp - stack_lo_ >= stack_size_) return false;
      if (tag > sp) {
        if (torn_down()) return false;  // an exit at a frame above its own: exit() tells why
      } else if (!torn_down() || top[-1].sp < sp) {
        return false;  // a stale frame below `sp`, or not a tail-called exit's own frame
      }
    }
    Node *node = top->node;
    if (HCCT_UNLIKELY(node->routine != fn || !(node->parent_bits & kCountsDirectly))) return false;
    top_ = top - 1;
    return true;
  }

  // `torn_down`: the probe was tail-called after the function's frame was released, so `sp` is
  // the caller's stack pointer (gcc emits `jmp __cyg_profile_func_exit` at the end of void
  // functions). The exiting frame is then the last one below `sp`, not one at or above it.
  // Every exit event (the fast path's fallback).
  HCCT_NOINST void exit(uintptr_t fn, uintptr_t sp, bool torn_down = false) {
    ++upkeep_.general_exits;
    Frame *top = top_;
    Node *left = top->node;
    bool own_stack = sp - stack_lo_ < stack_size_;
    if (HCCT_UNLIKELY(!own_stack) && stacks_ && follow_unseen_switch(sp)) {
      top = top_;  // control reached another known stack without a swapcontext (uc_link, longjmp)
      left = top->node;
      own_stack = true;
    }
    if (HCCT_UNLIKELY(torn_down) && own_stack) {
      top = exit_torn_down(top, fn, sp);
    } else {
      if (HCCT_LIKELY(own_stack) && HCCT_UNLIKELY(top->sp < sp)) {
        top = exit_below(top, fn, sp);  // prunes what it pops: `left` must not be pruned twice
        left = top->node;
      }
      if (HCCT_LIKELY(top->node->routine == fn && top != frames_)) {
        --top;
      } else if (top->node == &sink_) {
        --top;
      } else {
        ++unmatched_exits_;
      }
    }
    top_ = top;
    if (mode_ == Mode::kHcct && left != top->node) prune(left, top->node);
  }

  // Pops every frame whose machine frame lies below `sp`: called when control is known to have
  // moved to the frame at `sp` without exit probes (longjmp target, catch handler).
  void unwind_to(uintptr_t sp) {
    if (HCCT_UNLIKELY(sp - stack_lo_ >= stack_size_) && stacks_ && !follow_unseen_switch(sp)) return;
    if (sp - stack_lo_ < stack_size_ && top_->sp < sp) top_ = pop_stale(top_, sp);
  }

  // Control is about to move to the machine stack whose stack pointer will be `target_sp`
  // (swapcontext, setcontext): the calling path becomes that stack's own, in O(1) when the target
  // was made by makecontext. `hint_lo`/`hint_size`: the target context's uc_stack, where it was
  // made to run (0, 0 if unknown). A uc_stack is only taken for a new stack when it looks like
  // makecontext's work (`target_sp` near its top, `from_sp`, the switcher's stack pointer, outside
  // it): a ucontext_t that only getcontext filled holds whatever its memory held there. A stack
  // seen for the first time is rooted at the current context; one that holds no frame (finished,
  // or not started) is re-rooted there. False if the target stack cannot be told (then frames
  // there are foreign, as without this call).
  bool switch_stack(uintptr_t target_sp, uintptr_t hint_lo, uintptr_t hint_size, uintptr_t from_sp = 0);
  // How far below the top of its uc_stack a context fresh from makecontext starts.
  static constexpr uintptr_t kFreshContextDepth = 4096;
  // A known stack switched into at a context that makecontext made on it was made again (a
  // coroutine pool reusing an abandoned coroutine's stack): the frames left on it are stale. Such a
  // context starts as a function entered by a call, its stack pointer 8 bytes past a 16-byte
  // boundary (x86-64 psABI), just below the top (glibc leaves room for the trampoline's return
  // address and arguments beyond the sixth); a context saved by getcontext or swapcontext, as when
  // a suspended coroutine is resumed, holds its caller's stack pointer, 16-byte aligned at a call.
  static constexpr uintptr_t kMadeContextDepth = 128;
  static constexpr bool made_by_makecontext(uintptr_t sp, uintptr_t stack_top) {
    return sp % 16 == 8 && stack_top - sp <= kMadeContextDepth;
  }
  // Machine stacks known besides the thread's own (tests).
  size_t other_stacks() const { return stack_count_ ? stack_count_ - 1 : 0; }
  // The deepest tree node of the current calling path (the cursor unless memory ran out).
  Node *path_leaf() const;

  // Static bursting (thesis §5.1.1): makes `path` (outermost frame first) the calling path, without
  // counting it, by walking down the tree from the root and adding missing nodes (count 0; in hcct
  // mode unmonitored, so they are pruned once the cursor leaves them). The old calling path is
  // dropped first (in hcct mode its unmonitored leaves are pruned).
  void rebuild_path(const PathEntry *path, size_t n);

  // Code in [lo, hi) was unloaded (dlclose): its contexts move to the retired addresses
  // `address | tag` (routines and call sites), so that code loaded later at the same addresses gets
  // contexts of its own. O(nodes); indexed children are re-filed under their new keys.
  void retire_range(uintptr_t lo, uintptr_t hi, uintptr_t tag);

  // Rebuilds the calling path in a fresh tree without counting it, then drops the old tree: the
  // profile starts over from the current context (used after fork).
  void restart_from_current_path();

  // Time samples (docs/RUNTIME.md, "Time"). Charges `n` samples to the current context (the top of
  // the shadow stack). Called by the sampler's signal handler on this thread, only while the tree
  // is consistent: outside events, or inside an inline fast path (which changes no structure).
  // `may_prune`: the handler did not interrupt an event, so a context that loses its time counter
  // may be pruned now; otherwise it is queued for prune_deferred(). False if the samples could not
  // be charged now (the queue is full): the caller keeps them pending.
  bool charge_samples(uint64_t n, bool may_prune) { return charge_samples_to(top_->node, n, may_prune); }
  // The same for a context read by another thread (time=wall's sampler, which reads the cursor
  // with sampled_cursor() while this thread is outside its out-of-line paths).
  bool charge_samples_to(Node *node, uint64_t n, bool may_prune);
  // The current context, read by another thread while this thread may be in an inline fast path
  // (which writes a frame before it publishes top_, and frees no node): a live node.
  Node *sampled_cursor() const {
    const Frame *top = __atomic_load_n(&top_, __ATOMIC_RELAXED);
    return __atomic_load_n(&top->node, __ATOMIC_RELAXED);
  }
  bool has_deferred_prunes() const { return deferred_count_ != 0; }
  // Static bursting: charges `n` samples to the context `path` names (the shadow stack kept between
  // bursts), made the profile's calling path first (rebuild_path: missing nodes are added, with no
  // calls). Only outside an event of this profile.
  void charge_samples_on_path(const PathEntry *path, size_t depth, uint64_t n) {
    rebuild_path(path, depth);
    charge_samples(n, /*may_prune=*/true);
  }
  // Prunes the contexts that lost their time counter inside an event (the tree must be consistent
  // and the caller not inside an event of this profile).
  void prune_deferred();
  bool timed() const { return timed_; }
  // The time samples of a node of this profile.
  uint64_t node_samples(const Node *n) const {
    if (!(n->parent_bits & kHasSamples)) return 0;
    const uintptr_t *s = sample_map_.find(reinterpret_cast<uintptr_t>(n));
    return s ? *s : 0;
  }
  // S: the samples charged into the tree (in hcct mode, the sum of the time counters).
  uint64_t samples() const { return samples_; }
  // Samples that found the thread in the memory-exhaustion sink (no context to charge).
  uint64_t samples_in_sink() const { return samples_in_sink_; }
  // hcct mode: the smallest time counter, the error bound of every time estimate (0 until every
  // counter is used), and how many counters are in use.
  uint64_t min_samples() const;
  uint32_t time_monitored_count() const { return time_size_; }

  // A node's call counter: its low 32 bits are in the node, the rare carries beside the tree.
  uint64_t count_of(const Node *n) const {
    uint64_t low = n->count_low;
    if (HCCT_LIKELY(carries_.empty())) return low;
    const uintptr_t *high = carries_.find(reinterpret_cast<uintptr_t>(n));
    return high ? low | (uint64_t(*high) << 32) : low;
  }

  // Accessors for the dump writer and tests.
  const Node *root() const { return root_; }
  Node *cursor() const { return top_->node; }
  size_t depth() const { return size_t(top_ - frames_); }
  const Frame *frames() const { return frames_; }
  bool is_sink(const Node *n) const { return n == &sink_; }
  // Enter events counted into the tree (N) and those lost because tree memory ran out.
  // N is not kept apart: every enter adds exactly one to the counters (Space-Saving replaces a
  // minimum m by m + 1), so N is their sum, and the fast path does one increment less.
  uint64_t calls() const;
  uint64_t lost_events() const { return count_of(&sink_); }
  uint64_t unmatched_exits() const { return unmatched_exits_; }
  // Siblings and index slots examined by child lookups and unlinks off the fast path: the work
  // that must not grow with a node's fan-out (tests).
  uint64_t sibling_steps() const { return sibling_steps_; }
  const UpkeepCounts &upkeep() const { return upkeep_; }
  size_t live_nodes() const { return live_nodes_; }
  size_t peak_nodes() const { return peak_nodes_; }
  size_t tree_bytes() const { return nodes_.bytes_mapped() + index_.bytes() + sample_map_.bytes(); }
  size_t index_bytes() const { return index_.bytes(); }
  Mode mode() const { return mode_; }
  KeyBy key() const { return key_; }
  double epsilon() const { return epsilon_; }
  uint32_t counters() const { return capacity_; }
  uint32_t monitored_count() const { return size_; }
  // Smallest monitored counter: the error bound of every estimate (0 until all counters are used).
  uint64_t min_count() const;
  bool out_of_memory() const { return lost_events() != 0; }
  // Space-Saving's counters, for tests: the context of counter i < monitored_count().
  Node *slot(uint32_t i) const { return counter_node(i); }
  // Children of wide nodes in the index, and a full check of it against the tree (tests): every
  // child of an indexed node is found with its true previous sibling, and nothing else is there.
  size_t indexed_children() const { return index_.size(); }
  bool index_consistent() const;

  // A node whose sibling list is longer than this at a miss gets its children indexed. Below it a
  // scan of a few cache lines beats hashing; above it the scan grows with the fan-out.
  static constexpr int kIndexAfter = 8;

 private:
  Frame *pop_stale(Frame *top, uintptr_t sp);
  Frame *exit_torn_down(Frame *top, uintptr_t fn, uintptr_t sp);
  Frame *exit_below(Frame *top, uintptr_t fn, uintptr_t sp);
  Node *find_or_add_child(Node *parent, uintptr_t fn, uintptr_t site);
  Node *find_or_add_indexed(Node *parent, uintptr_t fn, uintptr_t site);
  void index_children(Node *parent);
  void order_by_count(Node *parent);
  Node *new_node(Node *parent, uintptr_t fn, uintptr_t site);
  // Counters: a node's counter plus one (the general path's increment), or set (Space-Saving).
  void add_call(Node *node) {
    if (HCCT_UNLIKELY(++node->count_low == 0)) carry(node, 1);
  }
  // Inline for the common case (no carry anywhere): Space-Saving calls it on every replacement.
  void set_count(Node *node, uint64_t count) {
    if (HCCT_LIKELY(!(count >> 32) && carries_.empty())) {
      node->count_low = uint32_t(count);
      return;
    }
    set_count_carried(node, count);
  }
  void set_count_carried(Node *node, uint64_t count);
  size_t summary_bytes() const { return size_t(capacity_) * sizeof(uint32_t); }
  // M's entries (see slots_ below).
  static constexpr uint32_t kCounterNodeBits = 26;
  static constexpr uint32_t kCounterNodeMask = (uint32_t(1) << kCounterNodeBits) - 1;
  static constexpr uint32_t kFloorMax = (uint32_t(1) << (32 - kCounterNodeBits)) - 1;
  // The floors' base follows the minimum once it is this far above it: find_min's test then
  // compares floors up to kFloorMax against a minimum at most this far up.
  static constexpr uint64_t kRebaseAfter = (kFloorMax + 1) / 2;
  Node *counter_node(uint32_t i) const { return node_at((slots_[i] & kCounterNodeMask) << 5); }
  // The floor bits of a count at or above `base`, in place.
  static uint32_t floor_bits(uint64_t count, uint64_t base) {
    uint64_t floor = count - base;
    return uint32_t(floor < kFloorMax ? floor : kFloorMax) << kCounterNodeBits;
  }
  static constexpr uint32_t kNoCounter = ~uint32_t(0);
  uint32_t search_min(uint64_t bound);
  void rebase_floors();
  void carry(Node *node, uintptr_t high_add);
  // Space-Saving's arrays hold 32-bit offsets into the node space: half the bytes of pointers.
  HCCT_NOINST Node *node_at(uint32_t offset) const { return reinterpret_cast<Node *>(nodes_.base() + offset); }
  HCCT_NOINST uint32_t offset_of(const Node *n) const {
    return uint32_t(reinterpret_cast<const char *>(n) - nodes_.base());
  }
  void set_samples(Node *node, uint64_t samples);
  void monitor(Node *node);
  uint32_t find_min();
  uint32_t rescan_min();
  uint32_t find_time_min();
  void forget_deferred(const Node *node);
  bool keeps(const Node *n) const { return n->parent_bits & (kCountsDirectly | kHasSamples); }
  void prune(Node *node, Node *cursor);
  void unlink(Node *node);
  Frame *grow_frames(Frame *top);
  Frame *frames_end() const { return frames_last_ + 1; }
  bool follow_unseen_switch(uintptr_t sp);
  bool start_stacks();
  int find_stack(uintptr_t sp, uintptr_t hint_lo, uintptr_t hint_size, uintptr_t from_sp, bool *remade);
  int add_stack(uintptr_t lo, uintptr_t size);
  void drop_stack(uint32_t index);
  void move_to_stack(uint32_t index, bool drop_current, bool remade = false);
  void pin(Node *node);
  void unpin(Node *node);
  Node *rebuild_node_path(const Node *old_leaf, const Node *old_root);

  // The root: the first node of the node space (children link to it by offset).
  Node *root_ = nullptr;
  // Absorbs every call made while tree memory is exhausted, so that later calls are not attributed
  // to a wrong context; its frames pop on any exit. Never in the tree (no links); flagged
  // monitored so that Space-Saving only counts it.
  Node sink_{0, 0, 0, kCountsDirectly, 0, 0};
  Frame *frames_ = nullptr;
  Frame *top_ = nullptr;
  Frame *frames_last_ = nullptr;  // the last frame of frames_'s array (the fast path's room test)
  // The running stack's memory, as (stack_lo_ - 1, stack_lo_ - 1 + stack_size_]: a probe's stack
  // pointer (its CFA) belongs to the stack holding the byte below it, the probe's return address.
  // At the low end it may equal the base of a coroutine stack that is an array in the caller's
  // frame (issue 26), which is not on that stack; `sp - stack_lo_ < stack_size_` tests both ends.
  uintptr_t stack_lo_ = 1;
  uintptr_t stack_size_ = ~uintptr_t(0);
  uintptr_t site_mask_ = ~uintptr_t(0);  // 0 with key=routine: all call sites are one
  Mode mode_ = Mode::kCct;
  KeyBy key_ = KeyBy::kSite;
  double epsilon_ = 0;

  NodeSpace nodes_;
  ChildIndex index_;
  uint32_t *hints_ = nullptr;  // kHintSlots node offsets (the hint table above), mmap'd
  Node *free_nodes_ = nullptr;
  size_t live_nodes_ = 0;
  size_t peak_nodes_ = 0;

  // Lazy Space-Saving (thesis Algorithm 2): counters live in the nodes; slots_ is the unordered
  // array M (offsets of the nodes); min_/min_idx_ are the lazily maintained minimum and its first
  // position. Each entry of M is 32 bits: the node's place (its offset / 32, 26 bits, as in the
  // child index) under a 6-bit floor, floor_base_ + the bits being a lower bound of the node's
  // count (its count when the upkeep last set or read it, capped): counters only grow, and the
  // fast path counts in the node alone, so a floor is never above its count. find_min and its
  // rescans skip every counter whose floor puts it above the minimum without touching its node:
  // on a program with more contexts than counters (tcc: an eviction every 47 calls) reading every
  // counter's node missed the caches (docs/BENCHMARKS.md, "Space-Saving's upkeep on tcc"). The
  // floors live in bits the offsets leave free, so they cost no memory.
  uint32_t *slots_ = nullptr;
  uint64_t floor_base_ = 0;
  uint32_t capacity_ = 0;
  uint32_t size_ = 0;
  uint64_t min_ = 0;
  uint32_t min_idx_ = 0;

  uint64_t unmatched_exits_ = 0;
  uint64_t sibling_steps_ = 0;
  UpkeepCounts upkeep_;

  // Time (option time=cpu). Samples per node in sample_map_ (nodes flagged kHasSamples). In hcct
  // mode a second lazy Space-Saving summary over samples, ⌈1/ε⌉ counters, as for calls.
  bool timed_ = false;
  uint64_t samples_ = 0;
  uint64_t samples_in_sink_ = 0;
  WordMap sample_map_;  // node -> samples (nonzero)
  uint32_t *time_slots_ = nullptr;
  uint32_t time_size_ = 0;
  uint64_t time_min_ = 0;
  uint32_t time_min_idx_ = 0;
  // Contexts that lost their time counter while the handler interrupted an inline fast path (no
  // pruning there): pruned at the next charge outside an event, or by prune_deferred().
  static constexpr uint32_t kDeferredPrunes = 32;
  Node *deferred_[kDeferredPrunes] = {};
  uint32_t deferred_count_ = 0;

  // Machine stacks (null until the first switch): [current_stack_] is the running one, whose state
  // lives in frames_/top_/frames_last_/stack_lo_/stack_size_ above; [0] is the thread's own.
  StackState *stacks_ = nullptr;
  uint32_t stack_count_ = 0;
  uint32_t stack_capacity_ = 0;
  uint32_t current_stack_ = 0;
  uint32_t nested_stacks_ = 0;  // stacks inside the thread's own (a local array as a coroutine stack)
  WordMap stack_by_lo_;         // stack lo -> index + 1
  WordMap pins_;                // node -> suspended stacks whose deepest context it is (hcct mode)
  WordMap carries_;             // node -> bits 32-63 of its counter, for counters past 2^32
};

}  // namespace hcct::rt

#endif
