// Static bursting (docs/BURSTING.md): a thread's profile sees only the events of short bursts; at
// the start of each burst its cursor is re-synchronised with the current calling context, without
// counting the frames already on the stack. This header holds the deterministic per-thread part
// (no threads, TLS, clocks or system calls other than mmap), which unit tests drive directly; the
// timer, the gate and the machine-stack unwinder are in burst_runtime.cc.
#ifndef HCCT_RT_BURST_H
#define HCCT_RT_BURST_H

#include "profile.h"

namespace hcct::rt {

// A light shadow stack of (routine, call site, stack pointer) kept between bursts, with the same
// recovery rules as ThreadProfile's frames (stale frames popped by stack pointer, tail-called exit
// probes, foreign stacks, longjmp targets), but no tree: an event costs a push or a pop.
class ShadowStack {
 public:
  bool init(uintptr_t stack_lo, uintptr_t stack_size);
  void destroy();
  bool ready() const { return entries_ != nullptr; }

  void enter(uintptr_t fn, uintptr_t site, uintptr_t sp);
  void exit(uintptr_t fn, uintptr_t sp, bool torn_down);

  // The common cases, inlined into the probes between bursts: a push with nothing stale to pop, a
  // pop of the function's own top entry. False means: call enter()/exit().
  HCCT_NOINST bool enter_fast(uintptr_t fn, uintptr_t site, uintptr_t sp) {
    PathEntry *top = top_;
    if (HCCT_UNLIKELY(sp - stack_lo_ >= stack_size_ || top->sp < sp || top + 1 == end_)) return false;
    top[1] = PathEntry{fn, site, sp};
    top_ = top + 1;
    return true;
  }
  HCCT_NOINST bool exit_fast(uintptr_t fn, uintptr_t sp, bool torn_down) {
    PathEntry *top = top_;
    if (HCCT_UNLIKELY(sp - stack_lo_ >= stack_size_)) return false;
    if (torn_down) {
      if (HCCT_UNLIKELY(!(top->sp < sp && top[-1].sp >= sp))) return false;  // (the sentinel's sp is maximal)
    } else if (HCCT_UNLIKELY(top->sp < sp)) {
      return false;
    }
    if (HCCT_UNLIKELY(top->fn != fn)) return false;  // also the sentinel (fn 0)
    top_ = top - 1;
    return true;
  }
  void unwind_to(uintptr_t sp);
  // ThreadProfile::retire_range for the entries.
  void retire_range(uintptr_t lo, uintptr_t hi, uintptr_t tag);
  // Takes the calling path of `profile` (at the end of a burst).
  void assign(const ThreadProfile &profile);

  // Raw access for building a path from elsewhere (the machine-stack unwinder).
  void clear() { top_ = entries_; }
  void pop_to(size_t depth) { top_ = entries_ + depth; }  // (depth at most depth())
  bool push_raw(const PathEntry &e);
  void reverse();  // entries 1..depth in reverse order

  const PathEntry *path() const { return entries_ + 1; }  // outermost first
  size_t depth() const { return size_t(top_ - entries_); }

 private:
  bool grow();
  PathEntry *entries_ = nullptr;  // entries_[0] is a sentinel that is never popped
  PathEntry *top_ = nullptr;
  PathEntry *end_ = nullptr;
  uintptr_t stack_lo_ = 0;
  uintptr_t stack_size_ = ~uintptr_t(0);
};

// The thread's last walk of its machine stack at a burst start (burst_runtime.cc, burst_unwind), so
// that the next walk stops at the first frame still on the stack and takes the frames outside it
// from here instead of unwinding them again (docs/BURSTING.md, "The cost of a burst start"). Both
// arrays are mmap'd (nothing from the program's heap) and grow by doubling.
struct UnwindMemo {
  // One entry per machine frame the walk visited after the event's own, innermost first: `fn` is
  // the frame's IP (the return address into it), `sp` its stack pointer at its call (the CFA of the
  // frame inside it: the return address lies at sp - 8), `site` how many path entries the frames
  // inside it contributed.
  ShadowStack frames;
  ShadowStack walking;       // the frames of the walk under way (swapped with `frames` at its end)
  ShadowStack path;          // the calling path the walk gave, outermost first
  uint32_t generation = 0;   // burst_runtime's walk generation it was made under; 0: nothing kept
  // The thread's own stack, (stack_lo, stack_lo + stack_size]: only frames there are reused (their
  // return-address slots are read in place; a coroutine's stack may be gone).
  uintptr_t stack_lo = 0, stack_size = 0;
  uint64_t frames_walked = 0;  // frames stepped through by the unwinder, every walk of the thread
  uint64_t frames_reused = 0;  // frames taken from the previous walk instead
  uint64_t frames_by_rules = 0;  // of frames_walked, those stepped with the rule table (burst_runtime.cc)

