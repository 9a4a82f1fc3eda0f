// Static bursting, process side (docs/BURSTING.md): the burst schedule (a runtime-owned timer
// thread, or the program itself through the test hook hcct_burst), the gate and the burst epoch,
// the set of functions known to be instrumented, and the machine-stack unwinder that rebuilds a
// thread's calling path at the start of a burst when no shadow stack was kept.
#include "burst_runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unwind.h>

#include <algorithm>

#include "dump.h"
#include "hcct/hcct.h"
#include "hcct/unit_abi.h"
#include "static_tls.h"
#include "thread.h"

extern "C" unsigned char __hcct_path_gate;  // kpath_runtime.cc

namespace hcct::rt {

bool g_path_versions_registered = false;
bool g_path_gate_read = false;
uint64_t g_burst_epoch = 0;
unsigned char g_burst_between = 0;
unsigned char g_hook_gate = 0;
unsigned char g_burst_events_seen = 0;
uint32_t g_shadow_generation = 0;
bool g_count_clock = false;
CountModules g_count_modules;
int g_count_writers = 0;
int g_count_unloading = 0;
// dlcloses begun and ended (count_unloading_add): while it stays the same, no object was unloaded.
uint64_t g_count_unload_events = 0;

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
uint64_t g_interval_ns = 0, g_length_ns = 0;  // the timer's schedule (time clock, path gate)
uint64_t g_call_interval_ns = 0, g_call_length_ns = 0;  // the event clock's (Options::kEventClock*)
bool g_schedule_given = false;  // burst_interval or burst_length given (else each clock's default)
bool g_open = false;
bool g_paths = false;  // the path gate follows the bursts (burst_paths_start)
bool g_path_timer = false;  // on the event clock, the timer runs for the path gate (burst_paths_start)
uint64_t g_start_ns = 0, g_opened_ns = 0, g_burst_ns = 0;
unsigned char g_plugin_seen = 0;
// burst_sync=auto. Until the first plugin event the gate stays open and shadow stacks are kept
// (undecided); then the machine stack is chosen if every unit registered so far can be unwound
// right (each has its site table), else the shadow stack. A unit registered later that cannot
// (dlopen) turns the machine stack into the shadow stack for the rest of the run.
bool g_auto_machine = false;  // the machine stack was chosen (burst_may_unwind)
bool g_auto_shadow = false;   // the shadow stack was chosen, for good
bool g_machine_chosen = false;  // g_auto_machine was set at some point (events were missed)
// The count clock (docs/BURSTING.md, "The count clock"): possible for this run (burst=1 on a timer,
// not burst_sync=unwind), decided at the first count-probe event.
bool g_count_possible = false;
bool g_count_decided = false;
bool g_gate_units = false;  // a plugin unit with the gate probe registered (its enters are not counted)

}  // namespace

HCCT_NOINST uint64_t raw_monotonic_ns() {
  timespec ts{};
  raw_syscall(SYS_clock_gettime, CLOCK_MONOTONIC, reinterpret_cast<long>(&ts));
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

HCCT_NOINST void raw_sleep_until(uint64_t deadline) {
  timespec ts;
  ts.tv_sec = time_t(deadline / 1000000000ull);  // whole seconds: intervals of any length
  ts.tv_nsec = long(deadline % 1000000000ull);
  while (raw_syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, TIMER_ABSTIME, reinterpret_cast<long>(&ts), 0) == -EINTR) {
  }
}

HCCT_NOINST void raw_set_thread_name(const char *name) {
  raw_syscall(SYS_prctl, PR_SET_NAME, reinterpret_cast<long>(name));
}

// The runtime's threads are made with clone(), not pthread_create: once pthread_create has run,
// glibc takes its multi-threaded paths for good (atomic locks in malloc, free and stdio), which cost
// a single-threaded program 2-3 % of its CPU time with nothing else of bursting (Lua: a sleeping
// pthread alone, docs/BENCHMARKS.md "Where plugin bursting's cost goes"). A thread glibc does not
// know of is safe only if it calls nothing of glibc's that uses thread state: it has no TLS of its
// own (no CLONE_SETTLS, so %fs is its creator's, which it never uses). Its 64 KiB stack is mapped
// pages, never freed (one per thread started, per process and fork). Every signal is blocked in it.
HCCT_NOINST bool start_raw_thread(int (*main)(void *), void *arg) {
  constexpr size_t kStackBytes = 64 * 1024;
  void *stack = map_pages(kStackBytes);
  if (!stack) return false;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // inherited by the new thread
  int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
  int tid = clone(main, static_cast<char *>(stack) + kStackBytes, flags, arg);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (tid < 0) unmap_pages(stack, kStackBytes);
  return tid >= 0;
}

namespace {

HCCT_NOINST void lock() {
  while (__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE)) raw_syscall(SYS_sched_yield);
}
HCCT_NOINST void unlock() { __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE); }
// For a caller that must not wait (a signal handler may have interrupted the holder on its thread).
HCCT_NOINST bool try_lock() { return !__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE); }

// Program threads read the clock through the vDSO; the timer thread (and phase changes, which it
// makes) with the system call.
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
  if (g_paths) __atomic_store_n(&__hcct_path_gate, (unsigned char)on, __ATOMIC_RELEASE);
  if (g_event_clock) return;  // (the timer runs for the path gate alone)
  uint64_t e = g_burst_epoch;
  if (on) {
    e += (e & 1) ? 2 : 1;  // a burst opened during a burst is a new burst
  } else {
    if (!(e & 1)) return;
    e += 1;
  }
  uint64_t now = raw_monotonic_ns();
  if (g_open) g_burst_ns += now - g_opened_ns;
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

// The timer thread: wall-clock (CLOCK_MONOTONIC) schedule, absolute deadlines so that lateness
// does not accumulate; no signals. All signals are blocked in it, so it never takes one of the
// program's. It calls nothing of glibc's (raw system calls, atomics, the runtime's globals).
HCCT_NOINST int timer_main(void *arg) {
  raw_set_thread_name("hcct-burst");
  uint64_t next = raw_monotonic_ns();
  bool open = __atomic_load_n(&g_open, __ATOMIC_ACQUIRE);
  // The first burst starts at a random point of the first interval (systematic sampling with a
  // random start): a burst at a fixed offset from the start would over-sample the program's start.
  uint64_t first_wait = reinterpret_cast<uintptr_t>(arg);
  for (;;) {
    if (first_wait) {
      next += first_wait;
      first_wait = 0;
    } else {
      next += open ? g_length_ns : g_interval_ns - g_length_ns;
    }
    uint64_t now = raw_monotonic_ns();
    if (next + g_interval_ns < now) next = now;  // far behind (a stopped process): re-anchor
    raw_sleep_until(next);
    open = !open;
    lock();
    // (auto switched to the event clock: no timer needed, unless the path gate follows it)
    bool done = g_finished || (g_event_clock && !g_path_timer);
    if (!done) set_phase_locked(open);
    unlock();
    if (done) return 0;  // glibc's clone() ends the thread (the exit system call)
  }
}

