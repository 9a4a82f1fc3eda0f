// Static bursting, process side (burst_runtime.cc; docs/BURSTING.md).
#ifndef HCCT_RT_BURST_RUNTIME_H
#define HCCT_RT_BURST_RUNTIME_H

#include <optional>

#include "burst.h"
#include "options.h"
#include "static_tls.h"

namespace hcct::rt {

// The runtime's own threads (the burst timer, the wall-clock sampler): started with clone(), so that
// glibc does not count them and keeps a single-threaded program's fast paths (start_raw_thread). Such
// a thread must call nothing of glibc's that uses thread state (errno, cancellation, TLS): it has
// none of its own. These helpers make the system calls it needs directly (x86-64; raw_syscall is
// in arena.h).
bool start_raw_thread(int (*main)(void *), void *arg);
uint64_t raw_monotonic_ns();
void raw_sleep_until(uint64_t deadline_ns);  // CLOCK_MONOTONIC, absolute
void raw_set_thread_name(const char *name);

// 0 unless bursting; during bursting odd while a burst is on, even between bursts; a new value at
// every change. A thread takes the inline fast path only while its ThreadState::fast_epoch equals
// it, so the first event of a burst finds its thread's path to re-synchronise.
extern uint64_t g_burst_epoch __attribute__((visibility("hidden")));
// Set at the first event the bursting paths process (burst_sync=auto may switch to the shadow
// stack's event clock only before it).
extern unsigned char g_burst_events_seen __attribute__((visibility("hidden")));
// Bumped when burst_sync=auto switches to the shadow stack mid-run: a thread whose
// BurstThread::generation differs rebuilds its shadow stack from the machine stack once.
extern uint32_t g_shadow_generation __attribute__((visibility("hidden")));
// 1 between bursts when events arriving then keep a shadow stack (burst_sync auto or shadow).
extern unsigned char g_burst_between __attribute__((visibility("hidden")));
// The gate the -finstrument-functions hooks test (they are called whatever __hcct_gate says): equal
// to __hcct_gate, except that it stays open between bursts when they keep a shadow stack.
extern unsigned char g_hook_gate __attribute__((visibility("hidden")));

// The count clock (docs/BURSTING.md, "The count clock"): modules built with the plugin's
// clock=count, each with a thread-local countdown and exit gate (hcct/unit_abi.h) at `offset` from
// every thread's pointer. Appended under the units lock, published by `count`; `live` turns false
// when the module is unloaded.
struct CountModules {
  static constexpr uint32_t kMax = kMaxCountModules;
  intptr_t offset[kMax];
  const void *unit[kMax];  // its first unit's descriptor
  // The loaded object that held the descriptor at the registration, as dl_iterate_phdr names it:
  // TLS module id, load address, a hash of its path. A dlclose'd module is told apart from a
  // library loaded after it at the same address, TLS offset and module id
  // (burst_forget_unloaded_units), so that its countdown is never written in that library's TLS.
  size_t tls_modid[kMax];
  uintptr_t load_address[kMax];
  uint64_t path_hash[kMax];
  // The dlclose count (begun and ended) when the object was named, or kNamedDuringDlclose: while
  // it is unchanged, the object is still loaded and the offset still the module's.
  static constexpr uint64_t kNamedDuringDlclose = ~uint64_t(0);
  uint64_t named_at[kMax];
  bool live[kMax];
  uint32_t count;
};
extern CountModules g_count_modules __attribute__((visibility("hidden")));
// Set once the count clock is chosen (burst_count_decide): count-probe events take it.
extern bool g_count_clock __attribute__((visibility("hidden")));
// At the first count-probe event: whether the count clock serves this run (burst=1 on a timer, not
// unwind, every plugin unit registered so far counts and has its site table). Empty when it cannot
// be decided now without waiting (the units lock is held, perhaps by the code a signal handler
// interrupted): the event is then left out, and the probe, its countdown still negative, calls in
// again at its next enter.
std::optional<bool> burst_count_decide();

// Every live count module from module `from` on: `visit(i, countdown)` with module i's countdown in
// the thread whose pointer is `thread_pointer` (its exit gate at unit_abi::kExitGateOffset from it).
// Returns the modules' number. The one walk of the modules, rare enough (a gap's share, a burst's
// start and end) to look them up each time.
template <typename Visit>
[[gnu::always_inline]] inline uint32_t for_each_count_module(uintptr_t thread_pointer, uint32_t from,
                                                             const Visit &visit) {
  uint32_t n = __atomic_load_n(&g_count_modules.count, __ATOMIC_ACQUIRE);
  for (uint32_t i = from; i < n; ++i)
    if (__atomic_load_n(&g_count_modules.live[i], __ATOMIC_ACQUIRE))
      visit(i, static_tls_at<int64_t>(thread_pointer, g_count_modules.offset[i]));
  return n;
}

// A write into the calling thread's count-module TLS (the countdowns and exit gates), against a
// dlclose that unloads a module meanwhile: its static TLS goes back to glibc, which may give it to
// the next library loaded, and a write there would change that library's data. A Dekker pair of
// sequentially consistent words: the dlclose (count_unload_begin) announces itself and waits for
// the writes under way; a write that begins after it sees it and is put off (allowed() false; the
// caller leaves a negative countdown, which calls in again). Signal-safe: nothing waits here.
extern int g_count_writers __attribute__((visibility("hidden")));
extern int g_count_unloading __attribute__((visibility("hidden")));
class CountWrite {
 public:
  CountWrite() {
    __atomic_add_fetch(&g_count_writers, 1, __ATOMIC_SEQ_CST);
    allowed_ = __atomic_load_n(&g_count_unloading, __ATOMIC_SEQ_CST) == 0;
  }
  ~CountWrite() { __atomic_sub_fetch(&g_count_writers, 1, __ATOMIC_RELEASE); }
  CountWrite(const CountWrite &) = delete;
  CountWrite &operator=(const CountWrite &) = delete;
  bool allowed() const { return allowed_; }

