// The runtime proper: the exported probes, per-thread state, thread start/exit, fork, dlclose and
// the final dump. See docs/RUNTIME.md for the design and docs/RUNTIME-ABI.md for the contract.
#include <dlfcn.h>
#include <new>
#include <errno.h>
#include <limits.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "burst_runtime.h"
#include "dump.h"
#include "hcct/hcct.h"
#include "hcct/unit_abi.h"
#include "interpose.h"
#include "lifecycle.h"
#include "messages.h"
#include "profile.h"
#include "sampler.h"
#include "spin_lock.h"
#include "stacks.h"
#include "static_tls.h"
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

SpinLock g_registry_lock{};
ThreadState *g_threads = nullptr;
uint32_t g_next_seq = 0;
int g_dumps_in_flight = 0;
// Execs may overlap (several threads, each with its own snapshot): the gates are saved by the first
// to start and restored by the last to end, both under the registry lock. A later exec that saved
// the gates the first had closed would otherwise restore them closed for good.
struct ExecsInProgress {
  int count;
  unsigned char gate;
  unsigned char hook_gate;
};
ExecsInProgress g_execs{};
char g_follow_preload[kMaxPath + 16];   // option follow=1 (lifecycle.h)
char g_follow_options[kMaxPath + 16];
// Set by the daemon() interposer around the fork whose parent then leaves (lifecycle.h); the
// parent's profile is written as for an exec, and resumed when the fork failed.
__thread bool t_leaving_after_fork __attribute__((tls_model("initial-exec"))) = false;
__thread bool t_resume_after_fork __attribute__((tls_model("initial-exec"))) = false;
__thread ExecSnapshot t_leaving_snapshot __attribute__((tls_model("initial-exec")));

// Thread numbers: taken under the registry lock at registration, and without it when a thread's
// first file would replace another process's (write_thread).
HCCT_NOINST uint32_t take_seq() { return __atomic_fetch_add(&g_next_seq, 1, __ATOMIC_RELAXED); }

HCCT_NOINST void lock_registry() { acquire(&g_registry_lock); }
HCCT_NOINST void unlock_registry() { release(&g_registry_lock); }

HCCT_NOINST int current_tid() { return int(syscall(SYS_gettid)); }

// The main thread's stack from /proc/self/maps, read with plain system calls: pthread_getattr_np
// reads the file through stdio, i.e. the program's malloc, which may be the very function whose
// first event is registering this thread (an instrumented allocator holding its own lock).
// The stack is the mapping that holds `here`; it may grow down to the previous mapping's end,
// within RLIMIT_STACK (what pthread_getattr_np reports too).
HCCT_NOINST bool main_thread_stack(uintptr_t here, uintptr_t *lo, uintptr_t *size) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  size_t have = 0;
  uintptr_t prev_end = 0, hi = 0;
  bool found = false, eof = false;
  while (!found && !eof) {
    ssize_t r = read(fd, buf + have, sizeof buf - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) eof = true;
    else have += size_t(r);
    // Whole lines only: "start-end perms ...".
    size_t line = 0;
    for (size_t i = 0; i < have && !found; ++i) {
      if (buf[i] != '\n') continue;
      uintptr_t start = 0, end = 0;
      size_t j = line;
      auto hex = [&](uintptr_t *v) {
        for (; j < i; ++j) {
          char c = buf[j];
          int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
          if (d < 0) break;
          *v = *v * 16 + uintptr_t(d);
        }
      };
      hex(&start);
      if (j < i && buf[j] == '-') {
        ++j;
        hex(&end);
      }
      if (start <= here && here < end) {
        hi = end;
        found = true;
      } else if (end <= here) {
        prev_end = end;
      }
      line = i + 1;
    }
    memmove(buf, buf + line, have - line);
    have -= line;
    if (have == sizeof buf) have = 0;  // a line longer than the buffer: skip it
  }
  close(fd);
  if (!found) return false;
  rlimit limit{};
  uintptr_t max = getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                      ? uintptr_t(limit.rlim_cur)
                      : hi - prev_end;
  if (max > hi - prev_end) max = hi - prev_end;
  *lo = hi - max;
  *size = max;
  return true;
}

// The calling thread's stack, so that frames on other stacks (sigaltstack, coroutines) are
// recognised. Unknown bounds make every address "own stack". Never calls malloc.
HCCT_NOINST void own_stack(uintptr_t *lo, uintptr_t *size) {
  *lo = 0;
  *size = ~uintptr_t(0);
  if (getpid() == current_tid()) {
    // pthread_getattr_np would read /proc/self/maps through stdio for the main thread.
    main_thread_stack(reinterpret_cast<uintptr_t>(__builtin_frame_address(0)), lo, size);
    return;
  }
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
// Constant-initialised: it is in force before any constructor runs (events can arrive from other
// libraries' constructors and from threads they start).
constinit ThreadState g_inert{ThreadState::Inert{}};
constinit ThreadState g_unattached{ThreadState::Inert{}};

// Every thread starts with g_unattached (the TLS image holds its address, relocated at load).
__thread ThreadState *t_state __attribute__((tls_model("initial-exec"))) = &g_unattached;

// The plugin probes' lean route between bursts (on_enter/on_exit below) may run: bursting, and not
// time=wall, whose sampler thread relies on the shadow stack changing only in the out-of-line
// paths (wall_enter_slow charges its samples between bursts there, sampler.cc). The CPU-time
// sampler's handler keeps a sample that finds the thread busy pending, as in the inline fast paths;
// the lean route charges it at its end. Set once before the gate first opens.
bool g_lean_between = false;

// Stops of all threads in force (stop_all_threads): the final dump's, for good, and each exec's
// snapshot until it resumes. While nonzero, a thread's slow path keeps its epochs kicked.
int g_stops = 0;
HCCT_NOINST bool threads_stopped() { return __atomic_load_n(&g_stops, __ATOMIC_SEQ_CST) != 0; }
HCCT_NOINST void kick_thread(ThreadState *s) {
  __atomic_store_n(&s->fast_epoch, kKicked, __ATOMIC_SEQ_CST);
  __atomic_store_n(&s->between_epoch, kKicked, __ATOMIC_SEQ_CST);
}

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
  config.timed = sampler_running();
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
  s->exact_on = g_exact;
  // Before the thread is registered: from then on a dlclose may kick these (kKicked).
  s->fast_epoch = g_exact ? ~uint64_t(0) : 0;  // with bursting, 0 never matches: the first event joins
  s->between_epoch = ~uint64_t(0);              // set once the thread keeps a shadow stack
  s->retired_seen = retired_count();           // its tree is empty: nothing to move
  lock_registry();
  s->seq = take_seq();
  s->next = g_threads;
  g_threads = s;
  unlock_registry();
  // A stop that began before the registration did not kick this thread (the registry lock orders
  // the two): it kicks itself, so that its hit path sees the stop.
  if (threads_stopped()) kick_thread(s);
  pthread_setspecific(g_thread_key, s);  // its destructor writes the file at thread exit
  t_state = s;
  sampler_attach(s);  // after t_state: its first sample finds the thread registered
  return s;
}

HCCT_NOINST const Options &runtime_options() { return g_options; }

HCCT_NOINST bool samples_accepted() {
  if (__atomic_load_n(&g_finished, __ATOMIC_ACQUIRE)) return false;
  return g_bursting || probe_gate_value() == kGateProfiling;
}

HCCT_NOINST void for_each_registered_thread(void (*fn)(ThreadState *, void *), void *arg) {
  lock_registry();
  for (ThreadState *s = g_threads; s; s = s->next) fn(s, arg);
  unlock_registry();
}

}  // namespace hcct::rt