// The timer thread: start_raw_thread (no pthread_create, which would turn glibc's single-threaded
// paths off for good); timer_main above calls nothing of glibc's.
HCCT_NOINST bool start_timer(uint64_t first_wait) {
  return start_raw_thread(timer_main, reinterpret_cast<void *>(uintptr_t(first_wait)));
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
// Unwind rules per return address (session 10, docs/BURSTING.md "The cost of a burst start"): what
// libgcc's unwinder computes for a frame from its FDE at every step (the FDE search, the CIE and FDE
// parsing, the CFA program: about 2,600 instructions), kept in a lock-free table keyed by the return
// address, filled on first use. Only the rules gcc and clang emit for ordinary x86-64 code are
// kept: the CFA is rsp or rbp plus an offset, the return address at CFA - 8, the caller's rbp
// unchanged or saved at CFA + an offset. Anything else (a signal frame, an expression, DRAP
// realignment, an unknown opcode) has no rule, and the walk continues with libgcc's unwinder.

constexpr int kDwarfRbp = 6, kDwarfRsp = 7, kDwarfRa = 16;
constexpr int32_t kRbpUnchanged = INT32_MIN;

struct UnwindRule {
  uintptr_t start;     // the function (the FDE's pc_begin)
  int32_t cfa_offset;
  int32_t rbp_offset;  // where the caller's rbp is saved, from the CFA; kRbpUnchanged
  uint8_t cfa_reg;     // kDwarfRsp or kDwarfRbp
  bool outermost;      // the return address is undefined (a thread's first frame)
};

struct RuleSlot {
  uintptr_t pc;  // 0: empty; 1: being filled; else the return address (published last)
  UnwindRule rule;
  bool usable;   // false: no rule this table can hold (libgcc's unwinder for this frame)
};

constexpr uint32_t kRuleBits = 14;
constexpr uint32_t kRuleSlots = 1u << kRuleBits;
constexpr uint32_t kRuleProbe = 16;
RuleSlot *g_rules = nullptr;  // mmap'd by burst_start with the function sets

HCCT_NOINST uint64_t read_uleb(const unsigned char *&p, const unsigned char *end, bool *ok) {
  uint64_t v = 0;
  for (unsigned shift = 0; p < end; shift += 7) {
    unsigned char b = *p++;
    if (shift < 64) v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  *ok = false;
  return 0;
}

HCCT_NOINST int64_t read_sleb(const unsigned char *&p, const unsigned char *end, bool *ok) {
  int64_t v = 0;
  unsigned shift = 0;
  unsigned char b = 0;
  do {
    if (p >= end) {
      *ok = false;
      return 0;
    }
    b = *p++;
    if (shift < 64) v |= int64_t(b & 0x7f) << shift;
    shift += 7;
  } while (b & 0x80);
  if (shift < 64 && (b & 0x40)) v |= -(int64_t(1) << shift);
  return v;
}

// The rules of the registers that matter here, as the CFA program leaves them.
struct CfaState {
  int cfa_reg = kDwarfRsp;
  int64_t cfa_offset = 8;
  bool rbp_saved = false;
  int64_t rbp_offset = 0;
  bool ra_saved = true;
  int64_t ra_offset = -8;
  bool ra_undefined = false;
};

// Runs a CFA program while its location is below `target` (libgcc's rule: the row of the return
// address minus one). False on anything this table does not hold.
HCCT_NOINST bool run_cfa(const unsigned char *p, const unsigned char *end, uintptr_t *loc, uintptr_t target,
                         uint64_t code_align, int64_t data_align, CfaState *st, const CfaState &initial) {
  constexpr int kStates = 8;
  CfaState saved[kStates];
  int depth = 0;
  bool ok = true;
  while (p < end && *loc < target && ok) {
    unsigned char op = *p++;
    unsigned high = op & 0xc0, low = op & 0x3f;
    if (high == 0x40) {  // advance_loc
      *loc += low * code_align;
      continue;
    }
    if (high == 0x80 || high == 0xc0) {  // offset, restore
      int64_t off = high == 0x80 ? int64_t(read_uleb(p, end, &ok)) * data_align : 0;
      if (low == kDwarfRbp) {
        st->rbp_saved = high == 0x80 ? true : initial.rbp_saved;
        st->rbp_offset = high == 0x80 ? off : initial.rbp_offset;
      } else if (low == kDwarfRa) {
        st->ra_saved = high == 0x80 ? true : initial.ra_saved;
        st->ra_offset = high == 0x80 ? off : initial.ra_offset;
        st->ra_undefined = high == 0x80 ? false : initial.ra_undefined;
      }
      continue;
    }
    switch (op) {
      case 0x00: break;  // nop
      case 0x02: if (p + 1 > end) return false; *loc += uintptr_t(p[0]) * code_align; p += 1; break;
      case 0x03: { if (p + 2 > end) return false; uint16_t d; __builtin_memcpy(&d, p, 2); p += 2; *loc += d * code_align; break; }
      case 0x04: { if (p + 4 > end) return false; uint32_t d; __builtin_memcpy(&d, p, 4); p += 4; *loc += d * code_align; break; }
      case 0x05: case 0x11: {  // offset_extended, offset_extended_sf
        uint64_t reg = read_uleb(p, end, &ok);
        int64_t off = (op == 0x05 ? int64_t(read_uleb(p, end, &ok)) : read_sleb(p, end, &ok)) * data_align;
        if (reg == kDwarfRbp) { st->rbp_saved = true; st->rbp_offset = off; }
        if (reg == kDwarfRa) { st->ra_saved = true; st->ra_offset = off; st->ra_undefined = false; }
        break;
      }
      case 0x06: case 0x07: case 0x08: {  // restore_extended, undefined, same_value
        uint64_t reg = read_uleb(p, end, &ok);
        if (reg == kDwarfRbp) {
          st->rbp_saved = op == 0x06 ? initial.rbp_saved : false;
          st->rbp_offset = op == 0x06 ? initial.rbp_offset : 0;
        } else if (reg == kDwarfRa) {
          if (op == 0x06) { st->ra_saved = initial.ra_saved; st->ra_offset = initial.ra_offset; st->ra_undefined = initial.ra_undefined; }
          else if (op == 0x07) st->ra_undefined = true;
          else return false;
        }
        break;
      }
      case 0x09: {  // register: rbp or the return address in another register
        uint64_t reg = read_uleb(p, end, &ok);
        read_uleb(p, end, &ok);
        if (reg == kDwarfRbp || reg == kDwarfRa) return false;
        break;
      }
      case 0x0a: if (depth == kStates) return false; saved[depth++] = *st; break;  // remember_state
      case 0x0b: if (depth == 0) return false; *st = saved[--depth]; break;        // restore_state
      case 0x0c: st->cfa_reg = int(read_uleb(p, end, &ok)); st->cfa_offset = int64_t(read_uleb(p, end, &ok)); break;
      case 0x0d: st->cfa_reg = int(read_uleb(p, end, &ok)); break;
      case 0x0e: st->cfa_offset = int64_t(read_uleb(p, end, &ok)); break;
      case 0x12: st->cfa_reg = int(read_uleb(p, end, &ok)); st->cfa_offset = read_sleb(p, end, &ok) * data_align; break;
      case 0x13: st->cfa_offset = read_sleb(p, end, &ok) * data_align; break;
      case 0x10: case 0x16: {  // expression, val_expression: harmless for other registers
        uint64_t reg = read_uleb(p, end, &ok);
        uint64_t len = read_uleb(p, end, &ok);
        if (reg == kDwarfRbp || reg == kDwarfRa || len > uint64_t(end - p)) return false;
        p += len;
        break;
      }
      case 0x14: case 0x15: {  // val_offset(_sf)
        uint64_t reg = read_uleb(p, end, &ok);
        if (op == 0x14) read_uleb(p, end, &ok); else read_sleb(p, end, &ok);
        if (reg == kDwarfRbp || reg == kDwarfRa) return false;
        break;
      }
      case 0x2e: read_uleb(p, end, &ok); break;  // GNU_args_size: for landing pads only
      default: return false;  // set_loc, def_cfa_expression, GNU_negative_offset_extended, vendor ops
    }
  }
  return ok;
}

// The rule of the frame whose return address is `pc`, from its FDE (the FDE and CIE layouts gcc and
// clang emit on x86-64; version 1 or 3 CIEs, augmentations z, R, P, L). False: none this table holds.
HCCT_NOINST bool compute_rule(uintptr_t pc, UnwindRule *rule) {
  dwarf_eh_bases bases{};
  const unsigned char *fde = _Unwind_Find_FDE(reinterpret_cast<void *>(pc - 1), &bases);
  if (!fde) return false;
  uint32_t length;
  __builtin_memcpy(&length, fde, 4);
  if (length == 0xffffffffu || length < 16) return false;
  const unsigned char *fde_end = fde + 4 + length;
  int32_t cie_delta;
  __builtin_memcpy(&cie_delta, fde + 4, 4);
  const unsigned char *cie = fde + 4 - cie_delta;
  uint32_t cie_length;
  __builtin_memcpy(&cie_length, cie, 4);
  if (cie_length == 0xffffffffu || cie_length < 8) return false;
  const unsigned char *cie_end = cie + 4 + cie_length;
  const unsigned char *p = cie + 8;
  unsigned version = *p++;
  if (version != 1 && version != 3) return false;
  const char *aug = reinterpret_cast<const char *>(p);
  while (p < cie_end && *p) ++p;
  if (p >= cie_end) return false;
  ++p;
  bool ok = true;
  uint64_t code_align = read_uleb(p, cie_end, &ok);
  int64_t data_align = read_sleb(p, cie_end, &ok);
  uint64_t ra_reg = version == 1 ? (p < cie_end ? *p++ : 0) : read_uleb(p, cie_end, &ok);
  if (!ok || ra_reg != kDwarfRa) return false;
  unsigned char fde_encoding = 0;
  bool has_z = aug[0] == 'z';
  if (has_z) {
    uint64_t aug_length = read_uleb(p, cie_end, &ok);
    if (!ok || aug_length > uint64_t(cie_end - p)) return false;
    const unsigned char *aug_end = p + aug_length;
    for (const char *a = aug + 1; *a; ++a) {
      if (*a == 'R') fde_encoding = *p++;
      else if (*a == 'L') ++p;
      else if (*a == 'P') {
        unsigned char enc = *p++;
        size_t size = (enc & 0x0f) == 0x00 || (enc & 0x0f) == 0x04 || (enc & 0x0f) == 0x0c ? 8
                      : (enc & 0x0f) == 0x03 || (enc & 0x0f) == 0x0b                       ? 4
                      : (enc & 0x0f) == 0x02 || (enc & 0x0f) == 0x0a                       ? 2
                                                                                             : 0;
        if (!size) return false;
        p += size;
      } else {
        return false;  // 'S' (a signal frame) and anything unknown
      }
    }
    p = aug_end;
  } else if (aug[0]) {
    return false;
  }
  // pc_begin and pc_range as 4-byte values (pcrel|sdata4 or udata4): libgcc decoded pc_begin already.
  if ((fde_encoding & 0x0f) != 0x0b && (fde_encoding & 0x0f) != 0x03) return false;
  const unsigned char *q = fde + 16;
  if (has_z) {
    uint64_t aug_length = read_uleb(q, fde_end, &ok);
    if (!ok || aug_length > uint64_t(fde_end - q)) return false;
    q += aug_length;
  }
  CfaState initial;
  uintptr_t loc = reinterpret_cast<uintptr_t>(bases.func);
  if (!run_cfa(p, cie_end, &loc, ~uintptr_t(0), code_align, data_align, &initial, initial)) return false;
  CfaState st = initial;
  loc = reinterpret_cast<uintptr_t>(bases.func);
  if (!run_cfa(q, fde_end, &loc, pc, code_align, data_align, &st, initial)) return false;
  if ((st.cfa_reg != kDwarfRsp && st.cfa_reg != kDwarfRbp) || st.cfa_offset <= 0 || st.cfa_offset > INT32_MAX)
    return false;
  if (!st.ra_undefined && !(st.ra_saved && st.ra_offset == -8)) return false;
  if (st.rbp_saved && (st.rbp_offset < INT32_MIN + 1 || st.rbp_offset > INT32_MAX)) return false;
  rule->start = reinterpret_cast<uintptr_t>(bases.func);
  rule->cfa_reg = uint8_t(st.cfa_reg);
  rule->cfa_offset = int32_t(st.cfa_offset);
  rule->rbp_offset = st.rbp_saved ? int32_t(st.rbp_offset) : kRbpUnchanged;
  rule->outermost = st.ra_undefined;
  return true;
}

HCCT_NOINST uint32_t rule_slot_of(uintptr_t pc) {
  return uint32_t((pc * 0x9E3779B97F4A7C15ull) >> (64 - kRuleBits));
}

// The rule for return address `pc`: from the table, else computed (and kept if a slot is free).
HCCT_NOINST bool rule_for(uintptr_t pc, UnwindRule *rule) {
  RuleSlot *table = __atomic_load_n(&g_rules, __ATOMIC_ACQUIRE);
  if (!table || pc < 2) return false;
  uint32_t i = rule_slot_of(pc);
  for (uint32_t k = 0; k < kRuleProbe; ++k, i = (i + 1) & (kRuleSlots - 1)) {
    RuleSlot &slot = table[i];
    uintptr_t key = __atomic_load_n(&slot.pc, __ATOMIC_ACQUIRE);
    if (key == pc) {
      *rule = slot.rule;
      return slot.usable;
    }
    if (key == 0) {
      bool usable = compute_rule(pc, rule);
      uintptr_t expected = 0;
      if (__atomic_compare_exchange_n(&slot.pc, &expected, uintptr_t(1), false, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED)) {
        slot.rule = *rule;
        slot.usable = usable;
        __atomic_store_n(&slot.pc, pc, __ATOMIC_RELEASE);
      }
      return usable;
    }
  }
  return compute_rule(pc, rule);  // (no slot left near it: not kept)
}

// ---------------------------------------------------------------------------------------------
// Unit descriptors (hcct/unit_abi.h): what the GCC plugin's units say about their probes, and the
// site tables that expand a machine frame of a stage=early unit into the instrumented functions
// active in it (inlined ones have no frame of their own).

// A site of a unit's table, as looked up: sorted by return address.
struct SortedSite {
  uintptr_t return_address;
  const uint64_t *chain;  // in the loaded module's data
  uint64_t length;
};

enum : uint32_t { kUnsorted = 0, kSorting = 1, kReady = 2 };

struct UnitRecord {
  const unit_abi::Unit *unit;  // null once its module was unloaded
  uint32_t state;               // kUnsorted, kSorting, kReady (published with release)
  bool unwindable;
  SortedSite *sites;            // valid once kReady; never freed (a reader may still hold it)
  uint64_t count;
  uintptr_t lo, hi;             // the sites' return addresses lie in [lo, hi]
};

// Records are appended under g_units_lock and published by g_unit_count; readers need no lock.
// Untouched BSS costs nothing; a program with more units than this has the rest served as units
// without a table.
constexpr uint32_t kMaxUnits = 1u << 16;
UnitRecord g_units[kMaxUnits];
uint32_t g_unit_count = 0;
// The holder's thread pointer, 0 when free: a signal handler can tell that its own thread holds it.
uintptr_t g_units_lock = 0;
bool g_units_fallback = false;  // a registered unit cannot be unwound right (or did not fit)

HCCT_NOINST bool units_try_lock() {
  uintptr_t free = 0;
  return __atomic_compare_exchange_n(&g_units_lock, &free, own_thread_pointer(), false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED);
}
HCCT_NOINST void units_lock() {
  while (!units_try_lock()) sched_yield();
}
HCCT_NOINST void units_unlock() { __atomic_store_n(&g_units_lock, 0, __ATOMIC_RELEASE); }
// Held by the calling thread: an event in a signal handler that interrupted the holder (a dlopen's
// unit registration, a dlclose), which would wait for ever on the lock.
HCCT_NOINST bool units_held_here() { return __atomic_load_n(&g_units_lock, __ATOMIC_RELAXED) == own_thread_pointer(); }

// Whether the machine stack gives the unit's functions right: with its site table (inlined
// functions of stage=early, `.cold` pieces of either stage).
HCCT_NOINST bool unwindable(const unit_abi::Unit *u) {
  return u->version >= unit_abi::kVersionGate && u->version <= unit_abi::kVersion &&
         (u->stage == unit_abi::kStageEarly || u->stage == unit_abi::kStageLate) &&
         (u->flags & unit_abi::kHasSiteTable);
}

// Whether the unit's entry probes count down (clock=count): its module's countdown is known.
HCCT_NOINST bool counts(const unit_abi::Unit *u) {
  return u->version >= 2 && u->version <= unit_abi::kVersion && (u->flags & unit_abi::kCountClock) && u->count_tls;
}

// The loaded object that holds a count unit's descriptor (dl_iterate_phdr; its PT_LOAD segments):
// its TLS module id, load address and a hash of its path. (Not the object's TLS block: glibc gives
// dl_iterate_phdr no address for it in a thread that has not used it since the load.)
struct ObjectName {
  uintptr_t address;
  size_t modid = 0;
  uintptr_t load_address = 0;
  uint64_t path_hash = 0;
  bool operator==(const ObjectName &) const = default;
};

HCCT_NOINST uint64_t path_hash(const char *path) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char *c = path ? path : ""; *c; ++c) h = (h ^ uint8_t(*c)) * 1099511628211ull;
  return h;
}

