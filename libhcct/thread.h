// Per-thread runtime state and the protocol every event follows (runtime.cc owns the lifecycle).
// Other runtime components (kpath's path profiler) keep their per-thread data here too.
#ifndef HCCT_RT_THREAD_H
#define HCCT_RT_THREAD_H

#include "burst.h"
#include "dump.h"
#include "hcct/hcct.h"
#include "profile.h"

// Hidden alias of __hcct_gate: the runtime's own accesses bypass the GOT.
extern "C" __attribute__((visibility("hidden"))) unsigned char __hcct_gate_local;

namespace hcct::rt {

inline constexpr unsigned char kGateOff = 0;
inline constexpr unsigned char kGateEmpty = 1;
inline constexpr unsigned char kGateProfiling = 2;

struct KpathThreadState;  // defined by the path profiler

struct ThreadState {
  struct Inert {};
  constexpr ThreadState() = default;
  // The state of g_inert: marked busy for good, so every event of a thread that has it returns.
  explicit constexpr ThreadState(Inert) : busy(1) {}

  ThreadProfile profile;
  ThreadProfile exact;      // option exact=1: the exact CCT of the same events, beside the MCCT
  KpathThreadState *kpath = nullptr;  // created by the path profiler on its first event in this thread
  // The inline fast paths run only while this equals g_burst_epoch: 0 without bursting, the current
  // burst's epoch once the thread's path is synchronised to it, never with exact=1.
  uint64_t fast_epoch = 0;
  // Between bursts, the inline shadow-stack paths run only while this equals g_burst_epoch (set once
  // the shadow stack holds the thread's path in that period and shadow stacks are kept).
  uint64_t between_epoch = 0;
  // Retired code ranges (dump.h) this thread's trees have moved to their retired addresses.
  uint32_t retired_seen = 0;
  BurstThread burst;        // static bursting (burst.h)
  // Set while this thread is inside the runtime. Only this thread writes it; the final dump reads
  // it (after a membarrier) to know the thread has left. 32 bits: the probes test and set it with
  // one `bts` (test_and_set_busy), whose smallest operand is a word, and clear it with a store of
  // the same size (a store narrower than the next event's `bts` would not forward to it; a 16-bit
  // store of an immediate carries a length-changing prefix, which stalls the legacy decoder).
  volatile uint32_t busy = 0;
  unsigned char exact_on = 0;  // option exact=1: every event takes the full path to feed `exact`
  // Who writes this thread's file (runtime.cc, "claims"): kClaimed while the thread itself, the
  // final dump or an exec's snapshot holds the state; kExited once the thread has left.
  unsigned char claim_state = 0;
  bool has_file = false;  // this thread's file (name pid.seq) was written once: the name is its own
  // Thread-exit destructor rounds seen (on_thread_exit re-arms itself so that the program's own
  // key destructors, which may call instrumented code, run before the thread's profile is written).
  unsigned char exit_rounds = 0;
  // Set (after `busy`) while the thread is in the runtime's out-of-line paths, which may change the
  // tree's structure: the time sampler's handler then only counts its samples in
  // `samples_pending`, charged when the event ends (sampler.h). The inline fast paths never set it
  // (they get no new instruction); the handler may charge the current context during them.
  volatile unsigned char in_slow = 0;
  uint32_t seq = 0;
  int tid = 0;
  uint64_t start_ns = 0;
  uint64_t dropped = 0;
  // Time sampling (sampler.h): samples waiting to be charged, and those that could not be.
  uint64_t samples_pending = 0;
  uint64_t samples_lost = 0;
  void *sample_timer = nullptr;  // a timer_t; null while none is armed
  bool has_sample_timer = false;
  // For the samples due but never delivered (sampler_undelivered): the thread's CPU clock when its
  // timer was armed, the first expiry's offset, and the expiries delivered (overruns included).
  uint64_t sample_cpu_start_ns = 0;
  uint64_t sample_first_ns = 0;
  uint64_t samples_delivered = 0;
  uint64_t samples_undelivered = 0;  // counted when the timer was deleted (thread exit)
  // time=wall (sampler.cc, "the wall-clock sampler"): set by the sampler thread while it reads and
  // charges this thread's current context; `wall_excluded` while the thread's tree must not be
  // touched by it (its file is being or has been written). A Dekker pair with `in_slow`: whichever
  // of the owner's out-of-line path and the sampler comes second waits or backs off.
  volatile unsigned char wall_active = 0;
  volatile unsigned char wall_excluded = 0;
  // time=wall with bursting: samples the sampler thread took between bursts (the thread's context
  // is on its shadow stack, which the sampler does not change): charged to that path by the thread
  // at the start of its next out-of-line event, before anything moves it (wall_enter_slow).
  uint64_t samples_between = 0;
  // time=wall: CLOCK_MONOTONIC up to which this thread's wall-clock time has been sampled (0 until
  // sampler_attach: the sampler skips the thread until then). Only the sampler thread advances it.
  uint64_t wall_charged_ns = 0;
  ThreadState *next = nullptr;
};

extern ThreadState g_inert;
// The state of a thread that has not had an event yet: t_state's initial value, marked busy for
// good like g_inert, so the probes' busy test also sends a thread's first event to the slow path
// (which registers it) and there is no null test on the hit path.
extern ThreadState g_unattached;
// Neither sentinel: a registered thread's own state.
HCCT_NOINST inline bool is_thread_state(const ThreadState *s) { return s != &g_inert && s != &g_unattached; }

// A dlclose in any thread stores this into every thread's fast_epoch and between_epoch (never a
// value of g_burst_epoch), so that each thread's next event leaves the inline paths and moves its
// trees off the retired code first (runtime.cc, catch_up_retired). So does every stop of all
// threads (the final dump, an exec's snapshot) after it closes the gates: the probes' hit path,
// once `busy` is set, tests only the epoch, and a kicked epoch is what makes it see the stop (the
// asymmetric Dekker of runtime.cc, stop_all_threads). The slow path undoes a kick
// (catch_up_retired) unless a stop is in force. A thread sets its own epochs with set_own_epoch,
// which never overwrites a kick.
inline constexpr uint64_t kKicked = ~uint64_t(1);
HCCT_NOINST inline void set_own_epoch(uint64_t *epoch, uint64_t value) {
  uint64_t seen = __atomic_load_n(epoch, __ATOMIC_RELAXED);
  if (seen != kKicked && seen != value)
    __atomic_compare_exchange_n(epoch, &seen, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

// The flags that other threads read or write (the final dump reads `busy` and writes the gates).
// Writers are atomic everywhere. Readers on the probes' fast path are atomic in ThreadSanitizer
// builds (so TSan sees no data race, tests/e2e [tsan]) and plain loads elsewhere: gcc folds a plain
// load into the compare, while an atomic load is one more instruction per check (measured: +3.6%
// instructions per call). On x86-64 both are the same single load.
template <typename T>
HCCT_NOINST inline T read_shared(const T &flag) {
#if defined(__SANITIZE_THREAD__)
  return __atomic_load_n(&flag, __ATOMIC_RELAXED);
#else
  return flag;
#endif
}
HCCT_NOINST inline unsigned char probe_gate_value() { return read_shared(__hcct_gate_local); }
HCCT_NOINST inline bool is_busy(const ThreadState *s) {
#if defined(__SANITIZE_THREAD__)
  return __atomic_load_n(&s->busy, __ATOMIC_RELAXED);
#else
  return s->busy;
#endif
}
HCCT_NOINST inline void set_busy(ThreadState *s) { __atomic_store_n(&s->busy, 1, __ATOMIC_RELAXED); }
HCCT_NOINST inline void clear_busy(ThreadState *s) { __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE); }
// Sets `busy`; true if it was set already (then the caller must leave: the thread is inside the
// runtime, or `s` is a sentinel). On x86-64 one `bts` instead of a load, a test and a store: a
// signal arrives between instructions, so a handler's probe sees `busy` either clear (and leaves it
// clear) or set, as with the load and the store; no other thread writes it, so it needs no lock
// prefix. Setting an already set `busy` writes the same value (the sentinels are set for good).
HCCT_NOINST inline bool test_and_set_busy(ThreadState *s) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  bool was_set;
  asm volatile("btsl $0, %0" : "+m"(s->busy), "=@ccc"(was_set));
  return was_set;
#else
  if (is_busy(s)) return true;
  set_busy(s);
  return false;
#endif
}

extern __thread ThreadState *t_state __attribute__((tls_model("initial-exec")));

// Registers the calling thread (slow path of its first event); null if it cannot be profiled.
ThreadState *attach_thread();
// Whether a time sample may be charged now: profiling runs (between bursts too) and no dump has
// begun. A sample that finds it false is counted as lost.
bool samples_accepted();
// Calls fn on every registered thread, the registry locked (no thread is freed meanwhile).
void for_each_registered_thread(void (*fn)(ThreadState *, void *), void *arg);

// True while the wall-clock sampler thread runs (time=wall; sampler.cc).
extern bool g_wall_sampler;
// time=wall, at the start of an out-of-line path (in_slow is set): waits until the sampler thread
// is not charging this thread's tree, then charges the samples it took between bursts (sampler.cc).
void wall_enter_slow(ThreadState *s);

// Marks the thread as inside the runtime's out-of-line paths (busy already set): see in_slow. With
// time=wall, also makes sure the sampler thread is not reading the tree these paths may change (a
// full fence and a load, here and never on the inline fast paths).
__attribute__((always_inline, no_instrument_function)) inline void enter_slow(ThreadState *s) {
  s->in_slow = 1;
  compiler_fence();
  if (HCCT_UNLIKELY(read_shared(g_wall_sampler))) wall_enter_slow(s);
}

// Starts an event: null if the event must be ignored (gate closed, thread not profiled, or this
// thread already inside the runtime — e.g. a signal handler that interrupted it). A non-null
// result must be passed to event_end.
__attribute__((always_inline, no_instrument_function)) inline ThreadState *event_begin(bool attach) {
  ThreadState *s = t_state;
  if (HCCT_UNLIKELY(s == &g_unattached)) {
    if (!attach) return nullptr;
    s = attach_thread();
    if (!s) return nullptr;
  }
  if (HCCT_UNLIKELY(is_busy(s))) {
    if (is_thread_state(s)) ++s->dropped;
    return nullptr;
  }
  set_busy(s);
  compiler_fence();
  // Re-read after `busy` is set: the final dump closes the gate and then waits for busy threads.
  if (HCCT_UNLIKELY(probe_gate_value() != kGateProfiling)) {
    compiler_fence();
    clear_busy(s);
    return nullptr;
  }
  enter_slow(s);
  return s;
}

// Charges the samples that arrived during an out-of-line event (sampler.cc).
void settle_samples(ThreadState *s);

// Ends an out-of-line event: samples that arrived during it are charged to the context current
// now (the one entered, or the one returned to), then `busy` is cleared.
__attribute__((always_inline, no_instrument_function)) inline void event_end(ThreadState *s) {
  compiler_fence();
  if (HCCT_UNLIKELY(__atomic_load_n(&s->samples_pending, __ATOMIC_RELAXED) || s->profile.has_deferred_prunes()))
    settle_samples(s);
  compiler_fence();
  // Release: the sampler thread (time=wall) that sees in_slow clear sees the tree this event left.
  __atomic_store_n(&s->in_slow, 0, __ATOMIC_RELEASE);
  compiler_fence();
  clear_busy(s);
}

}  // namespace hcct::rt

// Hooks of the path profiler (kpath_runtime.cc), weak so the runtime works without it.
__attribute__((weak)) bool hcct_kpath_write_sections(hcct::rt::DumpFile &file,
                                                     hcct::rt::ThreadState &thread);
__attribute__((weak)) void hcct_kpath_release(hcct::rt::ThreadState &thread);
// In a forked child (the forking thread, or null if it has no state): the child's path profile
// starts empty, as its calling-context tree does.
__attribute__((weak)) void hcct_kpath_fork_child(hcct::rt::ThreadState *thread);

#endif
