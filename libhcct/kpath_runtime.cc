// The path profiler's entry points (docs/RUNTIME-ABI.md, "Path profiling probes") and its dump
// hooks (thread.h). Per-thread state is created on a thread's first path event; the KPTH section
// (and KTRC with path_trace=1) goes into the thread's file (docs/FORMAT.md).
#include <errno.h>
#include <fcntl.h>
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "burst_runtime.h"
#include "dump.h"
#include "hcct/format.h"
#include "hcct/kpath_saving_entries.h"
#include "kpath_forest.h"
#include "messages.h"
#include "options.h"
#include "static_tls.h"
#include "thread.h"

using namespace hcct::rt;

// The thread's token while it has a live path profiler, else 0. Instrumented code compares it with
// a frame's `owner` before its inline fast path (docs/RUNTIME-ABI.md, "Path profiling probes").
extern "C" __attribute__((visibility("default"), tls_model("initial-exec"))) __thread uint64_t __hcct_path_token;
__thread uint64_t __hcct_path_token = 0;
// The thread's root cache (kpath_forest.h): all null until its profiler exists, cleared with it.
extern "C" __attribute__((visibility("default"), tls_model("initial-exec"))) __thread KsfNode *__hcct_path_roots_v4[kRootCacheSize];
__thread KsfNode *__hcct_path_roots_v4[kRootCacheSize];
// 1 while the thread's live profiler is BLPP (k = 1): the fast path's misses try the root cache.
extern "C" __attribute__((visibility("default"), tls_model("initial-exec"))) __thread uint64_t __hcct_path_blpp;
__thread uint64_t __hcct_path_blpp = 0;
// Which copy versioned functions run (hcct/kpath_abi.h): the instrumented one unless bursting, where
// the burst schedule opens it during bursts (burst_paths_start).
extern "C" __attribute__((visibility("default"))) unsigned char __hcct_path_gate;
unsigned char __hcct_path_gate = 1;


namespace hcct::rt {
// A module's counter array for this thread, the module's thread-local words that point to it and
// its table (hcct/kpath_abi.h), recorded when the thread's first item of the module armed it.
struct CounterBlock {
  const uint64_t *table;   // the runtime's copy: the module's own may be unloaded by dlclose
  size_t table_bytes;
  const uint64_t *origin;  // the module's table, which names the module
  uint32_t retired_at_arm; // retired_count() when armed (retired_since: is the module gone?)
  uint64_t *tls;
  uint64_t *array;
  size_t bytes;
};

struct KpathThreadState {
  PathProfiler profiler;
  // Activations that changed copies at a back edge (static bursting): joined the instrumented copy
  // with an empty window, or left it (docs/KPATH.md, "Bursting").
  uint64_t joins = 0, leaves = 0;
  CounterBlock *counter_blocks = nullptr;  // map_pages'd, doubled when full
  size_t counter_block_count = 0, counter_block_capacity = 0;
  // The thread's pointer (%fs base), taken in the thread: its per-thread start counters are at a
  // fixed distance from it (hcct/kpath_abi.h, VersionTable), also when another thread writes its
  // file (the final dump).
  uintptr_t thread_pointer = 0;
  // The event clock (hcct/kpath_abi.h, kTickSymbol): whether the thread's clock has started (its
  // first period starts at a random phase), and the generator of its jittered gaps.
  bool clock_started = false;
  uint64_t clock_random = 0;
};
}  // namespace hcct::rt