// Whether `address` lies in one of the object's PT_LOAD segments (with `flags` among its p_flags).
HCCT_NOINST bool object_holds(const dl_phdr_info *info, uintptr_t address, ElfW(Word) flags = 0) {
  uintptr_t relative = address - info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & flags) == flags && relative - ph.p_vaddr < ph.p_memsz) return true;
  }
  return false;
}

HCCT_NOINST void name_object(const dl_phdr_info *info, ObjectName *name) {
  name->modid = info->dlpi_tls_modid;
  name->load_address = info->dlpi_addr;
  name->path_hash = path_hash(info->dlpi_name);
}

HCCT_NOINST int find_object(dl_phdr_info *info, size_t, void *arg) {
  auto *name = static_cast<ObjectName *>(arg);
  if (!object_holds(info, name->address)) return 0;
  name_object(info, name);
  return 1;
}

// Under the module list's lock (dump.h: every dl_iterate_phdr of the runtime; fork).
HCCT_NOINST ObjectName object_holding(const void *address) {
  ObjectName name{reinterpret_cast<uintptr_t>(address)};
  lock_module_list();
  dl_iterate_phdr(find_object, &name);
  unlock_module_list();
  return name;
}

// A count unit's module, once (its units share the module's countdown). Caller holds the units lock.
// Static TLS: the distance from the registering thread's pointer holds for every thread (as for
// kpath's per-thread counters).
HCCT_NOINST void add_count_module(const unit_abi::Unit *u) {
  int64_t *countdown = u->count_tls();
  intptr_t offset = static_tls_offset(countdown);
  uint32_t n = g_count_modules.count;
  // Another unit of a module named since the last dlclose: the static TLS of loaded modules never
  // overlaps, so the offset names the module without walking the loaded objects again (one walk
  // per module, not per unit). The same descriptor again is a new load (below): walked.
  const uint64_t unload_events = __atomic_load_n(&g_count_unload_events, __ATOMIC_SEQ_CST);
  for (uint32_t i = 0; i < n; ++i)
    if (g_count_modules.offset[i] == offset && g_count_modules.live[i] &&
        g_count_modules.named_at[i] == unload_events && g_count_modules.unit[i] != u)
      return;
  // Read after the count, so that a dlclose beginning between the two is seen by one of them. An
  // entry named while a dlclose is under way is never joined so: that dlclose may unload its object
  // before it changes the count again.
  const bool no_dlclose = __atomic_load_n(&g_count_unloading, __ATOMIC_SEQ_CST) == 0;
  ObjectName object = object_holding(u);
  for (uint32_t i = 0; i < n; ++i) {
    if (g_count_modules.offset[i] != offset || !g_count_modules.live[i] ||
        g_count_modules.tls_modid[i] != object.modid || g_count_modules.load_address[i] != object.load_address ||
        g_count_modules.path_hash[i] != object.path_hash)
      continue;  // another module, or an unloaded one whose TLS this module was given
    if (g_count_modules.unit[i] != u) return;  // another unit of the same module: one countdown
    // The same descriptor registers again: a unit registers once per load, so this is a new load of
    // the module at its old place (a dlopen between another thread's dlclose and its forget step),
    // whose countdowns glibc has just zeroed in every thread. The entry is the unloaded module's:
    // threads hold its countdowns' old values (count_armed), which would turn the new load's
    // enters into garbage. A new entry, armed by each thread as a module loaded meanwhile.
    __atomic_store_n(&g_count_modules.live[i], false, __ATOMIC_RELEASE);
    break;
  }
  if (n == CountModules::kMax) {
    // Its countdown is never armed: each of its enters would call in. Counted modules must be all.
    g_gate_units = true;
    return;
  }
  g_count_modules.offset[n] = offset;
  g_count_modules.unit[n] = u;
  g_count_modules.tls_modid[n] = object.modid;
  g_count_modules.load_address[n] = object.load_address;
  g_count_modules.path_hash[n] = object.path_hash;
  g_count_modules.named_at[n] = no_dlclose ? unload_events : CountModules::kNamedDuringDlclose;
  g_count_modules.live[n] = true;
  __atomic_store_n(&g_count_modules.count, n + 1, __ATOMIC_RELEASE);
}


