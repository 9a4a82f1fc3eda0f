// Specialises a loop for its dominant multi-iteration path pattern (docs/GUIDE.md, "Loop versions"):
// "F consecutive iterations of path P" becomes a loop of exactly F iterations in which P's branches
// are taken P's way, behind one guard that checks those branches' conditions for all F iterations
// at once.
//
//   G (new header): state phis; P's memory-free conditions for iterations 0..F-1, and that P's
//      stores in these F iterations do not overlap the memory the guard reads
//   G2: P's conditions that read memory, for iterations 0..F-1
//   both true  → the fast loop: F iterations of the body with P's guarded branches folded → G
//   either false → the generic body (the loop as it was) for one iteration → G
//
// The fast loop is a copy of the loop body, not F straight-line copies: a counted loop of F
// iterations without the guarded branches is what LLVM's loop vectoriser takes, while the SLP
// vectoriser does not combine F copies of a computation such as a 5x5 convolution
// (docs/BENCHMARKS.md, "Loop versions"). Where the vectoriser can take it (vectorisable()), the
// fast loop carries a vector width hint of F — with a trip count of F the cost model alone gives up
// on it, yet the guard has already paid for the window; a hint, not a forced vectorisation, so a
// loop the vectoriser refuses after all costs no compiler warning — and is not unrolled first.
//
// A branch of P whose condition the guard cannot compute before the window runs (it depends on
// what the iteration computes, such as a clamp of a convolution's result) stays a branch in the
// fast loop, with the blocks off P it leads to, when those rejoin P within the iteration, write no
// memory and neither leave the loop nor enter an inner one: the fast loop then runs them exactly as
// the loop would (and the vectoriser if-converts them).
//
// The guard is right only if it computes exactly what iterations 0..F-1 would: so every value a
// guarded condition depends on must be an induction variable (a header phi whose SCEV is an
// affine recurrence with a constant step, at iteration j advanced by j steps), a loop invariant,
// or a load whose address is such a function and whose memory no store of the fast loop can change
// in the window (checked at run time, as LoopVersioning checks memory ranges). Loads are executed
// early (before iterations 0..j-1 ran): they are allowed only where iteration j would execute them
// anyway — in a block on every complete iteration, in a loop that can leave only through P's
// blocks on memory-free conditions (which the guard checks first) and has no instruction that
// might not return. Anything else refuses the specialisation with a reason (the loop is still
// versioned, with a generic clone).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
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

  // Checks one pattern on the loop as it is: `path` is the blocks of one iteration in order, the
  // loop header first, the last a latch. Returns "" when it can be specialised (build() will), else
  // why not.
  std::string add(llvm::ArrayRef<llvm::BasicBlock *> path, unsigned factor);
  // Of the pattern added last: the branches its fast loop keeps (not guarded).
  unsigned kept_branches() const;
  // Builds a guard and a fast loop for each pattern added, tried in the order added (a failed guard
  // tries the next; the last one's failure runs the generic body). Nothing if none was added.
  void build();

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
    llvm::BasicBlock *block = nullptr;  // the branch's block on the path
    llvm::BasicBlock *next = nullptr;   // ... and where the path goes from it
    bool kept = false;                  // not guarded: the fast loop keeps the branch
  };
  struct Access {
    llvm::Value *pointer;
    uint64_t bytes;
  };
  // One pattern to build.
  struct Plan {
    unsigned factor = 0;
    llvm::DebugLoc latch_location;
    llvm::SmallVector<Condition, 8> conditions;
    // The blocks of the fast loop: the path's, then those kept branches lead to.
    llvm::SmallVector<llvm::BasicBlock *, 32> body;
    size_t path_length = 0;  // body[0, path_length) is the path
    llvm::DenseSet<llvm::BasicBlock *> in_body;
    llvm::SmallVector<Access, 8> stores;
    llvm::SmallVector<Access, 8> guard_loads;
    // Every load of the fast loop, when all have affine addresses: then its loads are checked
    // against its stores too and marked as not aliasing them (the vectoriser needs no checks then).
    llvm::SmallVector<Access, 32> path_loads;
    bool path_loads_affine = true;
    bool independent = false;
    llvm::Value *disjoint_whole_loop = nullptr;  // in the preheader (nullptr: windows check themselves)
    bool vectorisable = false;  // the fast loop gets llvm.loop.vectorize.enable
  };

  std::string check(Plan &p, llvm::ArrayRef<llvm::BasicBlock *> path);
  // Adds the blocks off the path that a kept branch leads to (to p.body); "" or why it cannot be kept.
  std::string keep_branch(Plan &p, const Condition &c, const llvm::DenseSet<llvm::BasicBlock *> &on_path);
  // Whether `v` can be evaluated at any iteration of the window; *reads tells if it loads.
  std::string check_tree(Plan &p, llvm::Value *v, bool allow_loads, bool *reads);
  bool affine_pointer(llvm::Value *pointer) const;
  // `v` at iteration j of the window, built at `b` (memoised per iteration).
  llvm::Value *at_iteration(llvm::Value *v, unsigned j, llvm::IRBuilder<> &b);
  // An access's first and last address (as integers) over the iterations in question.
  using Extremes = std::function<std::pair<llvm::Value *, llvm::Value *>(const Access &)>;
  // Whether the bytes `stores` write and `loads` read are disjoint, at `b`; accesses are grouped by
  // their SCEV pointer base, one range per group.
  llvm::Value *disjoint(llvm::ArrayRef<Access> stores, llvm::ArrayRef<Access> loads, const Extremes &extremes,
                        llvm::IRBuilder<> &b, const char *name);
  // disjoint() over the F iterations of the window.
  llvm::Value *no_overlap(llvm::ArrayRef<Access> stores, llvm::ArrayRef<Access> loads, unsigned factor, llvm::IRBuilder<> &b);
  // The guard of `p` in `check`; returns the fast loop's entry. `fail_to(block)` is where a
  // failed test in `block` goes.
  llvm::BasicBlock *build_guard(Plan &p, llvm::BasicBlock *check,
                                const std::function<llvm::BasicBlock *(llvm::BasicBlock *)> &fail_to);
  // The fast loop of `p` from `fast_entry`, back to `guard` after F iterations with the state.
  void build_fast_loop(Plan &p, llvm::BasicBlock *fast_entry, llvm::BasicBlock *guard,
                       llvm::ArrayRef<llvm::PHINode *> state, llvm::PHINode *skip);
  // Whether LLVM's loop vectoriser can take p's fast loop, as far as can be told before it runs:
  // a forced hint it cannot honour is a compiler warning for the user (-Wpass-failed).
  bool vectorisable(const Plan &p);
  // Whether p's stores and the loads checked against them are disjoint over the whole rest of the
  // loop, built in the preheader; nullptr when SCEV cannot bound the loop.
  llvm::Value *disjoint_whole_loop(const Plan &p);
  void find_monotone(Condition &c);
  llvm::Value *holds_in_window(const Condition &c, unsigned factor, llvm::IRBuilder<> &b);
  void mark_independent(llvm::ArrayRef<llvm::BasicBlock *> blocks);

  llvm::Loop &loop_;
  llvm::DominatorTree &dt_;
  llvm::ScalarEvolution &se_;
  std::vector<Plan> plans_;
  llvm::DenseMap<llvm::Value *, int64_t> iv_step_;  // header phi (later: guard phi) -> constant step
  llvm::SmallVector<llvm::DenseMap<llvm::Value *, llvm::Value *>, 16> memo_;
};

}  // namespace hcct::kpath
