#ifndef HCCT_RT_INTERPOSE_H
#define HCCT_RT_INTERPOSE_H

#include "common.h"

// Pops the calling thread's shadow-stack frames that lie below `sp` (runtime.cc).
HCCT_NOINST void hcct_unwind_current_thread(uintptr_t sp);

#endif