namespace {

namespace fmt = hcct::format;

// Whether a module on the event clock has ticked: KPSC then says the bursts were counted in path
// starts (path_burst_starts), not in time, and that every thread that ran versioned code reached
// the runtime (its first start ticks).
bool g_path_event_clock = false;


// Tokens are even, unique per thread state, never reused: a thread state's first token is its
// index times 2^32, and each sweep of a bounded forest adds 2 (the epoch, PathProfiler::token).
uint64_t g_last_thread_index = 0;

HCCT_NOINST KpathThreadState *create_state(ThreadState *s) {
  void *mem = map_pages(sizeof(KpathThreadState));
  if (!mem) return nullptr;
  auto *k = new (mem) KpathThreadState{};
  uint64_t token = __atomic_add_fetch(&g_last_thread_index, 1, __ATOMIC_RELAXED) << 32;
  const Options &o = runtime_options();
  PathForest forest = o.path_forest;
  if (!k->profiler.init(o.path_k, o.path_trace, token, __hcct_path_roots_v4, forest, o.path_epsilon,
                        &__hcct_path_token, o.path_grow)) {
    k->profiler.destroy();
    unmap_pages(mem, sizeof(KpathThreadState));
    report_memory_exhausted();
    return nullptr;
  }
  k->thread_pointer = reinterpret_cast<uintptr_t>(__builtin_thread_pointer());
  s->kpath = k;
  __hcct_path_blpp = k->profiler.k() == 1;
  __hcct_path_token = k->profiler.token();  // from now on this thread's frames may take the inline fast path
  return k;
}

__attribute__((always_inline)) inline KpathThreadState *state_of(ThreadState *s) {
  KpathThreadState *k = s->kpath;
  if (HCCT_UNLIKELY(!k)) k = create_state(s);
  return k;
}

// Records a module's counter array for the thread; false if there is no room.
HCCT_NOINST bool add_counter_block(KpathThreadState &k, const CounterBlock &block) {
  if (k.counter_block_count == k.counter_block_capacity) {
    if (!k.counter_blocks) {
      size_t capacity = 4096 / sizeof(CounterBlock);
      k.counter_blocks = static_cast<CounterBlock *>(map_pages(capacity * sizeof(CounterBlock)));
      if (!k.counter_blocks) return false;
      k.counter_block_capacity = capacity;
    } else {
      CounterBlock *moved = double_pages(k.counter_blocks, k.counter_block_capacity);
      if (!moved) return false;
      k.counter_blocks = moved;
      k.counter_block_capacity *= 2;
    }
  }
  k.counter_blocks[k.counter_block_count++] = block;
  return true;
}

// The pages of a counter array that may hold a count: a bitmap (map_pages'd, `bytes` long) of the
// pages that /proc/self/pagemap says are present or swapped; a page never touched is neither and
// reads as zeros. The arrays are sparse virtual memory (hcct/kpath_abi.h, kMaxCounterWords: up to
// 16 MB per module and thread, of which a run touches a few pages): reading every word at the dump
// cost 10 M instructions and a page fault per page per thread (sqlite: 19 % of its short input's
// native instructions). Null when the map cannot be read (no /proc): every page is read then.
struct TouchedPages {
  uint8_t *bits = nullptr;
  size_t bytes = 0;
  size_t page = 0;
  bool touched(size_t word) const { return bits[word * 8 / page / 8] >> (word * 8 / page % 8) & 1; }
};

HCCT_NOINST TouchedPages touched_pages(const uint64_t *array, size_t array_bytes) {
  constexpr uint64_t kPresent = uint64_t(1) << 63, kSwapped = uint64_t(1) << 62;  // (pagemap.rst)
  TouchedPages t;
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || uintptr_t(array) % uintptr_t(page)) return t;
  t.page = size_t(page);
  size_t pages = (array_bytes + t.page - 1) / t.page;
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return t;
  t.bytes = (pages + 7) / 8;
  t.bits = static_cast<uint8_t *>(map_pages(t.bytes));
  off_t first = off_t(uintptr_t(array) / t.page * sizeof(uint64_t));
  uint64_t entries[256];
  for (size_t done = 0; t.bits && done < pages;) {
    size_t n = pages - done < 256 ? pages - done : 256;
    ssize_t got = pread(fd, entries, n * sizeof(uint64_t), first + off_t(done * sizeof(uint64_t)));
    if (got != ssize_t(n * sizeof(uint64_t))) {
      unmap_pages(t.bits, t.bytes);
      t.bits = nullptr;
      break;
    }
    for (size_t i = 0; i < n; ++i)
      if (entries[i] & (kPresent | kSwapped)) t.bits[(done + i) / 8] |= uint8_t(1u << ((done + i) % 8));
    done += n;
  }
  close(fd);
  return t;
}

// Moves what the inline code counted in the thread's counter blocks into its roots (each word
// taken with an atomic exchange, so that a later write does not count it twice), before the
// profile is written: the section then shows them like every other root count. Pages never
// touched are skipped (touched_pages). Another thread's inline code may touch a page after the map
// was read: its count is then taken by a later write, like a count made after the exchange.
HCCT_NOINST void fold_counters(KpathThreadState &k) {
  namespace abi = hcct::kpath_abi;
  for (size_t b = 0; b < k.counter_block_count; ++b) {
    const uint64_t *table = k.counter_blocks[b].table;
    uint64_t *block = k.counter_blocks[b].array;
    TouchedPages pages = touched_pages(block, k.counter_blocks[b].bytes);
    const size_t page_words = pages.page / sizeof(uint64_t);
    const uint64_t *entry = table + abi::kCounterTableHeaderWords;
    for (uint64_t f = 0; f < table[1]; ++f, entry += abi::kCounterEntryWords) {
      uint64_t function = entry[0], offset = entry[1], paths = entry[2];
      for (uint64_t id = 0; id < paths; ++id) {
        if (pages.bits && !pages.touched(offset + id)) {
          id += page_words - 1 - (offset + id) % page_words;  // (to the page's last word)
          continue;
        }
        if (block[offset + id] == 0) continue;
        uint64_t count = __atomic_exchange_n(&block[offset + id], 0, __ATOMIC_RELAXED);
        if (count) k.profiler.add_root_count(function, id, count);
      }
    }
    if (pages.bits) unmap_pages(pages.bits, pages.bytes);
  }
}

