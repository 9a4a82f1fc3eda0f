#include "arena.h"

#include "messages.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace hcct::rt {

namespace {
size_t g_limit = size_t(4096) << 20;
size_t g_used = 0;  // atomically updated

constexpr size_t kPage = 4096;
constexpr size_t kMaxChunk = size_t(2) << 20;

HCCT_NOINST size_t round_to_pages(size_t bytes) { return (bytes + kPage - 1) & ~(kPage - 1); }
}  // namespace

HCCT_NOINST long raw_syscall(long number, long a, long b, long c, long d, long e, long f) {
  long result;
  register long r10 asm("r10") = d;
  register long r8 asm("r8") = e;
  register long r9 asm("r9") = f;
  asm volatile("syscall"
               : "=a"(result)
               : "0"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
               : "rcx", "r11", "memory");
  return result;
}

// The memory system calls are made directly on x86-64 (raw_syscall): the wall-clock sampler's
// thread, which glibc does not know of (sampler.cc), grows trees too, and glibc's wrappers would
// set errno on a failure — the errno of the thread whose %fs it runs with. Under ThreadSanitizer
// (which intercepts mmap) and elsewhere, glibc's.
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
HCCT_NOINST void *map_pages(size_t bytes) {
  long p = raw_syscall(SYS_mmap, 0, long(round_to_pages(bytes)), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p < 0 && p > -4096 ? nullptr : reinterpret_cast<void *>(p);
}

HCCT_NOINST void unmap_pages(void *p, size_t bytes) {
  if (p) raw_syscall(SYS_munmap, reinterpret_cast<long>(p), long(round_to_pages(bytes)));
}
#else
HCCT_NOINST void *map_pages(size_t bytes) {
  void *p = mmap(nullptr, round_to_pages(bytes), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

HCCT_NOINST void unmap_pages(void *p, size_t bytes) {
  if (p) munmap(p, round_to_pages(bytes));
}
#endif

HCCT_NOINST void *remap_pages(void *p, size_t old_bytes, size_t new_bytes) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer does not follow mremap (its shadow would stay behind): copy instead.
  void *q = map_pages(new_bytes);
  if (!q) return nullptr;
  memcpy(q, p, old_bytes < new_bytes ? old_bytes : new_bytes);
  unmap_pages(p, old_bytes);
  return q;
#else
#if defined(__x86_64__)
  long q = raw_syscall(SYS_mremap, reinterpret_cast<long>(p), long(round_to_pages(old_bytes)),
                       long(round_to_pages(new_bytes)), MREMAP_MAYMOVE);
  return q < 0 && q > -4096 ? nullptr : reinterpret_cast<void *>(q);
#else
  void *q = mremap(p, round_to_pages(old_bytes), round_to_pages(new_bytes), MREMAP_MAYMOVE);
  return q == MAP_FAILED ? nullptr : q;
#endif
#endif
}

HCCT_NOINST void set_tree_memory_limit(size_t bytes) { g_limit = bytes; }

HCCT_NOINST size_t tree_memory_limit() { return g_limit; }

HCCT_NOINST void reset_tree_memory_accounting() { __atomic_store_n(&g_used, 0, __ATOMIC_RELAXED); }

HCCT_NOINST void report_memory_exhausted() {
  static bool said = false;
  if (__atomic_exchange_n(&said, true, __ATOMIC_RELAXED)) return;
  say("hcct: tree memory reached max_mb=%zu MiB; calls into new contexts are no longer "
      "recorded (counted as lost). Raise max_mb or use mode=hcct.\n",
      g_limit >> 20);
}

HCCT_NOINST bool charge_tree_memory(size_t bytes) {
  size_t now = __atomic_add_fetch(&g_used, bytes, __ATOMIC_RELAXED);
  if (now <= g_limit) return true;
  __atomic_sub_fetch(&g_used, bytes, __ATOMIC_RELAXED);
  return false;
}

HCCT_NOINST void refund_tree_memory(size_t bytes) {
  __atomic_sub_fetch(&g_used, bytes, __ATOMIC_RELAXED);
}

HCCT_NOINST void *Arena::allocate_slow(size_t bytes) {
  size_t size = next_size_;
  while (size < bytes + sizeof(Chunk)) size *= 2;
  if (!charge_tree_memory(size)) return nullptr;
  void *mem = map_pages(size);
  if (!mem) {
    refund_tree_memory(size);
    return nullptr;
  }
  if (next_size_ < kMaxChunk) next_size_ *= 2;
  auto *chunk = static_cast<Chunk *>(mem);
  chunk->next = chunks_;
  chunk->size = size;
  chunks_ = chunk;
  mapped_ += size;
  cursor_ = static_cast<char *>(mem) + ((sizeof(Chunk) + 15) & ~size_t(15));
  end_ = static_cast<char *>(mem) + size;
  void *p = cursor_;
  cursor_ += bytes;
  return p;
}

HCCT_NOINST void Arena::release() {
  for (Chunk *c = chunks_; c;) {
    Chunk *next = c->next;
    size_t size = c->size;
    unmap_pages(c, size);
    refund_tree_memory(size);
    c = next;
  }
  *this = Arena{};
}

// The reservation is PROT_NONE (no commit charge, no page tables) and as large as the budget
// allows up to kMaxBytes; where the address space is short (a ulimit -v), it halves down to what
// the kernel gives. Chunks become readable and writable as they are used.
HCCT_NOINST void *NodeSpace::allocate_slow() {
  if (!base_) {
    size_t want = round_to_pages(tree_memory_limit());
    if (want > kMaxBytes) want = kMaxBytes;
    if (want < kPage) want = kPage;
    for (;;) {
      void *p = mmap(nullptr, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED) {
        base_ = cursor_ = committed_end_ = static_cast<char *>(p);
        reserved_ = want;
        break;
      }
      if (want <= (size_t(1) << 20)) return nullptr;
      want /= 2;
    }
  }
  size_t used = size_t(committed_end_ - base_);
  size_t size = next_size_;
  if (size > reserved_ - used) size = reserved_ - used;
  if (size == 0 || !charge_tree_memory(size)) return nullptr;
  if (mprotect(committed_end_, size, PROT_READ | PROT_WRITE) != 0) {
    refund_tree_memory(size);
    return nullptr;
  }
  if (next_size_ < kMaxChunk) next_size_ *= 2;
  committed_end_ += size;
  void *p = cursor_;
  cursor_ += kGranule;
  return p;
}

HCCT_NOINST void NodeSpace::release() {
  if (base_) {
    refund_tree_memory(bytes_mapped());
    munmap(base_, reserved_);
  }
  *this = NodeSpace{};
}

}  // namespace hcct::rt
