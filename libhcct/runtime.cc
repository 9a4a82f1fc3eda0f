// The runtime proper: the exported probes, per-thread state, thread start/exit, fork, dlclose and
// the final dump. See docs/RUNTIME.md for the design and docs/RUNTIME-ABI.md for the contract.
#include <dlfcn.h>
#include <new>
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "burst_runtime.h"
#include "dump.h"
#include "hcct/hcct.h"
#include "interpose.h"
#include "profile.h"
#include "stacks.h"
#include "thread.h"

using namespace hcct::rt;

// 0: no events; 1: events reach the runtime, which returns at once (mode=empty, the instrumentation
// floor); 2: profiling.
extern "C" __attribute__((visibility("default"))) unsigned char __hcct_gate;
unsigned char __hcct_gate = 0;
extern "C" __attribute__((visibility("hidden"), alias("__hcct_gate"))) unsigned char __hcct_gate_local;

namespace {



Options g_options;
char g_out_dir[kMaxPath];
char g_exact_dir[kMaxPath + 8];
bool g_exact = false;  // option exact=1
pthread_key_t g_thread_key;
bool g_have_membarrier = false;
bool g_finished = false;
bool g_profiling = false;  // profiling started (the gate alone does not say: it closes between bursts)
bool g_bursting = false;   // option burst

int g_registry_lock = 0;
ThreadState *g_threads = nullptr;
uint32_t g_next_seq = 0;
int g_dumps_in_flight = 0;


HCCT_NOINST void lock_registry() {
  while (__atomic_exchange_n(&g_registry_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
}
HCCT_NOINST void unlock_registry() { __atomic_store_n(&g_registry_lock, 0, __ATOMIC_RELEASE); }

HCCT_NOINST void say(const char *fmt, const char *a, const char *b) {
  char msg[kMaxPath + 512];
  int n = snprintf(msg, sizeof msg, fmt, a, b);
  if (n > 0) (void)!write(2, msg, size_t(n) < sizeof msg ? size_t(n) : sizeof msg - 1);
}

HCCT_NOINST int current_tid() { return int(syscall(SYS_gettid)); }

// The calling thread's stack, so that frames on other stacks (sigaltstack, coroutines) are
// recognised. Unknown bounds make every address "own stack".
HCCT_NOINST void own_stack(uintptr_t *lo, uintptr_t *size) {
  *lo = 0;
  *size = ~uintptr_t(0);
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void *addr = nullptr;
  size_t bytes = 0;
  if (pthread_attr_getstack(&attr, &addr, &bytes) == 0 && bytes) {
    *lo = reinterpret_cast<uintptr_t>(addr);
    *size = bytes;
  }
  pthread_attr_destroy(&attr);
}

}  // namespace

namespace hcct::rt {

// Marks a thread whose profile is finished (or could not start): every later event returns at once.
ThreadState g_inert = [] {
  ThreadState s{};
  s.busy = 1;
  return s;
}();

__thread ThreadState *t_state __attribute__((tls_model("initial-exec"))) = nullptr;

HCCT_NOINST ThreadState *attach_thread() {
  // Events during set-up (an instrumented allocator, a signal) are dropped, not recursed into.
  t_state = &g_inert;
  void *mem = map_pages(sizeof(ThreadState));
  if (!mem) return nullptr;
  auto *s = new (mem) ThreadState{};
  ProfileConfig config;
  config.mode = g_options.mode;
  config.key = g_options.key;
  config.epsilon = g_options.epsilon;
  own_stack(&config.stack_lo, &config.stack_size);
  ProfileConfig exact_config = config;
  exact_config.mode = Mode::kCct;
  if (!s->profile.init(config) || (g_exact && !s->exact.init(exact_config)) ||
      (g_bursting && !s->burst.init(config.stack_lo, config.stack_size))) {
    s->profile.destroy();
    s->exact.destroy();
    s->burst.destroy();
    unmap_pages(s, sizeof(ThreadState));
    report_memory_exhausted();
    return nullptr;
  }
  s->tid = current_tid();
  s->start_ns = wall_clock_ns();
  lock_registry();
  s->seq = g_next_seq++;
  s->next = g_threads;
  g_threads = s;
  unlock_registry();
  s->exact_on = g_exact;
  s->fast_epoch = g_exact ? ~uint64_t(0) : 0;  // with bursting, 0 never matches: the first event joins
  s->between_epoch = ~uint64_t(0);              // set once the thread keeps a shadow stack
  pthread_setspecific(g_thread_key, s);  // its destructor writes the file at thread exit
  t_state = s;
  return s;
}

HCCT_NOINST const Options &runtime_options() { return g_options; }

}  // namespace hcct::rt

namespace {

HCCT_NOINST void write_thread(ThreadState *s, bool live_at_exit) {
  ThreadMeta meta{getpid(), getppid(), s->tid, s->seq, live_at_exit, s->dropped, s->start_ns};
  BurstMeta burst;
  if (g_bursting) {
    burst.kind = burst_kind_name();
    burst.sync = burst_sync_option();
    burst.interval_ns = burst_interval_ns();
    burst.length_ns = burst_length_ns();
    burst.bursts = s->burst.bursts;
    burst.events_known = burst_events_known();
    burst.events = s->profile.calls() + s->profile.lost_events() + s->burst.skipped;
    burst.time_fraction = burst_time_fraction();
  }
  int err = ENOMEM;
  {
    DumpFile file;
    if (write_profile_sections(file, s->profile, meta, g_bursting ? &burst : nullptr) &&
        (!hcct_kpath_write_sections || hcct_kpath_write_sections(file, *s)))
      err = file.commit(g_out_dir, meta.pid, s->seq);
  }
  if (!err && g_exact) {
    DumpFile file;
    err = write_profile_sections(file, s->exact, meta) ? file.commit(g_exact_dir, meta.pid, s->seq)
                                                       : ENOMEM;
  }
  if (err) {
    static bool said = false;
    if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
      say("hcct: cannot write the profile to '%s': %s\n", g_out_dir, strerror(err));
  }
}

HCCT_NOINST bool claim(ThreadState *s) { return !__atomic_exchange_n(&s->claimed, 1, __ATOMIC_ACQ_REL); }

HCCT_NOINST void free_thread(ThreadState *s) {
  if (hcct_kpath_release) hcct_kpath_release(*s);
  s->profile.destroy();
  s->exact.destroy();
  s->burst.destroy();
  unmap_pages(s, sizeof(ThreadState));
}

// pthread key destructor: the thread is exiting.
HCCT_NOINST void on_thread_exit(void *arg) {
  auto *s = static_cast<ThreadState *>(arg);
  t_state = &g_inert;
  if (!claim(s)) return;  // the final dump has it
  __atomic_add_fetch(&g_dumps_in_flight, 1, __ATOMIC_ACQ_REL);
  write_thread(s, /*live_at_exit=*/false);
  lock_registry();
  for (ThreadState **p = &g_threads; *p; p = &(*p)->next) {
    if (*p == s) {
      *p = s->next;
      break;
    }
  }
  unlock_registry();
  __atomic_sub_fetch(&g_dumps_in_flight, 1, __ATOMIC_ACQ_REL);
  free_thread(s);
}

HCCT_NOINST void sleep_briefly() {
  timespec ts{0, 1000000};  // 1 ms
  nanosleep(&ts, nullptr);
}

// Stops every thread from updating its tree: close the gate, then make sure each thread either
// saw the closed gate or is visibly busy (asymmetric Dekker: threads pay only a compiler fence,
// this side pays a membarrier).
HCCT_NOINST void stop_all_threads() {
  __atomic_store_n(&__hcct_gate_local, kGateOff, __ATOMIC_SEQ_CST);
  __atomic_store_n(&g_hook_gate, kGateOff, __ATOMIC_SEQ_CST);
  if (!g_have_membarrier || syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
    // Without membarrier, a scheduling round trip is the best available approximation.
    sleep_briefly();
  }
}

HCCT_NOINST bool wait_until_idle(ThreadState *s) {
  for (int i = 0; i < 1000; ++i) {  // at most ~1 s: a thread stuck in a handler is skipped
    if (!s->busy) return true;
    sleep_briefly();
  }
  return false;
}

HCCT_NOINST void on_fork_prepare() {
  lock_registry();
  burst_fork_prepare();
}
HCCT_NOINST void on_fork_parent() {
  burst_fork_parent();
  unlock_registry();
}

// In the child only the forking thread exists: it keeps profiling from its current context in a
// fresh tree, so the child's file holds what the child did.
HCCT_NOINST void on_fork_child() {
  ThreadState *self = t_state;
  for (ThreadState *s = g_threads; s;) {
    ThreadState *next = s->next;
    if (s != self) free_thread(s);
    s = next;
  }
  g_threads = nullptr;
  g_next_seq = 0;
  g_dumps_in_flight = 0;
  if (self && self != &g_inert) {
    self->profile.restart_from_current_path();
    if (g_exact) self->exact.restart_from_current_path();
    self->seq = g_next_seq++;
    self->tid = current_tid();
    self->start_ns = wall_clock_ns();
    self->dropped = 0;
    self->burst.skipped = 0;
    self->burst.bursts = 0;
    self->claimed = 0;
    self->next = nullptr;
    g_threads = self;
  }
  unlock_registry();
  burst_fork_child();  // restarts the timer thread, which the child does not have
}

// Creates `path` and its parents; true if it exists as a writable directory afterwards.
HCCT_NOINST bool make_directory(char *path) {
  for (char *p = path + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(path, 0755);
    *p = '/';
  }
  mkdir(path, 0755);
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && access(path, W_OK | X_OK) == 0;
}

HCCT_NOINST bool resolve_out_dir() {
  if (g_options.out[0] == '/') {
    snprintf(g_out_dir, sizeof g_out_dir, "%s", g_options.out);
  } else {
    char cwd[kMaxPath];
    if (!getcwd(cwd, sizeof cwd)) return false;
    if (snprintf(g_out_dir, sizeof g_out_dir, "%s/%s", cwd, g_options.out) >= int(sizeof g_out_dir))
      return false;
  }
  return true;
}

__attribute__((constructor(101))) HCCT_NOINST void hcct_start() {
  char error[512];
  if (!parse_options(getenv("HCCT_OPTIONS"), &g_options, error, sizeof error)) {
    say("hcct: HCCT_OPTIONS: %s; profiling is off for this run%s\n", error, "");
    return;
  }
  if (g_options.mode == Mode::kOff) return;
  if (g_options.mode == Mode::kEmpty) {
    g_hook_gate = kGateEmpty;
    __hcct_gate_local = kGateEmpty;
    return;
  }
  g_exact = g_options.exact;
  bool dirs_ok = resolve_out_dir() && make_directory(g_out_dir);
  if (dirs_ok && g_exact) {
    snprintf(g_exact_dir, sizeof g_exact_dir, "%s/exact", g_out_dir);
    dirs_ok = make_directory(g_exact_dir);
  }
  if (!dirs_ok) {
    say("hcct: cannot create or write the profile directory '%s': %s; profiling is off for this run\n",
        g_out_dir[0] ? g_out_dir : g_options.out, strerror(errno ? errno : EACCES));
    return;
  }
  set_tree_memory_limit(size_t(g_options.max_mb) << 20);
  if (pthread_key_create(&g_thread_key, on_thread_exit) != 0) {
    say("hcct: %s%s\n", "cannot create a thread key; profiling is off for this run", "");
    return;
  }
  pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
  g_have_membarrier =
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  unsigned char gate = kGateProfiling, hook_gate = kGateProfiling;
  if (g_options.burst != Burst::kOff) {
    g_bursting = true;
    if (!burst_start(g_options, g_exact, &gate, &hook_gate)) {
      say("hcct: %s%s\n", "cannot start the burst timer; profiling is off for this run", "");
      return;
    }
  }
  g_profiling = true;
  __atomic_store_n(&g_hook_gate, hook_gate, __ATOMIC_RELEASE);
  __atomic_store_n(&__hcct_gate_local, gate, __ATOMIC_RELEASE);
}

// Runs after the program's atexit handlers and static destructors, from whichever thread exits.
__attribute__((destructor(101))) HCCT_NOINST void hcct_finish() {
  if (!g_profiling || g_finished) return;
  g_finished = true;
  if (g_bursting) burst_finish();  // no burst opens again; events between bursts stop
  stop_all_threads();
  ThreadState *self = t_state;

  lock_registry();
  size_t count = 0;
  for (ThreadState *s = g_threads; s; s = s->next) ++count;
  auto **mine = static_cast<ThreadState **>(map_pages((count + 1) * sizeof(ThreadState *)));
  size_t n = 0;
  for (ThreadState *s = g_threads; s && mine; s = s->next)
    if (claim(s)) mine[n++] = s;
  unlock_registry();

  size_t written = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!wait_until_idle(mine[i])) continue;
    write_thread(mine[i], /*live_at_exit=*/mine[i] != self);
    ++written;
  }
  for (int i = 0; i < 2000 && __atomic_load_n(&g_dumps_in_flight, __ATOMIC_ACQUIRE); ++i)
    sleep_briefly();
  unmap_pages(mine, (count + 1) * sizeof(ThreadState *));
  if (g_options.verbose) {
    char msg[kMaxPath + 128];
    int len = snprintf(msg, sizeof msg, "hcct: process %d wrote %zu thread profile(s) to %s\n",
                       getpid(), written, g_out_dir);
    if (len > 0) (void)!write(2, msg, size_t(len) < sizeof msg ? size_t(len) : sizeof msg - 1);
  }
}

// ---------------------------------------------------------------------------------------------
// Events. The probes run the fast path inline and tail-call everything else, so they need no
// stack frame of their own (gcc keeps them leaf functions: no register saves, no frame setup).

// Static bursting (docs/BURSTING.md). The first event of a burst in a thread re-synchronises the
// profile's path: from the shadow stack kept between bursts, else from the machine stack, else
// (nothing happened since the thread's last profiled event) it is still current. True if the event
// is an exit whose frame is not on the rebuilt path (the machine stack holds the callers only).
HCCT_NOINST bool join_burst(ThreadState *s, uint64_t e, uintptr_t fn, uintptr_t sp, bool torn_down,
                            bool is_exit) {
  // Once plugin probes are seen (or with burst_sync=unwind) the shadow stack cannot be trusted: the
  // plugin's probes are silent between bursts, so only the machine stack tells the path.
  bool use_machine = burst_may_unwind();
  if (use_machine) s->burst.shadow_current = false;
  size_t n = use_machine ? burst_unwind(s->burst.shadow, fn, sp, torn_down) : 0;
  s->burst.join(s->profile, e, s->burst.shadow.path(), n, use_machine);
  s->fast_epoch = g_exact ? ~uint64_t(0) : e;
  return use_machine && is_exit;
}

// True while events are wanted: a burst, or between bursts with the gate open or shadow stacks
// kept. The final dump turns both off before it waits for busy threads.
__attribute__((always_inline)) inline bool burst_live() {
  return __hcct_gate_local == kGateProfiling || g_burst_between;  // (g_hook_gate implies one of them)
}

[[gnu::noinline]] HCCT_NOINST void burst_enter(ThreadState *s, uintptr_t fn, uintptr_t site,
                                               uintptr_t sp) {
  if (!burst_live()) return;
  uint64_t e = __atomic_load_n(&g_burst_epoch, __ATOMIC_ACQUIRE);
  if (g_exact) s->exact.enter(fn, site, sp);  // the exact side sees every event
  if (e & 1) {
    burst_learn(fn);
    if (s->burst.epoch != e) join_burst(s, e, fn, sp, false, false);
    s->profile.enter(fn, site, sp);
  } else if (burst_keeps_shadow() && !burst_may_unwind()) {
    s->burst.between_enter(s->profile, fn, site, sp);
    // The shadow-stack-only paths may run until the next change (not with exact=1: the exact side
    // needs every event).
    if (!g_exact) s->between_epoch = e;
  } else {
    s->burst.between_count();
  }
}

[[gnu::noinline]] HCCT_NOINST void burst_exit(ThreadState *s, uintptr_t fn, uintptr_t sp,
                                              bool torn_down) {
  if (!burst_live()) return;
  uint64_t e = __atomic_load_n(&g_burst_epoch, __ATOMIC_ACQUIRE);
  if (g_exact) s->exact.exit(fn, sp, torn_down);
  if (e & 1) {
    burst_learn(fn);
    if (s->burst.epoch != e && join_burst(s, e, fn, sp, torn_down, true)) return;
    s->profile.exit(fn, sp, torn_down);
  } else if (burst_keeps_shadow() && !burst_may_unwind()) {
    s->burst.between_exit(s->profile, fn, sp, torn_down);
    if (!g_exact) s->between_epoch = e;
  }
}

// Slow path of an enter on a thread that is marked busy by the caller; clears busy.
[[gnu::noinline]] HCCT_NOINST void enter_full(ThreadState *s, uintptr_t fn, uintptr_t site,
                                              uintptr_t sp) {
  if (HCCT_UNLIKELY(g_bursting)) {
    burst_enter(s, fn, site, sp);
  } else if (__hcct_gate_local == kGateProfiling) {
    s->profile.enter(fn, site, sp);
    if (g_exact) s->exact.enter(fn, site, sp);
  }
  event_end(s);
}

[[gnu::noinline]] HCCT_NOINST void exit_full(ThreadState *s, uintptr_t fn, uintptr_t sp,
                                             bool torn_down) {
  if (HCCT_UNLIKELY(g_bursting)) {
    burst_exit(s, fn, sp, torn_down);
  } else if (__hcct_gate_local == kGateProfiling) {
    s->profile.exit(fn, sp, torn_down);
    if (g_exact) s->exact.exit(fn, sp, torn_down);
  }
  event_end(s);
}

// Slow path of an enter whose thread is unregistered or already inside the runtime (also every
// enter between bursts that reaches the runtime with the gate closed).
[[gnu::noinline]] HCCT_NOINST void enter_unusual(uintptr_t fn, uintptr_t site, uintptr_t sp) {
  ThreadState *s = t_state;
  if (!s) {
    if (__hcct_gate_local != kGateProfiling && !g_burst_between) return;
    s = attach_thread();
    if (!s) return;
  }
  if (HCCT_UNLIKELY(s->busy)) {
    if (s != &g_inert) ++s->dropped;
    return;
  }
  s->busy = 1;
  compiler_fence();
  enter_full(s, fn, site, sp);
}

[[gnu::noinline]] HCCT_NOINST void enter_unusual_plugin(uintptr_t fn, uintptr_t site, uintptr_t sp) {
  burst_plugin_probe_seen();  // the thread's first plugin event comes here
  enter_unusual(fn, site, sp);
}

[[gnu::noinline]] HCCT_NOINST void count_dropped(ThreadState *s) {
  if (s != &g_inert) ++s->dropped;
}

// Off the fast path (busy set by the caller, cleared here): between bursts with a shadow stack, a
// push or a pop; else the full path. Out of line so that the probes stay frameless.
[[gnu::noinline]] HCCT_NOINST void enter_other(ThreadState *s, uintptr_t fn, uintptr_t site,
                                               uintptr_t sp) {
  if (s->between_epoch == __atomic_load_n(&g_burst_epoch, __ATOMIC_RELAXED) && burst_live() &&
      s->burst.shadow.enter_fast(fn, site, sp)) {
    ++s->burst.skipped;
    return event_end(s);
  }
  enter_full(s, fn, site, sp);
}

[[gnu::noinline]] HCCT_NOINST void exit_other(ThreadState *s, uintptr_t fn, uintptr_t sp,
                                              bool torn_down) {
  if (s->between_epoch == __atomic_load_n(&g_burst_epoch, __ATOMIC_RELAXED) && burst_live() &&
      s->burst.shadow.exit_fast(fn, sp, torn_down))
    return event_end(s);
  exit_full(s, fn, sp, torn_down);
}

// The gate a probe family tests: the plugin's probes __hcct_gate, the -finstrument-functions hooks
// g_hook_gate (open between bursts too when they keep a shadow stack).
template <bool kPlugin>
__attribute__((always_inline)) inline unsigned char probe_gate() {
  return kPlugin ? __hcct_gate_local : g_hook_gate;
}

// True when the epoch says the thread may take the fast path; read after the gate.
__attribute__((always_inline)) inline bool epoch_differs(const ThreadState *s) {
  compiler_fence();
  return s->fast_epoch != g_burst_epoch;
}

template <bool kPlugin>
__attribute__((always_inline)) inline void on_enter(uintptr_t fn, uintptr_t site, uintptr_t sp) {
  ThreadState *s = t_state;
  if (HCCT_UNLIKELY(!s || s->busy))
    return kPlugin ? enter_unusual_plugin(fn, site, sp) : enter_unusual(fn, site, sp);
  s->busy = 1;
  compiler_fence();
  // Re-read after `busy` is set: the final dump closes the gate and then waits for busy threads.
  if (HCCT_UNLIKELY(probe_gate<kPlugin>() != kGateProfiling || epoch_differs(s) ||
                    !s->profile.enter_fast(fn, site, sp)))
    return enter_other(s, fn, site, sp);
  compiler_fence();
  s->busy = 0;
}

template <bool kPlugin>
__attribute__((always_inline)) inline void on_exit(uintptr_t fn, uintptr_t sp, bool torn_down) {
  ThreadState *s = t_state;
  if (HCCT_UNLIKELY(!s)) return;  // nothing entered on this thread yet
  if (HCCT_UNLIKELY(s->busy)) return count_dropped(s);
  s->busy = 1;
  compiler_fence();
  if (HCCT_UNLIKELY(probe_gate<kPlugin>() != kGateProfiling || epoch_differs(s) ||
                    !s->profile.exit_fast(fn, sp, torn_down)))
    return exit_other(s, fn, sp, torn_down);
  compiler_fence();
  s->busy = 0;
}

}  // namespace