// Arms a module for the thread (hcct/kpath_abi.h): maps its counter array and points the
// module's thread-local words at it — both at k = 1, the loop-free one only at k >= 2 — unless the
// profiler traces (which needs every item in the runtime) or there is no memory: then off.
HCCT_NOINST void arm(KpathThreadState &k, const uint64_t *table, uint64_t *tls) {
  namespace abi = hcct::kpath_abi;
  tls[abi::kCountersStateWord] = abi::kCountersOff;
  if (k.profiler.tracing() || table[0] != abi::kCounterTableVersion || table[2] == 0) return;
  // The table is copied: the profile is written after the module may have been unloaded.
  size_t table_bytes = (abi::kCounterTableHeaderWords + table[1] * abi::kCounterEntryWords) * sizeof(uint64_t);
  auto *copy = static_cast<uint64_t *>(map_pages(table_bytes));
  if (!copy) return;
  memcpy(copy, table, table_bytes);
  CounterBlock block{copy, table_bytes, table, retired_count(), tls, nullptr, table[2] * sizeof(uint64_t)};
  block.array = static_cast<uint64_t *>(map_pages(block.bytes));
  if (!block.array || !add_counter_block(k, block)) {
    if (block.array) unmap_pages(block.array, block.bytes);
    unmap_pages(copy, table_bytes);
    return;
  }
  tls[abi::kCountersLoopFreeWord] = reinterpret_cast<uint64_t>(block.array);
  if (k.profiler.k() == 1) tls[abi::kCountersAllWord] = reinterpret_cast<uint64_t>(block.array);
  tls[abi::kCountersStateWord] = abi::kCountersArmed;
}

// KPTH: header, then every tree in preorder (docs/FORMAT.md). Inline fast paths of other threads
// may still increment counters while this runs (they never change the structure): `paths` is the
// sum of the counters as written, so the section is consistent.
HCCT_NOINST bool write_forest(ByteBuffer &out, const PathProfiler &p) {
  ByteBuffer body;
  uint64_t total = 0;
  const RootTable &roots = p.roots();
  // Depth is at most 2k − 2 (k-SF; kWF: k): an explicit stack of (node, preorder index).
  struct Item {
    const KsfNode *node;
    uint64_t index;
  };
  size_t stack_bytes = (2 * size_t(p.k()) + 2) * sizeof(Item);
  auto *stack = static_cast<Item *>(map_pages(stack_bytes));
  if (!stack) return false;
  uint64_t next_index = 0;
  for (size_t i = 0; i < roots.capacity(); ++i) {
    const RootTable::Slot &slot = roots.slots()[i];
    if (slot.value == 0) continue;  // (k = 1: roots only, their counts are the BLPP counters)
    const auto *root = reinterpret_cast<const KsfNode *>(slot.value);
    uint64_t count = __atomic_load_n(&root->count, __ATOMIC_RELAXED);
    body.append_varint(0);
    body.append_u64(slot.function);
    body.append_varint(root->path);
    body.append_varint(count);
    total += count;
    size_t depth = 0;
    stack[depth++] = {root, next_index++};
    // Children of the node on top of the stack, visited through first_child/next_sibling.
    const KsfNode *cursor = root->first_child == kEnd ? nullptr : root->first_child;
    while (depth > 0) {
      if (!cursor) {
        const KsfNode *done = stack[--depth].node;
        cursor = depth > 0 && done->next_sibling != kEnd ? done->next_sibling : nullptr;
        continue;
      }
      count = __atomic_load_n(&cursor->count, __ATOMIC_RELAXED);
      body.append_varint(next_index - stack[depth - 1].index);
      body.append_varint(cursor->path);
      body.append_varint(count);
      total += count;
      stack[depth++] = {cursor, next_index++};
      cursor = cursor->first_child == kEnd ? nullptr : cursor->first_child;
    }
  }
  unmap_pages(stack, stack_bytes);
  out.append_varint(fmt::kPathsVersion);
  out.append_varint(p.k());
  out.append_varint(uint64_t(p.k() == 1 ? PathForest::kBlpp : p.forest()));
  out.append_varint(total);
  out.append_varint(p.enters());
  out.append_varint(p.lost());
  // Version 3: the bounded kWF's parameters and error accounting (all 0 for an exact forest).
  double epsilon = p.epsilon();
  uint64_t epsilon_bits;
  __builtin_memcpy(&epsilon_bits, &epsilon, sizeof epsilon_bits);
  out.append_u64(epsilon_bits);
  out.append_varint(p.budget());
  out.append_varint(p.delta());
  out.append_varint(p.cuts());
  out.append_varint(p.sweeps());
  out.append_varint(p.forced_sweeps());
  out.append_varint(p.evicted());
  out.append_varint(p.nodes());
  out.append(body.data(), body.size());
  return body.ok() && out.ok() && next_index == p.nodes();
}

