// The contract between the kpath pass's inline fast path (kpath/src/PathInstrumenter.cpp, which
// emits loads and stores at these word offsets and calls these symbols) and the runtime
// (libhcct/kpath_forest.h, whose KsfNode and PathFrame static_assert against it;
// libhcct/kpath_runtime.cc, which defines the symbols). docs/RUNTIME-ABI.md describes it.
// Depends on nothing but <stdint.h>/<stddef.h>: the pass includes it without the runtime.
#ifndef HCCT_KPATH_ABI_H
#define HCCT_KPATH_ABI_H

#include <stddef.h>
#include <stdint.h>

namespace hcct::kpath_abi {

// A forest node: kNodeWords 64-bit words, one cache line. The fast path reads the label and the
// guesses, increments the count, and for an activation's first item reads a root's function.
inline constexpr unsigned kNodeWords = 8;
inline constexpr unsigned kPathWord = 0;          // the node's label: a path ID (~0 in the sentinel)
inline constexpr unsigned kCountWord = 1;
inline constexpr unsigned kGuessWord = 2;         // guess[0]; guess[1] is the next word
inline constexpr unsigned kRootFunctionWord = 5;  // a root's function ID
// A path frame (one activation's window): the node, then the owner token.
inline constexpr unsigned kFrameWords = 2;
inline constexpr unsigned kFrameNodeWord = 0;
inline constexpr unsigned kFrameOwnerWord = 1;

// The per-thread root cache: a direct-mapped table of kRootCacheSize roots, root r at
// root_slot(F, r's path ID) = (root_base(F) + id) mod kRootCacheSize. The base is a constant of the
// function that the pass computes at compile time, so an activation's first item pays an add and a
// mask, not a hash of the ID (the two multiplies of version 2: docs/BENCHMARKS.md, "Path profiling
// on real programs"); a function's paths take consecutive entries, so up to kRootCacheSize of
// them never collide with each other. Version 4: 1024 entries (8 KB of static TLS per thread), where
// version 3 had 256: tcc's first items missed the smaller table 3.56 M times at k = 8, of which a
// table of 1024 would have held 3.47 M, and Lua's 0.67 M of 0.67 M (docs/BENCHMARKS.md, "Seventh
// pass").
inline constexpr unsigned kRootCacheBits = 10;
inline constexpr size_t kRootCacheSize = size_t(1) << kRootCacheBits;
inline constexpr uint64_t kRootHashMultiplier = 0xd6e8feb86659fd93ull;
constexpr uint64_t root_base(uint64_t function) { return (function * kRootHashMultiplier) >> (64 - kRootCacheBits); }
constexpr size_t root_slot(uint64_t function, uint64_t id) {
  return size_t((root_base(function) + id) & (kRootCacheSize - 1));
}

// The runtime's symbols. The token and the root cache are initial-exec TLS. The token is opaque to
// the pass (it is only compared with a frame's owner word): the runtime hands out one per thread
// state and, for a bounded forest, a new one at each sweep, so that windows of an earlier epoch
// leave the fast path (docs/KPATH.md, "Bounded forests"). Nothing the pass emits depends on it.
inline constexpr char kSlowSymbol[] = "__hcct_path_slow";       // void (PathFrame *, fn, id, slot)
inline constexpr char kTokenSymbol[] = "__hcct_path_token";     // __thread uint64_t
inline constexpr char kRootsSymbol[] = "__hcct_path_roots_v4";  // __thread KsfNode *[kRootCacheSize]
// Nonzero while the thread's profiler counts Ball-Larus paths (k = 1), where every item is a root:
// the fast path then tries the root cache when neither guess is the item, instead of calling the
// runtime (issue 24). Read only on that miss; an object built before it existed still links and
// runs (its misses call the runtime), one built after needs a runtime that defines it.
inline constexpr char kBlppSymbol[] = "__hcct_path_blpp";       // __thread uint64_t

// Static bursting of path profiles (docs/KPATH.md, "Bursting"). A module built with
// `-kpath-burst=1` keeps two copies of every instrumented body: the instrumented one and an
// uninstrumented one. Both test the gate at the function's entry and on every back edge (where
// Ball-Larus paths start) and continue in the copy the gate names, so a long-running loop enters
// and leaves bursts too. Both copies count, per function, its entries and each loop header's
// back-edge traversals in the module's own counters (plain 64-bit increments, no lock): the exact
// totals that scale each root's sampled counts (the estimator).
//   unsigned char __hcct_path_gate: nonzero = run the instrumented copy. 1 unless bursting; with
//     burst=1 the runtime opens it during bursts. Read with a volatile byte load.
//   void __hcct_path_switch(uint64_t kind): called when an activation changes copies at a back
//     edge (kSwitchJoin: uninstrumented -> instrumented, its window starts empty; kSwitchLeave: the
//     other way, its window ends), so that the cut windows are counted per thread.
//   void __hcct_path_register_versions(const VersionTable *): from the module's constructor;
//   void __hcct_path_unregister_versions(const VersionTable *): from its destructor (dlclose, exit):
//     the runtime keeps a copy of the counters from then on.
inline constexpr char kGateSymbol[] = "__hcct_path_gate";
inline constexpr char kSwitchSymbol[] = "__hcct_path_switch";
inline constexpr char kRegisterVersionsSymbol[] = "__hcct_path_register_versions";
inline constexpr char kUnregisterVersionsSymbol[] = "__hcct_path_unregister_versions";
inline constexpr uint64_t kSwitchJoin = 0;
inline constexpr uint64_t kSwitchLeave = 1;
// The event clock (an executable's module, -kpath-burst-event-clock=1, the default there): instead
// of reading the gate, every start point decrements the thread's countdown, a local-exec TLS word of
// the executable (`subq $1, %fs:__hcct_kpath_countdown@tpoff; js`), so that bursts are counted in
// path starts per thread, not in time, and every start is sampled with one probability whatever its
// phase runs at (docs/KPATH.md, "The event clock"). One word per thread for all of the executable's
// translation units (hidden, in a COMDAT group of its name): each unit's own word made each unit's
// first start in a thread look like the end of a gap, opening a burst there. Its value says where
// the thread is:
//   >= 0: between bursts, that many starts before the next one;
//   in (kCountdownOpenEnd, -1): in a burst, (value - kCountdownOpenEnd) starts before it ends;
//   -1 or <= kCountdownOpenEnd after a decrement: the period is over: the code calls
//   uint8_t __hcct_path_tick(int64_t *countdown), which starts the next period (the runtime sets
//   the word) and returns 1 if it is a burst. The uninstrumented copy calls it whenever the word
//   is below zero (its one test is the sign: no range constants in its loops); the tick then
//   returns 1 and leaves a word in a burst as it is. The word starts at 0, so a thread's first start calls
//   the runtime, which then knows the thread (its counters reach a file even if no burst sampled it).
inline constexpr char kTickSymbol[] = "__hcct_path_tick";
inline constexpr char kCountdownSymbol[] = "__hcct_kpath_countdown";
inline constexpr int64_t kCountdownOpenEnd = -(int64_t(1) << 62);
// Whether a countdown (after its decrement) says "in a burst" without asking the runtime:
// kCountdownOpenEnd < value < -1, which the pass emits as one unsigned compare (the one definition:
// kpath/src/PathVersioner.cpp builds its test from these constants).
inline constexpr int64_t kCountdownBurstLow = kCountdownOpenEnd + 1;
inline constexpr uint64_t kCountdownBurstSpan = uint64_t(int64_t(-2) - kCountdownBurstLow);
constexpr bool countdown_open(int64_t value) {
  return uint64_t(value) - uint64_t(kCountdownBurstLow) <= kCountdownBurstSpan;
}
static_assert(countdown_open(kCountdownOpenEnd + 1) && countdown_open(-2));
static_assert(!countdown_open(kCountdownOpenEnd) && !countdown_open(-1) && !countdown_open(0) &&
              !countdown_open(INT64_MIN) && !countdown_open(INT64_MAX));
// Version 2 adds the per-thread counters (thread_counters, thread_words); version 3 the flags. The
// runtime still reads version 1 tables (process-wide counters only) and takes a table before version
// 3 as one whose code reads the gate.
inline constexpr uint64_t kVersionTableVersion = 3;
// VersionTable::flags: the module's versions follow the event clock (its countdown) and never read
// __hcct_path_gate, so the runtime needs no timer for them: a program whose every versioned module
// is on the event clock runs no thread of the runtime's.
inline constexpr uint64_t kVersionEventClock = 1;

// One versioned function: its counters, one per start point of its Ball-Larus paths: the entry
// (DAG block 0) and each loop header reached by a back edge (its DAG block index).
struct VersionFunction {
  uint64_t function_id;
  uint64_t starts;
  uint64_t *counters;             // [starts]; null when the table's counters are per thread
  const uint32_t *start_blocks;   // [starts], ascending, start_blocks[0] == 0
};
// Per-thread counters (version 2, an executable's module: thread_counters non-null): the module's
// counters are one thread-local array of thread_words words (initial-exec/local-exec TLS, so that
// an increment stays one instruction, `addq $1, %fs:off`), the functions' counters consecutive in
// it in table order. thread_counters() returns the calling thread's array; being static TLS, every
// thread's array is at the same distance from its thread pointer, so the runtime reads another
// thread's (the final dump) at that thread's pointer plus the distance. No thread shares a cache
// line of counters with another, and no increment is lost to a race.
struct VersionTable {
  uint64_t version;  // kVersionTableVersion (1: the first three fields only)
  uint64_t functions;
  const VersionFunction *function;
  uint64_t *(*thread_counters)();  // null: process-wide counters (VersionFunction::counters)
  uint64_t thread_words;
  uint64_t flags;                  // version 3: kVersionEventClock
};

// BLPP counter arrays (issue 24: BLPP as real path profilers do it). A function with at most
// kMaxCounterPaths paths gets a counter per path ID in its module's counter array, one array per
// thread that the runtime maps when the thread's first item of the module arms it (pages cost
// memory only once touched). The module's own thread-local words (`hcct.kpath.counters`, an
// internal __thread uint64_t[kCountersTlsWords]) hold the thread's array pointers and state:
//   word kCountersAllWord:      the array while the thread's profiler is BLPP (k = 1), else null;
//   word kCountersLoopFreeWord: the array whenever the thread is armed and not tracing, else null;
//   word kCountersStateWord:    kCountersUnset until the runtime armed the module for the thread.
// A function without loops (one item per activation, so that its part of any forest is its roots,
// i.e. BLPP counters at every k) ends each path with `if (p = words[LoopFree]) ++p[offset(F) + id];
// else kCountedSymbol(...)`; a function with loops does the same with words[All] on an activation's
// first item (its window stays null at k = 1, so that is every item), asking the runtime through
// kCountersSymbol when the state is unset. No runtime call, no hash. `table` is the module's
// constant descriptor: kCounterTableHeaderWords words {kCounterTableVersion, functions, array
// words}, then per function {function ID, offset, paths} (offsets from 1).
inline constexpr char kCountersSymbol[] = "__hcct_path_counters";  // void (const uint64_t *table, uint64_t *tls)
// An item of a function without loops whose loop-free pointer is null: the runtime arms the module
// if its state is unset and then counts the item at offset + id of the thread's array if that
// pointer is now set, else takes it as the activation's first item in `frame` (a PathFrame, which
// it resets: the activation has no other item).
inline constexpr char kCountedSymbol[] = "__hcct_path_counted";  // void (table, tls, offset, frame, fn, id)
// The same three entries with LLVM's preserve_most convention (x86-64: the callee keeps every
// general-purpose register but r11), which the pass calls there: a site then spills and reloads
// nothing around its cold runtime calls, so each site is smaller and cheaper to compile
// (docs/KPATH.md, "Compile time"). The runtime's trampolines save the registers the C convention
// lets the C entries clobber.
inline constexpr char kSlowSavingSymbol[] = "__hcct_path_slow_pm";
inline constexpr char kCountersSavingSymbol[] = "__hcct_path_counters_pm";
inline constexpr char kCountedSavingSymbol[] = "__hcct_path_counted_pm";
inline constexpr unsigned kCountersTlsWords = 3;
inline constexpr unsigned kCountersAllWord = 0;
inline constexpr unsigned kCountersLoopFreeWord = 1;
inline constexpr unsigned kCountersStateWord = 2;
inline constexpr uint64_t kCountersUnset = 0;
inline constexpr uint64_t kCountersArmed = 1;
inline constexpr uint64_t kCountersOff = 2;  // tracing, no memory, or an unknown table version
inline constexpr uint64_t kCounterTableVersion = 1;
inline constexpr unsigned kCounterTableHeaderWords = 3;
inline constexpr unsigned kCounterEntryWords = 3;
// The default bounds (the pass's -kpath-counter-paths and -kpath-counter-words override them):
// paths per function (an array is never slower than the root table, only larger: Lua's
// luaV_execute has 48 790 paths), and words per module's array (virtual memory: a thread's
// array costs memory for the pages its counts touch).
inline constexpr uint64_t kMaxCounterPaths = uint64_t(1) << 16;
inline constexpr uint64_t kMaxCounterWords = uint64_t(1) << 21;

}  // namespace hcct::kpath_abi

#endif
