// Time per calling context (option time=cpu|wall; docs/RUNTIME.md, "Time"). time=cpu: each thread's CPU time is
// sampled by a timer of its own (timer_create(CLOCK_THREAD_CPUTIME_ID) delivered to the thread,
// SIGEV_THREAD_ID) whose signal handler charges the sample to the thread's current context, the
// top of its shadow stack. No unwinding, and nothing on the probes' fast path. time=wall: a sampler
// thread charges every registered thread's current context each period (sampler.cc).
#ifndef HCCT_RT_SAMPLER_H
#define HCCT_RT_SAMPLER_H

#include "options.h"

namespace hcct::rt {

struct ThreadState;

// Installs the handler of the sampling signal (process-wide). False (with one message) if the
// signal cannot be taken; time sampling is then off for the run, profiling goes on.
bool sampler_start(const Options &options);
// True once sampler_start succeeded: new threads get a timer, their trees carry samples.
bool sampler_running();
uint64_t sample_period_ns();

// The calling thread's CPU-time timer: created and armed at its registration (whoever created the
// thread), deleted when its state is freed.
void sampler_attach(ThreadState *s);
void sampler_detach(ThreadState *s);
// fork: the child has no timers (POSIX timers are not inherited); the forking thread gets a new
// one. `others` have none in the child and must not be deleted there.
void sampler_forget_timer(ThreadState *s);

// Expiries of the thread's timer that its CPU time made due but no signal delivered: the kernel
// checks CPU-time timers at its tick, so a thread that ends between ticks (short threads) loses
// the expiries since the last one. Counted as lost samples, so that samples + lost covers the
// thread's CPU time. Any thread may ask (the thread's CPU clock is read by its tid).
uint64_t sampler_undelivered(const ThreadState *s);

// time=wall: the sampler thread stops reading and charging `s`'s tree (its file is written).
void sampler_exclude(ThreadState *s);
// time=wall with bursting: charges the samples taken between bursts to the shadow path (the
// thread is stopped, or at the start of an out-of-line event).
void sampler_settle_between(ThreadState *s);
// fork: time=wall's sampler thread does not exist in the child; start another.
void sampler_fork_child();

// exec: the timers of `threads` are disarmed and a pending sample signal discarded, so that the new
// image never receives one (its disposition is the default there); the signal's disposition is the
// one the program had. If exec fails, sampler_resume re-arms them.
void sampler_pause(ThreadState *const *threads, size_t count);
void sampler_resume(ThreadState *const *threads, size_t count);

}  // namespace hcct::rt

#endif
