// The time sampler (sampler.h; docs/RUNTIME.md, "Time").
#include "sampler.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include <pthread.h>

#include "burst_runtime.h"
#include "messages.h"
#include "thread.h"

namespace hcct::rt {

bool g_wall_sampler = false;

namespace {

bool g_running = false;
bool g_wall = false;  // time=wall: the sampler thread below, no timers and no signal
int g_signal = 0;
uint64_t g_period_ns = 0;
// The most samples one delivery may charge, all to the context current at the delivery: a timer's
// overrun count says how many periods passed while the signal was pending. The kernel checks
// CPU-time timers at its tick, so a few periods per delivery are normal (at HZ=250 and 1 kHz:
// four); far more means the signal was blocked or the delivery delayed, and where that time went
// is unknown: the excess is counted as lost rather than charged to a context that may not have
// spent it (with a cap of 1 s, a heavily loaded machine charged 70 ms of one phase to the next).
uint64_t g_max_weight = 1;
struct sigaction g_program_action;  // the disposition before ours (restored around exec)

// The first expiry comes after a random fraction of a period: a thread that runs for less than a
// period (short threads, by the thousand) is then sampled with probability its CPU time / period,
// so its time is counted right on average. With the first expiry a full period away it would
// never be sampled (1,000 threads of 0.5 ms gave 8 samples for 500 ms of CPU).
HCCT_NOINST uint64_t random_phase(const ThreadState *s, uint64_t period_ns) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t x = (uint64_t(now.tv_nsec) ^ (uint64_t(s->tid) << 32) ^ reinterpret_cast<uintptr_t>(s)) *
               0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  return 1 + x % period_ns;
}

// The CPU clock of thread `tid` (Linux's clock id for a thread: ~tid << 3 | per-thread | sched).
HCCT_NOINST uint64_t thread_cpu_ns(int tid) {
  clockid_t clock = clockid_t((~unsigned(tid) << 3) | 4 | 2);
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

HCCT_NOINST void arm(ThreadState *s, uint64_t period_ns) {
  itimerspec spec{};
  spec.it_interval.tv_sec = time_t(period_ns / 1000000000u);
  spec.it_interval.tv_nsec = long(period_ns % 1000000000u);
  uint64_t first = period_ns ? random_phase(s, period_ns) : 0;
  if (period_ns) {
    s->sample_cpu_start_ns = thread_cpu_ns(s->tid);
    s->sample_first_ns = first;
    s->samples_delivered = 0;
  }
  spec.it_value.tv_sec = time_t(first / 1000000000u);
  spec.it_value.tv_nsec = long(first % 1000000000u);
  timer_settime(static_cast<timer_t>(s->sample_timer), 0, &spec, nullptr);
}

// Charges `n` samples to the thread's current context: the top of its profile's shadow stack, or
// with static bursting between bursts the path on the shadow stack kept then (made the profile's
// path first; docs/RUNTIME.md, "Time and bursting"). `may_prune`: the thread is outside the
// runtime's paths (or at the start or end of an out-of-line one): the tree may change. False if the
// samples must wait (kept pending by the caller). Samples whose context the runtime does not know
// (no shadow stack between bursts) are counted as lost.
HCCT_NOINST bool charge_current(ThreadState *s, uint64_t n, bool may_prune) {
  SampleSite site = burst_active() ? burst_sample_site(s->burst) : SampleSite::kProfile;
  if (site == SampleSite::kUnknown) {
    __atomic_add_fetch(&s->samples_lost, n, __ATOMIC_RELAXED);
    return true;
  }
  if (site == SampleSite::kShadow) {
    if (!may_prune) return false;
    s->profile.charge_samples_on_path(s->burst.shadow.path(), s->burst.shadow.depth(), n);
  } else if (!s->profile.charge_samples(n, may_prune)) {
    return false;
  }
  if (s->exact_on) s->exact.charge_samples(n, may_prune);  // the exact tree sees every event
  return true;
}

// Charges `weight` samples for thread `s`, interrupted by the signal. Three cases:
// - the thread is in an out-of-line event (in_slow): its tree may be mid-change, so the samples
//   wait in `samples_pending` until the event ends (event_end charges them to the context then
//   current: the one entered, or the one returned to);
// - it is in an inline fast path (busy, not in_slow): the tree's structure is intact and top_
//   names a live node, so the samples are charged now, but nothing is pruned (a context that loses
//   its time counter is queued for pruning);
// - it is outside the runtime: charged now, with pruning, `busy` held meanwhile so that a final
//   dump running in another thread waits for it.
HCCT_NOINST void take_sample(ThreadState *s, uint64_t weight) {
  if (s->in_slow) {
    __atomic_add_fetch(&s->samples_pending, weight, __ATOMIC_RELAXED);
    return;
  }
  bool was_busy = is_busy(s);
  if (!was_busy) {
    set_busy(s);
    compiler_fence();
  }
  if (!samples_accepted()) {
    // Profiling has stopped (a dump is being written, maybe by another thread that reads this).
    __atomic_add_fetch(&s->samples_lost, weight, __ATOMIC_RELAXED);
  } else {
    uint64_t n = weight + __atomic_exchange_n(&s->samples_pending, 0, __ATOMIC_RELAXED);
    if (!charge_current(s, n, !was_busy)) __atomic_add_fetch(&s->samples_pending, n, __ATOMIC_RELAXED);
  }
  if (!was_busy) {
    compiler_fence();
    clear_busy(s);
  }
}

HCCT_NOINST void on_sample(int, siginfo_t *info, void *) {
  int saved_errno = errno;
  ThreadState *s = t_state;
  // Only this thread's own timer: a signal sent by kill() or left from another state is not a sample.
  if (s && s != &g_inert && info->si_code == SI_TIMER && info->si_value.sival_ptr == s) {
    uint64_t weight = 1 + uint64_t(info->si_overrun > 0 ? info->si_overrun : 0);
    // Atomic: a live thread keeps receiving samples while the final dump, in another thread, reads
    // these counters (its gate is closed by then, so the tree is not touched).
    __atomic_add_fetch(&s->samples_delivered, weight, __ATOMIC_RELAXED);
    if (weight > g_max_weight) {
      __atomic_add_fetch(&s->samples_lost, weight - g_max_weight, __ATOMIC_RELAXED);
      weight = g_max_weight;
    }
    take_sample(s, weight);
  }
  errno = saved_errno;
}

HCCT_NOINST bool install_handler() {
  struct sigaction action{};
  action.sa_sigaction = on_sample;
  // SA_RESTART: a read, write or wait the signal lands in is restarted, never seen as EINTR.
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  return sigaction(g_signal, &action, nullptr) == 0;
}

// ---------------------------------------------------------------------------------------------
// The wall-clock sampler (time=wall; docs/RUNTIME.md, "Wall-clock time"). One thread of the
// runtime wakes every period (absolute CLOCK_MONOTONIC deadlines) and charges one sample to each
// registered thread's current context, whether that thread runs, waits for the CPU or is blocked
// (a lock, I/O, a sleep): no signal reaches the program, so no system call of it is interrupted.
//
// It charges a tree it does not own, through the same entry as the CPU sampler's handler when that
// interrupts an inline fast path (charge_samples_to, no pruning: a context that loses its time
// counter is queued for the owner to prune at the end of its next out-of-line event). The owner's
// inline fast paths change no structure and free no node, so the sampler may run beside them; its
// out-of-line paths may, so the two exclude each other with a Dekker pair on the owner's
// `in_slow` and the sampler's `wall_active` flags (a full fence on each side: on the owner's side
// in enter_slow, never on the inline paths). A sample that finds the owner in an out-of-line path
// waits in samples_pending for the end of that event, as a CPU sample does. A thread whose file is
// being written is excluded (wall_excluded) and no longer sampled; the registry lock, held for the
// whole round, keeps every thread's state from being freed under the sampler.

HCCT_NOINST uint64_t monotonic_ns() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return uint64_t(now.tv_sec) * 1000000000u + uint64_t(now.tv_nsec);
}

// Charges thread `s` the whole periods of its own wall-clock time since it was last charged (its
// registration, at first): one when the sampler is on time, more when it woke late; a thread that
// registered since the last round is charged only for its own time.
HCCT_NOINST void wall_sample(ThreadState *s, void *arg) {
  uint64_t now = *static_cast<const uint64_t *>(arg);
  if (__atomic_load_n(&s->wall_excluded, __ATOMIC_RELAXED)) return;
  uint64_t since = __atomic_load_n(&s->wall_charged_ns, __ATOMIC_RELAXED);
  if (!since || now < since + g_period_ns) return;
  uint64_t weight = (now - since) / g_period_ns;
  __atomic_store_n(&s->wall_charged_ns, since + weight * g_period_ns, __ATOMIC_RELAXED);
  __atomic_store_n(&s->wall_active, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&s->wall_excluded, __ATOMIC_SEQ_CST)) {
    __atomic_store_n(&s->wall_active, 0, __ATOMIC_RELEASE);
    return;
  }
  __atomic_add_fetch(&s->samples_delivered, weight, __ATOMIC_RELAXED);
  if (weight > g_max_weight) {
    __atomic_add_fetch(&s->samples_lost, weight - g_max_weight, __ATOMIC_RELAXED);
    weight = g_max_weight;
  }
  SampleSite site = burst_active() ? burst_sample_site(s->burst) : SampleSite::kProfile;
  if (__atomic_load_n(&s->in_slow, __ATOMIC_SEQ_CST)) {
    // The owner may be changing its tree: charged when its event ends, to the context current then.
    __atomic_add_fetch(&s->samples_pending, weight, __ATOMIC_RELAXED);
  } else if (!samples_accepted() || site == SampleSite::kUnknown) {
    __atomic_add_fetch(&s->samples_lost, weight, __ATOMIC_RELAXED);
  } else if (site == SampleSite::kShadow) {
    // Between bursts: the context is the shadow stack's path, which only the owner's out-of-line
    // paths change; the owner charges it before its next one changes anything.
    __atomic_add_fetch(&s->samples_between, weight, __ATOMIC_RELAXED);
  } else if (s->profile.charge_samples_to(s->profile.sampled_cursor(), weight, /*may_prune=*/false)) {
    if (s->exact_on) s->exact.charge_samples_to(s->exact.sampled_cursor(), weight, false);
  } else {
    __atomic_add_fetch(&s->samples_pending, weight, __ATOMIC_RELAXED);  // its prune queue is full
  }
  __atomic_store_n(&s->wall_active, 0, __ATOMIC_RELEASE);
}

