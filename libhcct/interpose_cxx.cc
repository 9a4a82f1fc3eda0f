// C++ catch handlers: clang's -finstrument-functions (and any probe that is not an EH cleanup)
// runs no exit probe for the frames an exception unwinds. __cxa_begin_catch is called from the
// handler's landing pad, so its CFA is the catching frame's stack pointer: every shadow frame below
// it was unwound. With gcc's cleanup-style exit probes those frames are already gone and this is a
// no-op.
//
// Cleanups (destructors) run earlier, while the exception is still in flight, from landing pads the
// unwinder installs in frames on the way: __gxx_personality_v0 tells it to. When it is called, the
// context's CFA is still that of the frame below (libgcc updates the context after the personality
// routine), i.e. the landing pad frame's stack pointer at its call site: every shadow frame tagged
// below it died in the unwinding, the landing pad frame's own tag is not below it, so the stack
// pointer rule pops exactly the dead frames before the cleanup's calls are recorded.
//
// Kept in its own object so that a static link with -static-libstdc++ can leave it out.
#include <dlfcn.h>
#include <unwind.h>

#include "interpose.h"

namespace {
using BeginCatch = void *(*)(void *);
BeginCatch g_begin_catch;

using Personality = _Unwind_Reason_Code (*)(int, _Unwind_Action, _Unwind_Exception_Class,
                                            _Unwind_Exception *, _Unwind_Context *);
using GetCfa = _Unwind_Word (*)(_Unwind_Context *);
Personality g_personality;
// The program's unwinder (libgcc_s), which built the context: libhcct's private copy of libgcc's
// unwinder (bursting) must not read a context it did not make.
GetCfa g_get_cfa;

template <typename T>
HCCT_NOINST T resolve(T *slot, void *handle, const char *name) {
  T f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (!f) {
    f = reinterpret_cast<T>(dlsym(handle, name));
    __atomic_store_n(slot, f, __ATOMIC_RELEASE);
  }
  return f;
}

HCCT_NOINST GetCfa program_get_cfa() {
  GetCfa f = __atomic_load_n(&g_get_cfa, __ATOMIC_ACQUIRE);
  if (f) return f;
  // libstdc++ links libgcc_s, so it is loaded whenever a C++ exception is in flight. The reference
  // RTLD_NOLOAD takes is kept: libgcc_s stays loaded as long as libstdc++ does anyway.
  void *libgcc = dlopen("libgcc_s.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!libgcc) return nullptr;
  f = reinterpret_cast<GetCfa>(dlsym(libgcc, "_Unwind_GetCFA"));
  __atomic_store_n(&g_get_cfa, f, __ATOMIC_RELEASE);
  return f;
}
}  // namespace

HCCT_EXPORT _Unwind_Reason_Code __gxx_personality_v0(int version, _Unwind_Action actions,
                                                     _Unwind_Exception_Class exception_class,
                                                     _Unwind_Exception *exception,
                                                     _Unwind_Context *context) {
  Personality next = resolve(&g_personality, RTLD_NEXT, "__gxx_personality_v0");
  if (!next) __builtin_trap();  // only C++ code's unwind tables name it, and libstdc++ defines it
  _Unwind_Reason_Code result = next(version, actions, exception_class, exception, context);
  if (result == _URC_INSTALL_CONTEXT && (actions & _UA_CLEANUP_PHASE)) {
    if (GetCfa get_cfa = program_get_cfa()) hcct_unwind_current_thread(get_cfa(context));
  }
  return result;
}

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
