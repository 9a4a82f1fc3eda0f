#include "MetadataBuilder.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/Instructions.h"
#include "llvm/Support/Path.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

namespace hcct::kpath {

using namespace llvm;

namespace {

std::string full_path(const DIScope *scope) {
  if (!scope) return {};
  StringRef file = scope->getFilename();
  if (file.empty() || sys::path::is_absolute(file)) return file.str();
  SmallString<256> p(scope->getDirectory());
  sys::path::append(p, file);
  return std::string(p.str());
}

}  // namespace

MetadataBuilder::MetadataBuilder(Module &m) : m_(m) { info_.source = m.getSourceFileName(); }

uint32_t MetadataBuilder::file_index(const std::string &path) {
  auto [it, inserted] = files_.try_emplace(path, uint32_t(info_.files.size()));
  if (inserted) info_.files.push_back(path);
  return it->second;
}

BlockInfo MetadataBuilder::block_info(const BasicBlock &bb, const FunctionDag &dag) {
  BlockInfo b;
  for (const Instruction &i : bb) {
    const DebugLoc &loc = i.getDebugLoc();
    if (!loc || loc.getLine() == 0) continue;
    SourceLine l{file_index(full_path(loc->getScope())), loc.getLine()};
    if (b.lines.empty() || !(b.lines.back() == l)) b.lines.push_back(l);
  }
  if (const DebugLoc &loc = bb.getTerminator()->getDebugLoc()) {
    b.term_line = loc.getLine();
    b.term_col = loc.getCol();
  }
  for (const BasicBlock *s : successors(&bb)) b.succs.push_back(uint32_t(dag.index(s)));
  return b;
}

void MetadataBuilder::add(Function &f, const FunctionDag &dag, uint64_t function_id, uint8_t flags, StringRef name) {
  FunctionInfo fi;
  fi.id = function_id;
  fi.name = (name.empty() ? f.getName() : name).str();
  if (const DISubprogram *sp = f.getSubprogram()) {
    fi.file = file_index(full_path(sp)) + 1;
    fi.line = sp->getLine();
  }
  fi.flags = flags | (dag.has_cut_edges() ? kFlagCutEdges : 0);
  fi.num_paths = dag.graph().num_paths();
  for (const BasicBlock *bb : dag.blocks()) fi.blocks.push_back(block_info(*bb, dag));
  for (uint32_t v = 0; v <= dag.graph().blocks(); ++v)
    for (uint32_t e : dag.graph().out(v)) fi.edges.push_back(dag.graph().edges()[e]);
  info_.functions.push_back(std::move(fi));
}

void MetadataBuilder::emit() {
  if (info_.functions.empty()) return;
  std::vector<uint8_t> bytes = MetadataWriter().encode(info_);
  Constant *init = ConstantDataArray::get(m_.getContext(), ArrayRef<uint8_t>(bytes));
  auto *gv = new GlobalVariable(m_, init->getType(), /*isConstant=*/true, GlobalValue::PrivateLinkage,
                                init, "__hcct_kpath_metadata");
  gv->setSection(kMetadataSection);
  // Alignment 1: the linker concatenates the blobs of all modules without padding.
  gv->setAlignment(Align(1));
  appendToUsed(m_, {gv});
}

}  // namespace hcct::kpath