// The sorted copy of a unit's sites, made by the first thread that needs it (mmap'd: the event
// path allocates nothing from the program). A thread that finds another one sorting treats the
// unit as tableless for this walk rather than wait.
HCCT_NOINST bool unit_ready(UnitRecord &r) {
  uint32_t state = __atomic_load_n(&r.state, __ATOMIC_ACQUIRE);
  if (state == kReady) return true;
  if (state == kSorting || !__atomic_compare_exchange_n(&r.state, &state, kSorting, false, __ATOMIC_ACQUIRE,
                                                        __ATOMIC_RELAXED))
    return false;
  const unit_abi::Unit *u = __atomic_load_n(&r.unit, __ATOMIC_ACQUIRE);
  uint64_t n = u && r.unwindable ? u->site_count : 0;
  SortedSite *sites = n ? static_cast<SortedSite *>(map_pages(n * sizeof(SortedSite))) : nullptr;
  if (!sites) n = 0;
  uint64_t kept = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const unit_abi::Site &site = u->sites[i];
    if (uint64_t(site.chain_begin) + site.chain_length > u->chain_count) continue;  // not ours to trust
    sites[kept++] = SortedSite{uintptr_t(site.return_address), u->chains + site.chain_begin, site.chain_length};
  }
  std::sort(sites, sites + kept,
            [](const SortedSite &a, const SortedSite &b) { return a.return_address < b.return_address; });
  r.sites = sites;
  r.count = kept;
  r.lo = kept ? sites[0].return_address : 1;
  r.hi = kept ? sites[kept - 1].return_address : 0;
  __atomic_store_n(&r.state, uint32_t(kReady), __ATOMIC_RELEASE);
  return true;
}

// The site of a stage=early unit whose return address is `ip`, if any. *complete is cleared when a
// unit was skipped because another thread was sorting its table (the answer may then be wrong).
HCCT_NOINST const SortedSite *find_site(uintptr_t ip, bool *complete = nullptr) {
  uint32_t n = __atomic_load_n(&g_unit_count, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < n; ++i) {
    UnitRecord &r = g_units[i];
    if (!r.unwindable || !__atomic_load_n(&r.unit, __ATOMIC_ACQUIRE)) continue;
    if (!unit_ready(r)) {
      if (complete) *complete = false;
      continue;
    }
    if (ip < r.lo || ip > r.hi) continue;
    const SortedSite *begin = r.sites, *end = r.sites + r.count;
    const SortedSite *it = std::lower_bound(
        begin, end, ip, [](const SortedSite &s, uintptr_t a) { return s.return_address < a; });
    if (it != end && it->return_address == ip) return it;
  }
  return nullptr;
}

HCCT_NOINST void switch_to_shadow_locked();

// ---------------------------------------------------------------------------------------------
// The machine-stack unwinder (libgcc's, symbol-free): region start = the function, IP = return
// address, CFA = the caller's stack pointer at the call.

// Bumped whenever something a walk's result depends on besides the stack changes: a unit registered
// or unloaded, a function learnt to be instrumented. A thread's UnwindMemo of an older generation is
// not reused.
uint32_t g_walk_generation = 1;

HCCT_NOINST void new_walk_generation() {
  uint32_t g = __atomic_add_fetch(&g_walk_generation, 1, __ATOMIC_ACQ_REL);
  if (g == 0) __atomic_add_fetch(&g_walk_generation, 1, __ATOMIC_ACQ_REL);  // (0 means "nothing kept")
}

struct Walk {
  uintptr_t sp;
  uintptr_t fn;
  bool exclude_first;
  bool started;
  bool have_pending;
  bool excluded_own;  // the event's own function was left out of the path
  PathEntry pending;
  const SortedSite *pending_site;  // the frame's chain, from its unit's site table
  SortedSite scratch_site;         // the first frame's chain without the event's own function
  ShadowStack *out;
  // The previous walk of the thread (UnwindMemo), if it can be reused: its frames innermost first,
  // the next one to compare, and its path; where this walk's frames are recorded.
  const PathEntry *old_frames;
  size_t old_count;
  size_t old_next;
  const PathEntry *old_path;
  size_t old_depth;
  uintptr_t stack_lo, stack_size;  // the thread's own stack (UnwindMemo)
  ShadowStack *new_frames;
  bool record_ok;  // this walk can be kept for the next one (no signal frame, every table ready)
  uint64_t walked;
  uint64_t reused;
  uint64_t by_rules;  // frames stepped through with the rule table instead of libgcc's unwinder
  bool rules_tried;   // (once per walk: after a failure libgcc's unwinder goes on alone)
};


// Pushes the pending frame (innermost first: the path is reversed at the end). A frame with a
// chain in its unit's table gives the functions active in it, innermost first, all with the
// frame's call site and stack pointer: an inlined function's probes pass the return address and
// CFA of the function it was inlined into.
//
// The stack pointer a frame is tagged with is the one its probes pass: its stack pointer at a probe
// call. The unwinder gives its stack pointer at its call into the frame inside it, which is lower
// when that call pushed stack arguments (a callee of more than six integer arguments) or the frame
// grew by alloca since its probes ran: an exit then found its own frame's tag below its stack
// pointer, popped the frame as stale and counted an unmatched exit (docs/BURSTING.md). Every probe
// of the frame runs above its calls' stack pointers and below its own return address, so the tag
// is raised to just below that (`own_cfa` - 8, `own_cfa` the frame's CFA, known from the frame
// outside it; 0 for the outermost frame, which keeps the unwinder's): an event of the frame or of
// any frame inside it lies at or below the tag, one of a frame outside it above.
HCCT_NOINST void emit(Walk *w, uintptr_t site, uintptr_t own_cfa) {
  if (!w->have_pending) return;
  w->pending.site = site;
  if (own_cfa > w->pending.sp + 8) w->pending.sp = own_cfa - 8;
  if (const SortedSite *chain = w->pending_site) {
    for (uint64_t i = chain->length; i-- > 0;) {
      uintptr_t fn = uintptr_t(chain->chain[i]);
      if (fn) w->out->push_raw(PathEntry{fn, site, w->pending.sp});
    }
  } else if (known(w->pending.fn)) {
    w->out->push_raw(w->pending);
  }
  w->have_pending = false;
}

