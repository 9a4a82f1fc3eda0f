// Collects the path metadata (hcct/kpath/metadata.h) of a module's instrumented functions and
// emits it as one constant blob in the ELF section `hcct_kpath`.
#pragma once

#include <map>
#include <string>

#include "FunctionDag.h"
#include "hcct/kpath/metadata.h"
#include "llvm/IR/Module.h"

namespace hcct::kpath {

class MetadataBuilder {
 public:
  explicit MetadataBuilder(llvm::Module &m);
  // Records `f` as numbered in `dag`. Call before instrumenting: the block contents are read here.
  void add(llvm::Function &f, const FunctionDag &dag, uint64_t function_id, uint8_t flags,
           llvm::StringRef name = {});  // name: f's unless given (an outlined copy is recorded as its original)
  // Emits the blob (nothing if no function was added).
  void emit();
  const ModuleInfo &info() const { return info_; }

 private:
  uint32_t file_index(const std::string &path);
  BlockInfo block_info(const llvm::BasicBlock &bb, const FunctionDag &dag);

  llvm::Module &m_;
  ModuleInfo info_;
  std::map<std::string, uint32_t> files_;
};

}  // namespace hcct::kpath