// Called by the longjmp and catch interposers (interpose.cc) with the stack pointer of the frame
// that control moves to.
HCCT_NOINST void hcct_unwind_current_thread(uintptr_t sp) {
  ThreadState *s = t_state;
  if (!s || s->busy) return;
  s->busy = 1;
  compiler_fence();
  if (__hcct_gate_local == kGateProfiling || g_burst_between) {
    // Whichever holds the current path: the shadow stack kept between bursts, or the profile.
    if (s->burst.shadow_current) s->burst.shadow.unwind_to(sp);
    else s->profile.unwind_to(sp);
    if (g_exact) s->exact.unwind_to(sp);
  }
  event_end(s);
}

// Called by the swapcontext/setcontext interposers (stacks.cc) before control moves to a context
// whose stack pointer will be `sp`: the calling path becomes that stack's.
HCCT_NOINST void hcct_switch_current_thread_stack(uintptr_t sp, uintptr_t lo, uintptr_t size,
                                                  uintptr_t from_sp) {
  ThreadState *s = t_state;
  if (!s || s->busy) return;
  s->busy = 1;
  compiler_fence();
  if (__hcct_gate_local == kGateProfiling || g_burst_between) {
    if (s->profile.switch_stack(sp, lo, size, from_sp)) s->profile.unwind_to(sp);
    if (g_exact && s->exact.switch_stack(sp, lo, size, from_sp)) s->exact.unwind_to(sp);
  }
  event_end(s);
}