namespace {

// Who this process is, recorded at start-up and at fork (not at dump time: the parent of a
// daemon() child has left by then, and getppid() would say 1).
struct ProcessIdentity {
  int pid;
  int ppid;
};
ProcessIdentity g_process{};
int g_forking_pid = 0;  // the parent's pid, kept by the fork-prepare handler for the child

// A thread that exits while the whole-process dump is written is left to that dump.
// Claims. A thread's state is written (and freed) by whoever holds its claim: the thread itself at
// its exit, the final dump, or an exec's snapshot, which gives the claim back if the exec fails.
// One atomic byte, changed only by read-modify-writes, so the three always agree on who that is:
// a thread that exits while another holds its claim marks itself kExited and leaves the rest to
// the holder (the final dump writes it as exited; a failed exec's resume writes and frees it).
constexpr unsigned char kClaimed = 1, kExited = 2;
HCCT_NOINST bool claim(ThreadState *s) {
  return !(__atomic_fetch_or(&s->claim_state, kClaimed, __ATOMIC_ACQ_REL) & kClaimed);
}
// The exiting thread: true if it now holds its own claim.
HCCT_NOINST bool claim_at_exit(ThreadState *s) {
  return !(__atomic_fetch_or(&s->claim_state, kClaimed | kExited, __ATOMIC_ACQ_REL) & kClaimed);
}
HCCT_NOINST bool has_exited(const ThreadState *s) { return __atomic_load_n(&s->claim_state, __ATOMIC_ACQUIRE) & kExited; }
// Gives a claim back; true if the thread exited meanwhile: the caller then owns the state for good.
HCCT_NOINST bool release_claim(ThreadState *s) {
  return __atomic_fetch_and(&s->claim_state, static_cast<unsigned char>(~kClaimed), __ATOMIC_ACQ_REL) & kExited;
}

// Code was unloaded (dlclose; dump.h, "retired"): moves this thread's trees and shadow stack off
// the retired ranges it has not seen yet, then undoes the kick of its epochs. Run by the thread
// itself in its slow path (its epochs were kicked), or by whoever writes its file (it is stopped).
HCCT_NOINST void catch_up_retired(ThreadState *s) {
  for (;;) {
    uint32_t n = retired_count();
    for (uint32_t i = s->retired_seen; i < n; ++i) {
      const RetiredRange &r = retired_range(i);
      s->profile.retire_range(r.lo, r.hi, r.tag);
      if (g_exact) s->exact.retire_range(r.lo, r.hi, r.tag);
      if (g_bursting) s->burst.shadow.retire_range(r.lo, r.hi, r.tag);
    }
    s->retired_seen = n;
    uint64_t kicked = kKicked;
    uint64_t resumed = g_exact ? ~uint64_t(0) : g_bursting ? s->burst.epoch : 0;
    __atomic_compare_exchange_n(&s->fast_epoch, &kicked, resumed, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_RELAXED);
    kicked = kKicked;
    __atomic_compare_exchange_n(&s->between_epoch, &kicked, ~uint64_t(0), false, __ATOMIC_SEQ_CST,
                                __ATOMIC_RELAXED);
    // Undone during a stop: kicked again. (Sequentially consistent with the stop's count and kicks:
    // either this load sees the stop, or the stop's kick comes after the undo.)
    if (threads_stopped()) {
      kick_thread(s);
      return;
    }
    // A dlclose that retired more after `n` was read may have kicked before the undo: look again
    // (the CASes and this load are sequentially consistent, as are the dlclose's count and kicks).
    if (__atomic_load_n(&g_retired_count, __ATOMIC_SEQ_CST) == n) return;
  }
}

// After retire_unloaded_modules: every registered thread's next event takes the slow path, which
// catches up first. (It bumped the count before, sequentially consistent: a thread that sees the
// kick sees the count.)
HCCT_NOINST void kick_threads() {
  lock_registry();
  for (ThreadState *s = g_threads; s; s = s->next) kick_thread(s);
  unlock_registry();
}

// verbose=1: what Space-Saving's upkeep cost the thread (docs/RUNTIME.md, "Space-Saving's upkeep").
HCCT_NOINST void say_upkeep(const ThreadState *s) {
  const ThreadProfile &p = s->profile;
  const UpkeepCounts &u = p.upkeep();
  say("hcct: thread %d: %llu calls, %zu nodes (peak %zu), %u counters, minimum %llu; general enters %llu, "
      "exits %llu; evictions %llu, rescans %llu (nodes read %llu); pruned %llu, "
      "index erases %llu; tree %zu KiB (index %zu KiB, %zu children)\n",
      s->tid, (unsigned long long)p.calls(), p.live_nodes(), p.peak_nodes(), p.counters(),
      (unsigned long long)p.min_count(), (unsigned long long)u.general_enters,
      (unsigned long long)u.general_exits, (unsigned long long)u.evictions, (unsigned long long)u.rescans,
      (unsigned long long)u.rescan_reads, (unsigned long long)u.pruned,
      (unsigned long long)u.index_erases, p.tree_bytes() >> 10, p.index_bytes() >> 10,
      p.indexed_children());
}

// The count clock: the enters of the thread's current gap that its countdowns hold and the runtime
// has not taken yet (count_take). Read in the thread's static TLS, where it is still there: the
// thread itself, or a live thread stopped by the final dump.
HCCT_NOINST uint64_t count_gap_enters(const BurstThread &b, bool live) {
  if (!read_shared(g_count_clock) || b.sampling || !b.count_thread_pointer ||
      !(live || b.count_thread_pointer == own_thread_pointer()))
    return 0;
  uint64_t enters = 0;
  for_each_count_module(b.count_thread_pointer, 0, [&](uint32_t i, const int64_t *countdown) {
    // A live thread may be inside count_set (the dump read between its countdown and its armed
    // value): such a module's difference is negative or absurd, and is left out, not written.
    int64_t taken = b.count_armed[i] - *countdown;
    if (taken > 0 && taken < (int64_t(1) << 62)) enters += uint64_t(taken);
  });
  return enters;
}

// `interrupted`: the thread's own event was interrupted (exit or _exit from a signal handler): its
// tree is written as it stands.
HCCT_NOINST void write_thread(ThreadState *s, bool live_at_exit, bool interrupted) {
  sampler_exclude(s);  // time=wall: the sampler thread leaves the tree alone from now on
  if (!interrupted) sampler_settle_between(s);
  if (s->retired_seen != retired_count()) catch_up_retired(s);
  // A thread's first file never replaces a file it did not write: a fork child may have the pid of
  // a process that ended and left its files here (a recycled pid). Later files of the thread (an
  // exec's snapshot, then the final dump) replace its own.
  for (int tries = 0; !s->has_file && tries < 4096; ++tries) {
    if (!profile_file_exists(g_out_dir, g_process.pid, s->seq) &&
        !(g_exact && profile_file_exists(g_exact_dir, g_process.pid, s->seq)))
      break;
    s->seq = take_seq();
  }
  s->has_file = true;
  ThreadMeta meta{g_process.pid, g_process.ppid, s->tid,       s->seq,
                  live_at_exit,  s->dropped,     s->start_ns, interrupted, s->retired_seen};
  meta.sample_period_ns = sample_period_ns();
  meta.time_clock = time_metric_name(g_options.time);
  // Samples still pending were taken inside an event that never ended (the thread is written while
  // stopped in it): no context was charged.
  meta.samples_lost = __atomic_load_n(&s->samples_lost, __ATOMIC_RELAXED) +
                     __atomic_load_n(&s->samples_pending, __ATOMIC_RELAXED) +
                     __atomic_load_n(&s->samples_between, __ATOMIC_RELAXED) +
                     s->samples_undelivered + sampler_undelivered(s);
  BurstMeta burst;
  if (g_bursting) {
    burst.kind = burst_kind_name();
    burst.sync = burst_sync_option();
    burst.interval_ns = burst_call_interval_ns();
    burst.length_ns = burst_call_length_ns();
    burst.bursts = s->burst.bursts;
    burst.events_known = burst_events_known();
    burst.events = s->profile.calls() + s->profile.lost_events() + s->burst.skipped_enters() +
                   count_gap_enters(s->burst, live_at_exit);
    burst.time_fraction = burst_event_clock() ? burst_thread_time_fraction(s->burst) : burst_time_fraction();
    burst.clock = burst_event_clock() ? "events" : "time";
    burst.unwind_frames = s->burst.unwind_memo.frames_walked;
    burst.unwind_frames_reused = s->burst.unwind_memo.frames_reused;
    burst.unwind_frames_by_rules = s->burst.unwind_memo.frames_by_rules;
  }
  // A full disk or a file-size limit (SIGXFSZ) gives an error here, never a signal in the program.
  QuietWrites quiet;
  int err = ENOMEM;
  {
    DumpFile file;
    err = file.open(g_out_dir, meta.pid, s->seq);
    if (!err)
      err = write_profile_sections(file, s->profile, meta, g_bursting ? &burst : nullptr) &&
                    (!hcct_kpath_write_sections || hcct_kpath_write_sections(file, *s))
                ? file.commit()
                : file.failure();
  }
  if (!err && g_exact) {
    DumpFile file;
    err = file.open(g_exact_dir, meta.pid, s->seq);
    if (!err) err = write_profile_sections(file, s->exact, meta) ? file.commit() : file.failure();
  }
  if (err) {
    static bool said = false;
    if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
      say("hcct: cannot write the profile to '%s': %s\n", g_out_dir, error_text(err));
  }
  if (g_options.verbose && s->profile.mode() == Mode::kHcct) say_upkeep(s);
}

HCCT_NOINST void unregister_thread(ThreadState *s) {
  lock_registry();
  for (ThreadState **p = &g_threads; *p; p = &(*p)->next) {
    if (*p == s) {
      *p = s->next;
      break;
    }
  }
  unlock_registry();
}

HCCT_NOINST void free_thread(ThreadState *s) {
  sampler_detach(s);
  if (hcct_kpath_release) hcct_kpath_release(*s);
  s->profile.destroy();
  s->exact.destroy();
  s->burst.destroy();
  unmap_pages(s, sizeof(ThreadState));
}

// pthread key destructor: the thread is exiting. The program's own key destructors may still call
// instrumented code, and glibc calls destructors in rounds while any key has a value
// (PTHREAD_DESTRUCTOR_ITERATIONS, 4): re-arming keeps this thread profiled into the third round,
// so calls of destructors that run in the first two are counted too. Not the last round: the
// sanitizers' own thread finalisation re-arms itself into that one. C++ thread_local destructors
// run before any key's.
constexpr unsigned kProfiledExitRounds = PTHREAD_DESTRUCTOR_ITERATIONS > 2 ? PTHREAD_DESTRUCTOR_ITERATIONS - 1 : 1;

HCCT_NOINST void on_thread_exit(void *arg) {
  auto *s = static_cast<ThreadState *>(arg);
  if (++s->exit_rounds < kProfiledExitRounds && pthread_setspecific(g_thread_key, s) == 0) return;
  t_state = &g_inert;  // a sample from now on is not this state's
  // Counted before the claim: a final dump that finds the state claimed then waits for this write.
  __atomic_add_fetch(&g_dumps_in_flight, 1, __ATOMIC_ACQ_REL);
  if (claim_at_exit(s)) {
    s->samples_undelivered += sampler_undelivered(s);
    sampler_detach(s);
    write_thread(s, /*live_at_exit=*/false, /*interrupted=*/false);
    unregister_thread(s);
    free_thread(s);
  }  // else the holder writes it (the final dump; or an exec's snapshot, whose resume frees it)
  __atomic_sub_fetch(&g_dumps_in_flight, 1, __ATOMIC_ACQ_REL);
}

HCCT_NOINST void sleep_briefly() {
  timespec ts{0, 1000000};  // 1 ms
  nanosleep(&ts, nullptr);
}

// Stops every thread from updating its tree: close the gates and kick every thread's epochs, then
// make sure each thread either saw the kick or is visibly busy (asymmetric Dekker: a thread sets
// `busy` and then reads its epoch, paying only a compiler fence; this side pays a membarrier).
// The probes' hit path reads no gate after `busy`: the kick is what it sees (thread.h, kKicked).
// A thread's slow path re-reads the gates after `busy`; one registered after the kicks kicks itself.
HCCT_NOINST void stop_all_threads() {
  __atomic_add_fetch(&g_stops, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&__hcct_gate_local, kGateOff, __ATOMIC_SEQ_CST);
  __atomic_store_n(&g_hook_gate, kGateOff, __ATOMIC_SEQ_CST);
  kick_threads();
  if (!g_have_membarrier || syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
    // Without membarrier, a scheduling round trip is the best available approximation.
    sleep_briefly();
  }
}

HCCT_NOINST bool wait_until_idle(ThreadState *s) {
  for (int i = 0; i < 1000; ++i) {  // at most ~1 s: a thread stuck in a handler is skipped
    if (__atomic_load_n(&s->busy, __ATOMIC_ACQUIRE) == 0) return true;
    sleep_briefly();
  }
  return false;
}

// The threads a whole-process dump writes, claimed from the registry (mmap'd: the dump may run in
// a signal handler, at _exit, before exec).
struct ClaimedThreads {
  ThreadState **list = nullptr;
  size_t count = 0;
  size_t bytes = 0;
};

HCCT_NOINST ClaimedThreads claim_all_threads() {
  ClaimedThreads c;
  lock_registry();
  size_t registered = 0;
  for (ThreadState *s = g_threads; s; s = s->next) ++registered;
  c.bytes = (registered + 1) * sizeof(ThreadState *);
  c.list = static_cast<ThreadState **>(map_pages(c.bytes));
  for (ThreadState *s = g_threads; s && c.list; s = s->next)
    if (claim(s)) c.list[c.count++] = s;
  unlock_registry();
  return c;
}

// Writes the claimed threads' profiles; the gates must be closed. The calling thread is never
// waited for: when it is busy, a signal handler interrupted one of its events, which cannot finish
// before this returns — its tree is written as it stands.
HCCT_NOINST size_t write_claimed(const ClaimedThreads &c) {
  ThreadState *self = t_state;
  size_t written = 0;
  for (size_t i = 0; i < c.count; ++i) {
    ThreadState *s = c.list[i];
    bool interrupted = s == self && is_busy(s);
    if (s != self && !wait_until_idle(s)) continue;
    write_thread(s, /*live_at_exit=*/s != self && !has_exited(s), interrupted);
    ++written;
  }
  return written;
}

// The dump at the end of the process (exit, _exit, the parent side of daemon()): every thread's
// profile, once.
HCCT_NOINST void finish_process() {
  if (!__atomic_load_n(&g_profiling, __ATOMIC_ACQUIRE) || __atomic_exchange_n(&g_finished, true, __ATOMIC_ACQ_REL))
    return;
  if (g_bursting) burst_finish();  // no burst opens again; events between bursts stop
  stop_all_threads();
  ClaimedThreads claimed = claim_all_threads();
  size_t written = write_claimed(claimed);
  for (int i = 0; i < 2000 && __atomic_load_n(&g_dumps_in_flight, __ATOMIC_ACQUIRE); ++i)
    sleep_briefly();
  unmap_pages(claimed.list, claimed.bytes);
  if (g_options.verbose)
    say("hcct: process %d wrote %zu thread profile(s) to %s\n", g_process.pid, written, g_out_dir);
}

HCCT_NOINST void on_fork_prepare() {
  g_forking_pid = g_process.pid;
  lock_registry();
  lock_module_list();  // a child must not inherit it held by another thread (it dumps at exit)
  burst_fork_prepare();
}

HCCT_NOINST void on_fork_parent() {
  burst_fork_parent();
  unlock_module_list();
  unlock_registry();
  // daemon()'s parent leaves with _exit as soon as fork returns: this is its last chance. The
  // handler also runs when the fork failed, and daemon() then returns -1 to a process that goes on.
  if (t_leaving_after_fork) t_resume_after_fork = snapshot_before_exec(&t_leaving_snapshot);
}

// In the child only the forking thread exists: it keeps profiling from its current context in a
// fresh tree, so the child's file holds what the child did.
void count_fork_child(BurstThread &b);

HCCT_NOINST void on_fork_child() {
  g_process = {current_tid(), g_forking_pid};
  count_writes_fork_child();  // the writes and dlcloses of the parent's other threads are not the child's
  t_leaving_after_fork = false;
  ThreadState *self = t_state;
  for (ThreadState *s = g_threads; s;) {
    ThreadState *next = s->next;
    sampler_forget_timer(s);  // timers are not inherited
    if (s != self) free_thread(s);
    s = next;
  }
  g_threads = nullptr;
  g_next_seq = 0;
  g_dumps_in_flight = 0;
  // Other threads' stops (their execs) do not exist in the child; the final dump's stays.
  __atomic_store_n(&g_stops, __atomic_load_n(&g_finished, __ATOMIC_ACQUIRE) ? 1 : 0, __ATOMIC_SEQ_CST);
  if (g_execs.count) {  // another thread of the parent was in an exec: the child has no such thread
    g_execs.count = 0;
    __atomic_store_n(&g_hook_gate, g_execs.hook_gate, __ATOMIC_RELEASE);
    __atomic_store_n(&__hcct_gate_local, g_execs.gate, __ATOMIC_RELEASE);
  }
  if (hcct_kpath_fork_child) hcct_kpath_fork_child(is_thread_state(self) ? self : nullptr);
  if (is_thread_state(self)) {
    self->profile.restart_from_current_path();
    if (g_exact) self->exact.restart_from_current_path();
    self->seq = take_seq();
    self->has_file = false;
    self->tid = current_tid();
    self->start_ns = wall_clock_ns();
    self->dropped = 0;
    self->samples_lost = self->samples_undelivered = 0;
    __atomic_store_n(&self->samples_pending, 0, __ATOMIC_RELAXED);
    sampler_attach(self);
    self->burst.reset_skipped();
    count_fork_child(self->burst);
    self->burst.bursts = 0;
    self->burst.unwind_memo.frames_walked = self->burst.unwind_memo.frames_reused = 0;
    self->burst.unwind_memo.frames_by_rules = 0;
    self->claim_state = 0;  // an exec's snapshot in another thread of the parent may hold it
    self->next = nullptr;
    g_threads = self;
  }
  unlock_module_list();
  unlock_registry();
  burst_fork_child();  // restarts the timer thread, which the child does not have
  sampler_fork_child();  // and time=wall's sampler thread
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

// `path` made absolute against the working directory at start-up (the program may chdir later).
HCCT_NOINST bool make_absolute(const char *path, char *out, size_t size) {
  if (path[0] == '/') return size_t(snprintf(out, size, "%s", path)) < size;
  char cwd[kMaxPath];
  if (!getcwd(cwd, sizeof cwd)) return false;
  return size_t(snprintf(out, size, "%s/%s", cwd, path)) < size;
}

// Reads the output directory once at start-up (plain system calls, no malloc): removes the
// temporary files of dumps that were killed midway (`.<pid>.…tmp` of a process that no longer
// exists), and numbers this image's threads after any profile files of the same pid already there
// (an image that exec'd this one wrote them; a recycled pid's old files are kept too).
HCCT_NOINST void scan_out_dir() {
  int dir = open(g_out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char buf[8192];
  for (;;) {
    long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      struct Entry {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto *e = reinterpret_cast<const Entry *>(buf + at);
      at += e->reclen;
      DumpName id;
      if (parse_temporary_name(e->name, &id)) {
        if (id.pid != uint64_t(g_process.pid) && kill(int(id.pid), 0) != 0 && errno == ESRCH)
          unlinkat(dir, e->name, 0);
      } else if (parse_profile_name(e->name, &id) && id.pid == uint64_t(g_process.pid) &&
                 id.seq >= g_next_seq && id.seq < 0xffffffffu) {
        g_next_seq = uint32_t(id.seq + 1);
      }
    }
  }
  close(dir);
}

}  // namespace

namespace hcct::rt {

HCCT_NOINST bool leaving_process_can_dump() {
  // A vfork child shares the parent's memory: it must not touch the parent's profile.
  return __atomic_load_n(&g_profiling, __ATOMIC_ACQUIRE) && !__atomic_load_n(&g_finished, __ATOMIC_ACQUIRE) &&
         getpid() == g_process.pid;
}

HCCT_NOINST void finish_before_leaving() {
  if (leaving_process_can_dump()) finish_process();
}

HCCT_NOINST void mark_leaving_after_fork(bool on) {
  t_leaving_after_fork = on;
  if (!on && t_resume_after_fork) {  // a parent whose fork failed: it did not leave
    t_resume_after_fork = false;
    resume_after_exec(&t_leaving_snapshot);
  }
}

// exec: the image's profile is written as it stands, every thread's; if exec fails, profiling goes
// on (the files are written again, complete, at the end). With bursting, a failed exec ends
// bursting for the image (docs/RUNTIME.md).

HCCT_NOINST bool snapshot_before_exec(ExecSnapshot *snap) {
  *snap = {};
  if (!leaving_process_can_dump()) return false;
  if (g_bursting) {
    finish_process();
    return false;
  }
  lock_registry();
  if (g_execs.count++ == 0) {
    g_execs.gate = __atomic_load_n(&__hcct_gate_local, __ATOMIC_ACQUIRE);
    g_execs.hook_gate = __atomic_load_n(&g_hook_gate, __ATOMIC_ACQUIRE);
  }
  unlock_registry();
  stop_all_threads();
  ClaimedThreads claimed = claim_all_threads();
  write_claimed(claimed);
  sampler_pause(claimed.list, claimed.count);
  snap->threads = claimed.list;
  snap->count = claimed.count;
  snap->bytes = claimed.bytes;
  return true;
}

// A thread that exited while an exec's snapshot held its claim: written again, as exited, and freed.
HCCT_NOINST void finish_exited_thread(ThreadState *s) {
  if (!__atomic_load_n(&g_finished, __ATOMIC_ACQUIRE)) write_thread(s, /*live_at_exit=*/false, /*interrupted=*/false);
  unregister_thread(s);
  free_thread(s);
}

HCCT_NOINST void resume_after_exec(ExecSnapshot *snap) {
  auto **list = static_cast<ThreadState **>(snap->threads);
  size_t live = 0;
  for (size_t i = 0; i < snap->count; ++i) {
    if (has_exited(list[i])) finish_exited_thread(list[i]);  // no timer to re-arm: the thread is gone
    else list[live++] = list[i];
  }
  sampler_resume(list, live);
  for (size_t i = 0; i < live; ++i)
    if (release_claim(list[i])) finish_exited_thread(list[i]);
  unmap_pages(list, snap->bytes);
  __atomic_sub_fetch(&g_stops, 1, __ATOMIC_SEQ_CST);  // threads may undo their kicks from now on
  lock_registry();
  if (--g_execs.count == 0 && !__atomic_load_n(&g_finished, __ATOMIC_ACQUIRE)) {
    __atomic_store_n(&g_hook_gate, g_execs.hook_gate, __ATOMIC_RELEASE);
    __atomic_store_n(&__hcct_gate_local, g_execs.gate, __ATOMIC_RELEASE);
  }
  unlock_registry();
}

// Empty when the process did not start with them (mode=off, a runtime linked in, a bad option):
// then there is nothing to pass on.
HCCT_NOINST const char *preload_to_follow() {
  return g_options.follow && g_follow_preload[0] ? g_follow_preload : nullptr;
}
HCCT_NOINST const char *options_to_follow() {
  return g_options.follow && g_follow_options[0] ? g_follow_options : nullptr;
}

}  // namespace hcct::rt

namespace {

// What a child whose environment was replaced gets back with follow=1 (exits.cc): the
// "LD_PRELOAD=…" and "HCCT_OPTIONS=…" entries as they were at start-up.
HCCT_NOINST void remember_environment() {
  g_follow_preload[0] = g_follow_options[0] = 0;
  // Only a preload that loaded this runtime (a runtime linked into the program has none to pass).
  Dl_info self{};
  bool have_self = dladdr(reinterpret_cast<void *>(&remember_environment), &self) && self.dli_fname;
  if (const char *v = getenv("LD_PRELOAD");
      v && ((have_self && strstr(v, self.dli_fname)) || strstr(v, "libhcct")) &&
      size_t(snprintf(g_follow_preload, sizeof g_follow_preload, "LD_PRELOAD=%s", v)) >= sizeof g_follow_preload)
    g_follow_preload[0] = 0;  // cut: a partial path would make the child's loader complain
  if (const char *v = getenv("HCCT_OPTIONS");
      v && size_t(snprintf(g_follow_options, sizeof g_follow_options, "HCCT_OPTIONS=%s", v)) >= sizeof g_follow_options)
    g_follow_options[0] = 0;
}

__attribute__((constructor(101))) HCCT_NOINST void hcct_start() {
  messages_init();
  g_process = {getpid(), getppid()};
  char error[512];
  if (!parse_options(getenv("HCCT_OPTIONS"), &g_options, error, sizeof error)) {
    say("hcct: HCCT_OPTIONS: %s; profiling is off for this run\n", error);
    return;
  }
  if (g_options.log[0]) {
    char log[kMaxPath];
    if (make_absolute(g_options.log, log, sizeof log)) messages_to_file(log);
  }
  if (g_options.mode == Mode::kOff) return;
  resolve_ways_out();
  remember_environment();
  remember_command();
  if (g_options.mode == Mode::kEmpty) {
    __atomic_store_n(&g_hook_gate, kGateEmpty, __ATOMIC_RELEASE);
    __atomic_store_n(&__hcct_gate_local, kGateEmpty, __ATOMIC_RELEASE);
    return;
  }
  g_exact = g_options.exact;
  bool dirs_ok = make_absolute(g_options.out, g_out_dir, sizeof g_out_dir) && make_directory(g_out_dir);
  if (dirs_ok && g_exact) {
    snprintf(g_exact_dir, sizeof g_exact_dir, "%s/exact", g_out_dir);
    dirs_ok = make_directory(g_exact_dir);
  }
  if (!dirs_ok) {
    say("hcct: cannot create or write the profile directory '%s': %s; profiling is off for this run\n",
        g_out_dir[0] ? g_out_dir : g_options.out, error_text(errno ? errno : EACCES));
    return;
  }
  scan_out_dir();
  set_tree_memory_limit(size_t(g_options.max_mb) << 20);
  if (pthread_key_create(&g_thread_key, on_thread_exit) != 0) {
    say("hcct: cannot create a thread key; profiling is off for this run\n");
    return;
  }
  pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
  g_have_membarrier =
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  unsigned char gate = kGateProfiling, hook_gate = kGateProfiling;
  if (g_options.burst != Burst::kOff) {
    g_bursting = true;
    if (!burst_start(g_options, g_exact, &gate, &hook_gate)) {
      say("hcct: cannot start the burst timer; profiling is off for this run\n");
      g_bursting = false;  // no burst will come: count probes need not call in to wait for one
      return;
    }
  }
  // Time sampling (docs/RUNTIME.md, "Time"; with static bursting, "Time and bursting").
  if (samples_time(g_options)) sampler_start(g_options);
  g_lean_between = g_bursting && !(samples_time(g_options) && g_options.time == TimeMetric::kWall);
  __atomic_store_n(&g_profiling, true, __ATOMIC_RELEASE);
  __atomic_store_n(&g_hook_gate, hook_gate, __ATOMIC_RELEASE);
  __atomic_store_n(&__hcct_gate_local, gate, __ATOMIC_RELEASE);
}

// Runs after the program's atexit handlers and static destructors, from whichever thread exits
// (also from a signal handler that called exit()).
// Not in a child that shares or copied the memory without the fork handlers (vfork, _Fork, clone):
// it would write the parent's threads under the parent's pid and end the parent's profiling.
__attribute__((destructor(101))) HCCT_NOINST void hcct_finish() { finish_before_leaving(); }

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
  // burst_sync=auto that switched to the shadow stack mid-run: a thread's shadow stack is not
  // current until it was rebuilt from the machine stack once.
  uint32_t generation = __atomic_load_n(&g_shadow_generation, __ATOMIC_ACQUIRE);
  bool use_machine = burst_may_unwind() || s->burst.generation != generation;
  s->burst.generation = generation;
  if (use_machine) s->burst.shadow_current = false;
  bool excluded_own = false;
  size_t n = use_machine ? burst_unwind(s->burst.shadow, fn, sp, torn_down, &excluded_own, &s->burst.unwind_memo) : 0;
  s->burst.join(s->profile, e, s->burst.shadow.path(), n, use_machine);
  set_own_epoch(&s->fast_epoch, g_exact ? ~uint64_t(0) : e);
  // An exit whose frame is on the rebuilt path (an ipa-split part's exit: its function's frame
  // is the caller's) is processed; one whose own frame was left out is not.
  bool on_path = n && !excluded_own && s->burst.shadow.path()[n - 1].fn == fn;
  return use_machine && is_exit && !on_path;
}

// Between bursts, before the shadow stack takes an event: after burst_sync=auto switched to the
// shadow stack mid-run, the thread's shadow stack is rebuilt from the machine stack once. True if
// the event is an exit whose own frame was left out of the rebuilt path (not to be processed).
HCCT_NOINST bool resync_shadow(ThreadState *s, uintptr_t fn, uintptr_t sp, bool torn_down, bool is_exit) {
  uint32_t generation = __atomic_load_n(&g_shadow_generation, __ATOMIC_ACQUIRE);
  if (HCCT_LIKELY(s->burst.generation == generation)) return false;
  s->burst.generation = generation;
  bool excluded_own = false;
  burst_unwind(s->burst.shadow, fn, sp, torn_down, &excluded_own, &s->burst.unwind_memo);
  s->burst.shadow_current = true;
  return is_exit && excluded_own;
}

// True while events are wanted: a burst, or between bursts with the gate open or shadow stacks
// kept. The final dump turns both off before it waits for busy threads.
__attribute__((always_inline)) inline bool burst_live() {
  return probe_gate_value() == kGateProfiling || read_shared(g_burst_between);  // (g_hook_gate implies one of them)
}

// The event clock (docs/BURSTING.md, "The estimator"): the thread's own bursts, counted in its
// enters. Its events during a burst take this full path (their fast path stays off: fast_epoch never
// equals the global epoch, which does not change), so that the burst's enters are counted without a
// counter on the inline path; events of its gaps take the inline shadow-stack path, which counts
// down gap_left, until the enter that starts the next burst comes here.
HCCT_NOINST void clock_enter(ThreadState *s, uint64_t e, uintptr_t fn, uintptr_t site, uintptr_t sp) {
  BurstThread &b = s->burst;
  if (HCCT_UNLIKELY(!b.burst_events)) burst_schedule_first(b, uint64_t(s->tid) << 32 | s->seq);
  b.clock_enter(
      [&] {
        b.between_enter(s->profile, fn, site, sp);  // (counts the enter down gap_left)
        if (!g_exact) set_own_epoch(&s->between_epoch, e);
      },
      [&] {
        b.join(s->profile, 0, nullptr, 0, false);  // from the shadow stack; fast_epoch stays off
        set_own_epoch(&s->between_epoch, 0);         // the inline shadow-stack paths stop
      },
      // The exhaustive inline hit first (the same tree change as enter(), in a tenth of the
      // instructions), enter() for everything else.
      [&] {
        if (!s->profile.enter_fast(fn, site, sp)) s->profile.enter(fn, site, sp);
      },
      burst_now_ns);
}

HCCT_NOINST void clock_exit(ThreadState *s, uint64_t e, uintptr_t fn, uintptr_t sp, bool torn_down) {
  BurstThread &b = s->burst;
  if (b.sampling) {
    if (!s->profile.exit_fast(fn, sp, torn_down)) s->profile.exit(fn, sp, torn_down);
  } else {
    b.between_exit(s->profile, fn, sp, torn_down);
    if (!g_exact) set_own_epoch(&s->between_epoch, e);
  }
}

[[gnu::noinline]] HCCT_NOINST void burst_enter(ThreadState *s, uintptr_t fn, uintptr_t site,
                                               uintptr_t sp) {
  if (!burst_live()) return;
  if (HCCT_UNLIKELY(!g_burst_events_seen)) __atomic_store_n(&g_burst_events_seen, 1, __ATOMIC_RELEASE);
  uint64_t e = __atomic_load_n(&g_burst_epoch, __ATOMIC_ACQUIRE);
  if (g_exact) s->exact.enter(fn, site, sp);  // the exact side sees every event
  if (burst_event_clock()) return clock_enter(s, e, fn, site, sp);
  if (e & 1) {
    burst_learn(fn);
    if (s->burst.epoch != e) join_burst(s, e, fn, sp, false, false);
    s->profile.enter(fn, site, sp);
  } else if (burst_keeps_shadow() && !burst_may_unwind()) {
    resync_shadow(s, fn, sp, false, false);
    s->burst.between_enter(s->profile, fn, site, sp);
    // The shadow-stack-only paths may run until the next change (not with exact=1: the exact side
    // needs every event).
    if (!g_exact) set_own_epoch(&s->between_epoch, e);
  } else {
    s->burst.between_count();
  }
}

[[gnu::noinline]] HCCT_NOINST void burst_exit(ThreadState *s, uintptr_t fn, uintptr_t sp,
                                              bool torn_down) {
  if (!burst_live()) return;
  if (HCCT_UNLIKELY(!g_burst_events_seen)) __atomic_store_n(&g_burst_events_seen, 1, __ATOMIC_RELEASE);
  uint64_t e = __atomic_load_n(&g_burst_epoch, __ATOMIC_ACQUIRE);
  if (g_exact) s->exact.exit(fn, sp, torn_down);
  if (burst_event_clock()) return clock_exit(s, e, fn, sp, torn_down);
  if (e & 1) {
    burst_learn(fn);
    if (s->burst.epoch != e && join_burst(s, e, fn, sp, torn_down, true)) return;
    s->profile.exit(fn, sp, torn_down);
  } else if (burst_keeps_shadow() && !burst_may_unwind()) {
    if (resync_shadow(s, fn, sp, torn_down, true)) return;
    s->burst.between_exit(s->profile, fn, sp, torn_down);
    if (!g_exact) set_own_epoch(&s->between_epoch, e);
  }
}

// Code was unloaded since the thread last looked, or its epochs were kicked (a dlclose, a stop):
// the thread catches up, unless a stop is in force (read after `busy`, the Dekker pair of
// stop_all_threads): then its tree is being written, and the gates, closed, keep this event off it.
__attribute__((always_inline)) inline void catch_up_if_needed(ThreadState *s) {
  if (HCCT_UNLIKELY(s->retired_seen != retired_count() || read_shared(s->fast_epoch) == kKicked) &&
      !threads_stopped())
    catch_up_retired(s);
}

// Slow path of an enter on a thread that is marked busy by the caller; clears busy.
[[gnu::noinline]] HCCT_NOINST void enter_full(ThreadState *s, uintptr_t fn, uintptr_t site,
                                              uintptr_t sp) {
  catch_up_if_needed(s);
  if (HCCT_UNLIKELY(g_bursting)) {
    burst_enter(s, fn, site, sp);
  } else if (probe_gate_value() == kGateProfiling) {
    s->profile.enter(fn, site, sp);
    if (g_exact) s->exact.enter(fn, site, sp);
  }
  event_end(s);
}

[[gnu::noinline]] HCCT_NOINST void exit_full(ThreadState *s, uintptr_t fn, uintptr_t sp,
                                             bool torn_down) {
  catch_up_if_needed(s);
  if (HCCT_UNLIKELY(g_bursting)) {
    burst_exit(s, fn, sp, torn_down);
  } else if (probe_gate_value() == kGateProfiling) {
    s->profile.exit(fn, sp, torn_down);
    if (g_exact) s->exact.exit(fn, sp, torn_down);
  }
  event_end(s);
}

// Slow path of an enter whose thread is unregistered or already inside the runtime (also every
// enter between bursts that reaches the runtime with the gate closed).
[[gnu::noinline]] HCCT_NOINST void enter_unusual(uintptr_t fn, uintptr_t site, uintptr_t sp) {
  ThreadState *s = t_state;
  if (s == &g_unattached) {
    if (probe_gate_value() != kGateProfiling && !read_shared(g_burst_between)) return;
    s = attach_thread();
    if (!s) return;
  }
  if (HCCT_UNLIKELY(is_busy(s))) {
    if (is_thread_state(s)) ++s->dropped;
    return;
  }
  set_busy(s);
  compiler_fence();
  enter_slow(s);
  enter_full(s, fn, site, sp);
}

[[gnu::noinline]] HCCT_NOINST void enter_unusual_plugin(uintptr_t fn, uintptr_t site, uintptr_t sp) {
  burst_plugin_probe_seen();  // the thread's first plugin event comes here
  enter_unusual(fn, site, sp);
}

// An exit while the thread is inside the runtime (or has no state: nothing entered on it yet).
[[gnu::noinline]] HCCT_NOINST void count_dropped(ThreadState *s) {
  if (is_thread_state(s)) ++s->dropped;
}

// Between bursts, the common event on the thread's shadow stack, shared by the plugin probes' lean
// route (lean_enter/lean_exit) and the out-of-line paths (enter_other/exit_other): with the
// thread's between-burst epoch current and `may()` (the route's own condition), a push with nothing
// stale to pop, counted down gap_left (the event clock's countdown to the thread's next burst;
// never 0 on the time clock), or a pop of the function's own top entry. False: nothing was changed.
template <typename May>
__attribute__((always_inline)) inline bool between_enter_fast(ThreadState *s, uintptr_t fn, uintptr_t site,
                                                              uintptr_t sp, May may) {
  BurstThread &b = s->burst;
  uint64_t gap_left;
  if (HCCT_UNLIKELY(read_shared(s->between_epoch) != read_shared(g_burst_epoch) || !may() ||
                    __builtin_sub_overflow(b.gap_left, uint64_t(1), &gap_left) ||
                    !b.shadow.enter_fast(fn, site, sp)))
    return false;
  b.gap_left = gap_left;
  return true;
}

template <typename May>
__attribute__((always_inline)) inline bool between_exit_fast(ThreadState *s, uintptr_t fn, uintptr_t sp,
                                                             bool torn_down, May may) {
  return !HCCT_UNLIKELY(read_shared(s->between_epoch) != read_shared(g_burst_epoch) || !may() ||
                        !s->burst.shadow.exit_fast(fn, sp, torn_down));
}

// Off the fast path (busy set by the caller, cleared here): between bursts with a shadow stack, a
// push or a pop; else the full path. Out of line so that the probes stay frameless. The enter
// and exit paths the probes tail-call take the thread's state last, so that the routine stays in
// the first argument's register (with it first, gcc moved the routine out before the gate test, an
// instruction more for every event in mode=empty).
[[gnu::noinline]] HCCT_NOINST void enter_other(uintptr_t fn, uintptr_t site, uintptr_t sp,
                                               ThreadState *s) {
  enter_slow(s);
  if (between_enter_fast(s, fn, site, sp, [] { return burst_live(); })) return event_end(s);
  enter_full(s, fn, site, sp);
}

[[gnu::noinline]] HCCT_NOINST void exit_other(uintptr_t fn, uintptr_t sp, bool torn_down,
                                              ThreadState *s) {
  enter_slow(s);
  if (between_exit_fast(s, fn, sp, torn_down, [] { return burst_live(); })) return event_end(s);
  exit_full(s, fn, sp, torn_down);
}

// An enter under a wide node that the inline fast path left: its child from the index, inline
// here, else the general path. A hit ends as the inline fast path does: it changed no structure
// (in_slow was never set, so the time sampler charged its samples directly and left none pending).
// The lookup is inline so that a wide call costs one out-of-line function, not two (a call and
// five register moves less per wide lookup).
[[gnu::noinline]] HCCT_NOINST void enter_wide(uintptr_t fn, uintptr_t site, uintptr_t sp,
                                              ThreadState *s) {
  if (s->profile.enter_wide_child(fn, site, sp)) {
    compiler_fence();
    return clear_busy(s);
  }
  enter_other(fn, site, sp, s);
}

// An enter whose frame passed the inline fast path's test but whose context was not among the
// first children. Out of line, so that the choice costs the probes' hit path nothing (not even a
// register copy), and frameless (the wide path, which saves registers, is a tail call away).
[[gnu::noinline]] HCCT_NOINST void enter_missed(uintptr_t fn, uintptr_t site, uintptr_t sp,
                                                ThreadState *s) {
  if (s->profile.enter_scanned_child(fn, site, sp)) {
    compiler_fence();
    return clear_busy(s);
  }
  if (s->profile.at_wide_node()) return enter_wide(fn, site, sp, s);
  enter_other(fn, site, sp, s);
}

// True when the epoch says the thread may not take the fast path; read after `busy` is set. It
// stands for the gate too: every stop kicks the epochs after it closes the gates (stop_all_threads),
// bursts change the epoch before they flip the gates, and the slow paths read the gates themselves.
__attribute__((always_inline)) inline bool epoch_differs(const ThreadState *s) {
  compiler_fence();
  return read_shared(s->fast_epoch) != read_shared(g_burst_epoch);
}

// A CPU-time sample that came during a lean event (kept pending by the handler: the thread was
// busy) is charged now, to the path on the shadow stack.
[[gnu::noinline]] HCCT_NOINST void lean_settle(ThreadState *s) {
  settle_samples(s);
  event_end(s);
}

__attribute__((always_inline)) inline void lean_end(ThreadState *s) {
  compiler_fence();
  if (HCCT_UNLIKELY(__atomic_load_n(&s->samples_pending, __ATOMIC_RELAXED))) return lean_settle(s);
  clear_busy(s);
}

// The plugin probes' lean route between bursts (docs/BURSTING.md, "The cost between bursts"): with
// `busy` set, the thread's between-burst epoch current (it stands for the gate, as fast_epoch does
// on the hit path: every stop and every dlclose kicks it) and not time=wall, a push or a pop of
// the shadow stack and, for an enter, the event clock's count (between_enter_fast/exit_fast);
// nothing else of the out-of-line protocol (in_slow and the deferred prunes concern the samplers
// and the profile's tree, which this route does not touch; a CPU-time sample kept pending
// meanwhile is charged by lean_end). Anything unusual — the gap's end, a stale or foreign frame, a
// full stack, an exit that is not the top's — takes enter_other/exit_other as before.
__attribute__((always_inline)) inline bool lean_enter(ThreadState *s, uintptr_t fn, uintptr_t site,
                                                      uintptr_t sp) {
  if (!between_enter_fast(s, fn, site, sp, [] { return g_lean_between; })) return false;
  lean_end(s);
  return true;
}

__attribute__((always_inline)) inline bool lean_exit(ThreadState *s, uintptr_t fn, uintptr_t sp,
                                                     bool torn_down) {
  if (!between_exit_fast(s, fn, sp, torn_down, [] { return g_lean_between; })) return false;
  lean_end(s);
  return true;
}

// The hooks' own work on the hit path: the gate (before the thread's state, so that mode=empty
// costs a compare), the thread's state (never null: g_unattached until the first event), `busy`
// tested and set in one instruction, then the epoch, which the dump's stop kicks.
template <bool kPlugin>
__attribute__((always_inline)) inline void on_enter(uintptr_t fn, uintptr_t site, uintptr_t sp) {
  ThreadState *s = t_state;
  if (HCCT_UNLIKELY(test_and_set_busy(s)))
    return kPlugin ? enter_unusual_plugin(fn, site, sp) : enter_unusual(fn, site, sp);
  if (HCCT_UNLIKELY(epoch_differs(s) || !s->profile.fast_frame(sp))) {
    if (kPlugin && lean_enter(s, fn, site, sp)) return;
    return enter_other(fn, site, sp, s);
  }
  if (HCCT_UNLIKELY(!s->profile.enter_fast_child(fn, site, sp))) return enter_missed(fn, site, sp, s);
  compiler_fence();
  clear_busy(s);
}

// `torn_down()`: whether the probe was tail-called (exit_fast_with asks only where it matters).
template <bool kPlugin, typename TornDown>
__attribute__((always_inline)) inline void on_exit(uintptr_t fn, uintptr_t sp, TornDown torn_down) {
  ThreadState *s = t_state;
  if (HCCT_UNLIKELY(test_and_set_busy(s))) return count_dropped(s);
  if (HCCT_UNLIKELY(epoch_differs(s) || !s->profile.exit_fast_with(fn, sp, torn_down))) {
    if (kPlugin && lean_exit(s, fn, sp, torn_down())) return;
    return exit_other(fn, sp, torn_down(), s);
  }
  compiler_fence();
  clear_busy(s);
}

// The probe's CFA, kept in a register: without this gcc recomputes `lea 8(%rsp)` at each use (an
// instruction each time on the hit path).
__attribute__((always_inline)) inline uintptr_t held(uintptr_t value) {
  asm("" : "+r"(value));
  return value;
}

// ---------------------------------------------------------------------------------------------
// The count clock (docs/BURSTING.md, "The count clock"; hcct/unit_abi.h): plugin units built with
// clock=count count each thread's enters down in a thread-local countdown per module and call
// __hcct_enter_count when it goes negative; their exit probes call __hcct_exit_count while the
// module's thread-local exit gate is open. Both start at 0 in every thread (the TLS image), so a
// thread's first enter in a module always calls in, and the runtime arms the thread there.

// A countdown that stays negative for 2^62 enters (every enter calls in), and one that never goes
// negative (no enter calls in).
constexpr int64_t kCountEveryEnter = INT64_MIN / 2;
constexpr int64_t kCountNoEnter = INT64_MAX;

// Count modules armed for the calling thread outside the count clock (every event delivered, or
// none), where it may have no ThreadState (mode=empty).
__thread uint32_t t_count_known __attribute__((tls_model("initial-exec"))) = 0;

// Every module's countdown and exit gate of the calling thread, from module `from` on. `armed` (the
// thread's BurstThread::count_armed) records the countdowns written, and `late` receives the enters
// made since they were last armed or taken: each countdown is exchanged, not overwritten, so that
// the enters a signal handler makes on this thread while the runtime is between its read
// (count_take) and this write are not lost. Under the caller's permit (`write` allowed).
[[gnu::always_inline]] inline uint32_t count_write(const CountWrite &write, uint32_t from, int64_t countdown,
                                                   unsigned char exit_gate, int64_t *armed, uint64_t *late) {
  (void)write;
  return for_each_count_module(own_thread_pointer(), from, [&](uint32_t i, int64_t *module_countdown) {
    int64_t was = __atomic_exchange_n(module_countdown, countdown, __ATOMIC_RELAXED);
    __atomic_store_n(reinterpret_cast<unsigned char *>(module_countdown) + hcct::unit_abi::kExitGateOffset, exit_gate,
                     __ATOMIC_RELAXED);
    if (armed) {
      if (late) *late += uint64_t(armed[i] - was);
      armed[i] = countdown;
    }
  });
}

// count_write under a permit of its own. Put off while a dlclose may be unloading a module
// (CountWrite): returns `from`, so that the caller's count of modules armed stays short and the
// write is made again (a countdown left negative also calls in again).
HCCT_NOINST uint32_t count_set(uint32_t from, int64_t countdown, unsigned char exit_gate, int64_t *armed,
                               uint64_t *late = nullptr) {
  CountWrite write;
  if (!write.allowed()) return from;
  return count_write(write, from, countdown, exit_gate, armed, late);
}

// The enters the thread made in its count modules since the runtime last armed them (the one that
// called in included), and the countdowns taken as the new base. Under the caller's permit.
[[gnu::always_inline]] inline uint64_t count_read(const CountWrite &write, BurstThread &b) {
  (void)write;
  uint64_t enters = 0;
  for_each_count_module(own_thread_pointer(), 0, [&](uint32_t i, int64_t *countdown) {
    int64_t now = *countdown;
    enters += uint64_t(b.count_armed[i] - now);
    b.count_armed[i] = now;
  });
  return enters;
}

// count_read under a permit of its own. Put off (0, nothing taken) while a dlclose may be unloading
// a module: the enters stay in the countdowns for the next take.
HCCT_NOINST uint64_t count_take(BurstThread &b) {
  CountWrite write;
  if (!write.allowed()) return 0;
  return count_read(write, b);
}

// The rest of a gap: each module's countdown gets an equal share of the enters left, so that the
// first one to run out calls in before the gap is over by more than the modules' number (the
// thread's enters may go to any of them); the runtime then shares out what is left again.
// `after_burst`: the countdowns still hold the burst's enters (its calls, not the gap's), so the
// caller must hold a permit that was allowed (count_end_burst): put off, the next take would count
// them again as the gap's. Otherwise a put-off arming leaves the gap's enters in the countdowns
// for the next take.
HCCT_NOINST void count_arm_gap(BurstThread &b, bool after_burst, const CountWrite &write) {
  if (!write.allowed()) return;
  uint32_t n = __atomic_load_n(&g_count_modules.count, __ATOMIC_ACQUIRE);
  if (g_exact) {  // the exact side needs every event: every enter calls in, every exit gate stays open
    count_read(write, b);  // (the burst's enters: not the gap's)
    if (b.count_known != n) b.count_known = count_write(write, b.count_known, kCountEveryEnter, 1, b.count_armed, nullptr);
    return;
  }
  uint32_t live = 0;
  for_each_count_module(0, 0, [&](uint32_t, int64_t *) { ++live; });
  uint64_t share = live > 1 ? b.gap_left / live : b.gap_left;
  if (share > uint64_t(kCountNoEnter)) share = uint64_t(kCountNoEnter);
  uint64_t late = 0;
  b.count_known = count_write(write, 0, int64_t(share), 0, b.count_armed, &late);
  if (!after_burst) b.skipped += late;  // (a signal handler's, since count_take: the gap's)
}

// A burst's last enter: the burst ends and the gap after it is armed, both under one permit. Put
// off by a dlclose, the burst takes the next enter too (its countdowns, still negative, call in)
// rather than end with the countdowns holding its enters, which the gap's next take would count
// again (session 15: `events` over-counted by the bursts that ended during a dlclose).
HCCT_NOINST void count_end_burst(BurstThread &b) {
  CountWrite write;
  if (HCCT_UNLIKELY(!write.allowed())) {
    b.burst_left = 1;
    return;
  }
  b.end_burst(burst_now_ns());
  count_arm_gap(b, true, write);
}

// A forked child's events start at the fork: the parent's part of the current gap, still in the
// countdowns, was the parent's.
HCCT_NOINST void count_fork_child(BurstThread &b) {
  if (!read_shared(g_count_clock) || b.sampling || !b.count_thread_pointer) return;
  uint64_t done = count_take(b);
  b.gap_left -= done < b.gap_left ? done : b.gap_left;
  b.reset_skipped();
}

// The thread stops taking count events (the final dump began, or no state can be had).
HCCT_NOINST void count_disarm(BurstThread *b) {
  // The enters of the current gap still in the countdowns are the thread's: counted before the
  // countdowns are overwritten (the final dump would otherwise lose up to a gap per live thread).
  bool in_gap = b && read_shared(g_count_clock) && !b->sampling && b->count_thread_pointer;
  uint64_t late = 0;
  uint32_t n = count_set(0, kCountNoEnter, 0, b ? b->count_armed : nullptr, &late);
  if (in_gap) b->skipped += late;
  if (b) b->count_known = n;
  t_count_known = n;
}

// An enter on the count clock (busy set by the caller, cleared here). Between bursts it ends the
// thread's gap (or a share of it: count_arm_gap); the burst it opens rebuilds the thread's path from
// the machine stack (the time clock's way, with the units' site tables), samples burst_events
// enters with every count probe calling in, and closes with the gap after it armed.
[[gnu::noinline]] HCCT_NOINST void count_enter(ThreadState *s, uintptr_t fn, uintptr_t site, uintptr_t sp) {
  compiler_fence();
  enter_slow(s);
  catch_up_if_needed(s);
  BurstThread &b = s->burst;
  if (HCCT_UNLIKELY(!burst_live())) {  // the final dump has begun
    count_disarm(&b);
    return event_end(s);
  }
  if (HCCT_UNLIKELY(!b.burst_events)) {
    burst_schedule_first(b, uint64_t(s->tid) << 32 | s->seq);
    b.count_thread_pointer = own_thread_pointer();
  }
  if (g_exact) s->exact.enter(fn, site, sp);
  if (!b.sampling) {
    uint64_t enters = count_take(b);  // this one included
    if (enters <= b.gap_left) {
      b.gap_left -= enters;
      count_arm_gap(b, false, CountWrite());
      return event_end(s);
    }
    // The gap is over at this enter; enters past its end in other modules were skipped too.
    b.skipped += enters - 1 - b.gap_left;
    b.gap_left = 0;
    // Every countdown negative and every exit gate open before the burst begins. Put off by a
    // dlclose (CountWrite), there is no burst: one begun with the other modules' countdowns still
    // counting their gap shares and every exit gate closed would see none of its exits and lose
    // those modules' enters from `events` until a slow enter re-armed them (session 15). This
    // enter is the gap's, and the next one (the countdown is still negative) tries again.
    if (!g_exact || b.count_known != __atomic_load_n(&g_count_modules.count, __ATOMIC_ACQUIRE)) {
      uint64_t late = 0;  // (a signal handler's, since count_take: the gap's)
      b.count_known = count_set(0, kCountEveryEnter, 1, b.count_armed, &late);
      b.skipped += late;
      if (HCCT_UNLIKELY(!b.count_known)) {  // (count_set returns its `from` when put off)
        ++b.skipped;
        return event_end(s);
      }
    }
    b.shadow_current = false;
    bool excluded_own = false;
    size_t n = burst_unwind(b.shadow, fn, sp, false, &excluded_own, &b.unwind_memo);
    b.join(s->profile, 0, b.shadow.path(), n, true);
    b.begin_burst(burst_now_ns());
  } else if (HCCT_UNLIKELY(b.count_known != __atomic_load_n(&g_count_modules.count, __ATOMIC_ACQUIRE))) {
    b.count_known = count_set(b.count_known, kCountEveryEnter, 1, b.count_armed);  // a module loaded meanwhile
  }
  // A function seen on the fast path was learnt when its node was made (the unwinder keeps frames of
  // known functions; the others it inspects once): 25 instructions per enter less on Lua.
  if (!s->profile.enter_fast(fn, site, sp)) {
    burst_learn(fn);
    s->profile.enter(fn, site, sp);
  }
  if (--b.burst_left == 0) count_end_burst(b);
  event_end(s);
}

// The hit path of a burst's events, inline in the entries as the exhaustive mode's (on_enter): the
// thread in its burst, not at its last enter, no exact side, its epoch not kicked (a stop, a
// dlclose: the slow path catches up).
__attribute__((always_inline)) inline bool count_burst_hit(const ThreadState *s) {
  compiler_fence();
  return s->burst.sampling && !g_exact && read_shared(s->fast_epoch) != kKicked;
}

// An exit with the thread's exit gate open (busy set by the caller, cleared here).
[[gnu::noinline]] HCCT_NOINST void count_exit(ThreadState *s, uintptr_t fn, uintptr_t sp) {
  compiler_fence();
  enter_slow(s);
  if (HCCT_LIKELY(burst_live())) {
    if (g_exact) s->exact.exit(fn, sp, false);
    if (s->burst.sampling && !s->profile.exit_fast(fn, sp, false)) s->profile.exit(fn, sp, false);
  } else {
    count_disarm(&s->burst);
  }
  event_end(s);
}

// Set by a constructor that runs right after hcct_start: until then the options are not known, and
// a count probe that calls in is left negative (it calls again at its next enter).
bool g_count_ready = false;
__attribute__((constructor(102))) HCCT_NOINST void count_ready() { __atomic_store_n(&g_count_ready, true, __ATOMIC_RELEASE); }

// A count-probe enter off the count clock's path: before the runtime started; the first of the run
// (which decides the clock); a thread's first; or every enter where the count clock does not serve
// the run (every event is then delivered, as the gate probe delivers them with the gate open).
[[gnu::noinline]] HCCT_NOINST void count_enter_unusual(uintptr_t fn, uintptr_t site, uintptr_t sp) {
  if (!__atomic_load_n(&g_count_ready, __ATOMIC_ACQUIRE)) return;
  unsigned char gate = probe_gate_value();
  bool count_clock = false;
  if (gate == kGateProfiling && g_bursting) {
    std::optional<bool> decided = burst_count_decide();
    if (!decided) return;  // (the countdown stays negative: the next enter calls in again)
    count_clock = *decided;
  }
  ThreadState *s = t_state;
  if (gate == kGateOff && g_bursting && !burst_finished()) {
    // The gate closed between the bursts of a closed-gate sync (unwind, or auto on the machine
    // stack): every enter keeps calling in, to see the next burst open it; a countdown that never
    // runs out would leave this thread out of every later burst.
    if (t_count_known != __atomic_load_n(&g_count_modules.count, __ATOMIC_ACQUIRE))
      t_count_known = count_set(0, kCountEveryEnter, 1, nullptr);
    return;
  }
  if (gate == kGateOff || (count_clock && s == &g_unattached && !(s = attach_thread()))) {
    if (t_count_known != __atomic_load_n(&g_count_modules.count, __ATOMIC_ACQUIRE)) count_disarm(nullptr);
    return;
  }
  if (count_clock) {
    if (HCCT_UNLIKELY(test_and_set_busy(s))) {
      if (is_thread_state(s)) ++s->dropped;
      return;
    }
    return count_enter(s, fn, site, sp);
  }
  if (t_count_known != __atomic_load_n(&g_count_modules.count, __ATOMIC_ACQUIRE))
    t_count_known = count_set(0, kCountEveryEnter, 1, nullptr);
  if (s == &g_unattached && gate == kGateEmpty) return;
  on_enter<true>(fn, site, sp);
}

}  // namespace

// Called by the longjmp and catch interposers (interpose.cc) with the stack pointer of the frame
// that control moves to.
HCCT_NOINST void hcct_unwind_current_thread(uintptr_t sp) {
  ThreadState *s = t_state;
  if (!s || is_busy(s)) return;
  set_busy(s);
  compiler_fence();
  enter_slow(s);
  if (probe_gate_value() == kGateProfiling || read_shared(g_burst_between)) {
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
  enter_slow(s);
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
  if (HCCT_LIKELY(read_shared(g_hook_gate) == kGateProfiling))
    on_enter<false>(reinterpret_cast<uintptr_t>(fn), reinterpret_cast<uintptr_t>(site),
                    held(reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa())));
}

HCCT_EXPORT void __cyg_profile_func_exit(void *fn, void *site) {
  if (HCCT_LIKELY(read_shared(g_hook_gate) == kGateProfiling)) {
    void *return_address = __builtin_return_address(0);
    on_exit<false>(reinterpret_cast<uintptr_t>(fn), held(reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa())),
                   [return_address, site] { return return_address == site; });
  }
}