// The sampler thread. Started with clone() (start_raw_thread, as the burst timer): glibc does not
// know of it, so a single-threaded program keeps glibc's single-threaded paths (malloc, free and
// stdio without atomic locks). It therefore calls nothing of glibc's that uses thread state: its
// clock and sleep are raw system calls; the registry lock blocks signals with pthread_sigmask and
// yields with sched_yield, neither of which touches errno or TLS when they succeed (they do not
// fail); charging a sample changes the tree's memory, whose pages the arena maps with raw system
// calls too (arena.cc), so not even a failed mmap sets an errno (the one of the thread that started
// this one, whose %fs it runs with). Under ThreadSanitizer, which must know every thread, it is a
// pthread.
HCCT_NOINST int wall_main(void *) {
#if !defined(__SANITIZE_THREAD__)
  raw_set_thread_name("hcct-wall");
#endif
  uint64_t next = raw_monotonic_ns();
  for (;;) {
    next += g_period_ns;
    raw_sleep_until(next);
    // Woken late (a loaded machine, a stopped process): the periods missed are charged to the
    // contexts current now, up to 50 ms worth (wall_sample); the schedule does not drift.
    uint64_t now = raw_monotonic_ns();
    if (now >= next + g_period_ns) next += (now - next) / g_period_ns * g_period_ns;
    for_each_registered_thread(wall_sample, &now);
  }
  return 0;
}

