// Static bursting, process side (docs/BURSTING.md): the burst schedule (a runtime-owned timer
// thread, or the program itself through the test hook hcct_burst), the gate and the burst epoch,
// the set of functions known to be instrumented, and the machine-stack unwinder that rebuilds a
// thread's calling path at the start of a burst when no shadow stack was kept.
#include "burst_runtime.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unwind.h>

#include "hcct/hcct.h"
#include "thread.h"

namespace hcct::rt {

uint64_t g_burst_epoch = 0;
unsigned char g_burst_between = 0;
unsigned char g_hook_gate = 0;

namespace {

// Serialises phase changes (timer thread, test hook) against the final dump and fork.
int g_lock = 0;
bool g_active = false;    // bursting configured and started
bool g_finished = false;  // the final dump has begun: the gate stays closed
Burst g_kind = Burst::kOff;
BurstSync g_sync = BurstSync::kAuto;
bool g_gate_flips = false;  // the gate closes between bursts (plugin probes go silent)
bool g_keep_shadow = false;  // events between bursts keep a shadow stack
bool g_all_events = false;  // every event reaches the runtime (gate always open)
bool g_event_clock = false;  // each thread schedules its own bursts by counting its enter events
uint64_t g_interval_ns = 0, g_length_ns = 0;
bool g_open = false;
uint64_t g_start_ns = 0, g_opened_ns = 0, g_burst_ns = 0;
unsigned char g_plugin_seen = 0;

// The native-time estimator (docs/BURSTING.md, "The native-time estimator").
bool g_native = false;
// The native share of the bursts (native time / CPU time in them) a thread measured last, as the
// bits of a double: the timer stretches the next burst by its inverse (next_burst_ns).
uint64_t g_native_share_bits = 0;
constexpr double kMaxStretch = 32;
// When each recent burst opened and closed, by epoch: a
// thread closes its measurement of a burst at its next one, when the timer has moved on. Written
// by the timer under the lock; read without it (the epoch, read before and after, validates).
struct BurstRecord {
  uint64_t epoch;
  uint64_t open_ns;
  uint64_t close_ns;
};
constexpr size_t kBurstRecords = 64;
BurstRecord g_records[kBurstRecords];
// Cycle counter against CLOCK_MONOTONIC from the start (the rate, measured over the run so far), and
// the cost of reading it twice back to back (subtracted from every timed event).
uint64_t g_cycles_at_start = 0;
uint64_t g_cycles_overhead = 0;
uint64_t g_cycles_per_timing = 0;  // the rest of a timed event's two readings, outside its interval

HCCT_NOINST void lock() {
  while (__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
}
HCCT_NOINST void unlock() { __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE); }

HCCT_NOINST uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Opens or closes a burst. Epochs are odd during bursts and even between them; every change makes
// a new one, so a thread knows at its next event whether its path is synchronised. Caller holds
// the lock.
HCCT_NOINST void set_phase_locked(bool on) {
  if (!g_active || g_finished) return;
  uint64_t e = g_burst_epoch;
  if (on) {
    e += (e & 1) ? 2 : 1;  // a burst opened during a burst is a new burst
  } else {
    if (!(e & 1)) return;
    e += 1;
  }
  uint64_t now = monotonic_ns();
  if (g_open) g_burst_ns += now - g_opened_ns;
  if (g_native) {
    if (g_open) {
      BurstRecord &r = g_records[(g_burst_epoch >> 1) % kBurstRecords];
      if (r.epoch == g_burst_epoch) __atomic_store_n(&r.close_ns, now, __ATOMIC_RELEASE);
    }
    if (on) {
      BurstRecord &r = g_records[(e >> 1) % kBurstRecords];
      __atomic_store_n(&r.epoch, 0, __ATOMIC_RELEASE);  // invalid while it changes
      __atomic_store_n(&r.open_ns, now, __ATOMIC_RELAXED);
      __atomic_store_n(&r.close_ns, 0, __ATOMIC_RELAXED);
      __atomic_store_n(&r.epoch, e, __ATOMIC_RELEASE);
    }
  }
  g_open = on;
  g_opened_ns = now;
  __atomic_store_n(&g_burst_epoch, e, __ATOMIC_RELEASE);
  __atomic_store_n(&g_burst_between, (unsigned char)(!on && g_keep_shadow), __ATOMIC_RELEASE);
  if (g_gate_flips) {
    __atomic_store_n(&__hcct_gate_local, on ? kGateProfiling : kGateOff, __ATOMIC_RELEASE);
    if (!g_keep_shadow) __atomic_store_n(&g_hook_gate, on ? kGateProfiling : kGateOff, __ATOMIC_RELEASE);
  }
}

HCCT_NOINST void set_phase(bool on) {
  lock();
  set_phase_locked(on);
  unlock();
}

HCCT_NOINST timespec to_timespec(uint64_t ns) {
  timespec ts;
  ts.tv_sec = time_t(ns / 1000000000ull);  // whole seconds: intervals of any length
  ts.tv_nsec = long(ns % 1000000000ull);
  return ts;
}

HCCT_NOINST void sleep_until(uint64_t deadline) {
  timespec ts = to_timespec(deadline);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// The length of the burst that opens now: burst_length, or with the native-time estimator
// burst_length / the native share of the bursts measured last (at most kMaxStretch times longer),
// so that each burst holds about burst_length of the program's own time and every window (the gap
// after it stays interval - length) samples the same fraction of its native time, hence of its
// calls, whatever the phase's in-burst slowdown.
HCCT_NOINST uint64_t next_burst_ns() {
  if (!g_native) return g_length_ns;
  uint64_t bits = __atomic_load_n(&g_native_share_bits, __ATOMIC_RELAXED);
  double share = 1.0;
  if (bits) __builtin_memcpy(&share, &bits, sizeof share);
  if (!(share >= 1.0 / kMaxStretch)) share = 1.0 / kMaxStretch;
  if (share > 1.0) share = 1.0;
  return uint64_t(double(g_length_ns) / share + 0.5);
}

// The timer thread: wall-clock (CLOCK_MONOTONIC) schedule, absolute deadlines so that lateness
// does not accumulate; no signals. All signals are blocked in it, so it never takes one of the
// program's.
HCCT_NOINST void *timer_main(void *arg) {
  uint64_t next = monotonic_ns();
  bool open = __atomic_load_n(&g_open, __ATOMIC_ACQUIRE);
  // The first burst starts at a random point of the first interval (systematic sampling with a
  // random start): a burst at a fixed offset from the start would over-sample the program's start.
  uint64_t first_wait = reinterpret_cast<uintptr_t>(arg);
  for (;;) {
    if (first_wait) {
      next += first_wait;
      first_wait = 0;
    } else {
      next += open ? next_burst_ns() : g_interval_ns - g_length_ns;
    }
    uint64_t now = monotonic_ns();
    if (next + g_interval_ns < now) next = now;  // far behind (a stopped process): re-anchor
    sleep_until(next);
    open = !open;
    lock();
    bool done = g_finished;
    if (!done) set_phase_locked(open);
    unlock();
    if (done) return nullptr;
  }
}

HCCT_NOINST bool start_timer(uint64_t first_wait) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  int err = pthread_create(&thread, &attr, timer_main, reinterpret_cast<void *>(uintptr_t(first_wait)));
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err == 0) pthread_setname_np(thread, "hcct-burst");
  return err == 0;
}

// ---------------------------------------------------------------------------------------------
// Functions known to be instrumented: every routine the runtime has seen an event of. Lock-free
// open addressing over an mmap'd table; inserts happen on the slow path only.

constexpr uint32_t kFunctionBits = 17;
constexpr uint32_t kFunctionSlots = 1u << kFunctionBits;
constexpr uint32_t kMaxProbe = 64;
uintptr_t *g_functions = nullptr;  // instrumented: seen in an event, or found so by code inspection
uintptr_t *g_others = nullptr;     // found not instrumented by code inspection

HCCT_NOINST uint32_t slot_of(uintptr_t fn) {
  return uint32_t(((fn >> 2) * 0x9E3779B97F4A7C15ull) >> (64 - kFunctionBits));
}

HCCT_NOINST bool set_contains(const uintptr_t *table, uintptr_t fn) {
  if (!table || !fn) return false;
  uint32_t i = slot_of(fn);
  for (uint32_t k = 0; k < kMaxProbe; ++k, i = (i + 1) & (kFunctionSlots - 1)) {
    uintptr_t v = __atomic_load_n(&table[i], __ATOMIC_RELAXED);
    if (v == fn) return true;
    if (v == 0) return false;
  }
  return false;
}

HCCT_NOINST void set_insert(uintptr_t *table, uintptr_t fn) {
  if (!table || !fn) return;
  uint32_t i = slot_of(fn);
  for (uint32_t k = 0; k < kMaxProbe; ++k, i = (i + 1) & (kFunctionSlots - 1)) {
    uintptr_t v = __atomic_load_n(&table[i], __ATOMIC_RELAXED);
    if (v == fn) return;
    if (v == 0 && (__atomic_compare_exchange_n(&table[i], &v, fn, false, __ATOMIC_RELAXED,
                                               __ATOMIC_RELAXED) ||
                   v == fn))
      return;
  }
}

}  // namespace
}  // namespace hcct::rt

