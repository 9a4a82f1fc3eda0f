// Interposed libc functions that move control between frames without exit probes. Knowing the
// exact target frame lets the runtime pop precisely the frames that were skipped, instead of
// guessing at the next probe (where a frame entered at the same stack pointer is ambiguous: an
// inlined callee's probe runs in its caller's frame).
#include <dlfcn.h>
#include <setjmp.h>

#include "interpose.h"

namespace {

using LongJmp = void (*)(__jmp_buf_tag *, int);

// glibc on x86-64 keeps the stack pointer of setjmp's caller in slot 6 of the jmp_buf, mangled as
// rol(sp ^ pointer_guard, 17) with the guard at %fs:0x30 (PTR_MANGLE).
HCCT_NOINST uintptr_t target_stack_pointer(const __jmp_buf_tag *env) {
#if defined(__x86_64__) && defined(__GLIBC__)
  uintptr_t guard;
  __asm__("mov %%fs:0x30, %0" : "=r"(guard));
  uintptr_t mangled = static_cast<uintptr_t>(env->__jmpbuf[6]);
  return ((mangled >> 17) | (mangled << 47)) ^ guard;
#else
  (void)env;
  return 0;
#endif
}

[[noreturn]] HCCT_NOINST void jump(const char *name, LongJmp *cache, __jmp_buf_tag *env, int value) {
  uintptr_t sp = target_stack_pointer(env);
  // Only a target above the current frame is plausible; anything else is left to the probes.
  if (sp > reinterpret_cast<uintptr_t>(__builtin_frame_address(0))) hcct_unwind_current_thread(sp);
  next_definition(name, cache)(env, value);
  __builtin_trap();  // unreachable unless libc has no such function
}

LongJmp g_longjmp, g_underscore_longjmp, g_siglongjmp, g_longjmp_chk;

}  // namespace

HCCT_EXPORT [[noreturn]] void longjmp(__jmp_buf_tag *env, int value) {
  jump("longjmp", &g_longjmp, env, value);
}
HCCT_EXPORT [[noreturn]] void _longjmp(__jmp_buf_tag *env, int value) {
  jump("_longjmp", &g_underscore_longjmp, env, value);
}
HCCT_EXPORT [[noreturn]] void siglongjmp(__jmp_buf_tag *env, int value) {
  jump("siglongjmp", &g_siglongjmp, env, value);
}
// What _FORTIFY_SOURCE builds call instead of longjmp.
HCCT_EXPORT [[noreturn]] void __longjmp_chk(__jmp_buf_tag *env, int value) {
  jump("__longjmp_chk", &g_longjmp_chk, env, value);
}
