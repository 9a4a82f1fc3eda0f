// The runtime's few locks (the thread registry, the module list), taken on rare paths only: thread
// start and exit, fork, dlclose, dumps. Signals are blocked while one is held, so a signal handler
// on the holding thread that leaves the process (_exit, exit) and writes the profile never waits
// for a lock its own thread holds. The synchronous fault signals stay deliverable.
#ifndef HCCT_RT_SPIN_LOCK_H
#define HCCT_RT_SPIN_LOCK_H

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include "common.h"

namespace hcct::rt {

struct SpinLock {
  int word;
  sigset_t saved_mask;  // the holder's mask before it took the lock (written by the holder only)
};

inline constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP};

HCCT_NOINST inline void acquire(SpinLock *lock) {
  sigset_t all, old;
  sigfillset(&all);
  for (int sig : kFaultSignals) sigdelset(&all, sig);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  while (__atomic_exchange_n(&lock->word, 1, __ATOMIC_ACQUIRE)) sched_yield();
  lock->saved_mask = old;
}

HCCT_NOINST inline void release(SpinLock *lock) {
  sigset_t old = lock->saved_mask;
  __atomic_store_n(&lock->word, 0, __ATOMIC_RELEASE);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace hcct::rt

#endif
