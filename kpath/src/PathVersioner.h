// Two versions of an instrumented function body for static bursting of path profiles (Arnold and
// Ryder's duplicated code; docs/KPATH.md, "Bursting"): the instrumented body and an
// uninstrumented copy, with a test of the gate (__hcct_path_gate, hcct/kpath_abi.h) at the
// function's entry and on every back edge of either copy, where Ball-Larus paths start, so that
// switching copies there starts a fresh path in either direction and a long-running loop can
// enter or leave a burst. Both copies count the function's entries and each loop's back-edge
// traversals in per-function counters: the exact totals the estimator scales sampled counts by.
//
// Use, per function:
//   PathVersioner v(f, api, outline);
//   if (v.prepare()) { ...build the DAG of v.target(), instrument it with run(/*promote=*/false)...;
//                      v.finish(dag, inst, id); }
// prepare() demotes the SSA values that live across blocks to stack slots (so that control can
// move between the copies at any block boundary) and clones the body into an unreachable copy
// that the DAG, the metadata and the instrumenter never see; finish() wires the gate tests and
// counters, then promotes the slots back to registers. VersionApi::emit_table() writes the
// module's VersionTable and the constructor/destructor that register it with the runtime.
//
// Outlined (`outline`): both copies go to a function of their own, `f.kpath` (target()), and `f`
// keeps its own body, untouched but for the start counters and the gate tests at its entry and
// back edges: between bursts a call costs what the native code costs plus a counter increment and
// a gate test per entry and per loop iteration — not the frame, the callee-saved registers and the
// code size of the instrumented copy, which an in-function copy shares with every call. When the
// gate is open, `f`'s entry tail-calls `f.kpath(args, 0, null)`; a back edge t→h of `f` stores the
// values live into h in a buffer and returns `f.kpath(args, index of h, buffer)`, which continues
// the activation at h in its instrumented copy (a join). Used where no value that lives across a
// loop is a local variable the optimiser has yet to promote (the late stage, or a function
// without loops), since passing its address would pin it to memory in `f`.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "FunctionDag.h"
#include "PathInstrumenter.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

namespace hcct::kpath {

// The module-level part: the runtime symbols and the table of versioned functions.
class VersionApi {
 public:
  explicit VersionApi(llvm::Module &m);
  llvm::GlobalVariable *gate() const { return gate_; }
  llvm::FunctionCallee switch_fn() const { return switch_; }
  // The event clock's countdown (thread-local) and the runtime's tick, or null: the time gate.
  llvm::GlobalVariable *countdown() const { return countdown_; }
  llvm::FunctionCallee tick_fn() const { return tick_; }
  // Counters of one function, one per start point (entry first, then the headers), recorded in
  // the table.
  llvm::GlobalVariable *add_function(uint64_t function_id, const std::vector<uint32_t> &start_blocks);
  // The table and its constructor/destructor; nothing if no function was added.
  void emit_table();

 private:
  llvm::Function *move_counters_to_tls(uint64_t &words);
  struct Entry {
    uint64_t function_id;
    std::vector<uint32_t> start_blocks;
    llvm::GlobalVariable *counters;
  };
  llvm::Module &m_;
  bool thread_counters_;  // whether the start counters are per thread (an executable; hcct/kpath_abi.h, VersionTable)
  llvm::GlobalVariable *gate_;
  llvm::FunctionCallee switch_;
  llvm::GlobalVariable *countdown_ = nullptr;
  llvm::FunctionCallee tick_;
  std::vector<Entry> entries_;
};

class PathVersioner {
 public:
  // Which functions get an outlined copy (above): none, those without loops, or every one.
  enum class Outline { kNever, kLoopFree, kAlways };
  PathVersioner(llvm::Function &f, VersionApi &api, Outline outline) : f_(f), api_(api), outline_(outline) {}
  // False (nothing changed) for bodies that cannot be duplicated safely here: callbr, an indirectbr
  // on a back edge, block addresses used other than in f's own constant tables, token values across
  // blocks. The function is then instrumented unversioned.
  // An outlined version also needs a fixed argument list, no musttail call and no argument the
  // ABI places in the caller's frame (inalloca, preallocated, swifterror); else in-function.
  bool prepare();
  // The function to number and instrument: `f` itself, or its outlined copy.
  llvm::Function &target() { return outlined_ ? *outlined_ : f_; }
  bool outlined() const { return outlined_ != nullptr; }
  // After `inst` instrumented the original body (without promoting its registers).
  void finish(const FunctionDag &dag, const PathInstrumenter &inst, uint64_t function_id);
  // When the function is not instrumented after all: drops the copy, promotes the slots.
  void abandon();

