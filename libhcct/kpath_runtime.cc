// The path profiler's entry points (docs/RUNTIME-ABI.md, "Path profiling probes") and its dump
// hooks (thread.h). Per-thread state is created on a thread's first path event; the KPTH section
// (and KTRC with path_trace=1) goes into the thread's file (docs/FORMAT.md).
#include <new>
#include <stdlib.h>

#include "dump.h"
#include "hcct/format.h"
#include "kpath_forest.h"
#include "options.h"
#include "thread.h"

using namespace hcct::rt;

namespace hcct::rt {
struct KpathThreadState {
  PathProfiler profiler;
};
}  // namespace hcct::rt

namespace {

namespace fmt = hcct::format;

uint32_t g_k = 8;
bool g_trace = false;

// The options the runtime parsed (runtime.cc) are its own; the same string is parsed again here.
// An invalid string has already kept the gate closed, so no event ever reaches this file.
__attribute__((constructor(102))) HCCT_NOINST void kpath_start() {
  Options o;
  char error[256];
  if (!parse_options(getenv("HCCT_OPTIONS"), &o, error, sizeof error)) return;
  g_k = o.path_k;
  g_trace = o.path_trace;
}

HCCT_NOINST KpathThreadState *create_state(ThreadState *s) {
  void *mem = map_pages(sizeof(KpathThreadState));
  if (!mem) return nullptr;
  auto *k = new (mem) KpathThreadState{};
  if (!k->profiler.init(g_k, g_trace)) {
    k->profiler.destroy();
    unmap_pages(mem, sizeof(KpathThreadState));
    report_memory_exhausted();
    return nullptr;
  }
  s->kpath = k;
  return k;
}

__attribute__((always_inline)) inline KpathThreadState *state_of(ThreadState *s) {
  KpathThreadState *k = s->kpath;
  if (HCCT_UNLIKELY(!k)) k = create_state(s);
  return k;
}

// KPTH: header, then every tree in preorder (docs/FORMAT.md).
HCCT_NOINST bool write_forest(ByteBuffer &out, const PathProfiler &p) {
  out.append_varint(fmt::kPathsVersion);
  out.append_varint(p.k());
  out.append_varint(p.paths());
  out.append_varint(p.enters());
  out.append_varint(p.lost());
  out.append_varint(p.nodes());
  const RootTable &roots = p.roots();
  // Depth is at most 2k − 2 (Definition 3.7): an explicit stack of (node, preorder index).
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
    if (slot.value == 0) continue;
    if (p.k() == 1) {  // BLPP: the value is the counter
      out.append_varint(0);
      out.append_u64(slot.function);
      out.append_varint(slot.path);
      out.append_varint(slot.value);
      ++next_index;
      continue;
    }
    const auto *root = reinterpret_cast<const KsfNode *>(slot.value);
    out.append_varint(0);
    out.append_u64(slot.function);
    out.append_varint(root->path);
    out.append_varint(root->count);
    size_t depth = 0;
    stack[depth++] = {root, next_index++};
    // Children of the node on top of the stack, visited through first_child/next_sibling.
    const KsfNode *cursor = root->first_child;
    while (depth > 0) {
      if (!cursor) {
        const KsfNode *done = stack[--depth].node;
        cursor = depth > 0 ? done->next_sibling : nullptr;
        continue;
      }
      out.append_varint(next_index - stack[depth - 1].index);
      out.append_varint(cursor->path);
      out.append_varint(cursor->count);
      stack[depth++] = {cursor, next_index++};
      cursor = cursor->first_child;
    }
  }
  unmap_pages(stack, stack_bytes);
  return out.ok() && next_index == p.nodes();
}

// KTRC: the raw stream in order.
HCCT_NOINST bool write_trace(ByteBuffer &out, const PathTrace &t) {
  out.append_varint(fmt::kPathsVersion);
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

// Both probes initialise nothing else and take no lock; the per-ID work allocates only from the
// thread's arena (a new k-SF node or a root table slot), never from malloc.
HCCT_EXPORT void __hcct_path_enter(PathFrame *frame, uint64_t function) {
  // Always reset, even when the event is ignored: a later __hcct_path must never follow stale
  // pointers left in the stack slot by an earlier frame.
  frame->top = frame->bottom = nullptr;
  frame->left = 0;
  frame->owner = nullptr;
  ThreadState *s = event_begin(/*attach=*/true);
  if (HCCT_UNLIKELY(!s)) return;
  if (KpathThreadState *k = state_of(s)) k->profiler.enter(frame, function);
  event_end(s);
}

HCCT_EXPORT void __hcct_path(PathFrame *frame, uint64_t function, uint64_t path_id) {
  ThreadState *s = event_begin(/*attach=*/true);
  if (HCCT_UNLIKELY(!s)) return;
  if (KpathThreadState *k = state_of(s)) k->profiler.path(frame, function, path_id);
  event_end(s);
}

HCCT_NOINST bool hcct_kpath_write_sections(DumpFile &file, ThreadState &thread) {
  KpathThreadState *k = thread.kpath;
  if (!k) return true;
  file.begin_section(fmt::kTagPaths);
  bool ok = write_forest(file.body(), k->profiler);
  file.end_section();
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
  k->profiler.destroy();
  unmap_pages(k, sizeof(KpathThreadState));
}