// libgcc's FDE lookup (unwind-dw2-fde.h, not installed).
struct dwarf_eh_bases {
  void *tbase;
  void *dbase;
  void *func;
};
extern "C" const unsigned char *_Unwind_Find_FDE(void *pc, dwarf_eh_bases *bases);

namespace hcct::rt {
namespace {

// The extent of the function starting at `start`, from its FDE (encoded pcrel|sdata4, as gcc and
// clang emit on x86-64: checked by decoding pc_begin back to `start`). 0 if unknown.
HCCT_NOINST size_t function_size(uintptr_t start) {
  dwarf_eh_bases bases{};
  const unsigned char *fde = _Unwind_Find_FDE(reinterpret_cast<void *>(start), &bases);
  if (!fde || reinterpret_cast<uintptr_t>(bases.func) != start) return 0;
  uint32_t length;
  int32_t begin;
  uint32_t range;
  __builtin_memcpy(&length, fde, 4);
  if (length == 0xffffffffu || length < 12) return 0;
  __builtin_memcpy(&begin, fde + 8, 4);
  __builtin_memcpy(&range, fde + 12, 4);
  if (reinterpret_cast<uintptr_t>(fde + 8) + intptr_t(begin) != start) return 0;
  return range;
}

// Whether the code of the function at `start` takes its own address: the first argument of every
// probe (`lea fn(%rip), %reg`, or `mov $fn, %reg` outside PIE), which both -finstrument-functions
// and the GCC plugin pass; ordinary functions practically never do. Symbol-free.
HCCT_NOINST bool references_itself(uintptr_t start) {
  size_t size = function_size(start);
  if (!size || size > (64u << 20)) return false;
  const unsigned char *p = reinterpret_cast<const unsigned char *>(start);
  for (size_t i = 0; i + 7 <= size; ++i) {
    if ((p[i] == 0x48 || p[i] == 0x4c) && p[i + 1] == 0x8d && (p[i + 2] & 0xc7) == 0x05) {
      int32_t disp;
      __builtin_memcpy(&disp, p + i + 3, 4);
      if (start + i + 7 + intptr_t(disp) == start) return true;
    }
    if (start <= 0xffffffffu && p[i] >= 0xb8 && p[i] <= 0xbf) {
      uint32_t imm;
      __builtin_memcpy(&imm, p + i + 1, 4);
      if (imm == start) return true;
    }
  }
  return false;
}

HCCT_NOINST bool known(uintptr_t fn) {
  if (!fn) return false;
  if (set_contains(g_functions, fn)) return true;
  if (set_contains(g_others, fn)) return false;
  bool yes = references_itself(fn);
  set_insert(yes ? g_functions : g_others, fn);
  return yes;
}

// ---------------------------------------------------------------------------------------------
// The machine-stack unwinder (libgcc's, symbol-free): region start = the function, IP = return
// address, CFA = the caller's stack pointer at the call.

struct Walk {
  uintptr_t sp;
  uintptr_t fn;
  bool exclude_first;
  bool started;
  bool have_pending;
  PathEntry pending;
  ShadowStack *out;
};

HCCT_NOINST void emit(Walk *w, uintptr_t site) {
  if (!w->have_pending) return;
  w->pending.site = site;
  if (known(w->pending.fn)) w->out->push_raw(w->pending);
  w->have_pending = false;
}

// Called innermost frame first. During _Unwind_Backtrace, _Unwind_GetCFA of a frame's context is
// that frame's own stack pointer at its call into the frame inside it (the CFA of the callee): for a
// program frame, exactly the stack pointer its probes report, hence its tag. The runtime's frames lie
// below the probe's stack pointer `sp`; the first frame at or above it is the event's function (or,
// for an inlined one or a tail-called exit probe, its caller).
HCCT_NOINST _Unwind_Reason_Code walk_frame(_Unwind_Context *ctx, void *arg) {
  auto *w = static_cast<Walk *>(arg);
  uintptr_t frame_sp = _Unwind_GetCFA(ctx);
  int before = 0;
  uintptr_t ip = _Unwind_GetIPInfo(ctx, &before);
  uintptr_t start = _Unwind_GetRegionStart(ctx);
  if (!w->started) {
    if (frame_sp < w->sp) return _URC_NO_REASON;  // the runtime's own frames
    w->started = true;
    if (w->exclude_first && start == w->fn) return _URC_NO_REASON;  // the event's own function
  }
  emit(w, ip);  // this frame's IP is the call site of the frame inside it
  w->pending = PathEntry{start, 0, frame_sp};
  w->have_pending = true;
  return _URC_NO_REASON;
}

}  // namespace

HCCT_NOINST bool burst_start(const Options &o, bool exact, unsigned char *gate,
                             unsigned char *hook_gate) {
  g_kind = o.burst;
  g_sync = o.burst_sync;
  g_interval_ns = o.burst_interval_ns;
  g_length_ns = o.burst_length_ns;
  g_all_events = exact || g_sync == BurstSync::kShadow;
  g_gate_flips = !g_all_events;
  g_keep_shadow = g_sync != BurstSync::kUnwind;
  if (g_sync != BurstSync::kShadow) {
    g_functions = static_cast<uintptr_t *>(map_pages(kFunctionSlots * sizeof(uintptr_t)));
    g_others = static_cast<uintptr_t *>(map_pages(kFunctionSlots * sizeof(uintptr_t)));
    if (!g_functions || !g_others) return false;
  }
  // Every event reaches the runtime and keeps a shadow stack: each thread can count its calls and
  // schedule its own bursts in them (the event clock), which makes every window's sampled fraction
  // the same whatever the in-burst slowdown of the phase (docs/BURSTING.md, "The estimator").
  g_event_clock = g_kind == Burst::kTimer && g_sync == BurstSync::kShadow;
  // The gate closes between bursts and time is the only clock: the native-time estimator.
  g_native = g_kind == Burst::kTimer && !g_event_clock && g_gate_flips;
  if (g_native) {
    // What timing an event adds: two readings of the counter, of which a timed interval holds one.
    uint64_t best = ~uint64_t(0), pairs = ~uint64_t(0);
    for (int round = 0; round < 8; ++round) {
      uint64_t begin = burst_cycles();
      for (int i = 0; i < 16; ++i) {
        uint64_t a = burst_cycles();
        uint64_t b = burst_cycles();
        if (b - a < best) best = b - a;
      }
      uint64_t took = (burst_cycles() - begin) / 16;
      if (took < pairs) pairs = took;
    }
    g_cycles_overhead = best;
    g_cycles_per_timing = pairs > best ? pairs - best : 0;
    g_cycles_at_start = burst_cycles();
  }
  g_start_ns = g_opened_ns = monotonic_ns();
  g_active = true;
  // The run starts between bursts (epoch 2: even, and never the 0 of "no bursting").
  g_open = false;
  g_burst_epoch = 2;
  g_burst_between = g_keep_shadow;
  *gate = g_gate_flips ? kGateOff : kGateProfiling;
  *hook_gate = g_gate_flips && !g_keep_shadow ? kGateOff : kGateProfiling;
  if (g_kind == Burst::kTimer && !g_event_clock) {
    // Random start: the clock's low bits (a hash of them) pick the first burst's offset.
    uint64_t x = g_start_ns * 0x9E3779B97F4A7C15ull;
    uint64_t first_wait = 1 + (x ^ (x >> 29)) % (g_interval_ns - g_length_ns + 1);
    if (!start_timer(first_wait)) return false;
  }
  return true;
}

HCCT_NOINST bool burst_active() { return g_active; }
HCCT_NOINST bool burst_keeps_shadow() { return g_keep_shadow; }

HCCT_NOINST bool burst_may_unwind() {
  return g_sync == BurstSync::kUnwind ||
         (g_sync == BurstSync::kAuto && __atomic_load_n(&g_plugin_seen, __ATOMIC_RELAXED));
}

HCCT_NOINST SampleSite burst_sample_site(const BurstThread &b) {
  if (b.shadow_current) return SampleSite::kShadow;
  // A shadow stack is kept between bursts but took nothing over: no event since the profile's last
  // one, whose path is still the thread's.
  if (g_keep_shadow && !burst_may_unwind()) return SampleSite::kProfile;
  // No shadow stack: the profile's path is the thread's only inside a burst it has joined.
  uint64_t e = __atomic_load_n(&g_burst_epoch, __ATOMIC_ACQUIRE);
  return (e & 1) && b.epoch == e ? SampleSite::kProfile : SampleSite::kUnknown;
}

HCCT_NOINST void burst_plugin_probe_seen() {
  if (!g_plugin_seen) __atomic_store_n(&g_plugin_seen, 1, __ATOMIC_RELAXED);
}

HCCT_NOINST bool burst_events_known() {
  return g_all_events || (g_sync == BurstSync::kAuto && !__atomic_load_n(&g_plugin_seen, __ATOMIC_RELAXED));
}

HCCT_NOINST void burst_learn(uintptr_t fn) {
  if (g_functions && !set_contains(g_functions, fn)) set_insert(g_functions, fn);
}

HCCT_NOINST size_t burst_unwind(ShadowStack &scratch, uintptr_t fn, uintptr_t sp, bool torn_down) {
  scratch.clear();
  Walk w{};
  w.sp = sp;
  w.fn = fn;
  w.exclude_first = !torn_down;
  w.out = &scratch;
  _Unwind_Backtrace(walk_frame, &w);
  emit(&w, 0);
  scratch.reverse();
  return scratch.depth();
}

HCCT_NOINST double burst_time_fraction() {
  lock();
  uint64_t now = monotonic_ns();
  uint64_t in_bursts = g_burst_ns + (g_open ? now - g_opened_ns : 0);
  uint64_t total = now - g_start_ns;
  unlock();
  return total ? double(in_bursts) / double(total) : 1.0;
}

HCCT_NOINST bool burst_event_clock() { return g_event_clock; }
HCCT_NOINST uint64_t burst_now_ns() { return monotonic_ns(); }

namespace {

// Bounds of a burst's length in enter events: at least enough to be worth re-synchronising for, at
// most what keeps a burst of a thread that blocks inside it from sampling most of the run.
constexpr uint64_t kMinBurstEvents = 64;
constexpr uint64_t kMaxBurstEvents = uint64_t(1) << 26;
constexpr uint64_t kFirstBurstEvents = 4096;

HCCT_NOINST uint64_t next_random(BurstThread &b) {
  uint64_t x = b.random;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  b.random = x;
  return x;
}

// The enters to skip after a burst of `events`: events * (interval - length) / length, times a
// jitter in [0.75, 1.25) drawn independently of the program, so that the schedule cannot lock onto a
// loop of the program whose period divides it (the probability that a given call is sampled stays
// length / interval in every window).
HCCT_NOINST uint64_t draw_gap(BurstThread &b, uint64_t events) {
  double per_event = double(g_interval_ns - g_length_ns) / double(g_length_ns);
  double jitter = 0.75 + 0.5 * double(next_random(b) >> 11) * 0x1.0p-53;
  return uint64_t(double(events) * per_event * jitter + 0.5);
}

}  // namespace

HCCT_NOINST void burst_schedule_first(BurstThread &b, uint64_t seed) {
  uint64_t now = monotonic_ns();
  b.random = (seed ^ now) * 0x9E3779B97F4A7C15ull | 1;
  b.clock_started_ns = now;
  b.burst_events = kFirstBurstEvents;
  // The first burst starts at a random point of the first window (systematic sampling with a
  // random start), as on the time clock.
  uint64_t window = kFirstBurstEvents + draw_gap(b, kFirstBurstEvents);
  b.gap_left = next_random(b) % (window + 1);
}

HCCT_NOINST void burst_schedule_next(BurstThread &b) {
  uint64_t now = monotonic_ns();
  uint64_t took = now - b.burst_started_ns;
  b.burst_ns += took;
  uint64_t events = b.burst_events;
  b.gap_left = draw_gap(b, events);
  // Aim the next burst at burst_length of time: scale its enters by length / took, at most doubling
  // per burst (shrinking at once: a burst that took too long says the calls became slower, and the
  // next gap, counted in this burst's calls, already lasts long). Only the burst's length in calls
  // depends on the program; the fraction sampled in each window does not, so the estimate stays
  // unbiased.
  uint64_t next = took ? uint64_t(double(events) * double(g_length_ns) / double(took)) : 2 * events;
  if (next > 2 * events) next = 2 * events;
  b.burst_events = next < kMinBurstEvents ? kMinBurstEvents : next > kMaxBurstEvents ? kMaxBurstEvents : next;
}

HCCT_NOINST double burst_thread_time_fraction(const BurstThread &b) {
  uint64_t now = monotonic_ns();
  uint64_t in_bursts = b.burst_ns + (b.sampling ? now - b.burst_started_ns : 0);
  uint64_t total = b.clock_started_ns ? now - b.clock_started_ns : 0;
  return total ? double(in_bursts) / double(total) : 0.0;
}

namespace {
HCCT_NOINST uint64_t thread_cpu_ns(int tid);
}  // namespace

HCCT_NOINST bool burst_native_estimator() { return g_native; }

HCCT_NOINST void burst_native_add(BurstThread &b, uint64_t start_cycles, bool joined) {
  uint64_t took = burst_cycles() - start_cycles;
  took = took > g_cycles_overhead ? took - g_cycles_overhead : 0;
  BurstThread::Native &m = b.native;
  m.fixed_ticks += g_cycles_per_timing;
  if (joined) {  // the re-synchronisation: once per burst, all of it
    m.fixed_ticks += took;
    return;
  }
  // One timed event stands for kNativeTimedEvery: one the thread was preempted in (or that took
  // unusually long) would weigh far too much, so it is left out of the average.
  if (took < kMaxTimedCycles) {
    m.timed_ticks += took;
    ++m.timed_events;
  }
  if (--m.until_calibration == 0) {
    m.until_calibration = kCalibrateEvery;
    m.calibrate = true;
  }
}

namespace {
// The calibration's dummy routine: its address is never a program's.
[[gnu::noinline]] HCCT_NOINST void calibration_dummy() { __asm__ volatile(""); }
}  // namespace

HCCT_NOINST uintptr_t burst_calibration_fn() { return reinterpret_cast<uintptr_t>(&calibration_dummy); }
HCCT_NOINST bool burst_plugin_probes() { return __atomic_load_n(&g_plugin_seen, __ATOMIC_RELAXED); }

HCCT_NOINST void burst_native_calibrated(BurstThread &b, uint64_t start, uint64_t middle, uint64_t end,
                                         uint64_t batch_end, uint64_t calls, int tid) {
  BurstThread::Native &m = b.native;
  // The thread's CPU clock now and then inside the burst: its CPU time in the burst, extrapolated
  // from the last reading by calls, does not depend on how the CPU was shared over the window.
  m.last_cpu_ns = thread_cpu_ns(tid);
  m.last_cpu_calls = calls;
  uint64_t read = burst_cycles();
  m.fixed_ticks += read - end;
  // The calibration runs in the burst too: all of it is the runtime's time.
  m.fixed_ticks += batch_end - start + g_cycles_overhead + g_cycles_per_timing;
  uint64_t enter = middle - start, exit = end - middle, batch = batch_end - end;
  // All reached the runtime (the gate stayed open), and none was preempted.
  if (m.dummies_seen == 2 + 2 * kCalibrationBatch && enter < kMaxTimedCycles && exit < kMaxTimedCycles &&
      batch < kMaxTimedCycles * kCalibrationBatch) {
    m.enter_cycles += enter > g_cycles_overhead ? enter - g_cycles_overhead : 0;
    m.exit_cycles += exit > g_cycles_overhead ? exit - g_cycles_overhead : 0;
    m.batch_cycles += batch;
    ++m.calibrations;
  }
  m.dummies_seen = 0;
}

namespace {

// The CPU clock of thread `tid` (any thread may read it: the final dump closes every thread's last
// burst); 0 if it cannot be read (the thread has gone).
HCCT_NOINST uint64_t thread_cpu_ns(int tid) {
  clockid_t clock = clockid_t((~unsigned(tid) << 3) | 4 | 2);  // Linux: per-thread, sched clock
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Cycle-counter ticks per nanosecond, measured from the start of bursting to now.
HCCT_NOINST double cycles_per_ns(uint64_t now_ns) {
  uint64_t ns = now_ns - g_start_ns;
  uint64_t cycles = burst_cycles() - g_cycles_at_start;
  return ns && cycles ? double(cycles) / double(ns) : 1.0;
}

// The record of burst `epoch`, if the ring still holds it (copied; false if not).
HCCT_NOINST bool find_record(uint64_t epoch, BurstRecord *out) {
  const BurstRecord &r = g_records[(epoch >> 1) % kBurstRecords];
  if (__atomic_load_n(&r.epoch, __ATOMIC_ACQUIRE) != epoch) return false;
  out->open_ns = __atomic_load_n(&r.open_ns, __ATOMIC_ACQUIRE);
  out->close_ns = __atomic_load_n(&r.close_ns, __ATOMIC_ACQUIRE);
  out->epoch = epoch;
  return __atomic_load_n(&r.epoch, __ATOMIC_ACQUIRE) == epoch;
}

// Closes the thread's measurement of its last burst (at its next burst's first event, or at its
// dump): the burst's CPU time is its wall time (from the thread's first event in it to its close)
// times the thread's share of the CPU since then; the runtime's part of it is the timed events'
// cycles, scaled, plus the calibration's cost of what they do not time.
HCCT_NOINST void close_native(BurstThread &b, uint64_t calls, uint64_t now_ns, uint64_t cpu_ns) {
  BurstThread::Native &m = b.native;
  if (!m.epoch) return;
  m.epoch = 0;
  uint64_t sampled = calls - m.join_calls;
  if (!sampled || now_ns <= m.join_ns) return;
  BurstRecord r{};
  bool closed = find_record(m.epoch_measured, &r) && r.close_ns >= m.join_ns && r.close_ns <= now_ns;
  uint64_t close = closed ? r.close_ns : now_ns;  // (still open at a dump)
  double window_wall = double(now_ns - m.join_ns);
  double window_cpu = cpu_ns > m.join_cpu_ns ? double(cpu_ns - m.join_cpu_ns) : window_wall;
  if (window_cpu > window_wall) window_cpu = window_wall;
  double burst_cpu = double(close - m.join_ns) * (window_cpu / window_wall);
  // The burst's events (an enter and an exit per call) at the average timed cost, plus what they
  // cost outside the timed part by the calibration's averages (both the thread's so far when the
  // burst had none of its own).
  m.all_timed_ticks += m.timed_ticks;
  m.all_timed_events += m.timed_events;
  double per_event = m.timed_events ? double(m.timed_ticks) / double(m.timed_events)
                     : m.all_timed_events ? double(m.all_timed_ticks) / double(m.all_timed_events) : 0;
  // A pair timed per event reads more than the same pair timed in a batch: the difference is the
  // error of timing one event (per measurement), which the timed events carry too.
  double per_call = 2 * per_event;
  if (m.calibrations) {
    double pair = double(m.enter_cycles + m.exit_cycles) / double(m.calibrations);
    double batched = double(m.batch_cycles) / double(m.calibrations) / kCalibrationBatch;
    double error = (pair - batched) / 2;
    per_call = 2 * (per_event > error ? per_event - error : 0) + batched;
  }
  double runtime_ns = (double(m.fixed_ticks) + double(sampled) * per_call) / cycles_per_ns(now_ns);
  if (runtime_ns > burst_cpu) runtime_ns = burst_cpu;
  m.sampled_calls += double(sampled);
  m.burst_ns += burst_cpu;
  m.runtime_ns += runtime_ns;
  if (!(burst_cpu > 0)) return;
  // The timer stretches bursts by the inverse of the native share (next_burst_ns): smoothed over
  // the thread's last bursts, since one burst's share is a small difference of two large times when
  // the in-burst slowdown is large.
  double share = (burst_cpu - runtime_ns) / burst_cpu;
  m.share = m.share > 0 ? 0.5 * (m.share + share) : share;
  uint64_t bits;
  __builtin_memcpy(&bits, &m.share, sizeof bits);
  __atomic_store_n(&g_native_share_bits, bits, __ATOMIC_RELAXED);
}

}  // namespace

HCCT_NOINST void burst_native_join(BurstThread &b, uint64_t epoch, uint64_t calls, int tid) {
  uint64_t now = monotonic_ns();
  uint64_t cpu = thread_cpu_ns(tid);
  close_native(b, calls, now, cpu);
  BurstThread::Native &m = b.native;
  m.epoch = m.epoch_measured = epoch;
  m.join_ns = now;
  m.join_cpu_ns = cpu;
  m.join_calls = calls;
  m.fixed_ticks = m.timed_ticks = m.timed_events = 0;
  m.last_cpu_ns = 0;
  m.last_cpu_calls = calls;
}

HCCT_NOINST double burst_native_fraction(BurstThread &b, uint64_t calls, int tid) {
  uint64_t cpu = thread_cpu_ns(tid);
  close_native(b, calls, monotonic_ns(), cpu);
  const BurstThread::Native &m = b.native;
  // The fraction of the thread's own (native) CPU time spent in bursts: bursts hold the same native
  // time per window, so it is the fraction of its calls sampled in every phase.
  double native_total = double(cpu) - m.runtime_ns;
  double native_bursts = m.burst_ns - m.runtime_ns;
  if (!cpu || !(native_bursts > 0) || native_total < native_bursts) return -1.0;
  return native_bursts / native_total;
}

HCCT_NOINST double burst_native_share(const BurstThread &b) {
  const BurstThread::Native &m = b.native;
  return m.burst_ns > 0 ? 1.0 - m.runtime_ns / m.burst_ns : 1.0;
}

HCCT_NOINST const char *burst_kind_name() { return g_kind == Burst::kManual ? "manual" : "timer"; }
HCCT_NOINST const char *burst_sync_option() { return burst_sync_name(g_sync); }
HCCT_NOINST uint64_t burst_interval_ns() { return g_interval_ns; }
HCCT_NOINST uint64_t burst_length_ns() { return g_length_ns; }

HCCT_NOINST void burst_finish() {
  lock();
  g_finished = true;
  if (g_open) g_burst_ns += monotonic_ns() - g_opened_ns;
  g_open = false;
  __atomic_store_n(&g_burst_between, (unsigned char)0, __ATOMIC_RELEASE);
  unlock();
}

HCCT_NOINST void burst_fork_prepare() {
  if (g_active) lock();
}
HCCT_NOINST void burst_fork_parent() {
  if (g_active) unlock();
}
// The timer thread does not exist in the child: start another one on the same schedule.
HCCT_NOINST void burst_fork_child() {
  if (!g_active) return;
  unlock();
  if (g_kind == Burst::kTimer && !g_event_clock && !g_finished) start_timer(0);
}

}  // namespace hcct::rt

// The documented test hook (docs/BURSTING.md): with HCCT_OPTIONS burst=manual, the program opens
// (on != 0) and closes (on == 0) bursts itself, so tests choose exactly which events are sampled.
// Without burst=manual it does nothing.
HCCT_EXPORT void hcct_burst(int on) {
  using namespace hcct::rt;
  if (g_kind != Burst::kManual) return;
  set_phase(on != 0);
}
