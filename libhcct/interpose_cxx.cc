// C++ catch handlers: clang's -finstrument-functions (and any probe that is not an EH cleanup)
// runs no exit probe for the frames an exception unwinds. __cxa_begin_catch is called from the
// handler's landing pad, so its CFA is the catching frame's stack pointer: every shadow frame below
// it was unwound. With gcc's cleanup-style exit probes those frames are already gone and this is a
// no-op.
//
// Kept in its own object so that a static link with -static-libstdc++ can leave it out.
#include <dlfcn.h>

#include "interpose.h"

namespace {
using BeginCatch = void *(*)(void *);
BeginCatch g_begin_catch;
}  // namespace

HCCT_EXPORT void *__cxa_begin_catch(void *exception) {
  BeginCatch next = __atomic_load_n(&g_begin_catch, __ATOMIC_RELAXED);
  if (!next) {
    next = reinterpret_cast<BeginCatch>(dlsym(RTLD_NEXT, "__cxa_begin_catch"));
    if (!next) __builtin_trap();  // only C++ code calls this, and it has libstdc++ loaded
    __atomic_store_n(&g_begin_catch, next, __ATOMIC_RELAXED);
  }
  hcct_unwind_current_thread(reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()));
  return next(exception);
}
