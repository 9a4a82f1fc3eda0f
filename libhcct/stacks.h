// Stack switches the runtime is told about (stacks.cc interposes swapcontext and setcontext).
#ifndef HCCT_RT_STACKS_H
#define HCCT_RT_STACKS_H

#include "common.h"

// Control is about to move from a frame at `from_sp` to the context whose stack pointer is `sp`;
// `lo`/`size` is the stack it was made for (uc_stack), 0/0 if unknown (runtime.cc).
HCCT_NOINST void hcct_switch_current_thread_stack(uintptr_t sp, uintptr_t lo, uintptr_t size,
                                                  uintptr_t from_sp);

#endif