// Versioned modules (hcct/kpath_abi.h): registered from their constructors, lock-free append;
// a module that unregisters (its destructor: dlclose or exit) is replaced by a copy of its counters
// in the runtime's memory, so that the dump never reads an unmapped module.
constexpr size_t kMaxVersionTables = 4096;
const abi::VersionTable *g_version_tables[kMaxVersionTables];
// A table with per-thread counters (abi::VersionTable::thread_counters): the distance from a
// thread's pointer to its array, the same in every thread (static TLS of the executable), taken
// when the module registered. Such a table stays registered as it is: an executable is never
// unloaded, and its threads' TLS outlives its destructors (the final dump reads it).
intptr_t g_thread_counter_offsets[kMaxVersionTables];
size_t g_version_table_count = 0;
uint64_t g_version_tables_dropped = 0;

bool per_thread(const abi::VersionTable &t) { return t.version >= 2 && t.thread_counters; }

// The start counters of per-thread table i for the thread whose pointer is `thread_pointer`: one
// array, the functions' counters one after the other in table order. Null when the thread is
// unknown (no path profiler state).
uint64_t *thread_array(size_t i, uintptr_t thread_pointer) {
  return thread_pointer ? static_tls_at<uint64_t>(thread_pointer, g_thread_counter_offsets[i]) : nullptr;
}

HCCT_NOINST const abi::VersionTable *copy_table(const abi::VersionTable *t) {
  size_t starts = 0;
  for (uint64_t i = 0; i < t->functions; ++i) starts += t->function[i].starts;
  size_t bytes = sizeof(abi::VersionTable) + t->functions * sizeof(abi::VersionFunction) +
                 starts * (sizeof(uint64_t) + sizeof(uint32_t));
  void *mem = map_pages(bytes);
  if (!mem) return nullptr;
  auto *table = static_cast<abi::VersionTable *>(mem);
  auto *functions = reinterpret_cast<abi::VersionFunction *>(table + 1);
  auto *counters = reinterpret_cast<uint64_t *>(functions + t->functions);
  auto *blocks = reinterpret_cast<uint32_t *>(counters + starts);
  // (Only process-wide tables are copied; a version 3 table's flags go with it.)
  *table = abi::VersionTable{t->version, t->functions, functions, nullptr, 0, t->version >= 3 ? t->flags : 0};
  for (uint64_t i = 0; i < t->functions; ++i) {
    const abi::VersionFunction &f = t->function[i];
    functions[i] = abi::VersionFunction{f.function_id, f.starts, counters, blocks};
    for (uint64_t j = 0; j < f.starts; ++j) {
      counters[j] = __atomic_load_n(&f.counters[j], __ATOMIC_RELAXED);
      blocks[j] = f.start_blocks[j];
    }
    counters += f.starts;
    blocks += f.starts;
  }
  return table;
}

// A thread's per-thread counters. The calling thread's are read in place. Another thread's (the
// final dump writes live threads) are copied with process_vm_readv on this process, so that a
// thread that exits meanwhile cannot make the dump fault: if its stack, where static TLS lives,
// was unmapped the call fails (EFAULT) and its counts come out 0 (the reader reports such starts
// as counters below their sampled paths); if glibc kept the stack in its cache, the copy has the
// counts the thread had at its exit, or 0s should a new thread have reused that stack. Where the
// call is not permitted (a seccomp filter returning EPERM or ENOSYS), they are read in place; a
// filter that kills the process on unknown system calls would end it here.
class ThreadCounters {
 public:
  ThreadCounters() = default;
  ThreadCounters(const ThreadCounters &) = delete;
  ThreadCounters &operator=(const ThreadCounters &) = delete;
  ~ThreadCounters() {
    if (copy_) unmap_pages(copy_, bytes_);
  }
  // The counters at `source` (words of them) of the thread whose pointer is `owner`, or null
  // (unreadable).
  const uint64_t *read(const uint64_t *source, uint64_t words, uintptr_t owner) {
    if (!source || !words || owner == reinterpret_cast<uintptr_t>(__builtin_thread_pointer())) return source;
    bytes_ = words * sizeof(uint64_t);
    copy_ = static_cast<uint64_t *>(map_pages(bytes_));
    if (!copy_) return source;
    iovec local{copy_, bytes_}, remote{const_cast<uint64_t *>(source), bytes_};
    int saved_errno = errno;  // (the program's)
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    bool not_permitted = got < 0 && (errno == ENOSYS || errno == EPERM);
    errno = saved_errno;
    if (got == ssize_t(bytes_)) return copy_;
    return not_permitted ? source : nullptr;
  }

