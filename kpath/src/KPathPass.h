// The module pass: numbers and instruments every defined function and records its metadata.
#pragma once

#include <cstdint>

#include "llvm/IR/PassManager.h"

namespace hcct::kpath {

struct KPathOptions {
  bool late = false;  // runs at OptimizerLast instead of PipelineStart
  uint64_t max_paths = uint64_t(1) << 62;
  int opt_level = -1;  // clang's -O speed level, -1 when unknown (opt -passes=kpath)
  // The sites call the step until KPathInlineStepsPass inlines them (early stage in clang's
  // pipeline: the optimiser then works on one call per site instead of its fast path).
  bool defer_step_inlining = false;
};

class KPathPass : public llvm::PassInfoMixin<KPathPass> {
 public:
  explicit KPathPass(KPathOptions options) : options_(options) {}
  llvm::PreservedAnalyses run(llvm::Module &m, llvm::ModuleAnalysisManager &am);
  // Runs at -O0 and on optnone functions too: an uninstrumented function would break the stream.
  static bool isRequired() { return true; }

 private:
  KPathOptions options_;
};

// At OptimizerLast, after an early KPathPass with defer_step_inlining: inlines the steps
// (docs/KPATH.md, "Compile time").
class KPathInlineStepsPass : public llvm::PassInfoMixin<KPathInlineStepsPass> {
 public:
  llvm::PreservedAnalyses run(llvm::Module &m, llvm::ModuleAnalysisManager &am);
  static bool isRequired() { return true; }
};

// Functions the pass leaves alone (declarations, the runtime, naked functions, ...).
bool should_instrument(const llvm::Function &f);

}  // namespace hcct::kpath
