#include "burst.h"

namespace hcct::rt {

namespace {
constexpr size_t kInitialEntries = 1024;
}

HCCT_NOINST bool ShadowStack::init(uintptr_t stack_lo, uintptr_t stack_size) {
  stack_lo_ = stack_lo + 1;  // the stack is (lo, lo + size], as ThreadProfile's (profile.h)
  stack_size_ = stack_size;
  entries_ = static_cast<PathEntry *>(map_pages(kInitialEntries * sizeof(PathEntry)));
  if (!entries_) return false;
  end_ = entries_ + kInitialEntries;
  top_ = entries_;
  *top_ = PathEntry{0, 0, kForeignStack};  // never popped by the stack-pointer rule
  return true;
}

HCCT_NOINST void ShadowStack::destroy() {
  if (entries_) unmap_pages(entries_, size_t(end_ - entries_) * sizeof(PathEntry));
  *this = ShadowStack{};
}

HCCT_NOINST bool ShadowStack::grow() {
  size_t count = size_t(end_ - entries_);
  size_t index = size_t(top_ - entries_);
  PathEntry *moved = double_pages(entries_, count);
  if (!moved) return false;
  entries_ = moved;
  end_ = moved + 2 * count;
  top_ = moved + index;
  return true;
}

HCCT_NOINST bool ShadowStack::push_raw(const PathEntry &e) {
  if (top_ + 1 == end_ && !grow()) return false;
  *++top_ = e;
  return true;
}

HCCT_NOINST void ShadowStack::reverse() {
  for (PathEntry *a = entries_ + 1, *b = top_; a < b; ++a, --b) {
    PathEntry t = *a;
    *a = *b;
    *b = t;
  }
}

// The same rules as ThreadProfile::enter/exit (docs/RUNTIME.md, "The shadow stack and skipped
// exits"), on entries instead of tree nodes.
HCCT_NOINST void ShadowStack::enter(uintptr_t fn, uintptr_t site, uintptr_t sp) {
  if (sp - stack_lo_ < stack_size_) {
    while (top_->sp < sp) --top_;  // the sentinel's sp is kForeignStack
  } else {
    sp = kForeignStack;
  }
  push_raw(PathEntry{fn, site, sp});  // on failure the frame is not kept; its exit is ignored
}

HCCT_NOINST void ShadowStack::exit(uintptr_t fn, uintptr_t sp, bool torn_down) {
  bool own_stack = sp - stack_lo_ < stack_size_;
  if (torn_down && own_stack) {
    // ThreadProfile::exit_torn_down's rules, entry for frame.
    if (top_->sp >= sp) {
      // A split function (its header and enter probe inlined into the caller, its `.part` rest
      // ending in `jmp __cyg_profile_func_exit`): entered with the caller's stack pointer, this
      // exit's. Otherwise it was entered before anything was seen.
      if (top_->sp == sp && top_ != entries_ && (top_->fn == fn || top_->fn == 0)) --top_;
      return;
    }
    // The exiting frame is the outermost one below `sp`, unless that is another function's and a
    // deeper one is this function's (an inlined callee entered while stack arguments were pushed).
    PathEntry *outermost = top_;
    while (outermost[-1].sp < sp) --outermost;  // the sentinel's sp is maximal
    PathEntry *exiting = outermost;
    if (exiting->fn != fn && exiting->fn != 0) {
      for (PathEntry *e = outermost + 1; e <= top_; ++e) {
        if (e->fn == fn) {
          exiting = e;
          break;
        }
      }
    }
    top_ = exiting - 1;
    return;
  }
  if (own_stack) unwind_to(sp);
  if (top_ != entries_ && (top_->fn == fn || top_->fn == 0)) --top_;
}

HCCT_NOINST void ShadowStack::unwind_to(uintptr_t sp) {
  if (sp - stack_lo_ < stack_size_)
    while (top_->sp < sp) --top_;
}

HCCT_NOINST void ShadowStack::retire_range(uintptr_t lo, uintptr_t hi, uintptr_t tag) {
  if (!entries_) return;
  for (PathEntry *e = entries_ + 1; e <= top_; ++e) {
    if (e->fn - lo < hi - lo) e->fn |= tag;
    if (e->site - lo < hi - lo) e->site |= tag;
  }
}

HCCT_NOINST void ShadowStack::assign(const ThreadProfile &profile) {
  top_ = entries_;
  const Frame *frames = profile.frames();
  for (size_t i = 1; i <= profile.depth(); ++i) {
    const Node *n = frames[i].node;
    PathEntry e{profile.is_sink(n) ? 0 : n->routine, profile.is_sink(n) ? 0 : n->call_site, frames[i].sp};
    if (!push_raw(e)) return;
  }
}

namespace {

HCCT_NOINST uint64_t next_random(BurstThread &b) {
  uint64_t x = b.random;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  b.random = x;
  return x;
}

// The enters to skip after a burst of `events`: events * (interval - length) / length, times a
// jitter in [0.5, 1.5) drawn independently of the program. The jitter spreads the next burst's
// start over about a window, so that the schedule cannot lock onto a loop of the program whose
// period is near a window (the probability that a given call is sampled stays length / interval
// in every window). With [0.75, 1.25) and a burst length that followed each burst, a model of a Lua
// loop whose garbage-collector steps came about once a window had them sampled at ×0.64 of the rest
// (docs/BURSTING.md, "The estimator"); either change alone removes that.
HCCT_NOINST uint64_t draw_gap(BurstThread &b, uint64_t events, uint64_t interval_ns, uint64_t length_ns) {
  double per_event = double(interval_ns - length_ns) / double(length_ns);
  double jitter = 0.5 + double(next_random(b) >> 11) * 0x1.0p-53;
  return uint64_t(double(events) * per_event * jitter + 0.5);
}

}  // namespace

HCCT_NOINST void BurstThread::schedule_first(uint64_t seed, uint64_t interval_ns, uint64_t length_ns) {
  clock_interval_ns = interval_ns;
  clock_length_ns = length_ns;
  random = seed * 0x9E3779B97F4A7C15ull | 1;
  burst_events = kFirstBurstEvents;
  ns_per_event = 0;
  join_frames = 0;
  join_frames_smoothed = 0;
  uint64_t window = kFirstBurstEvents + draw_gap(*this, kFirstBurstEvents, interval_ns, length_ns);
  // Always on (length = interval): no gap, not even a random start.
  start_gap(length_ns >= interval_ns ? 0 : next_random(*this) % (window + 1));
}

// Aim the next burst at burst_length of time: its enters are length / (time per enter), the time
// per enter smoothed over the last bursts (an exponential average, weight 1/kRateSmoothing), at
// most doubling per burst. Why smoothed: the fraction each window samples does not depend on the
// burst's length, but *which* calls a burst covers does, when the length follows the content of
// the burst before it. In a loop whose expensive part (Lua's garbage-collector steps inside
// gmatch) came about once a window, a burst that covered it was slow, so the next burst was short
// and started at about the same place of the loop: that part was sampled ×0.64–0.8 (Lua:
// gmatch_aux's contexts at 0.72–0.87 of their exact counts, 16 runs of 16). Smoothed, one burst's
// content moves the next length by an eighth of its deviation; phases that last several bursts
// still get their own length (a change to slower calls takes a few bursts to follow: those bursts
// last longer than burst_length, and their windows still sample the same fraction).
HCCT_NOINST void BurstThread::schedule_next(uint64_t took_ns, uint64_t interval_ns, uint64_t length_ns) {
  uint64_t events = burst_events;
  start_gap(draw_gap(*this, events, interval_ns, length_ns));
  double per_event = double(took_ns ? took_ns : 1) / double(events);
  if (ns_per_event != 0) {
    if (per_event > ns_per_event * kRateStep) per_event = ns_per_event * kRateStep;
    if (per_event < ns_per_event / kRateStep) per_event = ns_per_event / kRateStep;
  }
  ns_per_event = ns_per_event == 0 ? per_event : ns_per_event + (per_event - ns_per_event) / kRateSmoothing;
  join_frames_smoothed += (double(join_frames) - join_frames_smoothed) / kRateSmoothing;
  double next = double(length_ns) / ns_per_event;
  if (next < kEnterPerJoinFrame * join_frames_smoothed) next = kEnterPerJoinFrame * join_frames_smoothed;
  if (next > double(2 * events)) next = double(2 * events);
  burst_events = next < double(kMinBurstEvents) ? kMinBurstEvents
                 : next > double(kMaxBurstEvents) ? kMaxBurstEvents
                                                  : uint64_t(next);
}

}  // namespace hcct::rt

