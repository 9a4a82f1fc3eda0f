// Interposed swapcontext and setcontext: the exact points where a thread moves to another machine
// stack (coroutines, generators, green threads built on ucontext). Each stack keeps its own calling
// path in the profile (ThreadProfile::switch_stack, docs/RUNTIME.md "Stacks"). makecontext is not
// interposed (it is variadic and cannot be forwarded): a context it made is recognised at the first
// switch into it by its uc_stack. Switches made without these calls (glibc returning to uc_link,
// hand-written fibers) are followed at the next event when the stack is known, else their frames
// are foreign, as before.
#include <dlfcn.h>
#include <ucontext.h>

#include "stacks.h"
#include "interpose.h"

namespace {

using SwapContext = int (*)(ucontext_t *, const ucontext_t *);
using SetContext = int (*)(const ucontext_t *);

HCCT_NOINST void announce(const ucontext_t *target) {
#if defined(__x86_64__) && defined(__GLIBC__)
  // The stack pointer the target resumes with: makecontext sets it near the top of uc_stack,
  // getcontext/swapcontext save their caller's.
  auto sp = static_cast<uintptr_t>(target->uc_mcontext.gregs[REG_RSP]);
  hcct_switch_current_thread_stack(sp, reinterpret_cast<uintptr_t>(target->uc_stack.ss_sp),
                                   target->uc_stack.ss_size,
                                   reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
#else
  (void)target;
#endif
}

SwapContext g_swapcontext;
SetContext g_setcontext;

}  // namespace

HCCT_EXPORT int swapcontext(ucontext_t *__restrict from, const ucontext_t *__restrict to) noexcept {
  SwapContext real = next_definition("swapcontext", &g_swapcontext);
  if (!real) return -1;
  if (to) announce(to);
  return real(from, to);  // returns when another switch comes back to `from`
}

HCCT_EXPORT int setcontext(const ucontext_t *to) noexcept {
  SetContext real = next_definition("setcontext", &g_setcontext);
  if (!real) return -1;
  if (to) announce(to);
  return real(to);
}