// The stack tag is the probe's CFA: the caller's stack pointer at the call, the same for the enter
// and exit probes of one frame whatever each hook's own frame looks like. An exit probe that
// returns straight to `site` was tail-called from the function's epilogue (see RUNTIME-ABI.md).
// Between bursts (gate closed, burst_sync auto or shadow) the -finstrument-functions hooks, which
// are called anyway, keep the thread's shadow stack (their gate, g_hook_gate, stays open); the
// plugin's probes do not call at all.
HCCT_EXPORT void __cyg_profile_func_enter(void *fn, void *site) {
  if (HCCT_LIKELY(g_hook_gate == kGateProfiling))
    on_enter<false>(reinterpret_cast<uintptr_t>(fn), reinterpret_cast<uintptr_t>(site),
                    reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()));
}

HCCT_EXPORT void __cyg_profile_func_exit(void *fn, void *site) {
  if (HCCT_LIKELY(g_hook_gate == kGateProfiling))
    on_exit<false>(reinterpret_cast<uintptr_t>(fn), reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()),
                   __builtin_return_address(0) == site);
}

HCCT_EXPORT void __hcct_enter(void *fn, void *site) {
  if (HCCT_LIKELY(__hcct_gate_local == kGateProfiling))
    on_enter<true>(reinterpret_cast<uintptr_t>(fn), reinterpret_cast<uintptr_t>(site),
                   reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()));
}