// Whether the frames old[from..count) are still on the stack as they were: each one's return address
// is still in its slot (just below its stack pointer at its call). Frames are identified by their
// stack pointer and return address; a frame the previous walk saw whose slot still holds the same
// return address, with every frame outside it the same, is the same calling path (the same call
// sites at the same places), hence the same path entries.
HCCT_NOINST bool frames_still_there(const PathEntry *old, size_t from, size_t count) {
  for (size_t k = from; k < count; ++k)  // (the walk's last frame, past the thread's entry, has IP 0)
    if (old[k].fn && *reinterpret_cast<const uintptr_t *>(old[k].sp - 8) != old[k].fn) return false;
  return true;
}

// A frame after the event's own that the previous walk saw too, with everything outside it unchanged:
// the path entries of this frame and of those outside it are the previous walk's. Pushes them and
// records their frames. True if so (the walk ends here).
HCCT_NOINST bool reuse_previous(Walk *w, uintptr_t frame_sp, uintptr_t ip) {
  if (!w->old_frames) return false;
  while (w->old_next < w->old_count && w->old_frames[w->old_next].sp < frame_sp) ++w->old_next;
  size_t c = w->old_next;
  if (c == w->old_count || w->old_frames[c].sp != frame_sp || w->old_frames[c].fn != ip) return false;
  // Only on the thread's own stack, where every slot between here and the outermost frame is
  // mapped (a coroutine's stack may have been unmapped and another mapped at its place).
  if (frame_sp - w->stack_lo - 1 >= w->stack_size ||
      w->old_frames[w->old_count - 1].sp - w->stack_lo - 1 >= w->stack_size ||
      !frames_still_there(w->old_frames, c + 1, w->old_count))
    return false;
  emit(w, ip, frame_sp);  // the frame inside this one, as a walk without the memo would
  size_t inner_new = w->out->depth();
  size_t inner_old = size_t(w->old_frames[c].site);
  if (inner_old > w->old_depth) return false;  // (cannot happen: a kept walk is consistent)
  for (size_t i = w->old_depth - inner_old; i-- > 0;)
    if (!w->out->push_raw(w->old_path[i])) w->record_ok = false;
  for (size_t k = c; k < w->old_count; ++k) {
    const PathEntry &f = w->old_frames[k];
    if (!w->new_frames->push_raw(PathEntry{f.fn, f.site - inner_old + inner_new, f.sp})) w->record_ok = false;
  }
  w->reused = w->old_count - c;
  return true;
}


// A frame after the event's own, at `frame_sp` with return address `ip` in function `start`. True
// if the walk ends here (the previous walk's frames from here on).
HCCT_NOINST bool visit_outer_frame(Walk *w, uintptr_t frame_sp, uintptr_t ip, uintptr_t start, bool before) {
  if (!before && reuse_previous(w, frame_sp, ip)) {
    w->have_pending = false;
    return true;
  }
  const SortedSite *site = before ? nullptr : find_site(ip, &w->record_ok);
  emit(w, ip, frame_sp);  // this frame's IP is the call site of the frame inside it, its CFA-to-be its CFA
  // Kept for the next walk: every frame but the event's own, whose entries depend on the event.
  if (w->new_frames && !w->new_frames->push_raw(PathEntry{ip, uintptr_t(w->out->depth()), frame_sp}))
    w->record_ok = false;
  w->pending = PathEntry{start, 0, frame_sp};
  w->pending_site = site;
  w->have_pending = true;
  return false;
}

// The event's own frame (the first at or above the probe's stack pointer): its function is left
// out of the path, or the innermost function of its chain (an inlined probe's), unless the exit
// probe was tail-called (its frame is then gone and this is its caller's).
HCCT_NOINST void visit_event_frame(Walk *w, uintptr_t frame_sp, uintptr_t ip, uintptr_t start, bool before) {
  w->started = true;
  const SortedSite *site = before ? nullptr : find_site(ip, &w->record_ok);
  bool own_left_out = false;
  if (w->exclude_first) {
    if (site && site->length && uintptr_t(site->chain[site->length - 1]) == w->fn) {
      w->excluded_own = true;
      own_left_out = site->length == 1;
      w->scratch_site = SortedSite{site->return_address, site->chain, site->length - 1};
      site = &w->scratch_site;
    } else if (!site && start == w->fn) {
      w->excluded_own = own_left_out = true;
    }
  }
  if (!own_left_out) {
    emit(w, ip, frame_sp);
    w->pending = PathEntry{start, 0, frame_sp};
    w->pending_site = site;
    w->have_pending = true;
  }
}

// The rest of the walk with the rule table, from the frame at `sp` (its stack pointer at its call)
// with return address `ip` and rbp value `rbp`, already visited: the same frames, in the same order,
// as libgcc's unwinder gives (down to the pseudo-frame with IP 0 after a thread's first frame). True
// if it reached the end; false, with everything it did undone, at a frame without a usable rule or
// off the thread's own stack (libgcc's unwinder then goes on from the same frame).
HCCT_NOINST bool walk_by_rules(Walk *w, uintptr_t ip, uintptr_t sp, uintptr_t rbp) {
  if (!__atomic_load_n(&g_rules, __ATOMIC_RELAXED) || !w->stack_size || sp - w->stack_lo - 1 >= w->stack_size) return false;
  Walk saved = *w;
  size_t out_depth = w->out->depth();
  size_t frames_depth = w->new_frames ? w->new_frames->depth() : 0;
  UnwindRule rule;
  bool done = false, ok = rule_for(ip, &rule);
  while (ok && !done) {
    uintptr_t cfa = (rule.cfa_reg == kDwarfRsp ? sp : rbp) + uintptr_t(intptr_t(rule.cfa_offset));
    // Every slot read lies on the thread's own stack, above the frame.
    if (cfa <= sp || cfa - w->stack_lo - 1 >= w->stack_size) break;
    if (rule.outermost) {  // libgcc reports one more frame, IP 0, in the same function
      ++w->walked;
      visit_outer_frame(w, cfa, 0, rule.start, false);
      done = true;
      break;
    }
    uintptr_t next_ip = *reinterpret_cast<const uintptr_t *>(cfa - 8);
    if (rule.rbp_offset != kRbpUnchanged) {
      uintptr_t slot = cfa + uintptr_t(intptr_t(rule.rbp_offset));
      if (slot - w->stack_lo - 1 >= w->stack_size - 7) break;
      rbp = *reinterpret_cast<const uintptr_t *>(slot);
    }
    ++w->walked;
    ++w->by_rules;
    if (next_ip == 0) {  // (as libgcc: the last frame, its function's start kept)
      visit_outer_frame(w, cfa, 0, rule.start, false);
      done = true;
      break;
    }
    UnwindRule next;
    ok = rule_for(next_ip, &next);
    if (!ok) break;
    ip = next_ip;
    sp = cfa;
    rule = next;
    done = visit_outer_frame(w, sp, ip, rule.start, false);
  }
  if (done) return true;
  // Undone: libgcc's unwinder steps from the same frame.
  uint64_t walked = w->walked;
  *w = saved;
  w->walked = walked;  // (the work was done)
  w->rules_tried = true;
  w->out->pop_to(out_depth);
  if (w->new_frames) w->new_frames->pop_to(frames_depth);
  return false;
}

// The return address of the call to it, the caller's stack pointer at that call and rbp: the first
// frame of a walk by rules (burst_unwind's own), with nothing of libgcc's.
extern "C" __attribute__((naked, noinline, visibility("hidden"))) void hcct_capture_frame(uintptr_t * /*regs: %rdi*/) {
  asm("movq (%rsp), %rax\n\t"
      "movq %rax, (%rdi)\n\t"
      "leaq 8(%rsp), %rax\n\t"
      "movq %rax, 8(%rdi)\n\t"
      "movq %rbp, 16(%rdi)\n\t"
      "ret");
}