 private:
  bool allowed_;
};
// Around a dlclose (runtime.cc): no count-module write runs from begin until end, when the modules
// it unloaded are no longer live (burst_forget_unloaded_units). A forked child starts with no write
// under way, and with the forking thread's own dlcloses under way (a destructor that forked) but
// no other thread's (count_writes_fork_child).
void count_unload_begin();
void count_unload_end();
void count_writes_fork_child();

// Configures bursting and starts the schedule (the timer thread for burst=1); *gate and *hook_gate
// receive the values to open with. False if a resource could not be had.
bool burst_start(const Options &options, bool exact, unsigned char *gate, unsigned char *hook_gate);
bool burst_active();
bool burst_finished();  // the final dump has begun: bursting is over for good
bool burst_keeps_shadow();
// Whether a thread without a current shadow stack must rebuild its path from the machine stack
// (burst_sync=unwind, or auto once GCC-plugin probes were seen: they are silent between bursts).
bool burst_may_unwind();
void burst_plugin_probe_seen();
// Whether every event of the run reached the runtime, so that the sampled fraction is exact.
bool burst_events_known();
// Records `fn` as an instrumented function (the unwinder keeps only frames of known functions).
void burst_learn(uintptr_t fn);
// The calling path of the current thread from the machine stack, outermost first, into `scratch`:
// the known-instrumented frames whose CFA lies above `sp` (the probe's), without the event's own
// function's frame unless the exit probe was tail-called (its frame is then gone). Returns the depth.
// Frames of stage=early GCC-plugin units are expanded into the instrumented functions active in
// them (their unit's site table, hcct/unit_abi.h). *excluded_own: whether the event's own function
// was left out (else an exit's function, if on the path, is the path's last entry).
// `memo`: the thread's previous walk, reused for the frames still on the stack, and updated
// (docs/BURSTING.md, "The cost of a burst start").
size_t burst_unwind(ShadowStack &scratch, uintptr_t fn, uintptr_t sp, bool torn_down,
                    bool *excluded_own = nullptr, UnwindMemo *memo = nullptr);
// After a dlclose: forgets the unit descriptors of unloaded modules.
void burst_forget_unloaded_units();
// Registered unit descriptors, and the chain of `return_address` in their site tables (tests).
size_t burst_unit_count();
bool burst_unit_unwinds(uintptr_t return_address, uintptr_t *chain, size_t max, size_t *length);
// Where a time sample finds a thread's current calling context under bursting (docs/RUNTIME.md,
// "Time and bursting"): on the profile's path, on the shadow stack kept between bursts, or nowhere
// the runtime keeps (no shadow stack between bursts: burst_sync=unwind, plugin probes).
enum class SampleSite : unsigned char { kProfile, kShadow, kUnknown };
SampleSite burst_sample_site(const BurstThread &b);
// Fraction of wall time since start spent in bursts.
double burst_time_fraction();
// The event clock (burst=1 with burst_sync=shadow, docs/BURSTING.md "The estimator"): each thread
// schedules its own bursts in its own enter events; the global epoch never changes.
bool burst_event_clock();
uint64_t burst_now_ns();
// Starts a thread's schedule on the event clock at its first event (`seed`: something of the
// thread's own, mixed with the clock).
void burst_schedule_first(BurstThread &b, uint64_t seed);
// The fraction of the thread's time (since its first event) spent in its own bursts.
double burst_thread_time_fraction(const BurstThread &b);
const char *burst_kind_name();
const char *burst_sync_option();
// The timer's schedule (the time clock's bursts, the path gate), and the schedule of the calls'
// bursts (the event clock's, or the timer's on the time clock).
uint64_t burst_interval_ns();
uint64_t burst_length_ns();
uint64_t burst_call_interval_ns();
uint64_t burst_call_length_ns();
// Path profiles (docs/KPATH.md, "Bursting"): once a module with uninstrumented copies
// (kpath -kpath-burst=1) registered and bursting is on, __hcct_path_gate follows the bursts of the
// process-wide schedule (the timer, or burst=manual's hook); on the event clock, which has no
// timer, a timer thread is started for the path gate alone. Idempotent; called by the kpath runtime
// when a module registers and by burst_start when one did before.
void burst_paths_start();
extern bool g_path_versions_registered __attribute__((visibility("hidden")));
// Whether a registered module's versions read the path gate (not only the event clock's countdown):
// then the gate needs the timer on the event clock too.
extern bool g_path_gate_read __attribute__((visibility("hidden")));
// Whether the path gate follows bursts.
bool burst_paths_active();
// The final dump: no burst opens again, events between bursts stop.
void burst_finish();
void burst_fork_prepare();
void burst_fork_parent();
void burst_fork_child();

}  // namespace hcct::rt

#endif