HCCT_EXPORT void __hcct_enter(void *fn, void *site) {
  if (HCCT_LIKELY(probe_gate_value() == kGateProfiling))
    on_enter<true>(reinterpret_cast<uintptr_t>(fn), reinterpret_cast<uintptr_t>(site),
                   held(reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa())));
}

HCCT_EXPORT void __hcct_exit(void *fn, void *site) {
  if (HCCT_LIKELY(probe_gate_value() == kGateProfiling))
    on_exit<true>(reinterpret_cast<uintptr_t>(fn), held(reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa())),
                  [return_address = __builtin_return_address(0), site] { return return_address == site; });
}

// Probe ABI 2 (the plugin since issue 3's speed work; docs/RUNTIME-ABI.md): called only after the
// probe itself saw the gate open, so they skip the gate test above; on_enter/on_exit read the
// epoch once `busy` is set, which the final dump's stop kicks. The plugin never lets gcc
// tail-call the exit probe, so it needs no call site: its CFA is always the instrumented frame's.
// mode=empty (gate 1) never creates thread state: its enters return on the thread-state test, as
// enter_unusual would, and its exits find g_unattached busy and return from count_dropped.
HCCT_EXPORT void __hcct_enter_open(void *fn, void *site) {
  if (HCCT_UNLIKELY(t_state == &g_unattached) && probe_gate_value() == kGateEmpty) return;
  on_enter<true>(reinterpret_cast<uintptr_t>(fn), reinterpret_cast<uintptr_t>(site),
                 held(reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa())));
}