#if !defined(__SANITIZE_THREAD__)
HCCT_NOINST bool start_wall_thread() {
  if (start_raw_thread(wall_main, nullptr)) return true;
  say("hcct: cannot start the wall-clock sampler thread (%s); time sampling is off for this run\n",
      strerror(errno));
  return false;
}
#else
HCCT_NOINST void *wall_pthread_main(void *) { return reinterpret_cast<void *>(intptr_t(wall_main(nullptr))); }

HCCT_NOINST bool start_wall_thread() {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // it never takes one of the program's signals
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  int err = pthread_create(&thread, &attr, wall_pthread_main, nullptr);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err != 0) {
    say("hcct: cannot start the wall-clock sampler thread (%s); time sampling is off for this run\n",
        strerror(err));
    return false;
  }
  pthread_setname_np(thread, "hcct-wall");
  return true;
}
#endif

HCCT_NOINST inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The other half of the Dekker pair: after the caller's store of in_slow (or wall_excluded), waits
// until the sampler thread is not charging this thread's tree.
HCCT_NOINST void wait_for_wall_sampler(ThreadState *s) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer does not model fences: a sequentially consistent read-modify-write of the flag
  // orders the two sides the same way there (and keeps the TSan build free of -Wtsan warnings).
  __atomic_fetch_add(&s->wall_active, 0, __ATOMIC_SEQ_CST);
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
  for (unsigned spins = 0; __atomic_load_n(&s->wall_active, __ATOMIC_ACQUIRE); ++spins) {
    if (spins < 1000) cpu_relax();
    else sched_yield();
  }
}

