// The Ball-Larus DAG of an LLVM function: which CFG edges are back edges, where the function exits,
// and the numbered PathGraph (path_graph.h) built from them. Analysis only; nothing is modified.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hcct/kpath/path_graph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/IR/BasicBlock.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstrTypes.h"

namespace hcct::kpath {

// How a block leaves the function, if it does.
enum class ExitKind : uint8_t {
  kNone,          // has successors
  kReturn,        // ret
  kResume,        // resume: an exception propagates to the caller
  kNoReturnCall,  // unreachable after a call that does not return (exit, abort, __cxa_throw, ...)
  kUnreachable,   // unreachable with no such call: never executed, nothing to emit
};

// A CFG edge treated like a back edge: its path ends (kBreak at `from`) and the next one starts at
// `to` (kStart from the entry). Cut edges are forward edges cut the same way when the function has
// too many paths (docs/KPATH.md, "Overflow").
struct RestartEdge {
  uint32_t from = 0;
  uint32_t to = 0;
  uint32_t break_edge = 0;  // PathGraph edge index of the kBreak dummy out of `from`
  uint32_t start_edge = 0;  // PathGraph edge index of the kStart dummy into `to`
  bool cut = false;         // a forward edge cut because of overflow, not a back edge
};

class FunctionDag {
 public:
  // Builds and numbers the DAG of `f`. With more than `max_paths` paths, forward edges into join
  // blocks are cut until the count fits. Returns nullopt (and a reason) for functions the
  // instrumentation does not support.
  static std::optional<FunctionDag> build(llvm::Function &f, uint64_t max_paths, std::string *why);

  // Entry-reachable blocks in layout order; block i is PathGraph node i.
  const std::vector<llvm::BasicBlock *> &blocks() const { return blocks_; }
  // Index of `bb`, or -1 if it is unreachable.
  int64_t index(const llvm::BasicBlock *bb) const;
  const PathGraph &graph() const { return graph_; }
  const std::vector<RestartEdge> &restarts() const { return restarts_; }
  ExitKind exit_kind(uint32_t block) const { return exit_kinds_[block]; }
  // The kExit edge of an exit block (valid when exit_kind != kNone).
  uint32_t exit_edge(uint32_t block) const { return exit_edges_[block]; }
  // The noreturn call that ends a kNoReturnCall block.
  llvm::CallBase *noreturn_call(uint32_t block) const { return noreturn_calls_[block]; }
  bool has_cut_edges() const { return cut_count_ > 0; }

 private:
  using EdgeSet = llvm::DenseSet<std::pair<uint32_t, uint32_t>>;
  void index_blocks(llvm::Function &f);
  void classify_exits();
  void build_graph(const EdgeSet &restart);
  // The join block whose incoming edges to cut next, or -1 if there is none.
  int64_t pick_cut_target(const EdgeSet &restart) const;

  std::vector<llvm::BasicBlock *> blocks_;
  llvm::DenseMap<const llvm::BasicBlock *, uint32_t> index_;
  std::vector<ExitKind> exit_kinds_;
  std::vector<uint32_t> exit_edges_;
  std::vector<llvm::CallBase *> noreturn_calls_;
  PathGraph graph_;
  std::vector<RestartEdge> restarts_;
  size_t cut_count_ = 0;
};

}  // namespace hcct::kpath
