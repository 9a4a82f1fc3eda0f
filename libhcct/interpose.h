#ifndef HCCT_RT_INTERPOSE_H
#define HCCT_RT_INTERPOSE_H

#include <dlfcn.h>

#include "common.h"

// The definition an interposer passes the call on to (the next one in lookup order: libc's, or a
// sanitizer's), found once and cached in *cache; null where there is none (a static program).
template <typename F>
HCCT_NOINST F next_definition(const char *name, F *cache) {
  F f = __atomic_load_n(cache, __ATOMIC_RELAXED);
  if (!f) {
    f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
    __atomic_store_n(cache, f, __ATOMIC_RELAXED);
  }
  return f;
}

// Pops the calling thread's shadow-stack frames that lie below `sp` (runtime.cc).
HCCT_NOINST void hcct_unwind_current_thread(uintptr_t sp);

#endif