  bool init() {
    return frames.init(0, ~uintptr_t(0)) && walking.init(0, ~uintptr_t(0)) && path.init(0, ~uintptr_t(0));
  }
  void destroy() {
    frames.destroy();
    walking.destroy();
    path.destroy();
  }
};

// The count clock's modules at most (burst_runtime.h, CountModules).
inline constexpr uint32_t kMaxCountModules = 64;

// One thread's bursting state.
struct BurstThread {
  ShadowStack shadow;
  UnwindMemo unwind_memo;  // initialised at the first walk of the machine stack
  uint64_t epoch = 0;    // the burst (an odd epoch number) the profile's path is synchronised to
  // Enter events seen between bursts and not profiled: `skipped` plus the current gap's count so far
  // (gap_start - gap_left), so that the lean route between bursts (runtime.cc) counts an event with
  // the gap's one decrement (skipped_enters()).
  uint64_t skipped = 0;
  uint64_t bursts = 0;   // bursts this thread took part in
  uint32_t generation = 0;  // g_shadow_generation when the shadow stack last matched the machine stack
  // The shadow stack, not the profile's frames, holds the current calling path: there were events
  // between bursts since the profile's last one.
  bool shadow_current = false;

  // The event clock (burst=1 with burst_sync=shadow; docs/BURSTING.md, "The estimator"): the thread
  // counts its own enter events and keeps its own schedule, a burst of `burst_events` enters then a
  // gap of about burst_events * (interval - length) / length enters, so that every window (a burst
  // and the gap after it) samples the same fraction of the thread's calls whatever the phase.
  bool sampling = false;               // inside one of the thread's own bursts
  uint64_t gap_left = ~uint64_t(0);    // enters still to skip before the next burst
  uint64_t gap_start = ~uint64_t(0);   // gap_left when the current gap began (start_gap)
  uint64_t burst_left = 0;             // enters still to sample in the current burst
  uint64_t burst_events = 0;           // enters per burst (0: schedule not started)
  uint64_t burst_started_ns = 0;       // CLOCK_MONOTONIC at the current burst's first event
  uint64_t clock_started_ns = 0;       // CLOCK_MONOTONIC at the thread's first event
  uint64_t burst_ns = 0;               // time spent in the thread's finished bursts
  uint64_t random = 0;                 // xorshift state for the gaps' jitter
  double ns_per_event = 0;             // smoothed time per enter in the thread's bursts (0: none yet)
  uint64_t join_frames = 0;            // frames of the path rebuilt at the current burst's start
  double join_frames_smoothed = 0;     // the same, smoothed over the thread's bursts

  // The count clock (docs/BURSTING.md, "The count clock"): what the runtime last wrote into each
  // count module's countdown of this thread (0, the TLS image's value, for a module not armed yet),
  // so that the enters since then are the sum over modules of count_armed - countdown.
  int64_t count_armed[kMaxCountModules] = {};
  uint32_t count_known = 0;            // modules whose exit gate this thread has set
  uintptr_t count_thread_pointer = 0;  // the thread's pointer (its countdowns' base), once it counts

  // Bounds of a burst's length in enter events: at least enough to be worth re-synchronising for,
  // at most what keeps a burst of a thread that blocks inside it from sampling most of the run.
  static constexpr uint64_t kMinBurstEvents = 64;
  static constexpr uint64_t kMaxBurstEvents = uint64_t(1) << 26;
  // The first burst: as short as any (its window starts at a random point, so the enters before
  // the end of its burst are sampled at a fraction rising from 0 to f: with 4,096, until session
  // 12, each thread's first 4,096 enters came out at ×0.64), then doubling towards burst_length.
  static constexpr uint64_t kFirstBurstEvents = kMinBurstEvents;
  // A burst's time per enter moves the smoothed one by 1/kRateSmoothing (schedule_next), and counts
  // at most kRateStep times above or below it: one burst preempted for milliseconds (64 enters
  // that "took" 10 ms) would otherwise hold the thread's bursts at kMinBurstEvents for some 60
  // bursts (more joins, the same fraction); a real change of phase is followed in a few bursts.
  static constexpr double kRateSmoothing = 8;
  static constexpr double kRateStep = 4;
  // A burst samples at least this many enters per frame of the path rebuilt at its start (the walk
  // down the tree from the shadow stack, and the shadow stack taking the path back at its end, cost
  // a tree step and a copy per frame), so that a thread deep in a recursion does not spend its
  // bursts re-synchronising. Counted in frames, not timed: a burst start preempted for milliseconds
  // made a timed rule stretch the next bursts tenfold (a few huge windows, Lua 16.8 % error).
  static constexpr double kEnterPerJoinFrame = 8;

