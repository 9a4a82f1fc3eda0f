// Resolved, in-function OSR into a compiler-made loop version (docs/GUIDE.md, "Loop versions").
//
// For a guided loop L with header H and threshold T the versioner makes
//
//   preheader ──► H: count = phi [0, outside] [count + 1, latches]
//                    if (count + 1 == max(T, 1)) ──► H.osr.ph ──► H.osr (the clone of L) ──► L's exits
//                    else ──► the rest of H … (the base loop, unchanged)
//
// i.e. the first T − 1 header executions of an entry run in the base loop and the T-th and later
// ones in the clone, which starts with the whole header: the same iteration, with the same state.
// That is OSRKit's *resolved* OSR point, inside one function: frame, allocas, landing pads and
// debug scopes are shared, so the only state to map is SSA values live at the header — exactly
// the header's phis, which become the incoming values of the clone header's phis on the transfer
// edge; values the loop defines and uses after it are merged in its (dedicated, LCSSA) exit
// blocks. At PipelineStart (where the kpath pass runs by default) clang's locals are still
// allocas: the versioner runs SSA construction (mem2reg) on the function first, which turns every
// promotable local live around the loop into a header phi, so the mapping is the identity on the
// frame's variables, phi by phi (OSR, Distilled: such a mapping is correct by construction);
// locals whose address escapes stay in the shared frame and need no mapping.
//
// The counter is the fallback trigger: when the header's exit test orders a non-wrapping induction
// variable against an invariant (`x < n`, `<=`, `>`, `>=`, `!=` by ±1; SCEV), the base loop instead
// runs until x reaches its value at the threshold or the loop ends, and then leaves to the clone if
// the test still holds (split_at_threshold: for strict tests nothing per iteration).
// With path patterns from the guidance, the clone is specialised (PathSpecializer.h). Both need
// SSA form, so the function's allocas are promoted first.
//
// A loop it cannot version safely is refused with an optimisation remark naming the reason
// (`-Rpass-missed=hcct-osr`) and left as it is; a versioned loop gets `-Rpass=hcct-osr`, naming
// its trigger and specialisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/ADT/Twine.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Function.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

namespace llvm {
class OptimizationRemarkEmitter;
}

namespace hcct::kpath {

// The remark pass name: clang -Rpass=hcct-osr / -Rpass-missed=hcct-osr.
inline constexpr char kOsrRemarkPass[] = "hcct-osr";

// A pattern of the guidance to specialise the clone for: `factor` consecutive iterations of the
// path `path` (its kpath ID), whose blocks are `blocks` (header first).
struct PathPattern {
  uint64_t path = 0;
  unsigned factor = 0;
  std::vector<llvm::BasicBlock *> blocks;
};

class LoopVersioner {
 public:
  // `f` must stay unchanged by others while the versioner lives (it keeps its dominator tree and
  // loop info up to date itself).
  LoopVersioner(llvm::Function &f, llvm::OptimizationRemarkEmitter &remarks);

  // Versions the natural loop headed by `header`, switching at its `threshold`-th header
  // execution per entry; `what` names the loop in remarks. Returns whether it did.
  // The clone is specialised for each of `patterns` that PathSpecializer accepts, tried in order.
  bool version(llvm::BasicBlock *header, uint64_t threshold, const std::string &what,
               const std::vector<PathPattern> &patterns = {});
  // Loop nesting depth of `header` (0: not in a loop): inner loops are versioned first, so that
  // an outer loop's clone contains the inner loop's versions as well.
  unsigned depth(const llvm::BasicBlock *header) const { return li_.getLoopDepth(header); }

 private:
  // Why the loop cannot be versioned, or "" if it can.
  std::string refusal(const llvm::Loop &loop) const;
  // Puts the loop into the form cloning needs: a dedicated preheader that only branches to the
  // header, dedicated exits, LCSSA. Returns "" or why it could not.
  std::string canonicalize(llvm::Loop &loop);
  // Adds the clone's incoming values to the LCSSA phis of the base loop's exit blocks.
  void merge_exits(const llvm::Loop &base, const llvm::SmallVectorImpl<llvm::BasicBlock *> &exits,
                   llvm::ValueToValueMapTy &map);
  // The clone header's state on the transfer edge: the base header's phis.
  void map_header_state(llvm::BasicBlock *header, llvm::BasicBlock *clone_entry, llvm::ValueToValueMapTy &map);
  // The per-entry counter and the conditional transfer at the top of the base header.
  void insert_trigger(llvm::Loop &base, llvm::BasicBlock *clone_entry, uint64_t threshold);
  // The trigger without a counter, when the header's exit test orders an induction variable X
  // that does not wrap against an invariant N (`<`, `<=`, `>`, `>=`, `!=` by ±1): the base loop
  // runs until X reaches its value at the threshold or the test fails, and leaves to the clone if
  // the test holds. Returns false (nothing changed) when the loop is not like that.
  bool split_at_threshold(llvm::Loop &base, llvm::BasicBlock *clone_entry, uint64_t threshold);
  void refuse(const llvm::Loop *loop, llvm::BasicBlock *header, const std::string &what, const std::string &why);
  void recompute();
  // Promotes the function's allocas (specialisation analyses the loop in SSA form).
  void promote_allocas();
  // Specialises the clone; returns the remark's text.
  std::string specialize(llvm::Loop &clone, const std::vector<PathPattern> &patterns, llvm::ValueToValueMapTy &map);

  llvm::Function &f_;
  llvm::OptimizationRemarkEmitter &remarks_;
  llvm::DominatorTree dt_;
  llvm::LoopInfo li_;
};

}  // namespace hcct::kpath
