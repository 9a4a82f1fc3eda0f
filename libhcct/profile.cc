#include "profile.h"

#include <math.h>

namespace hcct::rt {

namespace {
constexpr size_t kInitialFrames = 4096;
constexpr size_t kStackFrames = 256;   // a coroutine's shadow stack at first (one page; it grows)
constexpr uint32_t kInitialStacks = 16;
}

HCCT_NOINST bool ThreadProfile::init(const ProfileConfig &config) {
  mode_ = config.mode;
  key_ = config.key;
  site_mask_ = key_ == KeyBy::kRoutine ? 0 : ~uintptr_t(0);
  epsilon_ = config.epsilon;
  timed_ = config.timed;
  stack_lo_ = config.stack_lo + 1;
  stack_size_ = config.stack_size;
  root_ = static_cast<Node *>(nodes_.allocate());
  if (!root_) return false;
  *root_ = Node{};
  index_.set_base(nodes_.base());
  hints_ = static_cast<uint32_t *>(map_pages(kHintSlots * sizeof(uint32_t)));  // zeroed: the root
  if (!hints_) {
    destroy();
    return false;
  }
  frames_ = static_cast<Frame *>(map_pages(kInitialFrames * sizeof(Frame)));
  if (!frames_) {
    destroy();
    return false;
  }
  frames_last_ = frames_ + kInitialFrames - 1;
  top_ = frames_;
  top_->node = root_;
  top_->sp = kForeignStack;  // the root is never popped
  if (mode_ == Mode::kHcct) {
    double want = ceil(1.0 / epsilon_);
    capacity_ = want > 1e9 ? 1000000000u : uint32_t(want);
    if (capacity_ < 1) capacity_ = 1;
    if (!charge_tree_memory(summary_bytes())) {
      destroy();
      return false;
    }
    slots_ = static_cast<uint32_t *>(map_pages(summary_bytes()));
    if (!slots_) {
      refund_tree_memory(summary_bytes());
      destroy();
      return false;
    }
    if (timed_) {
      if (!charge_tree_memory(capacity_ * sizeof(uint32_t))) {
        destroy();
        return false;
      }
      time_slots_ = static_cast<uint32_t *>(map_pages(capacity_ * sizeof(uint32_t)));
      if (!time_slots_) {
        refund_tree_memory(capacity_ * sizeof(uint32_t));
        destroy();
        return false;
      }
    }
  }
  return true;
}

HCCT_NOINST void ThreadProfile::destroy() {
  for (uint32_t i = 0; i < stack_count_; ++i)
    if (i != current_stack_) unmap_pages(stacks_[i].frames, size_t(stacks_[i].end - stacks_[i].frames) * sizeof(Frame));
  if (stacks_) unmap_pages(stacks_, stack_capacity_ * sizeof(StackState));
  stack_by_lo_.release();
  pins_.release();
  if (frames_) unmap_pages(frames_, size_t(frames_end() - frames_) * sizeof(Frame));
  if (hints_) unmap_pages(hints_, kHintSlots * sizeof(uint32_t));
  if (slots_) {
    unmap_pages(slots_, summary_bytes());
    refund_tree_memory(summary_bytes());
  }
  if (time_slots_) {
    unmap_pages(time_slots_, capacity_ * sizeof(uint32_t));
    refund_tree_memory(capacity_ * sizeof(uint32_t));
  }
  nodes_.release();
  index_.release();
  sample_map_.release();
  carries_.release();
  *this = ThreadProfile{};
}

// A counter past 2^32 keeps its high bits in carries_ (a context called four billion times: rare,
// and never on the probes' fast path, which leaves the carry to the general path).
HCCT_NOINST void ThreadProfile::carry(Node *node, uintptr_t high_add) {
  uintptr_t *high = carries_.find_or_insert(reinterpret_cast<uintptr_t>(node));
  if (!high) {  // no memory for the high bits: the counter stays at its largest low value
    node->count_low = ~uint32_t(0);
    report_memory_exhausted();
    return;
  }
  *high += high_add;
}

HCCT_NOINST void ThreadProfile::set_count_carried(Node *node, uint64_t count) {
  node->count_low = uint32_t(count);
  uintptr_t high = uintptr_t(count >> 32);
  if (HCCT_UNLIKELY(high)) {
    if (uintptr_t *h = carries_.find(reinterpret_cast<uintptr_t>(node))) *h = 0;
    carry(node, high);
  } else if (HCCT_UNLIKELY(!carries_.empty())) {
    carries_.erase(reinterpret_cast<uintptr_t>(node));
  }
}

// The entry of a node with samples exists (charge_samples_to makes it first); 0 erases it.
HCCT_NOINST void ThreadProfile::set_samples(Node *node, uint64_t samples) {
  uintptr_t key = reinterpret_cast<uintptr_t>(node);
  if (samples) {
    *sample_map_.find_or_insert(key) = samples;
    node->parent_bits |= kHasSamples;
  } else {
    sample_map_.erase(key);
    node->parent_bits &= ~kHasSamples;
  }
}

// The full rescan of find_min: out of line, it runs once per ~1/ε evictions at most. The new
// minimum is above min_ (find_min found no counter at it) and most often min_ + 1, the count of
// every counter taken since the last rescan: the search tries that bound first, else the count of
// a counter at the least floor (a bound that always holds).
HCCT_NOINST uint32_t ThreadProfile::rescan_min() {
  ++upkeep_.rescans;
  uint32_t i = search_min(min_ + 1);
  if (HCCT_UNLIKELY(i == kNoCounter)) {
    uint32_t lowest = kFloorMax, at_lowest = 0;
    for (uint32_t j = 0; j < size_; ++j) {
      uint32_t floor = slots_[j] >> kCounterNodeBits;
      if (floor < lowest) {
        lowest = floor;
        at_lowest = j;
      }
    }
    ++upkeep_.rescan_reads;
    i = search_min(count_of(counter_node(at_lowest)));
  }
  if (min_ - floor_base_ >= kRebaseAfter) rebase_floors();
  return i;
}

// The first counter holding the least count, if that count is at most `bound` (then it becomes
// min_), else kNoCounter. It walks the floors and reads a counter's node only where its floor does
// not already put it above the least count found so far (or, once one is found at it, at it), and
// brings that floor up to date: the same minimum and first position as reading every node.
HCCT_NOINST uint32_t ThreadProfile::search_min(uint64_t bound) {
  uint32_t *const slots = slots_;
  const uint32_t size = size_;
  const uint64_t base = floor_base_;
  uint64_t reads = 0;
  // Counter j's count, its floor brought up to date.
  auto read = [&](uint32_t j) {
    uint64_t c = count_of(node_at((slots[j] & kCounterNodeMask) << 5));
    ++reads;
    slots[j] = floor_bits(c, base) | (slots[j] & kCounterNodeMask);
    return c;
  };
  // Floors and counts are compared above the base (every count is at least the base).
  uint64_t m = bound - base;
  uint32_t i = 0;
  for (; i < size; ++i) {  // the first counter at or below the bound
    if (slots[i] >> kCounterNodeBits > m) continue;
    uint64_t c = read(i) - base;
    if (c <= m) {
      m = c;
      break;
    }
  }
  if (i == size) {
    upkeep_.rescan_reads += reads;
    return kNoCounter;
  }
  for (uint32_t j = i + 1; j < size; ++j) {  // then only counters below the least count so far
    if (slots[j] >> kCounterNodeBits >= m) continue;
    uint64_t c = read(j) - base;
    if (c < m) {
      m = c;
      i = j;
    }
  }
  upkeep_.rescan_reads += reads;
  min_ = base + m;
  return i;
}

// Moves the floors' base up to the minimum: a floor below it becomes the minimum itself (every
// count is at least that), the others keep their value. Once per kRebaseAfter rises of the
// minimum at most, so that find_min's test (a floor above min_ - floor_base_) keeps its range.
HCCT_NOINST void ThreadProfile::rebase_floors() {
  uint64_t rise = min_ - floor_base_;
  for (uint32_t j = 0; j < size_; ++j) {
    uint32_t floor = slots_[j] >> kCounterNodeBits;
    floor = floor > rise ? floor - uint32_t(rise) : 0;
    slots_[j] = (floor << kCounterNodeBits) | (slots_[j] & kCounterNodeMask);
  }
  floor_base_ = min_;
}

HCCT_NOINST Frame *ThreadProfile::pop_stale(Frame *top, uintptr_t sp) {
  Node *left = top->node;
  while (top->sp < sp) --top;  // the root's sp is kForeignStack: the loop stops there
  if (mode_ == Mode::kHcct && left != top->node) prune(left, top->node);
  return top;
}

// An exit (not tail-called) below whose stack pointer frames are left: they are stale, popped,
// unless the frame at the exit's stack pointer is another function's and a popped one is this
// function's. Then that one is an inlined callee whose enter probe ran while stack arguments of an
// earlier call were still pushed (gcc defers their pop; sqlite's sqlite3RefillIndex and its inlined
// sqlite3ResolvePartIdxLabel): it is the exiting frame, tagged below its caller's stack pointer.
// Returns the frame the exit's own test then pops (the exiting one, or the one at `sp`).
HCCT_NOINST Frame *ThreadProfile::exit_below(Frame *top, uintptr_t fn, uintptr_t sp) {
  Frame *outermost = top;
  while (outermost[-1].sp < sp) --outermost;  // the root's sp is kForeignStack: the loop stops there
  if (outermost[-1].node->routine != fn && outermost[-1].node != &sink_) {
    for (Frame *f = outermost; f <= top; ++f) {
      if (f->node->routine == fn) {
        if (mode_ == Mode::kHcct && top->node != f->node) prune(top->node, f->node);
        return f;
      }
    }
  }
  return pop_stale(top, sp);
}

HCCT_NOINST void ThreadProfile::enter(uintptr_t fn, uintptr_t site, uintptr_t sp) {
  Frame *top = top_;
  ++upkeep_.general_enters;
  // Control reached another known stack without a swapcontext (a coroutine returned through
  // uc_link, a longjmp across stacks): that stack's calling path becomes current.
  if (HCCT_UNLIKELY(sp - stack_lo_ >= stack_size_) && stacks_ && follow_unseen_switch(sp)) top = top_;
  if (HCCT_LIKELY(sp - stack_lo_ < stack_size_)) {
    // Frames below the new frame's stack pointer were left without an exit probe. Equal stack
    // pointers are live: probes of inlined callees run in their caller's machine frame.
    if (top->sp < sp) top = pop_stale(top, sp);
  } else {
    sp = kForeignStack;
  }
  site &= site_mask_;
  Node *parent = top->node;
  Node *node = parent->first_child();
  if (!node || node->routine != fn || node->call_site != site)
    node = find_or_add_child(parent, fn, site);  // the sink when memory is exhausted
  if (node->monitored()) {
    add_call(node);
  } else {
    monitor(node);
  }
  if (node != &sink_) remember(parent, fn, site, node);
  if (++top == frames_end()) {
    top = grow_frames(top);
    if (!top) return;
  }
  top->node = node;
  top->sp = sp;
  top_ = top;
}

HCCT_NOINST Frame *ThreadProfile::exit_torn_down(Frame *top, uintptr_t fn, uintptr_t sp) {
  if (top->sp >= sp) {
    // A split function: gcc inlined its header (with the enter probe) into the caller and left the
    // rest in a `.part` clone that ends with `jmp __cyg_profile_func_exit`. The enter then ran in
    // the caller's frame, so its tag is the caller's stack pointer, which is exactly this exit's.
    if (top->sp == sp && top != frames_ && (top->node->routine == fn || top->node == &sink_))
      return top - 1;
    ++unmatched_exits_;  // no frame below: the function was entered before profiling started
    return top;
  }
  // The exiting frame is the outermost one below `sp`; the deeper ones were skipped without exits.
  // Unless that frame is another function's and a deeper one is this function's: an inlined
  // callee's enter probe ran while stack arguments of an earlier call were still pushed (gcc defers
  // their pop), so its live frame carries a tag below its caller's stack pointer.
  Frame *outermost = top;
  while (outermost[-1].sp < sp) --outermost;
  Frame *exiting = outermost;
  if (exiting->node->routine != fn && exiting->node != &sink_) {
    for (Frame *f = outermost + 1; f <= top; ++f) {
      if (f->node->routine == fn) {
        exiting = f;
        break;
      }
    }
    if (exiting->node->routine != fn) ++unmatched_exits_;
  }
  return exiting - 1;
}

[[gnu::always_inline]] inline HCCT_NOINST Node *ThreadProfile::new_node(Node *parent, uintptr_t fn, uintptr_t site) {
  bool indexed = parent->indexed();
  if (HCCT_UNLIKELY(indexed) && !index_.reserve(1)) {
    report_memory_exhausted();
    return &sink_;
  }
  Node *node = free_nodes_;
  if (node) {
    free_nodes_ = node->next_sibling();
  } else {
    node = static_cast<Node *>(nodes_.allocate());
    if (HCCT_UNLIKELY(!node)) {
      report_memory_exhausted();
      return &sink_;
    }
  }
  node->routine = fn;
  node->call_site = site;
  node->set_parent(parent, mode_ == Mode::kCct ? kCountsDirectly : 0);
  node->set_first_child(nullptr);
  node->count_low = 0;
  // Linked last, so a reader that follows child links never sees a half-made node.
  Node *old_first = parent->first_child();
  node->set_next_sibling(old_first);
  compiler_fence();
  parent->set_first_child(node);
  if (HCCT_UNLIKELY(indexed)) {
    index_.insert(node, nullptr);
    if (old_first) index_.set_prev(index_.find(old_first, sibling_steps_), node);
  }
  if (++live_nodes_ > peak_nodes_) peak_nodes_ = live_nodes_;
  return node;
}

// Linear scan. A narrow node's children stay in the order order_by_count gave them, except a hit
// beyond the probes' inline scan (the ninth child), which moves to the front. A list found longer
// than kIndexAfter at a miss gets indexed: from then on lookups and unlinks under that node cost
// O(1) whatever its fan-out.
[[gnu::always_inline]] inline HCCT_NOINST Node *ThreadProfile::find_or_add_child(Node *parent, uintptr_t fn, uintptr_t site) {
  if (parent == &sink_) return &sink_;
  if (HCCT_UNLIKELY(parent->indexed())) return find_or_add_indexed(parent, fn, site);
  Node *prev = parent->first_child();
  if (prev) {
    int scanned = 0;
    for (Node *node = prev->next_sibling(); node; prev = node, node = node->next_sibling()) {
      ++scanned;
      if (node->routine == fn && node->call_site == site) {
        sibling_steps_ += scanned;
        if (scanned < kFastSiblings) return node;  // the probes' scan reaches it: keep the order
        prev->set_next_sibling(node->next_sibling());
        node->set_next_sibling(parent->first_child());
        parent->set_first_child(node);
        return node;
      }
    }
    sibling_steps_ += scanned;
    if (HCCT_UNLIKELY(scanned >= kIndexAfter)) {
      index_children(parent);
    } else if (scanned >= 1) {  // two children or more: an order to choose
      Node *node = new_node(parent, fn, site);
      if (node != &sink_) order_by_count(parent);
      return node;
    }
  }
  return new_node(parent, fn, site);
}

// A narrow node's children by call count, most called first, the newest last: the probes' inline
// scan finds a child after as many steps as children precede it. Run when a third or later child
// is added (the general path, already some hundred instructions; with one sibling the newest
// stays first, which spares the calls example's new contexts the work), so the order follows the
// counts as they were then: an interpreter's hot callees are hot from the start.
HCCT_NOINST void ThreadProfile::order_by_count(Node *parent) {
  Node *kids[kIndexAfter + 2];
  int n = 0;
  Node *newest = parent->first_child();
  for (Node *c = newest->next_sibling(); c && n < kIndexAfter + 1; c = c->next_sibling()) kids[n++] = c;
  for (int i = 1; i < n; ++i) {
    Node *k = kids[i];
    int j = i;
    for (; j > 0 && kids[j - 1]->count_low < k->count_low; --j) kids[j] = kids[j - 1];
    kids[j] = k;
  }
  kids[n++] = newest;
  newest->set_next_sibling(nullptr);
  for (int i = n - 1; i > 0; --i) kids[i - 1]->set_next_sibling(kids[i]);
  parent->set_first_child(kids[0]);
}

// No move-to-front under a wide node: it would cost two index updates per call, and among
// thousands of children the first few seldom hit anyway (new children still go to the front).
[[gnu::always_inline]] inline HCCT_NOINST Node *ThreadProfile::find_or_add_indexed(Node *parent, uintptr_t fn, uintptr_t site) {
  size_t slot = index_.find(parent, fn, site, sibling_steps_);
  if (slot != ChildIndex::kNone) return index_.node(slot);
  return new_node(parent, fn, site);
}

// Indexes every child of `parent`, with room for the one about to be added. If the memory budget
// says no, the node stays a scanned list: slower, still right.
HCCT_NOINST void ThreadProfile::index_children(Node *parent) {
  size_t n = 0;
  for (Node *c = parent->first_child(); c; c = c->next_sibling()) ++n;
  if (!index_.reserve(n + 1)) return;
  Node *prev = nullptr;
  for (Node *c = parent->first_child(); c; prev = c, c = c->next_sibling()) index_.insert(c, prev);
  parent->parent_bits |= kIndexedChildren;
}

// Space-Saving update for a context that is not monitored (thesis §3.1.3): take a free counter,
// else replace the minimum one, whose context then leaves M and is pruned if it is a leaf.
[[gnu::always_inline]] inline HCCT_NOINST void ThreadProfile::monitor(Node *node) {
  node->set_monitored(true);
  if (size_ < capacity_) {
    slots_[size_++] = (uint32_t(1) << kCounterNodeBits) | (offset_of(node) >> 5);  // floor 1: the base is 0
    set_count(node, 1);
    return;
  }
  uint32_t i = find_min();
  ++upkeep_.evictions;
  Node *victim = counter_node(i);
  // Floor min_ + 1, at most kRebaseAfter above the base: no cap.
  slots_[i] = (uint32_t(min_ + 1 - floor_base_) << kCounterNodeBits) | (offset_of(node) >> 5);
  set_count(node, min_ + 1);
  victim->set_monitored(false);
  set_count(victim, 0);
  prune(victim, node);
}

// Thesis Algorithm 2. Counters never decrease, so a counter equal to min_ can only lie at or after
// min_idx_; when none is left, a full rescan finds the new minimum and its *first* position, so the
// victim is always a true minimum (the original implementation could evict one a little above it).
// The scan reads a counter's node only where its floor does not already put it above min_; it
// writes no floor (it passes a counter once per rescan at most; the rescan brings them up to date).
[[gnu::always_inline]] inline HCCT_NOINST uint32_t ThreadProfile::find_min() {
  uint32_t i = min_idx_;
  if (HCCT_UNLIKELY(!carries_.empty())) {
    while (i < size_ && (floor_base_ + (slots_[i] >> kCounterNodeBits) > min_ || count_of(counter_node(i)) != min_))
      ++i;
  } else {
    const uint32_t at_min = uint32_t(min_ - floor_base_);  // below kRebaseAfter: a floor above it is above min_
    // No carries: every count is its node's low 32 bits, and min_ fits them.
    while (i < size_ && ((slots_[i] >> kCounterNodeBits) > at_min || counter_node(i)->count_low != min_)) ++i;
  }
  if (HCCT_UNLIKELY(i == size_)) i = rescan_min();
  min_idx_ = i;
  return i;
}

HCCT_NOINST uint64_t ThreadProfile::calls() const {
  uint64_t n = 0;
  if (mode_ == Mode::kHcct) {
    for (uint32_t j = 0; j < size_; ++j) n += count_of(counter_node(j));
    return n;
  }
  // Every node counts directly: sum the tree, depth-first without a stack (parent links).
  const Node *node = root_->first_child();
  while (node) {
    n += count_of(node);
    if (node->first_child()) {
      node = node->first_child();
      continue;
    }
    while (node && !node->next_sibling()) {
      node = node->parent();
      if (node == root_) node = nullptr;
    }
    if (node) node = node->next_sibling();
  }
  return n;
}

HCCT_NOINST uint64_t ThreadProfile::min_count() const {
  if (size_ < capacity_ || size_ == 0) return 0;
  uint64_t m = count_of(counter_node(0));
  for (uint32_t j = 1; j < size_; ++j) m = count_of(counter_node(j)) < m ? count_of(counter_node(j)) : m;
  return m;
}

// The time summary's find-min: Algorithm 2 as above. Weighted updates (a victim's replacement
// gets min + n) never decrease a counter either, so the same lazy scan is exact.
HCCT_NOINST uint32_t ThreadProfile::find_time_min() {
  uint32_t i = time_min_idx_;
  while (i < time_size_ && node_samples(node_at(time_slots_[i])) != time_min_) ++i;
  if (HCCT_UNLIKELY(i == time_size_)) {
    uint64_t m = node_samples(node_at(time_slots_[0]));
    i = 0;
    for (uint32_t j = 1; j < time_size_; ++j) {
      if (node_samples(node_at(time_slots_[j])) < m) {
        m = node_samples(node_at(time_slots_[j]));
        i = j;
      }
    }
    time_min_ = m;
  }
  time_min_idx_ = i;
  return i;
}

HCCT_NOINST bool ThreadProfile::charge_samples_to(Node *node, uint64_t n, bool may_prune) {
  if (node == &sink_) {  // memory ran out: no context to charge (stated as lost)
    samples_in_sink_ += n;
    return true;
  }
  if (may_prune && deferred_count_) prune_deferred();
  // The sample map may have to grow: if the memory budget says no, the samples are lost (stated).
  if (!(node->parent_bits & kHasSamples) && !sample_map_.find_or_insert(reinterpret_cast<uintptr_t>(node))) {
    samples_in_sink_ += n;
    return true;
  }
  if (mode_ != Mode::kHcct || node_samples(node)) {
    set_samples(node, node_samples(node) + n);
    samples_ += n;
    return true;
  }
  // Space-Saving over samples: a free counter, else the minimum one's.
  if (time_size_ < capacity_) {
    time_slots_[time_size_++] = offset_of(node);
    set_samples(node, n);
    samples_ += n;
    return true;
  }
  if (!may_prune && deferred_count_ == kDeferredPrunes) {
    set_samples(node, 0);  // no entry left behind for a node that has no samples
    return false;
  }
  uint32_t i = find_time_min();
  Node *victim = node_at(time_slots_[i]);
  time_slots_[i] = offset_of(node);
  set_samples(node, time_min_ + n);
  set_samples(victim, 0);
  samples_ += n;
  if (may_prune) prune(victim, node);
  else deferred_[deferred_count_++] = victim;
  return true;
}

// A node leaves the queue when it is freed, so the queue only ever holds live nodes.
HCCT_NOINST void ThreadProfile::forget_deferred(const Node *node) {
  for (uint32_t i = 0; i < deferred_count_; ++i)
    if (deferred_[i] == node) deferred_[i--] = deferred_[--deferred_count_];
}

HCCT_NOINST void ThreadProfile::prune_deferred() {
  // A queued node may have gained a counter or children since; prune() keeps it then.
  while (deferred_count_) prune(deferred_[--deferred_count_], top_->node);
}

HCCT_NOINST uint64_t ThreadProfile::min_samples() const {
  if (mode_ != Mode::kHcct || time_size_ < capacity_ || time_size_ == 0) return 0;
  uint64_t m = node_samples(node_at(time_slots_[0]));
  for (uint32_t j = 1; j < time_size_; ++j)
    if (node_samples(node_at(time_slots_[j])) < m) m = node_samples(node_at(time_slots_[j]));
  return m;
}

// Thesis Algorithm 1, and the same walk when the cursor leaves a context: remove an unmonitored
// leaf and then every unmonitored ancestor it leaves childless, never the cursor or the root. This
// keeps the MCCT exactly the minimal subtree spanning M and the current calling path.
HCCT_NOINST void ThreadProfile::prune(Node *node, Node *cursor) {
  while (node != cursor && node != root_ && !node->first_child_offset && !keeps(node) &&
         !(node->parent_bits & kPinned)) {
    Node *parent = node->parent();
    unlink(node);
    ++upkeep_.pruned;
    if (HCCT_UNLIKELY(deferred_count_)) forget_deferred(node);
    node->set_next_sibling(free_nodes_);
    free_nodes_ = node;
    --live_nodes_;
    node = parent;
  }
}

[[gnu::always_inline]] inline HCCT_NOINST void ThreadProfile::unlink(Node *node) {
  Node *parent = node->parent();
  if (HCCT_UNLIKELY(parent->indexed())) {
    size_t slot = index_.find(node, sibling_steps_);
    Node *prev = index_.prev(slot), *next = node->next_sibling();
    index_.erase(slot);
    ++upkeep_.index_erases;
    if (prev) prev->set_next_sibling(next);
    else parent->set_first_child(next);
    if (next) index_.set_prev(index_.find(next, sibling_steps_), prev);
    return;
  }
  if (parent->first_child() == node) {
    parent->set_first_child(node->next_sibling());
    return;
  }
  Node *prev = parent->first_child();
  while (prev->next_sibling() != node) {
    ++sibling_steps_;
    prev = prev->next_sibling();
  }
  prev->set_next_sibling(node->next_sibling());
}

HCCT_NOINST Frame *ThreadProfile::grow_frames(Frame *top) {
  size_t old_count = size_t(frames_end() - frames_);
  size_t index = size_t(top - frames_);
  Frame *moved = double_pages(frames_, old_count);
  if (!moved) {
    top_ = frames_ + index - 1;  // the frame cannot be kept; its exit will be ignored
    return nullptr;
  }
  frames_ = moved;
  frames_last_ = moved + 2 * old_count - 1;
  return moved + index;
}

HCCT_NOINST void ThreadProfile::rebuild_path(const PathEntry *path, size_t n) {
  Frame *top = top_;
  if (mode_ == Mode::kHcct) {
    // Prune the old path from its deepest real node (sink frames have no tree node).
    while (top != frames_ && top->node == &sink_) --top;
    if (top != frames_) prune(top->node, frames_->node);
  }
  top = frames_;
  Node *parent = frames_->node;  // the root, or a coroutine stack's base
  for (size_t i = 0; i < n; ++i) {
    uintptr_t site = path[i].site & site_mask_;
    Node *node = parent->first_child();  // find_or_add_child scans from the second child
    if (parent == &sink_ || path[i].fn == 0)
      node = &sink_;
    else if (!node || node->routine != path[i].fn || node->call_site != site)
      node = find_or_add_child(parent, path[i].fn, site);
    if (++top == frames_end()) {
      top_ = top - 1;
      top = grow_frames(top);
      if (!top) return;
    }
    top->node = node;
    top->sp = path[i].sp - stack_lo_ < stack_size_ ? path[i].sp : kForeignStack;
    parent = node;
  }
  top_ = top;
}

HCCT_NOINST void ThreadProfile::restart_from_current_path() {
  NodeSpace old_nodes = nodes_;
  Node *old_root = root_;
  WordMap old_samples = sample_map_, old_carries = carries_;
  nodes_ = NodeSpace{};
  sample_map_ = WordMap{};
  carries_ = WordMap{};
  root_ = static_cast<Node *>(nodes_.allocate());
  if (!root_) {  // no memory for a fresh tree: keep the old one
    nodes_ = old_nodes;
    root_ = old_root;
    sample_map_ = old_samples;
    carries_ = old_carries;
    return;
  }
  *root_ = Node{};
  for (size_t i = 0; i < kHintSlots; ++i) hints_[i] = 0;  // offsets into the old tree's space
  index_.release();  // it indexes the old tree
  index_.set_base(nodes_.base());
  pins_.release();   // so does this: suspended stacks are pinned again below
  free_nodes_ = nullptr;
  live_nodes_ = peak_nodes_ = 0;
  size_ = 0;
  min_ = 0;
  min_idx_ = 0;
  floor_base_ = 0;
  unmatched_exits_ = 0;
  sink_.count_low = 0;
  // Time: the fresh tree has no samples (new nodes start at 0; so does the root).
  samples_ = samples_in_sink_ = 0;
  time_size_ = 0;
  time_min_ = 0;
  time_min_idx_ = 0;
  deferred_count_ = 0;
  // Every machine stack's path, the suspended ones too (the child may resume them).
  if (stacks_) {
    stacks_[current_stack_] = StackState{frames_, top_, frames_end(), stack_lo_ - 1, stack_size_};
  } else {
    stack_count_ = 1;  // just the current stack: a view of it, for the loop below
  }
  StackState only{frames_, top_, frames_end(), stack_lo_ - 1, stack_size_};
  StackState *stacks = stacks_ ? stacks_ : &only;
  for (uint32_t i = 0; i < stack_count_; ++i) {
    StackState &st = stacks[i];
    if (!st.frames->node) continue;  // never run
    Node *parent = st.frames->node == old_root ? root_ : rebuild_node_path(st.frames->node, old_root);
    st.frames->node = parent;
    for (Frame *f = st.frames + 1; f <= st.top; ++f) {
      Node *node = f->node == &sink_ || parent == &sink_
                       ? &sink_
                       : find_or_add_child(parent, f->node->routine, f->node->call_site);
      f->node = node;
      parent = node;
    }
  }
  if (!stacks_) stack_count_ = 0;
  frames_->node = stacks[current_stack_].frames->node;
  if (stacks_ && mode_ == Mode::kHcct) {
    for (uint32_t i = 0; i < stack_count_; ++i) {
      if (i == current_stack_) continue;
      Frame *f = stacks_[i].top;
      while (f->node == &sink_) --f;
      pin(f->node);
    }
  }
  old_nodes.release();
  old_samples.release();
  old_carries.release();
}

// The path of a node of the old tree, made again in the new one (restart after fork).
HCCT_NOINST Node *ThreadProfile::rebuild_node_path(const Node *old_leaf, const Node *old_root) {
  size_t depth = 0;
  for (const Node *n = old_leaf; n != old_root; n = n->parent()) ++depth;
  auto *chain = static_cast<const Node **>(map_pages(depth * sizeof(Node *) + 1));
  if (!chain) return root_;
  size_t i = depth;
  for (const Node *n = old_leaf; n != old_root; n = n->parent()) chain[--i] = n;
  Node *node = root_;
  for (i = 0; i < depth && node != &sink_; ++i) node = find_or_add_child(node, chain[i]->routine, chain[i]->call_site);
  unmap_pages(chain, depth * sizeof(Node *) + 1);
  return node == &sink_ ? root_ : node;
}

// ---------------------------------------------------------------------------------------------
// Machine stacks (docs/RUNTIME.md, "Stacks").

HCCT_NOINST Node *ThreadProfile::path_leaf() const {
  const Frame *f = top_;
  while (f != frames_ && f->node == &sink_) --f;
  return f->node;
}

HCCT_NOINST bool ThreadProfile::start_stacks() {
  stacks_ = static_cast<StackState *>(map_pages(kInitialStacks * sizeof(StackState)));
  if (!stacks_) return false;
  stack_capacity_ = kInitialStacks;
  stack_count_ = 1;
  current_stack_ = 0;
  stacks_[0] = StackState{frames_, top_, frames_end(), stack_lo_ - 1, stack_size_};
  return true;
}

// The stack `sp` lies on. With a hint (the target context's uc_stack, set for makecontext) that
// holds `sp`, a lookup by its address; else the thread's own stack, or, when other stacks lie
// inside it, the smallest known stack holding `sp`. -1 if none does (or memory is refused).
// `*remade`: the hint names a known stack that makecontext made again (see made_by_makecontext):
// its bounds become the hint's, and the frames still on it are an abandoned coroutine's.
HCCT_NOINST int ThreadProfile::find_stack(uintptr_t sp, uintptr_t hint_lo, uintptr_t hint_size,
                                          uintptr_t from_sp, bool *remade) {
  if (hint_size && hint_lo && sp - 1 - hint_lo < hint_size) {
    bool switcher_outside = from_sp == 0 || from_sp - 1 - hint_lo >= hint_size;
    if (uintptr_t *index = stack_by_lo_.find(hint_lo)) {
      auto i = uint32_t(*index - 1);
      if (switcher_outside && made_by_makecontext(sp, hint_lo + hint_size)) {
        stacks_[i].size = hint_size;  // the memory may be reused with another size
        if (i == current_stack_) stack_size_ = hint_size;
        *remade = true;
        return int(i);
      }
      // Resumed: the bounds it was made with hold (a saved context's uc_stack is only the
      // program's bookkeeping; it does not move frames).
      uintptr_t size = i == current_stack_ ? stack_size_ : stacks_[i].size;
      if (sp - 1 - hint_lo < size) return int(i);
    } else if (switcher_outside && hint_lo + hint_size - sp <= kFreshContextDepth) {
      return add_stack(hint_lo, hint_size);
    }
  }
  const StackState &own = stacks_[0];
  if (nested_stacks_ == 0 && sp - 1 - own.lo < own.size) return 0;
  int best = -1;
  for (uint32_t i = 0; i < stack_count_; ++i) {
    const StackState &st = stacks_[i];
    if (sp - 1 - st.lo < st.size && (best < 0 || st.size < stacks_[best].size)) best = int(i);
  }
  return best;
}

HCCT_NOINST int ThreadProfile::add_stack(uintptr_t lo, uintptr_t size) {
  if (stack_count_ == stack_capacity_) {
    StackState *moved = double_pages(stacks_, stack_capacity_);
    if (!moved) return -1;
    stacks_ = moved;
    stack_capacity_ *= 2;
  }
  auto *frames = static_cast<Frame *>(map_pages(kStackFrames * sizeof(Frame)));
  if (!frames) return -1;
  uintptr_t *slot = stack_by_lo_.find_or_insert(lo);
  if (!slot) {
    unmap_pages(frames, kStackFrames * sizeof(Frame));
    return -1;
  }
  uint32_t index = stack_count_++;
  *slot = index + 1;
  frames[0] = Frame{nullptr, kForeignStack};  // the base: set when first switched into
  stacks_[index] = StackState{frames, frames, frames + kStackFrames, lo, size};
  if (lo - stacks_[0].lo < stacks_[0].size) ++nested_stacks_;
  return int(index);
}

// A stack that held no frame when control left it without a swapcontext: its coroutine returned.
HCCT_NOINST void ThreadProfile::drop_stack(uint32_t index) {
  StackState &st = stacks_[index];
  unmap_pages(st.frames, size_t(st.end - st.frames) * sizeof(Frame));
  stack_by_lo_.erase(st.lo);
  if (st.lo - stacks_[0].lo < stacks_[0].size) --nested_stacks_;
  uint32_t last = --stack_count_;
  if (index != last) {
    stacks_[index] = stacks_[last];
    *stack_by_lo_.find(stacks_[index].lo) = index + 1;
    if (current_stack_ == last) current_stack_ = index;
  }
}

// O(1) but for pins (one map update each in hcct mode): saves the running stack's state (or drops
// it), loads the target's. A target that holds no frame is rooted at the switcher's context; so is
// a `remade` one, whose frames, an abandoned coroutine's, are dropped first.
HCCT_NOINST void ThreadProfile::move_to_stack(uint32_t index, bool drop_current, bool remade) {
  Node *from = path_leaf();
  Node *dropped_base = nullptr;
  if (drop_current) {
    dropped_base = frames_->node;
    stacks_[current_stack_] = StackState{frames_, top_, frames_end(), stack_lo_ - 1, stack_size_};
    drop_stack(current_stack_);
    if (index == stack_count_) index = current_stack_;  // the target was moved into the hole
  } else {
    stacks_[current_stack_] = StackState{frames_, top_, frames_end(), stack_lo_ - 1, stack_size_};
    if (mode_ == Mode::kHcct) pin(from);
  }
  const StackState &st = stacks_[index];
  frames_ = st.frames;
  top_ = st.top;
  frames_last_ = st.end - 1;
  stack_lo_ = st.lo + 1;
  stack_size_ = st.size;
  current_stack_ = index;
  // Pinned when it was suspended (a stack never run has no base yet).
  if (mode_ == Mode::kHcct && frames_->node) unpin(path_leaf());
  Node *old_leaf = path_leaf();  // the base when the stack holds no frame (null if never run)
  if (remade) top_ = frames_;
  if (index != 0 && top_ == frames_) {
    frames_->node = from;  // (re)rooted where it is switched into
    // One walk frees the dropped frames' contexts and the old base, as far as nothing keeps them.
    if (mode_ == Mode::kHcct && old_leaf && old_leaf != from) prune(old_leaf, from);
  }
  if (mode_ == Mode::kHcct && dropped_base) prune(dropped_base, path_leaf());
}

HCCT_NOINST bool ThreadProfile::switch_stack(uintptr_t target_sp, uintptr_t hint_lo, uintptr_t hint_size,
                                             uintptr_t from_sp) {
  if (!stacks_ && !start_stacks()) return false;
  // The switcher's own frame is on the stack control is on: the runtime may not have seen it get
  // there (a return through uc_link or a longjmp, and no event since).
  if (from_sp && from_sp - stack_lo_ >= stack_size_) follow_unseen_switch(from_sp);
  bool remade = false;
  int index = find_stack(target_sp, hint_lo, hint_size, from_sp, &remade);
  if (index < 0) return false;
  if (uint32_t(index) != current_stack_) {
    move_to_stack(uint32_t(index), false, remade);
  } else if (remade) {
    // Still taken for the running stack (the switcher's is one never announced): its abandoned
    // frames go, its base stays.
    Node *left = path_leaf();
    top_ = frames_;
    if (mode_ == Mode::kHcct && left != frames_->node) prune(left, frames_->node);
  }
  return true;
}

HCCT_NOINST bool ThreadProfile::follow_unseen_switch(uintptr_t sp) {
  bool remade = false;  // no hint: never set
  int index = find_stack(sp, 0, 0, 0, &remade);
  if (index < 0 || uint32_t(index) == current_stack_) return false;
  move_to_stack(uint32_t(index), /*drop_current=*/current_stack_ != 0 && top_ == frames_);
  return true;
}

// Pins count suspended stacks per node; the flag alone is what pruning reads. If the map cannot
// grow, the flag stays set for good: a node kept too long, never a path freed under a stack.
HCCT_NOINST void ThreadProfile::pin(Node *node) {
  if (uintptr_t *count = pins_.find_or_insert(reinterpret_cast<uintptr_t>(node))) ++*count;
  node->parent_bits |= kPinned;
}

HCCT_NOINST void ThreadProfile::unpin(Node *node) {
  uintptr_t *count = pins_.find(reinterpret_cast<uintptr_t>(node));
  if (!count) return;
  if (--*count == 0) {
    pins_.erase(reinterpret_cast<uintptr_t>(node));
    node->parent_bits &= ~kPinned;
  }
}

HCCT_NOINST uintptr_t *WordMap::find(uintptr_t key) const {
  if (!entries_) return nullptr;
  for (size_t i = home(key);; i = (i + 1) & mask_) {
    if (entries_[i].key == key) return &entries_[i].value;
    if (!entries_[i].key) return nullptr;
  }
}

HCCT_NOINST uintptr_t *WordMap::find_or_insert(uintptr_t key) {
  if (uintptr_t *value = find(key)) return value;
  if (2 * (size_ + 1) > (entries_ ? mask_ + 1 : 0) && !grow()) return nullptr;
  size_t i = home(key);
  while (entries_[i].key) i = (i + 1) & mask_;
  entries_[i] = Entry{key, 0};
  ++size_;
  return &entries_[i].value;
}

HCCT_NOINST void WordMap::erase(uintptr_t key) {
  if (!entries_) return;
  size_t hole = home(key);
  while (entries_[hole].key != key) {
    if (!entries_[hole].key) return;
    hole = (hole + 1) & mask_;
  }
  for (size_t j = (hole + 1) & mask_; entries_[j].key; j = (j + 1) & mask_) {
    size_t k = home(entries_[j].key);
    bool stays = hole <= j ? (hole < k && k <= j) : (hole < k || k <= j);
    if (!stays) {
      entries_[hole] = entries_[j];
      hole = j;
    }
  }
  entries_[hole] = Entry{0, 0};
  --size_;
}

HCCT_NOINST bool WordMap::grow() {
  size_t capacity = entries_ ? mask_ + 1 : 0;
  size_t grown = capacity ? 2 * capacity : 4096 / sizeof(Entry);
  if (!charge_tree_memory(grown * sizeof(Entry))) return false;
  auto *fresh = static_cast<Entry *>(map_pages(grown * sizeof(Entry)));
  if (!fresh) {
    refund_tree_memory(grown * sizeof(Entry));
    return false;
  }
  Entry *old = entries_;
  entries_ = fresh;
  mask_ = grown - 1;
  for (size_t i = 0; i < capacity; ++i) {
    if (!old[i].key) continue;
    size_t j = home(old[i].key);
    while (entries_[j].key) j = (j + 1) & mask_;
    entries_[j] = old[i];
  }
  if (old) {
    unmap_pages(old, capacity * sizeof(Entry));
    refund_tree_memory(capacity * sizeof(Entry));
  }
  return true;
}

HCCT_NOINST void WordMap::release() {
  if (entries_) {
    unmap_pages(entries_, (mask_ + 1) * sizeof(Entry));
    refund_tree_memory((mask_ + 1) * sizeof(Entry));
  }
  *this = WordMap{};
}

namespace {

// The node after `node` in depth-first order below `root`, through parent links (no stack to
// allocate: trees may be a million levels deep); null after the last.
template <typename N>
HCCT_NOINST N *next_in_preorder(N *node, const Node *root) {
  if (node->first_child()) return node->first_child();
  while (node != root && !node->next_sibling()) node = node->parent();
  return node == root ? nullptr : node->next_sibling();
}

}  // namespace

HCCT_NOINST void ThreadProfile::retire_range(uintptr_t lo, uintptr_t hi, uintptr_t tag) {
  auto retired = [lo, hi, tag](uintptr_t address) { return address - lo < hi - lo ? address | tag : address; };
  uint64_t steps = 0;
  Node *node = root_;
  for (;;) {
    for (Node *c = node->first_child(); c; c = c->next_sibling()) {
      uintptr_t fn = retired(c->routine), site = retired(c->call_site);
      if (fn == c->routine && site == c->call_site) continue;
      // Siblings stay distinct: a retired key has the tag's bits, which no live key has.
      size_t slot = node->indexed() ? index_.find(c, steps) : ChildIndex::kNone;
      Node *prev = slot != ChildIndex::kNone ? index_.prev(slot) : nullptr;
      if (slot != ChildIndex::kNone) index_.erase(slot);
      c->routine = fn;
      c->call_site = site;
      if (slot != ChildIndex::kNone) index_.insert(c, prev);  // into the slot erase just freed: no growth
    }
    node = next_in_preorder(node, root_);
    if (!node) break;
  }
}

// Every child of an indexed node must be in the index with its true previous sibling, and only
// those: walks the whole tree (tests only).
HCCT_NOINST bool ThreadProfile::index_consistent() const {
  size_t found = 0;
  uint64_t steps = 0;
  const Node *node = root_;
  for (;;) {
    const Node *prev = nullptr;
    for (const Node *c = node->first_child(); c; prev = c, c = c->next_sibling()) {
      if (c->parent() != node) return false;
      size_t slot = index_.find(c, steps);
      if (node->indexed()) {
        if (slot == ChildIndex::kNone || index_.node(slot) != c || index_.prev(slot) != prev) return false;
        ++found;
      } else if (slot != ChildIndex::kNone) {
        return false;
      }
    }
    node = next_in_preorder(node, root_);
    if (!node) break;
  }
  return found == index_.size();
}

namespace {
constexpr size_t kMinIndexEntries = 4096 / (2 * sizeof(uint32_t));
}

HCCT_NOINST size_t ChildIndex::find(const Node *parent, uintptr_t fn, uintptr_t site, uint64_t &steps) const {
  if (!slots_) return kNone;
  uint64_t h = hash(parent, fn, site);
  uint32_t tag = tag_of(h);
  size_t probes = 1;
  for (size_t i = home(h);; i = (i + 1) & mask_, ++probes) {
    uint32_t slot = slots_[i];
    if (!slot) break;
    if ((slot & ~kNodeBits) != tag) continue;
    const Node *n = node_of(slot);
    if (n->routine == fn && n->call_site == site && n->parent() == parent) {
      steps += probes;
      return i;
    }
  }
  steps += probes;
  return kNone;
}

HCCT_NOINST bool ChildIndex::reserve(size_t more) {
  size_t capacity = slots_ ? mask_ + 1 : 0;
  if (2 * (size_ + more) <= capacity) return true;
  size_t grown = capacity ? capacity : kMinIndexEntries;
  while (grown < 2 * (size_ + more)) grown *= 2;
  size_t bytes = grown * kSlotBytes;
  if (!charge_tree_memory(bytes)) return false;
  auto *fresh = static_cast<uint32_t *>(map_pages(bytes));
  if (!fresh) {
    refund_tree_memory(bytes);
    return false;
  }
  uint32_t *old = slots_;
  slots_ = fresh;
  mask_ = grown - 1;
  size_ = 0;
  for (size_t i = 0; i < capacity; ++i) {
    if (!old[i]) continue;
    uint32_t prev = old[capacity + i];
    insert(node_of(old[i]), prev ? reinterpret_cast<Node *>(const_cast<char *>(base_) + prev) : nullptr);
  }
  if (old) {
    unmap_pages(old, capacity * kSlotBytes);
    refund_tree_memory(capacity * kSlotBytes);
  }
  return true;
}

HCCT_NOINST void ChildIndex::insert(Node *child, Node *prev) {
  uint64_t h = hash(child->parent(), child->routine, child->call_site);
  size_t i = home(h);
  while (slots_[i]) i = (i + 1) & mask_;
  slots_[i] = tag_of(h) | uint32_t(offset_of(child) >> 5);
  set_prev(i, prev);
  ++size_;
}

// Backward-shift deletion: later entries of the probe chain move into the hole unless their home
// lies cyclically in (hole, their slot], so every chain stays unbroken without tombstones.
HCCT_NOINST void ChildIndex::erase(size_t hole) {
  size_t capacity = mask_ + 1;
  for (size_t j = (hole + 1) & mask_; slots_[j]; j = (j + 1) & mask_) {
    const Node *n = node_of(slots_[j]);
    size_t k = home(hash(n->parent(), n->routine, n->call_site));
    bool stays = hole <= j ? (hole < k && k <= j) : (hole < k || k <= j);
    if (!stays) {
      slots_[hole] = slots_[j];
      slots_[capacity + hole] = slots_[capacity + j];
      hole = j;
    }
  }
  slots_[hole] = 0;
  slots_[capacity + hole] = 0;
  --size_;
}

HCCT_NOINST void ChildIndex::release() {
  if (slots_) {
    unmap_pages(slots_, bytes());
    refund_tree_memory(bytes());
  }
  const char *base = base_;
  *this = ChildIndex{};
  base_ = base;  // the node space outlives its index (restart_from_current_path sets a new one)
}

}  // namespace hcct::rt