 private:
  // A loop header of `f` where an activation may join the outlined copy: the values live into it
  // (the header's phis first, then the values defined above the loop and used in or after it),
  // in the order of the join's buffer.
  // Values f.kpath can recompute from its own arguments and the passed values (address arithmetic
  // and casts: `&p->field` of an argument p) are not passed: passing one made f keep it in a
  // register or a stack slot across the whole loop, where the native code folds it into its
  // addressing modes.
  struct Resume {
    llvm::BasicBlock *header = nullptr;          // in f
    std::vector<llvm::Instruction *> live;       // in f, passed in the buffer
    std::vector<llvm::Instruction *> outlined;   // the same values in f.kpath, before demotion (the keys of slot_of_)
    std::vector<llvm::Instruction *> remat;      // in f, recomputed by f.kpath (operands before users)
    std::vector<llvm::Instruction *> remat_outlined;
    llvm::StructType *buffer = nullptr;
  };
  static bool supported(const llvm::Function &f);
  static bool block_address_tables(const llvm::Function &f, std::vector<llvm::GlobalVariable *> &tables);
  static llvm::Constant *retarget(llvm::GlobalVariable &table, llvm::Function &from, llvm::Function &to,
                                   const llvm::ValueToValueMapTy &blocks);
  llvm::GlobalVariable *new_table(llvm::GlobalVariable &table, llvm::Constant *contents, const llvm::Twine &suffix);
  void drop_tables();
  static bool outlinable(const llvm::Function &f);
  static bool has_loops(const llvm::Function &f);
  void find_resumes();
  void outline();
  void demote(llvm::Function &f, const std::vector<llvm::Instruction *> &also);
  static llvm::StoreInst *count_start(llvm::IRBuilder<> &b, llvm::GlobalVariable *counters, unsigned index);
  llvm::Value *gate_open(llvm::IRBuilder<> &b) const;
  // Returns the tick's call, if the test has one.
  llvm::CallInst *branch_on_gate(llvm::IRBuilder<> &b, llvm::BasicBlock *open, llvm::BasicBlock *closed,
                                 bool open_likely, bool ask_runtime = true) const;
  llvm::BasicBlock *decide_in_outlined(llvm::BasicBlock *open, llvm::BasicBlock *closed, const llvm::DebugLoc &loc) const;
  void wire_native(llvm::GlobalVariable *counters, const llvm::DenseMap<llvm::BasicBlock *, unsigned> &counter_of,
                   const std::vector<std::pair<llvm::BasicBlock *, llvm::BasicBlock *>> &cuts);
  // A back edge's test on the event clock: its start counter's store, and the tick it may call
  // (null in f's own body, which leaves that to f.kpath).
  struct BackEdgeTest {
    llvm::StoreInst *count = nullptr;
    llvm::CallInst *tick = nullptr;
  };
  using BackEdgeTests = llvm::DenseMap<llvm::BasicBlock *, std::vector<BackEdgeTest>>;  // header -> its back edges'
  void keep_clock_in_registers(llvm::Function &f, const BackEdgeTests &tests);

  llvm::Function &f_;
  VersionApi &api_;
  Outline outline_;
  llvm::Function *outlined_ = nullptr;         // f.kpath
  llvm::ValueToValueMapTy outline_map_;        // f -> f.kpath
  std::vector<Resume> resumes_;
  // f.kpath's demoted values: the slot their uses read, and a phi's slot its predecessors store.
  llvm::DenseMap<llvm::Value *, llvm::AllocaInst *> slot_of_, phi_slot_of_;
  llvm::ValueToValueMapTy map_;                // original block -> its uninstrumented copy
  std::vector<llvm::BasicBlock *> originals_;  // the blocks before cloning
  std::vector<llvm::AllocaInst *> slots_;      // demoted values, promoted again by finish()
  std::vector<llvm::GlobalVariable *> tables_;       // f's dispatch tables (block_address_tables)
  std::vector<llvm::GlobalVariable *> made_tables_;  // their copies, for f.kpath and the uninstrumented copy
};

}  // namespace hcct::kpath