// The whole walk with the rule table, from the frame of the caller of hcct_capture_frame (`regs`):
// the runtime's own frames skipped, the event's frame, then walk_by_rules. False at the first frame
// without a usable rule (the caller then starts over with libgcc's unwinder).
HCCT_NOINST bool walk_all_by_rules(Walk *w, const uintptr_t *regs, bool *reached_event) {
  uintptr_t ip = regs[0], sp = regs[1], rbp = regs[2];
  if (!__atomic_load_n(&g_rules, __ATOMIC_RELAXED) || !w->stack_size) return false;
  for (unsigned n = 0; n < 64; ++n) {  // (the runtime's own frames are a handful)
    if (sp - w->stack_lo - 1 >= w->stack_size) return false;
    UnwindRule rule;
    if (!rule_for(ip, &rule)) return false;
    ++w->walked;
    ++w->by_rules;
    if (sp >= w->sp) {
      *reached_event = true;
      visit_event_frame(w, sp, ip, rule.start, false);
      w->rules_tried = false;
      return walk_by_rules(w, ip, sp, rbp);
    }
    if (rule.outermost) return false;
    uintptr_t cfa = (rule.cfa_reg == kDwarfRsp ? sp : rbp) + uintptr_t(intptr_t(rule.cfa_offset));
    if (cfa <= sp || cfa - w->stack_lo - 1 >= w->stack_size) return false;
    if (rule.rbp_offset != kRbpUnchanged) {
      uintptr_t slot = cfa + uintptr_t(intptr_t(rule.rbp_offset));
      if (slot - w->stack_lo - 1 >= w->stack_size - 7) return false;
      rbp = *reinterpret_cast<const uintptr_t *>(slot);
    }
    ip = *reinterpret_cast<const uintptr_t *>(cfa - 8);
    sp = cfa;
  }
  return false;
}

// Called innermost frame first. During _Unwind_Backtrace, _Unwind_GetCFA of a frame's context is
// that frame's own stack pointer at its call into the frame inside it (the CFA of the callee): for a
// program frame, exactly the stack pointer its probes report, hence its tag. The runtime's frames lie
// below the probe's stack pointer `sp`; the first frame at or above it is the event's function (or,
// for an inlined one or a tail-called exit probe, its caller).
//
// After the event's own frame, a frame the thread's previous walk saw, with the frames outside it
// unchanged, ends the walk: the rest of the path is the previous walk's (reuse_previous). From the
// event's frame on, the walk goes on with the rule table (walk_by_rules) where it can.
HCCT_NOINST _Unwind_Reason_Code walk_frame(_Unwind_Context *ctx, void *arg) {
  auto *w = static_cast<Walk *>(arg);
  ++w->walked;
  uintptr_t frame_sp = _Unwind_GetCFA(ctx);
  int before = 0;
  uintptr_t ip = _Unwind_GetIPInfo(ctx, &before);
  if (before) w->record_ok = false;  // a signal frame: its IP is no return address
  if (!w->started && frame_sp < w->sp) return _URC_NO_REASON;  // the runtime's own frames
  if (w->started) {
    if (visit_outer_frame(w, frame_sp, ip, _Unwind_GetRegionStart(ctx), before)) return _URC_END_OF_STACK;
  } else {
    visit_event_frame(w, frame_sp, ip, _Unwind_GetRegionStart(ctx), before);
  }
  if (!before && !w->rules_tried && walk_by_rules(w, ip, frame_sp, _Unwind_GetGR(ctx, kDwarfRbp)))
    return _URC_END_OF_STACK;
  w->rules_tried = true;
  return _URC_NO_REASON;
}

}  // namespace

HCCT_NOINST bool burst_start(const Options &o, bool exact, unsigned char *gate,
                             unsigned char *hook_gate) {
  g_kind = o.burst;
  g_sync = o.burst_sync;
  g_interval_ns = o.burst_interval_ns;
  g_length_ns = o.burst_length_ns;
  g_call_interval_ns = o.burst_schedule_given() ? o.burst_interval_ns : Options::kEventClockIntervalNs;
  g_call_length_ns = o.burst_schedule_given() ? o.burst_length_ns : Options::kEventClockLengthNs;
  g_schedule_given = o.burst_schedule_given();
  // auto with a unit already registered that cannot be unwound right (static links run the units'
  // constructors first): the shadow stack from the start, as with burst_sync=shadow.
  units_lock();
  bool shadow = g_sync == BurstSync::kShadow || (g_sync == BurstSync::kAuto && g_units_fallback);
  if (shadow) g_auto_shadow = true;
  units_unlock();
  g_all_events = exact || shadow;
  // auto opens the gate between bursts too until the first plugin event decides
  // (decide_auto_locked).
  g_gate_flips = !g_all_events && g_sync == BurstSync::kUnwind;
  g_keep_shadow = g_sync != BurstSync::kUnwind;
  if (g_sync != BurstSync::kShadow) {
    g_functions = static_cast<uintptr_t *>(map_pages(kFunctionSlots * sizeof(uintptr_t)));
    g_others = static_cast<uintptr_t *>(map_pages(kFunctionSlots * sizeof(uintptr_t)));
    if (!g_functions || !g_others) return false;
    g_rules = static_cast<RuleSlot *>(map_pages(kRuleSlots * sizeof(RuleSlot)));  // (optional)
  }
  // Every event reaches the runtime and keeps a shadow stack: each thread can count its calls and
  // schedule its own bursts in them (the event clock), which makes every window's sampled fraction
  // the same whatever the in-burst slowdown of the phase (docs/BURSTING.md, "The estimator").
  g_event_clock = g_kind == Burst::kTimer && shadow;
  g_count_possible = g_kind == Burst::kTimer && g_sync != BurstSync::kUnwind;
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
  if (__atomic_load_n(&g_path_versions_registered, __ATOMIC_ACQUIRE)) burst_paths_start();
  return true;
}

HCCT_NOINST void burst_paths_start() {
  lock();
  bool start = g_active && !g_finished && !g_paths && g_kind != Burst::kOff;
  if (start) {
    g_paths = true;
    __atomic_store_n(&__hcct_path_gate, (unsigned char)g_open, __ATOMIC_RELEASE);  // (closed until a burst)
  }
  // On the event clock the calls' bursts need no timer, and versions on the event clock read no
  // gate: the timer starts once a module whose versions read it registers (a shared library's, a
  // time-gate build's), at the latest when it is dlopen'ed.
  bool own_timer = g_paths && !g_finished && !g_path_timer && g_kind == Burst::kTimer && g_event_clock &&
                   __atomic_load_n(&g_path_gate_read, __ATOMIC_ACQUIRE);
  if (own_timer) g_path_timer = true;
  unlock();
  if (own_timer) {
    uint64_t x = monotonic_ns() * 0x9E3779B97F4A7C15ull;
    start_timer(1 + (x ^ (x >> 29)) % (g_interval_ns - g_length_ns + 1));
  }
}

HCCT_NOINST bool burst_paths_active() { return g_paths; }

HCCT_NOINST bool burst_active() { return g_active; }
HCCT_NOINST bool burst_finished() { return __atomic_load_n(&g_finished, __ATOMIC_ACQUIRE); }
HCCT_NOINST bool burst_keeps_shadow() { return g_keep_shadow; }

HCCT_NOINST bool burst_may_unwind() {
  return g_sync == BurstSync::kUnwind ||
         (g_sync == BurstSync::kAuto && __atomic_load_n(&g_auto_machine, __ATOMIC_RELAXED));
}