HCCT_EXPORT void __hcct_exit_open(void *fn) {
  on_exit<true>(reinterpret_cast<uintptr_t>(fn), held(reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa())),
                [] { return false; });
}

// The count probes (hcct/unit_abi.h, "The count clock"): an enter whose module countdown went
// negative (through the unit's __hcct_count_miss, a tail jump: the CFA is the probe's), an exit
// while the module's exit gate is open. Off the count clock both serve as the _open entries.
HCCT_EXPORT void __hcct_enter_count(void *fn, void *site) {
  uintptr_t sp = held(reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()));
  ThreadState *s = t_state;
  if (HCCT_UNLIKELY(!read_shared(g_count_clock) || s == &g_unattached))
    return count_enter_unusual(reinterpret_cast<uintptr_t>(fn), reinterpret_cast<uintptr_t>(site), sp);
  if (HCCT_UNLIKELY(test_and_set_busy(s))) return count_dropped(s);
  uintptr_t f = reinterpret_cast<uintptr_t>(fn), c = reinterpret_cast<uintptr_t>(site);
  if (HCCT_LIKELY(count_burst_hit(s) && s->burst.burst_left > 1 && s->profile.fast_frame(sp) &&
                  s->profile.enter_fast_child(f, c, sp))) {
    --s->burst.burst_left;
    compiler_fence();
    return clear_busy(s);
  }
  count_enter(s, f, c, sp);
}