 private:
  uint64_t *copy_ = nullptr;
  size_t bytes_ = 0;
};

// KPSC: whether the thread's path stream was sampled in bursts, its cut windows, and every
// versioned function's start counters: the thread's own (per-thread tables: the reader adds the
// files of a process), or the process's (each file has the counts at its dump, the reader keeps the
// largest) (docs/FORMAT.md).
HCCT_NOINST bool write_sampling(ByteBuffer &out, const KpathThreadState &k) {
  out.append_varint(fmt::kPathSamplingVersion);
  bool bursting = burst_paths_active();
  bool event_clock = __atomic_load_n(&g_path_event_clock, __ATOMIC_RELAXED);
  out.append_varint((bursting ? fmt::kPathSamplingBursting : 0) | (event_clock ? fmt::kPathSamplingEventClock : 0));
  if (!bursting) {  // no schedule ran (docs/FORMAT.md: 0 without bursting)
    out.append_varint(0);
    out.append_varint(0);
  } else if (event_clock) {  // (counted in path starts)
    const Options &o = runtime_options();
    out.append_varint(o.path_burst_interval);
    out.append_varint(o.path_burst_starts);
  } else {
    out.append_varint(burst_interval_ns());
    out.append_varint(burst_length_ns());
  }
  out.append_varint(k.joins);
  out.append_varint(k.leaves);
  out.append_varint(__atomic_load_n(&g_version_tables_dropped, __ATOMIC_RELAXED));
  size_t count = __atomic_load_n(&g_version_table_count, __ATOMIC_ACQUIRE);
  uint64_t functions = 0;
  for (size_t i = 0; i < count; ++i)
    if (const abi::VersionTable *t = __atomic_load_n(&g_version_tables[i], __ATOMIC_ACQUIRE)) functions += t->functions;
  out.append_varint(functions);
  for (size_t i = 0; i < count; ++i) {
    const abi::VersionTable *t = __atomic_load_n(&g_version_tables[i], __ATOMIC_ACQUIRE);
    if (!t) continue;
    const uint64_t *array = nullptr;
    ThreadCounters copy;
    if (per_thread(*t)) array = copy.read(thread_array(i, k.thread_pointer), t->thread_words, k.thread_pointer);
    for (uint64_t j = 0; j < t->functions; ++j) {
      const abi::VersionFunction &f = t->function[j];
      const uint64_t *counters = per_thread(*t) ? array : f.counters;
      out.append_u64(f.function_id);
      out.append_varint(per_thread(*t) ? fmt::kStartsPerThread : 0);
      out.append_varint(f.starts);
      for (uint64_t n = 0; n < f.starts; ++n) {
        out.append_varint(f.start_blocks[n]);
        out.append_varint(counters ? __atomic_load_n(&counters[n], __ATOMIC_RELAXED) : 0);
      }
      if (array) array += f.starts;  // (null: no copy, every count 0)
    }
  }
  return out.ok();
}

// KTRC: the raw stream in order.
HCCT_NOINST bool write_trace(ByteBuffer &out, const PathTrace &t) {
  out.append_varint(fmt::kPathTraceVersion);
  out.append_varint(t.lost());
  out.append_varint(t.size());
  t.for_each([&](const PathTrace::Record &r) {
    out.append_u8(uint8_t(r.kind));
    out.append_varint(r.frame);
    out.append_u64(r.function);
    if (r.kind == 1) out.append_varint(r.path);
  });
  return out.ok();
}

}  // namespace

// Everything the inline fast path does not do: the activation's first item, a child neither guess
// holds, a new node, a frame of another owner; BLPP (k = 1) always. It takes no lock and
// allocates only from the thread's arena, never from malloc.
HCCT_EXPORT void __hcct_path_slow(PathFrame *frame, uint64_t function, uint64_t path_id, uint64_t slot) {
  ThreadState *s = event_begin(/*attach=*/true);
  if (HCCT_UNLIKELY(!s)) {
    // Ignored (no profiling, or re-entered): the window restarts after this item, and the fast
    // path stays off for this frame until the runtime takes an item again.
    frame->node = nullptr;
    return;
  }
  if (KpathThreadState *k = state_of(s)) k->profiler.path(frame, function, path_id, unsigned(slot & 1));
  else frame->node = nullptr;
  event_end(s);
}

// An activation changed copies at a back edge (hcct/kpath_abi.h): counted per thread. Rare (once
// per active loop at each burst boundary), so a call.
HCCT_EXPORT void __hcct_path_switch(uint64_t kind) {
  ThreadState *s = event_begin(/*attach=*/true);
  if (HCCT_UNLIKELY(!s)) return;
  if (KpathThreadState *k = state_of(s)) ++(kind == hcct::kpath_abi::kSwitchJoin ? k->joins : k->leaves);
  event_end(s);
}