namespace {

// burst_sync=auto, once a plugin unit turned up whose inlined functions the machine stack cannot
// show (a unit without a site table, an object without a descriptor): the shadow stack for good.
// Undecided until now (the gate was open, every event reached the runtime): before any event was
// processed this is burst_sync=shadow exactly (the event clock, if bursts are on a timer: the
// timer thread stops at its next wake-up); after, the time clock stays, with every event counted.
// After the machine stack was chosen (a unit loaded later), the gate stays open from now on and each
// thread rebuilds its shadow stack from the machine stack once (g_shadow_generation). Caller holds
// the units lock.
HCCT_NOINST void switch_to_shadow_locked() {
  if (g_sync != BurstSync::kAuto || g_auto_shadow) return;
  bool was_machine = g_auto_machine;
  g_auto_shadow = true;
  __atomic_store_n(&g_auto_machine, false, __ATOMIC_RELAXED);
  if (!g_active) return;  // burst_start decides
  lock();
  if (!g_finished) {
    if (was_machine) {
      g_gate_flips = false;
      __atomic_add_fetch(&g_shadow_generation, 1, __ATOMIC_RELEASE);
      __atomic_store_n(&g_burst_between, (unsigned char)!g_open, __ATOMIC_RELEASE);
      __atomic_store_n(&g_hook_gate, kGateProfiling, __ATOMIC_RELEASE);
      __atomic_store_n(&__hcct_gate_local, kGateProfiling, __ATOMIC_RELEASE);
    } else {
      g_all_events = true;
      if (g_kind == Burst::kTimer && !__atomic_load_n(&g_burst_events_seen, __ATOMIC_ACQUIRE)) {
        if (g_open) g_burst_ns += monotonic_ns() - g_opened_ns;
        g_open = false;
        g_event_clock = true;
        uint64_t e = g_burst_epoch;
        __atomic_store_n(&g_burst_epoch, e + ((e & 1) ? 1 : 2), __ATOMIC_RELEASE);
        __atomic_store_n(&g_burst_between, (unsigned char)1, __ATOMIC_RELEASE);
      }
    }
  }
  unlock();
}

// burst_sync=auto at the first plugin event, every unit registered so far unwindable: the machine
// stack; the gate closes between bursts from now on (unless exact=1 needs every event). Caller
// holds the units lock.
HCCT_NOINST void choose_machine_locked() {
  lock();
  __atomic_store_n(&g_auto_machine, true, __ATOMIC_RELAXED);
  if (!g_all_events && !g_finished) {
    __atomic_store_n(&g_machine_chosen, true, __ATOMIC_RELAXED);
    g_gate_flips = true;
    if (!g_open) __atomic_store_n(&__hcct_gate_local, kGateOff, __ATOMIC_RELEASE);
  }
  unlock();
}

}  // namespace

HCCT_NOINST SampleSite burst_sample_site(const BurstThread &b) {
  // The count clock keeps no path between bursts.
  if (__atomic_load_n(&g_count_clock, __ATOMIC_RELAXED)) return b.sampling ? SampleSite::kProfile : SampleSite::kUnknown;
  if (b.shadow_current) return SampleSite::kShadow;
  // A shadow stack is kept between bursts but took nothing over: no event since the profile's last
  // one, whose path is still the thread's.
  if (g_keep_shadow && !burst_may_unwind()) return SampleSite::kProfile;
  // No shadow stack: the profile's path is the thread's only inside a burst it has joined.
  uint64_t e = __atomic_load_n(&g_burst_epoch, __ATOMIC_ACQUIRE);
  return (e & 1) && b.epoch == e ? SampleSite::kProfile : SampleSite::kUnknown;
}

HCCT_NOINST void burst_plugin_probe_seen() {
  if (g_plugin_seen) return;
  // The first plugin event of the process: the units linked in have registered by now. Objects
  // built before unit descriptors send events without having registered anything. A signal
  // handler's event on the lock holder's own thread leaves the choice to a later event.
  if (!units_try_lock()) {
    if (units_held_here()) return;
    units_lock();
  }
  if (g_sync == BurstSync::kAuto && g_active && !g_auto_shadow && !g_auto_machine) {
    if (!__atomic_load_n(&g_unit_count, __ATOMIC_RELAXED) || g_units_fallback)
      switch_to_shadow_locked();
    else
      choose_machine_locked();
  }
  units_unlock();
  __atomic_store_n(&g_plugin_seen, 1, __ATOMIC_RELAXED);
}

// Whether count module i is still the one registered, from inside dl_iterate_phdr: the object that
// holds its descriptor is the one that did at the registration (module id, load address, path),
// and the module's own code (count_tls) finds its countdown at the offset the runtime writes. The
// call into the module is made in the callback, where glibc's write lock on the list of objects
// keeps the object mapped: another thread's dlclose unmaps and unlinks it under that lock, so an
// object found listed cannot be unmapped before the callback returns (glibc's dl-close.c). Called
// after the check, the module's code could have been unmapped meanwhile (issue 16, session 15: two
// threads in dlclose at once). The descriptor's pointer must lie in the object's executable
// segments: an object still being loaded (listed before its relocation) holds link-time values.
struct CountModuleCheck {
  ObjectName registered;
  uintptr_t countdown;  // where the runtime writes the calling thread's countdown
  bool live = false;
};

HCCT_NOINST int check_count_module(dl_phdr_info *info, size_t, void *arg) {
  auto *check = static_cast<CountModuleCheck *>(arg);
  if (!object_holds(info, check->registered.address)) return 0;
  ObjectName found{check->registered.address};
  name_object(info, &found);
  if (found == check->registered) {
    const auto *u = reinterpret_cast<const unit_abi::Unit *>(check->registered.address);
    auto count_tls = u->count_tls;
    check->live = object_holds(info, reinterpret_cast<uintptr_t>(count_tls), PF_X) &&
                  reinterpret_cast<uintptr_t>(count_tls()) == check->countdown;
  }
  return 1;
}

HCCT_NOINST bool count_module_live(uint32_t i, uintptr_t thread_pointer) {
  CountModuleCheck check{{reinterpret_cast<uintptr_t>(g_count_modules.unit[i]), g_count_modules.tls_modid[i],
                          g_count_modules.load_address[i], g_count_modules.path_hash[i]},
                         thread_pointer + uintptr_t(g_count_modules.offset[i])};
  lock_module_list();
  dl_iterate_phdr(check_count_module, &check);
  unlock_module_list();
  return check.live;
}

HCCT_NOINST void burst_forget_unloaded_units() {
  // Not under the units lock: dladdr waits for glibc's loader lock, which a dlopen holds while its
  // constructors register units (and so wait for the units lock): the two would wait for each
  // other (session 15). The records only ever lose their unit here; appends need no care.
  uint32_t n = __atomic_load_n(&g_unit_count, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < n; ++i) {
    const unit_abi::Unit *u = __atomic_load_n(&g_units[i].unit, __ATOMIC_ACQUIRE);
    Dl_info info;
    if (u && !dladdr(u, &info)) __atomic_store_n(&g_units[i].unit, nullptr, __ATOMIC_RELEASE);
  }
  // A count module unloaded: its countdowns are no longer written or read (another library's TLS
  // may take their place). Not told by its descriptor's address alone: a library loaded meanwhile
  // (in the dlclose's destructors, or by another thread once the unload was over) may be mapped
  // where the module was and take its TLS module id and offset (count_module_live). Under the units
  // lock, which only dl_iterate_phdr's lock is taken under (never glibc's loader lock).
  units_lock();
  uintptr_t tp = own_thread_pointer();
  for (uint32_t i = 0; i < g_count_modules.count; ++i)
    if (g_count_modules.live[i] && !count_module_live(i, tp))
      __atomic_store_n(&g_count_modules.live[i], false, __ATOMIC_RELEASE);
  units_unlock();
  new_walk_generation();  // kept walks may name the unloaded code
  // The rules of unloaded code must not serve code loaded at the same addresses later: a fresh
  // table (the old one is never unmapped: another thread may be reading it).
  if (__atomic_load_n(&g_rules, __ATOMIC_ACQUIRE)) {
    if (auto *fresh = static_cast<RuleSlot *>(map_pages(kRuleSlots * sizeof(RuleSlot))))
      __atomic_store_n(&g_rules, fresh, __ATOMIC_RELEASE);
  }
}

namespace {
// The calling thread's own dlcloses under way, of g_count_unloading's (more than one when a
// destructor dlcloses). A forked child's one thread is the forking thread, inside its dlcloses
// still when a destructor forked: those are the child's, and return there.
__thread int t_count_unloading __attribute__((tls_model("initial-exec"))) = 0;

// Both counts change as one for the thread's signal handlers: a handler that forked between the
// two changes would start the child one off, its writes refused for ever (or allowed during its
// dlclose). A dlclose is rare and slow: the two mask changes cost nothing beside it.
HCCT_NOINST void count_unloading_add(int delta) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  __atomic_add_fetch(&g_count_unloading, delta, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&g_count_unload_events, 1, __ATOMIC_SEQ_CST);
  t_count_unloading += delta;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}
}  // namespace

HCCT_NOINST void count_unload_begin() {
  count_unloading_add(1);
  while (__atomic_load_n(&g_count_writers, __ATOMIC_SEQ_CST) > 0) sched_yield();
}
HCCT_NOINST void count_unload_end() { count_unloading_add(-1); }
HCCT_NOINST void count_writes_fork_child() {
  __atomic_store_n(&g_count_writers, 0, __ATOMIC_RELAXED);
  // The other threads' dlcloses are not the child's; the forking thread's own are (a fork from a
  // destructor: before session 16 reset to 0 here, the count ended at -1 when that dlclose returned).
  __atomic_store_n(&g_count_unloading, t_count_unloading, __ATOMIC_RELAXED);
}