  // The event clock's schedule, pure arithmetic (the runtime passes the clock; unit tests pass
  // synthetic times). schedule_first: the thread's first gap, a random part of a window
  // (systematic sampling with a random start). schedule_next, after a burst of `burst_events`
  // enters that took `took_ns`: the gap to skip (burst_events * (interval - length) / length times
  // a jitter) and the next burst's length in enters, aimed at `length_ns` of time, and at least
  // kEnterPerJoinFrame enters per frame rebuilt at a burst start (join_frames, smoothed).
  void schedule_first(uint64_t seed, uint64_t interval_ns, uint64_t length_ns);
  void schedule_next(uint64_t took_ns, uint64_t interval_ns, uint64_t length_ns);
  uint64_t clock_interval_ns = 0, clock_length_ns = 0;  // the schedule schedule_first was given

  // One enter on the event clock: runtime.cc's clock_enter is this with the thread's profile,
  // shadow stack and CLOCK_MONOTONIC; unit tests drive it with a synthetic program and clock. In a
  // gap, `skip()` takes the enter and counts it down gap_left (between_enter, between_count); the
  // enter after a gap starts a burst, once `join()` re-synchronised the profile; a burst's enters go
  // to `sample()`; after its last, the time it took (`now()`, nanoseconds, read at its first enter
  // and after its last) schedules the next gap and burst (schedule_next).
  template <typename Skip, typename Join, typename Sample, typename Now>
  [[gnu::always_inline]] void clock_enter(const Skip &skip, const Join &join, const Sample &sample, const Now &now) {
    if (!sampling) {
      if (gap_left) return skip();
      join();
      begin_burst(now());
    }
    sample();
    if (--burst_left == 0) end_burst(now());
  }

  // A burst's first enter (either clock), once the profile's path is the thread's (join): the
  // burst samples burst_events enters from here, its time counted from `now_ns`.
  void begin_burst(uint64_t now_ns) {
    sampling = true;
    burst_left = burst_events;
    burst_started_ns = now_ns;
  }

  // After a burst's last enter (either clock: the event clock's clock_enter, the count clock's
  // count_enter): the time it took, read at `now_ns`, schedules the next gap and burst.
  void end_burst(uint64_t now_ns) {
    sampling = false;
    uint64_t took = now_ns - burst_started_ns;
    burst_ns += took;
    schedule_next(took, clock_interval_ns, clock_length_ns);
  }

  bool init(uintptr_t stack_lo, uintptr_t stack_size) {
    unwind_memo.stack_lo = stack_lo;
    unwind_memo.stack_size = stack_size;
    return shadow.init(stack_lo, stack_size);
  }
  void destroy() {
    shadow.destroy();
    unwind_memo.destroy();
  }

  // Events between bursts: kept on the shadow stack (which first takes over the profile's path if
  // the last events were profiled) and counted.
  void between_enter(const ThreadProfile &p, uintptr_t fn, uintptr_t site, uintptr_t sp) {
    take_over(p);
    shadow.enter(fn, site, sp);
    --gap_left;
  }
  void between_exit(const ThreadProfile &p, uintptr_t fn, uintptr_t sp, bool torn_down) {
    take_over(p);
    shadow.exit(fn, sp, torn_down);
  }
  void between_unwind_to(const ThreadProfile &p, uintptr_t sp) {
    take_over(p);
    shadow.unwind_to(sp);
  }
  // Events between bursts that are only counted (no shadow stack: the machine stack will tell).
  void between_count() { --gap_left; }

  // Every enter between bursts decrements gap_left (on the time clock it starts at 2^64 - 1 and
  // never reaches 0): the skipped enters are those of the finished gaps and of the current one.
  uint64_t skipped_enters() const { return skipped + (gap_start - gap_left); }
  void start_gap(uint64_t enters) {
    skipped += gap_start - gap_left;
    gap_start = gap_left = enters;
  }
  void reset_skipped() {
    skipped = 0;
    gap_start = gap_left;
  }

  // First event of burst `e`. If the shadow stack is current, the profile's cursor is moved onto its
  // path (walking down the tree from the root, thesis §5.1.1); else if `machine` is given (the path
  // unwound from the machine stack), onto that; else the profile's own path is still current (the
  // thread made no call since its last profiled event).
  void join(ThreadProfile &p, uint64_t e, const PathEntry *machine, size_t n, bool use_machine) {
    join_frames = 0;
    if (shadow_current) {
      join_frames = shadow.depth();
      p.rebuild_path(shadow.path(), shadow.depth());
      shadow_current = false;
    } else if (use_machine) {
      join_frames = n;
      p.rebuild_path(machine, n);
    }
    epoch = e;
    ++bursts;
  }

 private:
  void take_over(const ThreadProfile &p) {
    if (!shadow_current) {
      shadow.assign(p);
      shadow_current = true;
    }
  }
};

}  // namespace hcct::rt

#endif
