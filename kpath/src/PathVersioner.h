// Two versions of an instrumented function body for static bursting of path profiles (Arnold and
// Ryder's duplicated code; docs/KPATH.md, "Bursting"): the instrumented body and an
// uninstrumented copy, with a test of the gate (__hcct_path_gate, hcct/kpath_abi.h) at the
// function's entry and on every back edge of either copy, where Ball-Larus paths start, so that
// switching copies there starts a fresh path in either direction and a long-running loop can
// enter or leave a burst. Both copies count the function's entries and each loop's back-edge
// traversals in per-function counters: the exact totals the estimator scales sampled counts by.
//
// Use, per function:
//   PathVersioner v(f, api);
//   if (v.prepare()) { ...build the DAG, instrument with run(/*promote=*/false)...; v.finish(dag, inst); }
// prepare() demotes the SSA values that live across blocks to stack slots (so that control can
// move between the copies at any block boundary) and clones the body into an unreachable copy
// that the DAG, the metadata and the instrumenter never see; finish() wires the gate tests and
// counters, then promotes the slots back to registers. VersionApi::emit_table() writes the
// module's VersionTable and the constructor/destructor that register it with the runtime.
#pragma once

#include <cstdint>
#include <vector>

#include "FunctionDag.h"
#include "PathInstrumenter.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

namespace hcct::kpath {

// The module-level part: the runtime symbols and the table of versioned functions.
class VersionApi {
 public:
  explicit VersionApi(llvm::Module &m);
  llvm::GlobalVariable *gate() const { return gate_; }
  llvm::FunctionCallee switch_fn() const { return switch_; }
  // Counters of one function, one per start point (entry first, then the headers), recorded in
  // the table.
  llvm::GlobalVariable *add_function(uint64_t function_id, const std::vector<uint32_t> &start_blocks);
  // The table and its constructor/destructor; nothing if no function was added.
  void emit_table();

 private:
  struct Entry {
    uint64_t function_id;
    std::vector<uint32_t> start_blocks;
    llvm::GlobalVariable *counters;
  };
  llvm::Module &m_;
  llvm::GlobalVariable *gate_;
  llvm::FunctionCallee switch_;
  std::vector<Entry> entries_;
};

class PathVersioner {
 public:
  PathVersioner(llvm::Function &f, VersionApi &api) : f_(f), api_(api) {}
  // False (nothing changed) for bodies that cannot be duplicated safely here: indirectbr, callbr,
  // block addresses, token values across blocks. The function is then instrumented unversioned.
  bool prepare();
  // After `inst` instrumented the original body (without promoting its registers).
  void finish(const FunctionDag &dag, const PathInstrumenter &inst, uint64_t function_id);
  // When the function is not instrumented after all: drops the copy, promotes the slots.
  void abandon();

 private:
  static bool supported(const llvm::Function &f);
  void demote();

  llvm::Function &f_;
  VersionApi &api_;
  llvm::ValueToValueMapTy map_;                // original block -> its uninstrumented copy
  std::vector<llvm::BasicBlock *> originals_;  // the blocks before cloning
  std::vector<llvm::AllocaInst *> slots_;      // demoted values, promoted again by finish()
};

}  // namespace hcct::kpath
