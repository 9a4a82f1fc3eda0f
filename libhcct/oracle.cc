// The online hotness oracle's loop registry (hcct/oracle.h, docs/GUIDE.md "Online hotness
// oracle"). Independent of the profiler: nothing here reads HCCT_OPTIONS or the profiling state.
// The per-iteration path is inline in the header; this file holds registration (under one lock)
// and the queries. Thresholds come from oracle_input.cc; OSR points and the exit report are
// osr_report.cc's. Memory: a static pool of loop records, then mmap'd chunks; never the program's
// malloc.
#include "hcct/oracle.h"

#include <pthread.h>
#include <string.h>

#include "arena.h"
#include "common.h"
#include "oracle_internal.h"

using namespace hcct::rt;

namespace {

constexpr size_t kPoolLoops = 256;
constexpr size_t kChunkLoops = 256;

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
hcct_oracle_loop g_pool[kPoolLoops];
size_t g_pool_used = 0;                    // under g_lock
hcct_oracle_loop *g_chunk = nullptr;       // current mmap'd chunk, under g_lock
size_t g_chunk_used = kChunkLoops;
hcct_oracle_loop *g_loops = nullptr;       // registry, newest first (atomic head, immutable links)

// Under g_lock.
HCCT_NOINST hcct_oracle_loop *new_loop() {
  if (g_pool_used < kPoolLoops) return &g_pool[g_pool_used++];
  if (g_chunk_used == kChunkLoops) {
    auto *chunk = static_cast<hcct_oracle_loop *>(map_pages(kChunkLoops * sizeof(hcct_oracle_loop)));
    if (!chunk) return nullptr;
    g_chunk = chunk;
    g_chunk_used = 0;
  }
  return &g_chunk[g_chunk_used++];
}

HCCT_NOINST hcct_oracle_loop *find_locked(const char *key) {
  for (hcct_oracle_loop *l = __atomic_load_n(&g_loops, __ATOMIC_ACQUIRE); l; l = l->next)
    if (strcmp(l->key, key) == 0) return l;
  return nullptr;
}

// The program's default threshold of each loop, in registration order (index = position from the
// oldest); the same pool/chunk discipline as the loops. Under g_lock.
uint64_t g_default_pool[kPoolLoops];
struct DefaultChunk {
  DefaultChunk *next;
  const hcct_oracle_loop *loops[kChunkLoops];
  uint64_t values[kChunkLoops];
  size_t used;
};
DefaultChunk *g_default_chunks = nullptr;

HCCT_NOINST bool remember_default(const hcct_oracle_loop *l, uint64_t value) {
  if (l >= g_pool && l < g_pool + kPoolLoops) {
    g_default_pool[l - g_pool] = value;
    return true;
  }
  if (!g_default_chunks || g_default_chunks->used == kChunkLoops) {
    auto *c = static_cast<DefaultChunk *>(map_pages(sizeof(DefaultChunk)));
    if (!c) return false;
    c->next = g_default_chunks;
    g_default_chunks = c;
  }
  g_default_chunks->loops[g_default_chunks->used] = l;
  g_default_chunks->values[g_default_chunks->used++] = value;
  return true;
}

HCCT_NOINST uint64_t default_of(const hcct_oracle_loop *l) {
  if (l >= g_pool && l < g_pool + kPoolLoops) return g_default_pool[l - g_pool];
  for (DefaultChunk *c = g_default_chunks; c; c = c->next)
    for (size_t i = 0; i < c->used; ++i)
      if (c->loops[i] == l) return c->values[i];
  return 0;
}

}  // namespace

HCCT_NOINST hcct_oracle_loop *hcct::rt::oracle::registered_loops() { return __atomic_load_n(&g_loops, __ATOMIC_ACQUIRE); }

HCCT_EXPORT hcct_oracle_loop *hcct_oracle_register(const char *key, uint64_t default_threshold) {
  if (!key || !*key) return nullptr;
  pthread_mutex_lock(&g_lock);
  oracle::load_environment();
  hcct_oracle_loop *l = find_locked(key);
  if (!l && (l = new_loop()) != nullptr) {
    if (!remember_default(l, default_threshold)) {
      pthread_mutex_unlock(&g_lock);
      return nullptr;
    }
    l->key = key;
    l->threshold = oracle::threshold_for(key, default_threshold, true);
    l->next = g_loops;
    __atomic_store_n(&g_loops, l, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_lock);
  return l;
}

HCCT_EXPORT hcct_oracle_loop *hcct_oracle_find(const char *key) {
  if (!key) return nullptr;
  return find_locked(key);  // the list only grows, links never change: no lock needed
}

HCCT_EXPORT int hcct_oracle_configure(const char *spec) {
  if (!spec) spec = "";
  size_t len = strnlen(spec, oracle::kSpecBytes);
  const char *why;
  size_t at;
  if (len >= oracle::kSpecBytes) return -1;
  int n = oracle::validate_spec(spec, &why, &at);
  if (n < 0) return -1;
  pthread_mutex_lock(&g_lock);
  oracle::load_environment();
  oracle::set_spec(spec, len);
  for (hcct_oracle_loop *l = g_loops; l; l = l->next)
    __atomic_store_n(&l->threshold, oracle::threshold_for(l->key, default_of(l), false), __ATOMIC_RELAXED);
  pthread_mutex_unlock(&g_lock);
  return n;
}

HCCT_EXPORT void hcct_oracle_set_threshold(hcct_oracle_loop *loop, uint64_t threshold) {
  if (loop) __atomic_store_n(&loop->threshold, threshold, __ATOMIC_RELAXED);
}

HCCT_EXPORT void hcct_oracle_stats_of(const hcct_oracle_loop *loop, hcct_oracle_stats *out) {
  if (!out) return;
  if (!loop) {
    *out = hcct_oracle_stats{0, 0, 0, 0};
    return;
  }
  out->threshold = __atomic_load_n(&loop->threshold, __ATOMIC_RELAXED);
  out->entries = __atomic_load_n(&loop->entries, __ATOMIC_RELAXED);
  out->iterations = __atomic_load_n(&loop->iterations, __ATOMIC_RELAXED);
  out->fired = __atomic_load_n(&loop->fired, __ATOMIC_RELAXED);
}

