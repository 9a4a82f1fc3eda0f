// Specialises a loop for its dominant multi-iteration path pattern (docs/GUIDE.md, "Loop versions"):
// "F consecutive iterations of path P" becomes F straight-line copies of P behind one guard that
// checks P's branch conditions of all F iterations at once.
//
//   G (new header): state phis; P's memory-free conditions for iterations 0..F-1, and that P's
//      stores in these F iterations do not overlap the memory the guard reads
//   G2: P's conditions that read memory, for iterations 0..F-1
//   both true  → P(0); P(1); …; P(F-1) with every branch of P taken P's way → G
//   either false → the generic body (the loop as it was) for one iteration → G
//
// Iteration j's header state is computed from the guard's: an induction variable (a header phi
// whose SCEV is an affine recurrence with a constant step) advanced by j steps. The guard is right
// only if it computes exactly what iterations 0..F-1 would: so every value a condition depends on
// must be an induction variable, a loop invariant, or a load whose address is such a function and
// whose memory no store of P can change in the window (checked at run time, as LoopVersioning
// checks memory ranges). Loads are executed early (before iterations 0..j-1 ran): they are
// allowed only where iteration j would execute them anyway — in a block on every complete
// iteration, in a loop that can leave only through P's blocks on memory-free conditions (which the
// guard checks first) and has no instruction that might not return. Anything else refuses the
// specialisation with a reason (the loop is still versioned, with a generic clone).
#pragma once

#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"

namespace hcct::kpath {

class PathSpecializer {
 public:
  PathSpecializer(llvm::Loop &loop, llvm::DominatorTree &dt, llvm::ScalarEvolution &se)
      : loop_(loop), dt_(dt), se_(se) {}

  // `path`: the blocks of one iteration in order, the loop header first, the last a latch.
  // Returns "" when the loop was specialised, else why not (then nothing was changed).
  std::string specialize(llvm::ArrayRef<llvm::BasicBlock *> path, unsigned factor);

 private:
  struct Condition {
    llvm::Value *value;
    bool taken;  // the path follows the true successor
    bool reads_memory;
    // An ordered compare of an affine value of the loop (operand `affine_side`, step
    // `affine_step`) with an invariant: true for all F iterations iff true for the first and the
    // last, when the last one's value does not wrap — two compares instead of F.
    int affine_side = -1;
    int64_t affine_step = 0;
  };
  struct Access {
    llvm::Value *pointer;
    uint64_t bytes;
  };

  std::string check(llvm::ArrayRef<llvm::BasicBlock *> path);
  // Whether `v` can be evaluated at any iteration of the window; *reads tells if it loads.
  std::string check_tree(llvm::Value *v, bool allow_loads, bool *reads);
  bool affine_pointer(llvm::Value *pointer) const;
  // `v` at iteration j of the window, built at `b` (memoised per iteration).
  llvm::Value *at_iteration(llvm::Value *v, unsigned j, llvm::IRBuilder<> &b);
  // Whether the bytes `stores` write and `loads` read in the F iterations of the window are
  // disjoint; accesses are grouped by their SCEV pointer base, one range per group.
  llvm::Value *no_overlap(llvm::ArrayRef<Access> stores, llvm::ArrayRef<Access> loads, unsigned factor, llvm::IRBuilder<> &b);
  std::pair<llvm::Value *, llvm::Value *> window_range(llvm::ArrayRef<Access> group, unsigned factor, llvm::IRBuilder<> &b);
  void build(llvm::ArrayRef<llvm::BasicBlock *> path, unsigned factor);
  void find_monotone(Condition &c);
  llvm::Value *holds_in_window(const Condition &c, unsigned factor, llvm::IRBuilder<> &b);
  void mark_independent(llvm::ArrayRef<llvm::BasicBlock *> blocks);

  llvm::Loop &loop_;
  llvm::DominatorTree &dt_;
  llvm::ScalarEvolution &se_;
  llvm::SmallVector<Condition, 8> conditions_;
  llvm::SmallVector<Access, 8> stores_;
  llvm::SmallVector<Access, 8> guard_loads_;
  // Every load of the path, when all have affine addresses: then the copies' loads are checked
  // against their stores too and marked as not aliasing them (so that the SLP vectoriser may
  // combine the F copies).
  llvm::SmallVector<Access, 32> path_loads_;
  bool path_loads_affine_ = true;
  llvm::DenseMap<llvm::Value *, int64_t> iv_step_;  // header phi (later: guard phi) -> constant step
  llvm::SmallVector<llvm::DenseMap<llvm::Value *, llvm::Value *>, 16> memo_;
};

}  // namespace hcct::kpath
