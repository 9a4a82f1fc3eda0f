// The contract between the GCC plugin's per-unit descriptor (gcc-plugin/hcct_plugin.cc, which
// writes it in assembly at the end of each instrumented unit and registers it from the unit's
// constructor) and the runtime (libhcct/burst_runtime.cc, which defines the entry and reads the
// descriptor). docs/RUNTIME-ABI.md, "Unit descriptors", describes it. Depends on nothing but
// <stdint.h>: the plugin includes it without the runtime.
//
// Why: with static bursting and the gate closed between bursts, a burst start rebuilds the thread's
// calling path from the machine stack. That is right only if every instrumented function active on
// the stack has a machine frame of its own, which holds for probes inserted after inlining
// (stage=late) but not before it (stage=early: an inlined copy keeps its probes and has no frame).
// A unit tells the runtime which stage its probes come from and gives the table that expands a
// machine frame into the instrumented functions active in it (inlined ones with stage=early; the
// function of a `.cold` piece, whose frame starts elsewhere, with either stage). A unit is unwound
// from the machine stack only with its table.
#ifndef HCCT_UNIT_ABI_H
#define HCCT_UNIT_ABI_H

#include <stddef.h>
#include <stdint.h>

namespace hcct::unit_abi {

// Version 2 adds Unit::count_tls (units built with -fplugin-arg-hcct_plugin-clock=count); a runtime
// reads versions 1 and 2, and the plugin still writes version 1 for units with the gate probe.
inline constexpr uint32_t kVersion = 2;
inline constexpr uint32_t kVersionGate = 1;

// Where the unit's probes come from (-fplugin-arg-hcct_plugin-stage=).
inline constexpr uint32_t kStageEarly = 1;  // before inlining: inlined copies keep their probes
inline constexpr uint32_t kStageLate = 2;   // after inlining: every instrumented function has a frame

// Unit::flags
inline constexpr uint32_t kHasSiteTable = 1;  // sites/chains below are the unit's complete table
inline constexpr uint32_t kCountClock = 2;    // the unit's entry probes count down (count_tls below)

// One call instruction of the unit's final code whose active instrumented functions are not simply
// "the function the machine frame belongs to": `return_address` is the address right after the
// call (what the callee's frame sees as its return address, for a probe call too), and the chain
// of functions active there, outermost first, is chains[chain_begin .. chain_begin + chain_length).
// Calls not listed have the natural chain: the function at the frame's region start, if it is
// instrumented. Listed are calls in inlined instrumented code, in a hot/cold function's `.cold`
// part, in clones whose probes name the original (`f.constprop.0` passes `&f`), in ipa-split
// `.part` pieces (whose function's enter probe ran in the caller's frame: not repeated here), and
// calls that run after the frame's own exit probe (an empty chain: a stage=late call in tail
// position that gcc emitted as an ordinary call). A chain names each function by what its probes
// pass: for an inlined C++ constructor, the clone inlined (C1/C2), not the abstract one.
struct Site {
  uint64_t return_address;
  uint32_t chain_begin;
  uint32_t chain_length;
};

// The unit's descriptor. A chain element is a function's address as its probes pass it (&this_fn),
// or 0 for an element the runtime must skip.
struct Unit {
  uint32_t version;  // kVersion
  uint32_t stage;    // kStageEarly or kStageLate
  uint32_t flags;
  uint32_t reserved;  // 0
  const Site *sites;  // in no particular order; the runtime sorts a copy
  uint64_t site_count;
  const uint64_t *chains;
  uint64_t chain_count;
  // Version 2, kCountClock: returns the calling thread's address of the module's countdown
  // (kCountdownSymbol; its exit gate is the byte at kExitGateOffset from it). Static TLS: the same
  // distance from every thread's pointer, as kpath's per-thread counters (hcct/kpath_abi.h).
  int64_t *(*count_tls)(void);
};

// Byte offsets the plugin writes the descriptor at (it emits assembly, not C).
inline constexpr size_t kUnitSizeGate = 48;  // version 1
inline constexpr size_t kUnitSize = 56;
inline constexpr size_t kSiteSize = 16;
static_assert(sizeof(Unit) == kUnitSize && offsetof(Unit, sites) == 16 && offsetof(Unit, site_count) == 24 &&
              offsetof(Unit, chains) == 32 && offsetof(Unit, chain_count) == 40 && offsetof(Unit, count_tls) == 48);
static_assert(sizeof(Site) == kSiteSize && offsetof(Site, chain_begin) == 8 && offsetof(Site, chain_length) == 12);

// void __hcct_register_unit(const Unit *unit): called by the unit's constructor (priority 1), after
// it has pointed the unit's gate pointer at __hcct_gate, only if the runtime defines it (a weak
// reference). The runtime keeps the pointer (the descriptor is read-only data of the loaded module)
// and forgets it when the module is unloaded (dlclose). Objects without a descriptor (built before
// it, or with -flto) keep working: their probes are served as before, and burst_sync=auto keeps a
// shadow stack for them.
inline constexpr char kRegisterSymbol[] = "__hcct_register_unit";

// The count clock (clock=count; docs/RUNTIME-ABI.md, "The count clock"). Per module, in a comdat
// group so that all its units share them, hidden, static TLS (local-exec in an executable,
// initial-exec in a shared library):
//   int64_t __hcct_countdown;             -- 0 in every new thread (the TLS image)
//   unsigned char __hcct_count_exit_gate; -- at kExitGateOffset from it; 0 in every new thread
// The entry probe is `if (--__hcct_countdown < 0) __hcct_count_miss(&this_fn, call_site)`, the exit
// probe `if (__hcct_count_exit_gate) __hcct_exit_count(&this_fn)`. __hcct_count_miss (hidden, the
// module's own) jumps to the runtime's __hcct_enter_count (a weak reference) if it is there, else
// sets the countdown to INT64_MAX: a program without the runtime calls it once per thread. The
// runtime arms each thread's countdowns and exit gates (the first enter of a new thread, or of a
// module dlopen'ed later, calls in, its countdown being 0).
inline constexpr char kCountdownSymbol[] = "__hcct_countdown";
inline constexpr char kCountExitGateSymbol[] = "__hcct_count_exit_gate";
inline constexpr char kCountMissSymbol[] = "__hcct_count_miss";
inline constexpr char kCountTlsSymbol[] = "__hcct_count_tls";
inline constexpr char kEnterCountSymbol[] = "__hcct_enter_count";  // void (void *fn, void *call_site)
inline constexpr char kExitCountSymbol[] = "__hcct_exit_count";    // void (void *fn)
inline constexpr size_t kExitGateOffset = 8;

}  // namespace hcct::unit_abi

#endif
