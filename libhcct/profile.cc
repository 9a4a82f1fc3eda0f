#include "profile.h"

#include <math.h>

namespace hcct::rt {

namespace {
constexpr size_t kInitialFrames = 4096;
}

HCCT_NOINST bool ThreadProfile::init(const ProfileConfig &config) {
  mode_ = config.mode;
  key_ = config.key;
  site_mask_ = key_ == KeyBy::kRoutine ? 0 : ~uintptr_t(0);
  epsilon_ = config.epsilon;
  stack_lo_ = config.stack_lo;
  stack_size_ = config.stack_size;
  root_ = Node{};
  frames_ = static_cast<Frame *>(map_pages(kInitialFrames * sizeof(Frame)));
  if (!frames_) return false;
  frames_end_ = frames_ + kInitialFrames;
  top_ = frames_;
  top_->node = &root_;
  top_->sp = kForeignStack;  // the root is never popped
  if (mode_ == Mode::kHcct) {
    double want = ceil(1.0 / epsilon_);
    capacity_ = want > 1e9 ? 1000000000u : uint32_t(want);
    if (capacity_ < 1) capacity_ = 1;
    if (!charge_tree_memory(capacity_ * sizeof(Node *))) {
      destroy();
      return false;
    }
    slots_ = static_cast<Node **>(map_pages(capacity_ * sizeof(Node *)));
    if (!slots_) {
      refund_tree_memory(capacity_ * sizeof(Node *));
      destroy();
      return false;
    }
  }
  return true;
}

HCCT_NOINST void ThreadProfile::destroy() {
  if (frames_) unmap_pages(frames_, size_t(frames_end_ - frames_) * sizeof(Frame));
  if (slots_) {
    unmap_pages(slots_, capacity_ * sizeof(Node *));
    refund_tree_memory(capacity_ * sizeof(Node *));
  }
  arena_.release();
  index_.release();
  *this = ThreadProfile{};
}

// The full rescan of find_min: out of line, it runs once per ~1/ε evictions at most.
HCCT_NOINST uint32_t ThreadProfile::rescan_min() {
  uint64_t m = slots_[0]->count;
  uint32_t i = 0;
  for (uint32_t j = 1; j < size_; ++j) {
    if (slots_[j]->count < m) {
      m = slots_[j]->count;
      i = j;
    }
  }
  min_ = m;
  return i;
}

HCCT_NOINST Frame *ThreadProfile::pop_stale(Frame *top, uintptr_t sp) {
  Node *left = top->node;
  while (top->sp < sp) --top;  // the root's sp is kForeignStack: the loop stops there
  if (mode_ == Mode::kHcct && left != top->node) prune(left, top->node);
  return top;
}

HCCT_NOINST void ThreadProfile::enter(uintptr_t fn, uintptr_t site, uintptr_t sp) {
  Frame *top = top_;
  if (HCCT_LIKELY(sp - stack_lo_ < stack_size_)) {
    // Frames below the new frame's stack pointer were left without an exit probe. Equal stack
    // pointers are live: probes of inlined callees run in their caller's machine frame.
    if (top->sp < sp) top = pop_stale(top, sp);
  } else {
    sp = kForeignStack;
  }
  site &= site_mask_;
  Node *parent = top->node;
  Node *node = parent->first_child;
  if (!node || node->routine != fn || node->call_site != site)
    node = find_or_add_child(parent, fn, site);  // the sink when memory is exhausted
  if (node->monitored()) {
    ++node->count;
  } else {
    monitor(node);
  }
  if (++top == frames_end_) {
    top = grow_frames(top);
    if (!top) return;
  }
  top->node = node;
  top->sp = sp;
  top_ = top;
}

HCCT_NOINST Frame *ThreadProfile::exit_torn_down(Frame *top, uintptr_t fn, uintptr_t sp) {
  if (top->sp >= sp) {  // no frame below: the function was entered before profiling started
    ++unmatched_exits_;
    return top;
  }
  while (top[-1].sp < sp) --top;  // frames skipped without exits lie below the exiting one
  if (top->node->routine != fn && top->node != &sink_) ++unmatched_exits_;
  return top - 1;
}

[[gnu::always_inline]] inline HCCT_NOINST Node *ThreadProfile::new_node(Node *parent, uintptr_t fn, uintptr_t site) {
  bool indexed = parent->indexed();
  if (HCCT_UNLIKELY(indexed) && !index_.reserve(1)) {
    report_memory_exhausted();
    return &sink_;
  }
  Node *node = free_nodes_;
  if (node) {
    free_nodes_ = node->next_sibling;
  } else {
    node = static_cast<Node *>(arena_.allocate(sizeof(Node)));
    if (HCCT_UNLIKELY(!node)) {
      report_memory_exhausted();
      return &sink_;
    }
  }
  node->routine = fn;
  node->call_site = site;
  node->parent_bits = reinterpret_cast<uintptr_t>(parent) | (mode_ == Mode::kCct ? kCountsDirectly : 0);
  node->first_child = nullptr;
  node->count = 0;
  // Linked last, so a reader that follows child links never sees a half-made node.
  Node *old_first = parent->first_child;
  node->next_sibling = old_first;
  compiler_fence();
  parent->first_child = node;
  if (HCCT_UNLIKELY(indexed)) {
    index_.insert(node, nullptr);
    if (old_first) index_.find(old_first, sibling_steps_)->prev = node;
  }
  if (++live_nodes_ > peak_nodes_) peak_nodes_ = live_nodes_;
  return node;
}

// Linear scan with move-to-front: the thesis measured 2-3 siblings scanned on average, and moving
// the hit to the front makes the next call from the same loop a first-child hit. A list found longer
// than kIndexAfter at a miss gets indexed: from then on lookups and unlinks under that node cost
// O(1) whatever its fan-out.
[[gnu::always_inline]] inline HCCT_NOINST Node *ThreadProfile::find_or_add_child(Node *parent, uintptr_t fn, uintptr_t site) {
  if (parent == &sink_) return &sink_;
  if (HCCT_UNLIKELY(parent->indexed())) return find_or_add_indexed(parent, fn, site);
  Node *prev = parent->first_child;
  if (prev) {
    int scanned = 0;
    for (Node *node = prev->next_sibling; node; prev = node, node = node->next_sibling) {
      ++scanned;
      if (node->routine == fn && node->call_site == site) {
        sibling_steps_ += scanned;
        prev->next_sibling = node->next_sibling;
        node->next_sibling = parent->first_child;
        parent->first_child = node;
        return node;
      }
    }
    sibling_steps_ += scanned;
    if (HCCT_UNLIKELY(scanned >= kIndexAfter)) index_children(parent);
  }
  return new_node(parent, fn, site);
}

// No move-to-front under a wide node: it would cost two index updates per call, and among
// thousands of children the first few seldom hit anyway (new children still go to the front).
HCCT_NOINST Node *ThreadProfile::find_or_add_indexed(Node *parent, uintptr_t fn, uintptr_t site) {
  if (ChildIndex::Entry *entry = index_.find(parent, fn, site, sibling_steps_)) return entry->node;
  return new_node(parent, fn, site);
}

// Indexes every child of `parent`, with room for the one about to be added. If the memory budget
// says no, the node stays a scanned list: slower, still right.
HCCT_NOINST void ThreadProfile::index_children(Node *parent) {
  size_t n = 0;
  for (Node *c = parent->first_child; c; c = c->next_sibling) ++n;
  if (!index_.reserve(n + 1)) return;
  Node *prev = nullptr;
  for (Node *c = parent->first_child; c; prev = c, c = c->next_sibling) index_.insert(c, prev);
  parent->parent_bits |= kIndexedChildren;
}

// Space-Saving update for a context that is not monitored (thesis §3.1.3): take a free counter,
// else replace the minimum one, whose context then leaves M and is pruned if it is a leaf.
[[gnu::always_inline]] inline HCCT_NOINST void ThreadProfile::monitor(Node *node) {
  node->set_monitored(true);
  if (size_ < capacity_) {
    slots_[size_++] = node;
    node->count = 1;
    return;
  }
  uint32_t i = find_min();
  Node *victim = slots_[i];
  slots_[i] = node;
  node->count = min_ + 1;
  victim->set_monitored(false);
  victim->count = 0;
  prune(victim, node);
}

// Thesis Algorithm 2. Counters never decrease, so a counter equal to min_ can only lie at or after
// min_idx_; when none is left, a full rescan finds the new minimum and its *first* position, so the
// victim is always a true minimum (the original implementation could evict one a little above it).
[[gnu::always_inline]] inline HCCT_NOINST uint32_t ThreadProfile::find_min() {
  uint32_t i = min_idx_;
  while (i < size_ && slots_[i]->count != min_) ++i;
  if (HCCT_UNLIKELY(i == size_)) i = rescan_min();
  min_idx_ = i;
  return i;
}

HCCT_NOINST uint64_t ThreadProfile::calls() const {
  uint64_t n = 0;
  if (mode_ == Mode::kHcct) {
    for (uint32_t j = 0; j < size_; ++j) n += slots_[j]->count;
    return n;
  }
  // Every node counts directly: sum the tree, depth-first without a stack (parent links).
  const Node *node = root_.first_child;
  while (node) {
    n += node->count;
    if (node->first_child) {
      node = node->first_child;
      continue;
    }
    while (node && !node->next_sibling) {
      node = node->parent();
      if (node == &root_) node = nullptr;
    }
    if (node) node = node->next_sibling;
  }
  return n;
}

HCCT_NOINST uint64_t ThreadProfile::min_count() const {
  if (size_ < capacity_ || size_ == 0) return 0;
  uint64_t m = slots_[0]->count;
  for (uint32_t j = 1; j < size_; ++j)
    if (slots_[j]->count < m) m = slots_[j]->count;
  return m;
}

// Thesis Algorithm 1, and the same walk when the cursor leaves a context: remove an unmonitored
// leaf and then every unmonitored ancestor it leaves childless, never the cursor or the root. This
// keeps the MCCT exactly the minimal subtree spanning M and the current calling path.
HCCT_NOINST void ThreadProfile::prune(Node *node, Node *cursor) {
  while (node != cursor && node != &root_ && !node->first_child && !node->monitored()) {
    Node *parent = node->parent();
    unlink(node);
    node->next_sibling = free_nodes_;
    free_nodes_ = node;
    --live_nodes_;
    node = parent;
  }
}

[[gnu::always_inline]] inline HCCT_NOINST void ThreadProfile::unlink(Node *node) {
  Node *parent = node->parent();
  if (HCCT_UNLIKELY(parent->indexed())) {
    ChildIndex::Entry *entry = index_.find(node, sibling_steps_);
    Node *prev = entry->prev, *next = node->next_sibling;
    index_.erase(entry);
    if (prev) prev->next_sibling = next;
    else parent->first_child = next;
    if (next) index_.find(next, sibling_steps_)->prev = prev;
    return;
  }
  if (parent->first_child == node) {
    parent->first_child = node->next_sibling;
    return;
  }
  Node *prev = parent->first_child;
  while (prev->next_sibling != node) {
    ++sibling_steps_;
    prev = prev->next_sibling;
  }
  prev->next_sibling = node->next_sibling;
}

HCCT_NOINST Frame *ThreadProfile::grow_frames(Frame *top) {
  size_t old_count = size_t(frames_end_ - frames_);
  size_t index = size_t(top - frames_);
  Frame *moved = double_pages(frames_, old_count);
  if (!moved) {
    top_ = frames_ + index - 1;  // the frame cannot be kept; its exit will be ignored
    return nullptr;
  }
  frames_ = moved;
  frames_end_ = moved + 2 * old_count;
  return moved + index;
}

HCCT_NOINST void ThreadProfile::rebuild_path(const PathEntry *path, size_t n) {
  Frame *top = top_;
  if (mode_ == Mode::kHcct) {
    // Prune the old path from its deepest real node (sink frames have no tree node).
    while (top != frames_ && top->node == &sink_) --top;
    if (top != frames_) prune(top->node, &root_);
  }
  top = frames_;
  Node *parent = &root_;
  for (size_t i = 0; i < n; ++i) {
    uintptr_t site = path[i].site & site_mask_;
    Node *node = parent->first_child;  // find_or_add_child scans from the second child
    if (parent == &sink_ || path[i].fn == 0)
      node = &sink_;
    else if (!node || node->routine != path[i].fn || node->call_site != site)
      node = find_or_add_child(parent, path[i].fn, site);
    if (++top == frames_end_) {
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
  Arena old_arena = arena_;
  arena_ = Arena{};
  index_.release();  // it indexes the old tree
  root_.first_child = nullptr;
  root_.parent_bits = 0;
  free_nodes_ = nullptr;
  live_nodes_ = peak_nodes_ = 0;
  size_ = 0;
  min_ = 0;
  min_idx_ = 0;
  unmatched_exits_ = 0;
  sink_.count = 0;
  Node *parent = &root_;
  for (Frame *f = frames_ + 1; f <= top_; ++f) {
    Node *node = f->node == &sink_ ? &sink_ : find_or_add_child(parent, f->node->routine, f->node->call_site);
    f->node = node;
    parent = node;
  }
  old_arena.release();
}

// Every child of an indexed node must be in the index with its true previous sibling, and only
// those: walks the whole tree (tests only).
HCCT_NOINST bool ThreadProfile::index_consistent() const {
  size_t found = 0;
  uint64_t steps = 0;
  const Node *node = &root_;
  for (;;) {
    const Node *prev = nullptr;
    for (const Node *c = node->first_child; c; prev = c, c = c->next_sibling) {
      if (c->parent() != node) return false;
      ChildIndex::Entry *entry = index_.find(c, steps);
      if (node->indexed()) {
        if (!entry || entry->node != c || entry->prev != prev) return false;
        ++found;
      } else if (entry) {
        return false;
      }
    }
    // Next node in depth-first order, through parent links (no stack to allocate).
    if (node->first_child) {
      node = node->first_child;
      continue;
    }
    while (node != &root_ && !node->next_sibling) node = node->parent();
    if (node == &root_) break;
    node = node->next_sibling;
  }
  return found == index_.size();
}

namespace {
constexpr size_t kMinIndexEntries = 4096 / sizeof(ChildIndex::Entry);
}

HCCT_NOINST size_t ChildIndex::home(const Node *parent, uintptr_t fn, uintptr_t site) const {
  uint64_t h = reinterpret_cast<uintptr_t>(parent) * 0x9e3779b97f4a7c15ull;
  h ^= fn * 0xc2b2ae3d27d4eb4full;
  h ^= site * 0x165667b19e3779f9ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return size_t(h) & mask_;
}

HCCT_NOINST ChildIndex::Entry *ChildIndex::find(const Node *parent, uintptr_t fn, uintptr_t site,
                                                uint64_t &steps) const {
  if (!entries_) return nullptr;
  for (size_t i = home(parent, fn, site);; i = (i + 1) & mask_) {
    ++steps;
    Entry *entry = &entries_[i];
    const Node *n = entry->node;
    if (!n) return nullptr;
    if (n->routine == fn && n->call_site == site && n->parent() == parent) return entry;
  }
}

HCCT_NOINST bool ChildIndex::reserve(size_t more) {
  size_t capacity = entries_ ? mask_ + 1 : 0;
  if (2 * (size_ + more) <= capacity) return true;
  size_t grown = capacity ? capacity : kMinIndexEntries;
  while (grown < 2 * (size_ + more)) grown *= 2;
  size_t bytes = grown * sizeof(Entry);
  if (!charge_tree_memory(bytes)) return false;
  auto *fresh = static_cast<Entry *>(map_pages(bytes));
  if (!fresh) {
    refund_tree_memory(bytes);
    return false;
  }
  Entry *old = entries_;
  entries_ = fresh;
  mask_ = grown - 1;
  size_ = 0;
  for (size_t i = 0; i < capacity; ++i)
    if (old[i].node) insert(old[i].node, old[i].prev);
  if (old) {
    unmap_pages(old, capacity * sizeof(Entry));
    refund_tree_memory(capacity * sizeof(Entry));
  }
  return true;
}

HCCT_NOINST void ChildIndex::insert(Node *child, Node *prev) {
  size_t i = home(child->parent(), child->routine, child->call_site);
  while (entries_[i].node) i = (i + 1) & mask_;
  entries_[i] = Entry{child, prev};
  ++size_;
}

// Backward-shift deletion: later entries of the probe chain move into the hole unless their home
// lies cyclically in (hole, their slot], so every chain stays unbroken without tombstones.
HCCT_NOINST void ChildIndex::erase(Entry *entry) {
  size_t hole = size_t(entry - entries_);
  for (size_t j = (hole + 1) & mask_; entries_[j].node; j = (j + 1) & mask_) {
    const Node *n = entries_[j].node;
    size_t k = home(n->parent(), n->routine, n->call_site);
    bool stays = hole <= j ? (hole < k && k <= j) : (hole < k || k <= j);
    if (!stays) {
      entries_[hole] = entries_[j];
      hole = j;
    }
  }
  entries_[hole] = Entry{nullptr, nullptr};
  --size_;
}

HCCT_NOINST void ChildIndex::release() {
  if (entries_) {
    unmap_pages(entries_, bytes());
    refund_tree_memory(bytes());
  }
  *this = ChildIndex{};
}

}  // namespace hcct::rt