HCCT_EXPORT void __hcct_exit(void *fn, void *site) {
  if (HCCT_LIKELY(__hcct_gate_local == kGateProfiling))
    on_exit<true>(reinterpret_cast<uintptr_t>(fn), reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()),
            __builtin_return_address(0) == site);
}

// Probe ABI 2 (the plugin since issue 3's speed work; docs/RUNTIME-ABI.md): called only after the
// probe itself saw the gate open, so they skip the gate test above; on_enter/on_exit re-read the
// gate once `busy` is set, as they must anyway for the final dump. The plugin never lets gcc
// tail-call the exit probe, so it needs no call site: its CFA is always the instrumented frame's.
// mode=empty (gate 1) never creates thread state: its enters return on the thread-state test, as
// enter_unusual would, and its exits return in on_exit's first test.
HCCT_EXPORT void __hcct_enter_open(void *fn, void *site) {
  if (HCCT_UNLIKELY(!t_state) && __hcct_gate_local == kGateEmpty) return;
  on_enter<true>(reinterpret_cast<uintptr_t>(fn), reinterpret_cast<uintptr_t>(site),
                 reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()));
}

HCCT_EXPORT void __hcct_exit_open(void *fn) {
  on_exit<true>(reinterpret_cast<uintptr_t>(fn), reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()),
                false);
}

// A library unloaded before the dump must still be in the module map.
HCCT_EXPORT int dlclose(void *handle) {
  static int (*real_dlclose)(void *) = nullptr;
  if (!real_dlclose) {
    real_dlclose = reinterpret_cast<int (*)(void *)>(dlsym(RTLD_NEXT, "dlclose"));
    if (!real_dlclose) return -1;
  }
  if (g_profiling && !g_finished) remember_modules_before_unload();
  return real_dlclose(handle);
}