// The sampler thread no longer touches `s`'s tree once this returns.
HCCT_NOINST void wall_exclude(ThreadState *s) {
  __atomic_store_n(&s->wall_excluded, 1, __ATOMIC_SEQ_CST);
  wait_for_wall_sampler(s);
}

}  // namespace

HCCT_NOINST void wall_enter_slow(ThreadState *s) {
  wait_for_wall_sampler(s);
  if (HCCT_UNLIKELY(__atomic_load_n(&s->samples_between, __ATOMIC_RELAXED))) sampler_settle_between(s);
}

HCCT_NOINST void sampler_settle_between(ThreadState *s) {
  uint64_t n = __atomic_exchange_n(&s->samples_between, 0, __ATOMIC_RELAXED);
  if (!n) return;
  // The shadow stack has not changed since these samples (only out-of-line paths change it); if it
  // no longer holds the path (a burst began without an event of this thread), the profile does.
  if (!charge_current(s, n, /*may_prune=*/true)) __atomic_add_fetch(&s->samples_pending, n, __ATOMIC_RELAXED);
}

HCCT_NOINST bool sampler_start(const Options &options) {
  g_period_ns = 1000000000u / options.sample_hz;
  g_max_weight = 50000000u / g_period_ns;  // 50 ms of CPU (or wall-clock) time
  if (g_max_weight < 1) g_max_weight = 1;
  if (options.time == TimeMetric::kWall) {
    g_wall = true;
    g_running = true;
    if (!start_wall_thread()) {
      g_running = g_wall = false;
      return false;
    }
    __atomic_store_n(&g_wall_sampler, true, __ATOMIC_SEQ_CST);
    return true;
  }
  g_signal = options.sample_signal;
  if (sigaction(g_signal, nullptr, &g_program_action) != 0) {
    say("hcct: sample_signal=%d is not a signal here; time sampling is off for this run\n", g_signal);
    return false;
  }
  if ((g_program_action.sa_flags & SA_SIGINFO) || (g_program_action.sa_handler != SIG_DFL &&
                                                  g_program_action.sa_handler != SIG_IGN)) {
    say("hcct: signal %d already has a handler; time sampling is off for this run (choose another "
        "with sample_signal=N)\n", g_signal);
    return false;
  }
  if (!install_handler()) return false;
  g_running = true;
  return true;
}

HCCT_NOINST bool sampler_running() { return g_running; }
HCCT_NOINST uint64_t sample_period_ns() { return g_period_ns; }

