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

inline constexpr uint32_t kVersion = 1;

// Where the unit's probes come from (-fplugin-arg-hcct_plugin-stage=).
inline constexpr uint32_t kStageEarly = 1;  // before inlining: inlined copies keep their probes
inline constexpr uint32_t kStageLate = 2;   // after inlining: every instrumented function has a frame

// Unit::flags
inline constexpr uint32_t kHasSiteTable = 1;  // sites/chains below are the unit's complete table

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
};

// Byte offsets the plugin writes the descriptor at (it emits assembly, not C).
inline constexpr size_t kUnitSize = 48;
inline constexpr size_t kSiteSize = 16;
static_assert(sizeof(Unit) == kUnitSize && offsetof(Unit, sites) == 16 && offsetof(Unit, site_count) == 24 &&
              offsetof(Unit, chains) == 32 && offsetof(Unit, chain_count) == 40);
static_assert(sizeof(Site) == kSiteSize && offsetof(Site, chain_begin) == 8 && offsetof(Site, chain_length) == 12);

// void __hcct_register_unit(const Unit *unit): called by the unit's constructor (priority 1), after
// it has pointed the unit's gate pointer at __hcct_gate, only if the runtime defines it (a weak
// reference). The runtime keeps the pointer (the descriptor is read-only data of the loaded module)
// and forgets it when the module is unloaded (dlclose). Objects without a descriptor (built before
// it, or with -flto) keep working: their probes are served as before, and burst_sync=auto keeps a
// shadow stack for them.
inline constexpr char kRegisterSymbol[] = "__hcct_register_unit";

}  // namespace hcct::unit_abi

#endif
