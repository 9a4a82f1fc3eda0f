// Definitions every runtime source needs. The runtime lives inside someone else's program: every
// function carries no_instrument_function (so a build that instruments it anyway cannot recurse), and
// nothing here pulls in libstdc++'s runtime.
#ifndef HCCT_RT_COMMON_H
#define HCCT_RT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define HCCT_NOINST __attribute__((no_instrument_function))
#define HCCT_LIKELY(x) __builtin_expect(!!(x), 1)
#define HCCT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HCCT_EXPORT extern "C" __attribute__((visibility("default"), no_instrument_function))

namespace hcct::rt {

// Keeps the compiler from moving memory accesses across it; signal handlers on this thread see
// program order.
HCCT_NOINST inline void compiler_fence() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // namespace hcct::rt

#endif