HCCT_NOINST size_t burst_unit_count() { return __atomic_load_n(&g_unit_count, __ATOMIC_ACQUIRE); }

HCCT_NOINST bool burst_unit_unwinds(uintptr_t return_address, uintptr_t *chain, size_t max, size_t *length) {
  const SortedSite *site = find_site(return_address);
  if (!site) return false;
  *length = 0;
  for (uint64_t i = 0; i < site->length && *length < max; ++i) chain[(*length)++] = uintptr_t(site->chain[i]);
  return true;
}

HCCT_NOINST bool burst_events_known() {
  // auto: every event reached the runtime unless the machine stack was chosen at some point.
  return g_all_events || (g_sync == BurstSync::kAuto && !__atomic_load_n(&g_machine_chosen, __ATOMIC_RELAXED));
}

HCCT_NOINST void burst_learn(uintptr_t fn) {
  if (g_functions && !set_contains(g_functions, fn)) {
    set_insert(g_functions, fn);
    new_walk_generation();  // a frame of fn may have been left out of a kept walk
  }
}

HCCT_NOINST size_t burst_unwind(ShadowStack &scratch, uintptr_t fn, uintptr_t sp, bool torn_down,
                                bool *excluded_own, UnwindMemo *memo) {
  scratch.clear();
  Walk w{};
  w.sp = sp;
  w.fn = fn;
  w.exclude_first = !torn_down;
  w.out = &scratch;
  uint32_t generation = __atomic_load_n(&g_walk_generation, __ATOMIC_ACQUIRE);
  if (memo && !memo->walking.ready() && !memo->init()) {
    memo->destroy();
    memo = nullptr;
  }
  w.record_ok = memo != nullptr;
  w.new_frames = memo ? &memo->walking : nullptr;
  if (memo) {
    memo->walking.clear();
    w.stack_lo = memo->stack_lo;
    w.stack_size = memo->stack_size;
    if (memo->generation == generation) {
      w.old_frames = memo->frames.path();
      w.old_count = memo->frames.depth();
      w.old_path = memo->path.path();
      w.old_depth = memo->path.depth();
    }
  }
  // The rule table from the first frame on; where it cannot, libgcc's unwinder from the start (which
  // goes back to the table from the event's frame on where it can).
  uintptr_t regs[3];
  hcct_capture_frame(regs);
  Walk start = w;
  bool reached_event = false;
  if (!walk_all_by_rules(&w, regs, &reached_event)) {
    uint64_t walked = w.walked;
    w = start;
    w.walked = walked;
    w.rules_tried = reached_event;  // (the table failed past the event's frame: libgcc's alone)
    scratch.clear();
    if (w.new_frames) w.new_frames->clear();
    _Unwind_Backtrace(walk_frame, &w);
  }
  emit(&w, 0, 0);
  scratch.reverse();
  if (excluded_own) *excluded_own = w.excluded_own;
  if (memo) {
    memo->frames_walked += w.walked;
    memo->frames_reused += w.reused;
    memo->frames_by_rules += w.by_rules;
    memo->generation = 0;
    if (w.record_ok) {
      ShadowStack kept = memo->frames;
      memo->frames = memo->walking;
      memo->walking = kept;
      memo->path.clear();
      const PathEntry *path = scratch.path();
      bool copied = true;
      for (size_t i = 0; i < scratch.depth() && copied; ++i) copied = memo->path.push_raw(path[i]);
      if (copied) memo->generation = generation;
    }
  }
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

HCCT_NOINST std::optional<bool> burst_count_decide() {
  if (__atomic_load_n(&g_count_decided, __ATOMIC_ACQUIRE)) return g_count_clock;
  // Not units_lock() nor lock(): a signal handler's first count event may interrupt the holder of
  // either on the same thread (a dlopen's unit registration, a dlclose; a fork's prepare handler,
  // the dump's time fraction), which would never release it. Left undecided, the event's countdown
  // stays negative and its next enter calls in again.
  if (!units_try_lock()) return std::nullopt;
  if (!g_count_decided) {
    // Every unit registered so far counts, and can be unwound right (its site table); nothing was
    // processed yet on another clock.
    bool chosen = g_count_possible && g_active && g_count_modules.count && !g_gate_units && !g_units_fallback &&
                  !__atomic_load_n(&g_burst_events_seen, __ATOMIC_ACQUIRE);
    if (chosen) {  // (kept for the next attempt when the lock below is busy)
      if (!g_functions) g_functions = static_cast<uintptr_t *>(map_pages(kFunctionSlots * sizeof(uintptr_t)));
      if (!g_others) g_others = static_cast<uintptr_t *>(map_pages(kFunctionSlots * sizeof(uintptr_t)));
      if (!g_rules) g_rules = static_cast<RuleSlot *>(map_pages(kRuleSlots * sizeof(RuleSlot)));  // (optional)
      chosen = g_functions && g_others;
    }
    if (chosen && !try_lock()) {
      units_unlock();
      return std::nullopt;
    }
    if (chosen) {
      // The event clock's estimator and schedule (the dump's burst_clock=events), each thread's own;
      // a time-clock timer (auto) stops at its next wake-up, and its burst, if one is open, ends.
      if (g_open) g_burst_ns += monotonic_ns() - g_opened_ns;
      g_open = false;
      g_event_clock = true;
      g_all_events = true;
      g_gate_flips = false;
      __atomic_store_n(&g_auto_shadow, true, __ATOMIC_RELAXED);
      __atomic_store_n(&g_auto_machine, false, __ATOMIC_RELAXED);
      if (!g_schedule_given) {  // the count clock's own default (no thread has scheduled yet)
        g_call_interval_ns = Options::kCountClockIntervalNs;
        g_call_length_ns = Options::kCountClockLengthNs;
      }
      unlock();
      __atomic_store_n(&g_count_clock, true, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&g_count_decided, true, __ATOMIC_RELEASE);
  }
  units_unlock();
  return g_count_clock;
}
HCCT_NOINST uint64_t burst_now_ns() { return monotonic_ns(); }

HCCT_NOINST void burst_schedule_first(BurstThread &b, uint64_t seed) {
  uint64_t now = monotonic_ns();
  b.clock_started_ns = now;
  b.schedule_first(seed ^ now, g_call_interval_ns, g_call_length_ns);
}

HCCT_NOINST double burst_thread_time_fraction(const BurstThread &b) {
  uint64_t now = monotonic_ns();
  uint64_t in_bursts = b.burst_ns + (b.sampling ? now - b.burst_started_ns : 0);
  uint64_t total = b.clock_started_ns ? now - b.clock_started_ns : 0;
  return total ? double(in_bursts) / double(total) : 0.0;
}

HCCT_NOINST const char *burst_kind_name() { return g_kind == Burst::kManual ? "manual" : "timer"; }
HCCT_NOINST const char *burst_sync_option() {
  return __atomic_load_n(&g_count_clock, __ATOMIC_RELAXED) ? "count" : burst_sync_name(g_sync);
}
HCCT_NOINST uint64_t burst_interval_ns() { return g_interval_ns; }
HCCT_NOINST uint64_t burst_length_ns() { return g_length_ns; }
HCCT_NOINST uint64_t burst_call_interval_ns() { return g_event_clock ? g_call_interval_ns : g_interval_ns; }
HCCT_NOINST uint64_t burst_call_length_ns() { return g_event_clock ? g_call_length_ns : g_length_ns; }

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
  if (g_kind == Burst::kTimer && (!g_event_clock || g_path_timer) && !g_finished) start_timer(0);
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

// Unit descriptors (hcct/unit_abi.h, docs/RUNTIME-ABI.md "Unit descriptors"): called by the
// constructor of each unit the GCC plugin built, possibly before the runtime's own constructor
// (static links). Keeps the pointer; the site table is sorted when a burst first needs it.
HCCT_EXPORT void __hcct_register_unit(const void *descriptor) {
  using namespace hcct::rt;
  const auto *u = static_cast<const hcct::unit_abi::Unit *>(descriptor);
  if (!u) return;
  units_lock();
  bool fits = g_unit_count < kMaxUnits;
  bool right = unwindable(u);
  if (fits) {
    UnitRecord &r = g_units[g_unit_count];
    r = UnitRecord{};
    r.unit = u;
    r.unwindable = right;
    __atomic_store_n(&g_unit_count, g_unit_count + 1, __ATOMIC_RELEASE);
  }
  if (!fits || !right) {
    g_units_fallback = true;
    switch_to_shadow_locked();
  }
  if (counts(u)) add_count_module(u);
  else g_gate_units = true;
  units_unlock();
  new_walk_generation();  // a new table may expand frames of kept walks
}