namespace {

// The event clock's generator of a thread that has no path state (next_period); 0 until seeded. A
// forked child starts it again (hcct_kpath_fork_child), so that it does not draw its parent's gaps.
__thread uint64_t t_clock_random = 0;

// The event clock's periods (hcct/kpath_abi.h). Not bursting (burst=0, or before the runtime
// started bursting): open, asking again after a million starts. burst=manual: every start asks, and
// the thread follows the gate that hcct_burst() opens and closes (deterministic tests). burst=1: a
// burst of path_burst_starts starts, then a gap of path_burst_interval - path_burst_starts starts
// on average, uniform within ±50 %, so that no periodic program keeps its bursts in step with one of its own
// phases; a thread's first period starts at a random phase of that cycle. Every start of the thread
// is then in a burst with the one probability length/interval, whatever its phase and speed.
HCCT_NOINST bool next_period(int64_t *countdown, KpathThreadState *k) {
  constexpr int64_t kOpenEnd = hcct::kpath_abi::kCountdownOpenEnd;
  const Options &o = runtime_options();
  __atomic_store_n(&g_path_event_clock, true, __ATOMIC_RELAXED);
  if (o.burst == Burst::kManual && burst_paths_active()) {
    bool open = __atomic_load_n(&__hcct_path_gate, __ATOMIC_ACQUIRE) != 0;
    *countdown = open ? kOpenEnd + 1 : 0;
    return open;
  }
  if (o.burst != Burst::kTimer || !burst_paths_active()) {
    *countdown = kOpenEnd + (int64_t(1) << 20);
    return true;
  }
  uint64_t length = o.path_burst_starts;
  uint64_t gap = o.path_burst_interval - length;  // (options: length <= interval)
  // (Without a thread state, e.g. its memory could not be had: the thread's own generator, kept
  // across periods, so that its gaps still differ; a local one reseeded at every call drew every
  // gap at one length.)
  uint64_t &x = k ? k->clock_random : t_clock_random;
  // Seeded by the time as well: runs of a deterministic program without address randomisation
  // (setarch -R) draw other gaps, so that they are independent samples.
  if (!x) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    x = ((reinterpret_cast<uintptr_t>(k) ^ uintptr_t(__builtin_thread_pointer()) ^ uint64_t(now.tv_nsec) ^
          uint64_t(now.tv_sec) << 32) * 0x9E3779B97F4A7C15ull) | 1;
  }
  auto next_random = [&x] {  // xorshift64*
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545F4914F6CDD1Dull;
  };
  bool open = *countdown > kOpenEnd;  // -1: the gap is over; else the burst is
  uint64_t remaining = 0;
  if (k && !k->clock_started) {
    k->clock_started = true;
    uint64_t at = next_random() % (length + gap);
    open = at < length;
    remaining = open ? length - at : at - length + 1;
  } else {
    remaining = open ? length : (gap ? gap / 2 + next_random() % (gap + 1) : 0);
  }
  if (open) *countdown = kOpenEnd + int64_t(remaining);
  else *countdown = int64_t(remaining) - 1;  // (0: the next start opens the next burst)
  return open;
}

}  // namespace

// A thread's path starts reached the end of a period of the event clock (hcct/kpath_abi.h), or its
// first start, or an uninstrumented copy's start found the countdown below zero: the runtime takes
// the thread on (its exit writes its file, with its start counters, even if no burst sampled it)
// and sets the next period. Once per burst and per gap: a call.
HCCT_EXPORT uint8_t __hcct_path_tick(int64_t *countdown) {
  // The uninstrumented copy asks below zero, also in a burst that began elsewhere in the thread
  // (hcct/kpath_abi.h): it is left as it is.
  if (hcct::kpath_abi::countdown_open(*countdown)) return 1;
  ThreadState *s = event_begin(/*attach=*/true);
  KpathThreadState *k = s ? state_of(s) : nullptr;
  bool open = next_period(countdown, k);
  if (s) event_end(s);
  return open;
}

