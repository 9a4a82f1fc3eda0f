// Static TLS of a loaded module (an executable's local-exec variables, a shared library's
// initial-exec ones): glibc places it at the same distance from every thread's pointer, so a
// runtime that learnt the distance once (from the module's own code, run in any thread) reaches any
// thread's copy at that thread's pointer plus the distance. Used for kpath's per-thread start
// counters (hcct/kpath_abi.h) and the count clock's countdowns (hcct/unit_abi.h).
#ifndef HCCT_RT_STATIC_TLS_H
#define HCCT_RT_STATIC_TLS_H

#include <stdint.h>

namespace hcct::rt {

inline uintptr_t own_thread_pointer() { return reinterpret_cast<uintptr_t>(__builtin_thread_pointer()); }

// The distance of `address` (a static TLS object of the calling thread) from its thread pointer.
inline intptr_t static_tls_offset(const void *address) {
  return reinterpret_cast<intptr_t>(address) - static_cast<intptr_t>(own_thread_pointer());
}

// The copy of the object at `offset` of the thread whose pointer is `thread_pointer`.
template <typename T>
inline T *static_tls_at(uintptr_t thread_pointer, intptr_t offset) {
  return reinterpret_cast<T *>(thread_pointer + offset);
}

}  // namespace hcct::rt

#endif