HCCT_NOINST void sampler_attach(ThreadState *s) {
  if (!g_running) return;
  if (g_wall) {  // the wall-clock sampler finds it in the registry; its time counts from now
    __atomic_store_n(&s->wall_charged_ns, monotonic_ns(), __ATOMIC_RELAXED);
    return;
  }
  sigevent event{};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = g_signal;
  event.sigev_value.sival_ptr = s;
  event._sigev_un._tid = s->tid;
  timer_t timer;
  if (timer_create(CLOCK_THREAD_CPUTIME_ID, &event, &timer) != 0) {
    static bool said = false;
    if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
      say("hcct: cannot create a CPU-time timer (%s): some threads' time is not sampled\n", error_text(errno));
    return;
  }
  s->sample_timer = timer;
  s->has_sample_timer = true;
  arm(s, g_period_ns);
}

HCCT_NOINST void sampler_detach(ThreadState *s) {
  if (g_wall) wall_exclude(s);
  if (!s->has_sample_timer) return;
  s->has_sample_timer = false;
  timer_delete(static_cast<timer_t>(s->sample_timer));
}

HCCT_NOINST uint64_t sampler_undelivered(const ThreadState *s) {
  if (!g_running || g_wall || !s->has_sample_timer || !g_period_ns) return 0;
  uint64_t now = thread_cpu_ns(s->tid);
  if (now < s->sample_cpu_start_ns + s->sample_first_ns) return 0;
  uint64_t due = 1 + (now - s->sample_cpu_start_ns - s->sample_first_ns) / g_period_ns;
  uint64_t delivered = __atomic_load_n(&s->samples_delivered, __ATOMIC_RELAXED);
  return due > delivered ? due - delivered : 0;
}

HCCT_NOINST void sampler_forget_timer(ThreadState *s) { s->has_sample_timer = false; }

HCCT_NOINST void sampler_exclude(ThreadState *s) {
  if (g_wall) wall_exclude(s);
}

HCCT_NOINST void sampler_fork_child() {
  if (g_wall && !start_wall_thread()) __atomic_store_n(&g_wall_sampler, false, __ATOMIC_SEQ_CST);
}

HCCT_NOINST void sampler_pause(ThreadState *const *threads, size_t count) {
  if (!g_running || g_wall) return;  // time=wall: the threads were excluded when they were written
  for (size_t i = 0; i < count; ++i)
    if (threads[i]->has_sample_timer) arm(threads[i], 0);
  // Ignoring a signal discards every pending instance of it (POSIX), in every thread; then the
  // program's own disposition, which the new image inherits as exec resets handlers.
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  sigaction(g_signal, &ignore, nullptr);
  sigaction(g_signal, &g_program_action, nullptr);
}

HCCT_NOINST void sampler_resume(ThreadState *const *threads, size_t count) {
  if (!g_running) return;
  if (g_wall) {  // a failed exec: sampled again from now (the time written before the exec is in its files)
    for (size_t i = 0; i < count; ++i) {
      __atomic_store_n(&threads[i]->wall_charged_ns, monotonic_ns(), __ATOMIC_RELAXED);
      __atomic_store_n(&threads[i]->wall_excluded, 0, __ATOMIC_RELEASE);
    }
    return;
  }
  install_handler();
  for (size_t i = 0; i < count; ++i)
    if (threads[i]->has_sample_timer) arm(threads[i], g_period_ns);
}

HCCT_NOINST void settle_samples(ThreadState *s) {
  // in_slow is set (the inline path under a wide node ends here without it): a signal, or the
  // wall-clock sampler, meanwhile adds to samples_pending, charged by the loop.
  enter_slow(s);
  if (s->profile.has_deferred_prunes()) s->profile.prune_deferred();
  for (;;) {
    uint64_t n = __atomic_load_n(&s->samples_pending, __ATOMIC_RELAXED);
    if (!n) return;
    if (!charge_current(s, n, /*may_prune=*/true)) return;
    __atomic_sub_fetch(&s->samples_pending, n, __ATOMIC_RELAXED);
  }
}

}  // namespace hcct::rt