HCCT_EXPORT void __hcct_exit_count(void *fn) {
  uintptr_t sp = held(reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()));
  if (HCCT_LIKELY(read_shared(g_count_clock))) {
    ThreadState *s = t_state;
    if (HCCT_UNLIKELY(test_and_set_busy(s))) return count_dropped(s);
    uintptr_t f = reinterpret_cast<uintptr_t>(fn);
    if (HCCT_LIKELY(count_burst_hit(s) && s->profile.exit_fast_with(f, sp, [] { return false; }))) {
      compiler_fence();
      return clear_busy(s);
    }
    return count_exit(s, f, sp);
  }
  if (probe_gate_value() == kGateOff) return;
  on_exit<true>(reinterpret_cast<uintptr_t>(fn), sp, [] { return false; });
}

// A library unloaded before the dump must still be in the module map.
HCCT_EXPORT int dlclose(void *handle) {
  using DlcloseFn = int (*)(void *);
  static DlcloseFn cache = nullptr;
  DlcloseFn real_dlclose = next_definition("dlclose", &cache);
  if (!real_dlclose) return -1;
  bool profiling = __atomic_load_n(&g_profiling, __ATOMIC_ACQUIRE) &&
                   !__atomic_load_n(&g_finished, __ATOMIC_ACQUIRE);
  if (profiling) remember_modules_before_unload();
  count_unload_begin();  // no thread writes a count module's TLS until its unload is known
  int result = real_dlclose(handle);
  // Code loaded later at the unloaded addresses is a different routine (docs/RUNTIME.md, "Reused
  // addresses"). The calling thread catches up now; the others at their next event.
  if (result == 0) burst_forget_unloaded_units();  // their site tables and countdowns (hcct/unit_abi.h)
  count_unload_end();
  if (profiling && result == 0 && retire_unloaded_modules()) {
    kick_threads();
    if (ThreadState *s = event_begin(/*attach=*/false)) {
      catch_up_retired(s);
      event_end(s);
    }
  }
  return result;
}