HCCT_EXPORT void __hcct_path_register_versions(const void *table) {
  const auto *t = static_cast<const abi::VersionTable *>(table);
  if (!t || t->version < 1 || t->version > abi::kVersionTableVersion) return;
  size_t i = __atomic_fetch_add(&g_version_table_count, 1, __ATOMIC_ACQ_REL);
  if (i >= kMaxVersionTables) {
    __atomic_store_n(&g_version_table_count, kMaxVersionTables, __ATOMIC_RELEASE);
    __atomic_add_fetch(&g_version_tables_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  if (per_thread(*t))
    g_thread_counter_offsets[i] = static_tls_offset(t->thread_counters());
  __atomic_store_n(&g_version_tables[i], t, __ATOMIC_RELEASE);
  // (A table before version 3 says nothing of its clock: its code may read the gate.)
  if (t->version < 3 || !(t->flags & abi::kVersionEventClock)) __atomic_store_n(&g_path_gate_read, true, __ATOMIC_RELEASE);
  __atomic_store_n(&g_path_versions_registered, true, __ATOMIC_RELEASE);
  burst_paths_start();  // (nothing until the runtime has started bursting; burst_start calls it then)
}

HCCT_EXPORT void __hcct_path_unregister_versions(const void *table) {
  size_t count = __atomic_load_n(&g_version_table_count, __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < count && i < kMaxVersionTables; ++i) {
    if (__atomic_load_n(&g_version_tables[i], __ATOMIC_ACQUIRE) != table) continue;
    if (per_thread(*static_cast<const abi::VersionTable *>(table))) return;  // (an executable's: stays)
    const abi::VersionTable *copy = copy_table(static_cast<const abi::VersionTable *>(table));
    if (!copy) __atomic_add_fetch(&g_version_tables_dropped, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&g_version_tables[i], copy, __ATOMIC_RELEASE);
    return;
  }
}

// A thread's first item of a module with counter arrays in a function with loops (hcct/kpath_abi.h):
// arms the module for the thread. Ignored (the state stays unset, the item takes the usual way)
// while the runtime does not take events.
HCCT_EXPORT void __hcct_path_counters(const uint64_t *table, uint64_t *tls) {
  namespace abi = hcct::kpath_abi;
  ThreadState *s = event_begin(/*attach=*/true);
  if (HCCT_UNLIKELY(!s)) return;
  if (KpathThreadState *k = state_of(s)) arm(*k, table, tls);
  else tls[abi::kCountersStateWord] = abi::kCountersOff;
  event_end(s);
}

// An item of a function without loops whose loop-free pointer is null: arms the module if unset,
// then counts the item in the thread's array, or else as the activation's only item in `frame`.
HCCT_EXPORT void __hcct_path_counted(const uint64_t *table, uint64_t *tls, uint64_t offset, PathFrame *frame,
                                     uint64_t function, uint64_t path_id) {
  namespace abi = hcct::kpath_abi;
  ThreadState *s = event_begin(/*attach=*/true);
  if (HCCT_UNLIKELY(!s)) return;  // ignored, as __hcct_path_slow ignores it
  if (KpathThreadState *k = state_of(s)) {
    if (tls[abi::kCountersStateWord] == abi::kCountersUnset) arm(*k, table, tls);
    if (uint64_t *array = reinterpret_cast<uint64_t *>(tls[abi::kCountersLoopFreeWord])) {
      ++array[offset + path_id];
    } else {
      frame->node = nullptr;
      frame->owner = 0;
      k->profiler.path(frame, function, path_id, 0);
    }
  }
  event_end(s);
}

#if defined(__x86_64__)
// The preserve_most entries (hcct/kpath_saving_entries.h), calling hidden aliases of the C ones.
extern "C" {
void hcct_path_slow_entry(PathFrame *, uint64_t, uint64_t, uint64_t)
    __attribute__((alias("__hcct_path_slow"), visibility("hidden")));
void hcct_path_counters_entry(const uint64_t *, uint64_t *) __attribute__((alias("__hcct_path_counters"), visibility("hidden")));
void hcct_path_counted_entry(const uint64_t *, uint64_t *, uint64_t, PathFrame *, uint64_t, uint64_t)
    __attribute__((alias("__hcct_path_counted"), visibility("hidden")));
}
HCCT_KPATH_SAVING_ENTRY(__hcct_path_slow_pm, hcct_path_slow_entry);
HCCT_KPATH_SAVING_ENTRY(__hcct_path_counters_pm, hcct_path_counters_entry);
HCCT_KPATH_SAVING_ENTRY(__hcct_path_counted_pm, hcct_path_counted_entry);
#endif

HCCT_NOINST bool hcct_kpath_write_sections(DumpFile &file, ThreadState &thread) {
  KpathThreadState *k = thread.kpath;
  if (!k) return true;
  fold_counters(*k);
  if (runtime_options().verbose) {
    const PathProfiler &p = k->profiler;
    // One line per thread (tests read its keys); a bounded forest appends its accounting.
    char bound[256] = "";
    if (p.bounded())
      snprintf(bound, sizeof bound,
               " epsilon=%g budget=%llu grown=%llu nodes_peak=%llu sweeps=%llu forced=%llu evicted=%llu cuts=%llu "
               "error_bound(k)=%llu",
               p.epsilon(), (unsigned long long)p.budget(), (unsigned long long)p.grown(),
               (unsigned long long)p.nodes_peak(),
               (unsigned long long)p.sweeps(), (unsigned long long)p.forced_sweeps(), (unsigned long long)p.evicted(),
               (unsigned long long)p.cuts(), (unsigned long long)p.error_bound(p.k()));
    say("hcct kpath: thread %d: k=%u forest=%s paths=%llu slow=%llu enters=%llu nodes=%llu "
        "bytes=%zu lost=%llu scans=%llu lookups=%llu joins=%llu leaves=%llu%s\n",
        thread.tid, p.k(),
        fmt::option_name(p.k() == 1 ? PathForest::kBlpp : p.forest()),
        (unsigned long long)p.paths(), (unsigned long long)p.slow_paths(),
        (unsigned long long)p.enters(), (unsigned long long)p.nodes(), p.bytes(),
        (unsigned long long)p.lost(), (unsigned long long)p.scans(), (unsigned long long)p.lookups(),
        (unsigned long long)k->joins, (unsigned long long)k->leaves, bound);
  }
  file.begin_section(fmt::kTagPaths);
  bool ok = write_forest(file.body(), k->profiler);
  file.end_section();
  if (ok && __atomic_load_n(&g_version_table_count, __ATOMIC_ACQUIRE) > 0) {
    file.begin_section(fmt::kTagPathSampling);
    ok = write_sampling(file.body(), *k);
    file.end_section();
  }
  if (ok && k->profiler.tracing()) {
    file.begin_section(fmt::kTagPathTrace);
    ok = write_trace(file.body(), k->profiler.trace());
    file.end_section();
  }
  return ok && file.body().ok();
}

HCCT_NOINST void hcct_kpath_release(ThreadState &thread) {
  KpathThreadState *k = thread.kpath;
  if (!k) return;
  thread.kpath = nullptr;
  // The calling thread's own state (thread exit): its frames must not take the fast path into
  // memory about to be unmapped. (After this, new items reach the runtime and are ignored.)
  if (__hcct_path_token == k->profiler.token()) {
    __hcct_path_token = 0;
    __hcct_path_blpp = 0;
    for (KsfNode *&r : __hcct_path_roots_v4) r = nullptr;
    // Its modules go back to unset (a later item asks the runtime again) and their arrays are
    // unmapped. Another thread's arrays stay mapped: it may be counting in them (at process exit).
    // The words of a module unloaded since (dlclose) are gone with it: not written.
    for (size_t b = 0; b < k->counter_block_count; ++b) {
      CounterBlock &block = k->counter_blocks[b];
      if (!retired_since(reinterpret_cast<uintptr_t>(block.origin), block.retired_at_arm))
        for (unsigned w = 0; w < hcct::kpath_abi::kCountersTlsWords; ++w) block.tls[w] = 0;
      unmap_pages(block.array, block.bytes);
    }
  }
  for (size_t b = 0; b < k->counter_block_count; ++b)
    unmap_pages(const_cast<uint64_t *>(k->counter_blocks[b].table), k->counter_blocks[b].table_bytes);
  if (k->counter_blocks) unmap_pages(k->counter_blocks, k->counter_block_capacity * sizeof(CounterBlock));
  k->profiler.destroy();
  unmap_pages(k, sizeof(KpathThreadState));
}

// A forked child (runtime.cc, on_fork_child: the forking thread is the only one left): its profile
// holds what the child does, as its calling-context tree does. The thread's path profiler goes
// (its next item makes a new one; the windows of the activations on its stack carry the old token
// and start again), and every start counter of the versioned modules restarts from zero, so that
// the child's T and S count the same paths. One path per activation on the stack at the fork
// started in the parent (counted there) and ends in the child (counted there, from its end).
// (Per-thread counters: the forking thread's own, the child's only thread.)
HCCT_NOINST void hcct_kpath_fork_child(ThreadState *thread) {
  if (thread) hcct_kpath_release(*thread);
  t_clock_random = 0;
  uintptr_t self = reinterpret_cast<uintptr_t>(__builtin_thread_pointer());
  size_t count = __atomic_load_n(&g_version_table_count, __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < count && i < kMaxVersionTables; ++i) {
    const abi::VersionTable *t = __atomic_load_n(&g_version_tables[i], __ATOMIC_ACQUIRE);
    if (!t) continue;
    uint64_t *own = per_thread(*t) ? thread_array(i, self) : nullptr;
    for (uint64_t j = 0, at = 0; j < t->functions; at += t->function[j].starts, ++j) {
      uint64_t *counters = own ? own + at : t->function[j].counters;
      for (uint64_t n = 0; n < t->function[j].starts; ++n) __atomic_store_n(&counters[n], 0, __ATOMIC_RELAXED);
    }
  }
}

