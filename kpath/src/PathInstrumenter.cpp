#include "PathInstrumenter.h"

#include "llvm/ADT/MapVector.h"

#include "llvm/Analysis/CFG.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Instructions.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/PromoteMemToReg.h"

namespace hcct::kpath {

using namespace llvm;

RuntimeApi RuntimeApi::declare(Module &m) {
  LLVMContext &c = m.getContext();
  Type *void_ty = Type::getVoidTy(c);
  Type *ptr = Type::getInt8PtrTy(c);
  Type *i64 = Type::getInt64Ty(c);
  // The runtime never throws and never unwinds: the probes are plain calls, never invokes, and do
  // not add exception edges.
  AttributeList attrs = AttributeList().addFnAttribute(c, Attribute::NoUnwind);
  RuntimeApi api;
  api.enter = m.getOrInsertFunction("__hcct_path_enter", attrs, void_ty, ptr, i64);
  api.path = m.getOrInsertFunction("__hcct_path", attrs, void_ty, ptr, i64, i64);
  return api;
}

namespace {

unsigned distinct_successors(const BasicBlock *bb) {
  SmallPtrSet<const BasicBlock *, 8> s(succ_begin(bb), succ_end(bb));
  return s.size();
}

unsigned distinct_predecessors(const BasicBlock *bb) {
  SmallPtrSet<const BasicBlock *, 8> s(pred_begin(bb), pred_end(bb));
  return s.size();
}

// Edges out of these terminators cannot get a block of their own: indirectbr and callbr targets
// have their address taken, and a landing pad must stay the unwind destination of its invokes.
bool splittable(const BasicBlock *from, const BasicBlock *to) {
  const Instruction *term = from->getTerminator();
  return !isa<IndirectBrInst>(term) && !isa<CallBrInst>(term) && !to->isEHPad();
}

}  // namespace

std::vector<EdgeProbe> PathInstrumenter::collect_probes() const {
  const PathGraph &g = dag_.graph();
  const auto &blocks = dag_.blocks();
  std::vector<EdgeProbe> probes;
  for (const DagEdge &e : g.edges()) {
    if (e.kind != EdgeKind::kBranch || e.val == 0) continue;
    EdgeProbe p;
    p.from = blocks[e.from];
    p.to = blocks[e.to];
    p.add = e.val;
    probes.push_back(p);
  }
  for (const RestartEdge &r : dag_.restarts()) {
    EdgeProbe p;
    p.from = blocks[r.from];
    p.to = blocks[r.to];
    p.restart = true;
    p.emit_add = g.edges()[r.break_edge].val;
    p.reset = g.edges()[r.start_edge].val;
    probes.push_back(p);
  }
  return probes;
}

// Where code runs exactly when the edge is taken, cheapest first.
PathInstrumenter::Placement PathInstrumenter::place(const EdgeProbe &p) const {
  const Instruction *term = p.from->getTerminator();
  // An invoke's code before the terminator would also run on the unwind edge; callbr likewise.
  if (distinct_successors(p.from) == 1 && !isa<InvokeInst>(term) && !isa<CallBrInst>(term))
    return Placement::kEndOfSource;
  if (distinct_predecessors(p.to) == 1) return Placement::kStartOfTarget;
  if (splittable(p.from, p.to)) return Placement::kSplit;
  return Placement::kDispatch;
}

void PathInstrumenter::emit_path(IRBuilder<> &b, uint64_t add) {
  Value *r = b.CreateLoad(b.getInt64Ty(), reg_, "kpath.r");
  Value *id = add ? b.CreateAdd(r, b.getInt64(add), "kpath.id") : r;
  b.CreateCall(api_.path, {frame_ptr_, b.getInt64(function_id_), id});
}

void PathInstrumenter::insert_probe(Instruction *before, const EdgeProbe &p) {
  IRBuilder<> b(before);
  if (p.restart) {
    emit_path(b, p.emit_add);
    b.CreateStore(b.getInt64(p.reset), reg_);
  } else {
    Value *r = b.CreateLoad(b.getInt64Ty(), reg_, "kpath.r");
    b.CreateStore(b.CreateAdd(r, b.getInt64(p.add), "kpath.r"), reg_);
  }
}

void PathInstrumenter::insert_prologue() {
  BasicBlock &entry = f_.getEntryBlock();
  IRBuilder<> top(&entry, entry.begin());
  reg_ = top.CreateAlloca(top.getInt64Ty(), nullptr, "kpath.reg");
  frame_ = top.CreateAlloca(ArrayType::get(top.getInt64Ty(), kFrameWords), nullptr, "kpath.frame");
  frame_->setAlignment(Align(8));
  // After the function's own static allocas, so that they stay a contiguous prefix.
  BasicBlock::iterator it = entry.begin();
  while (isa<AllocaInst>(&*it)) ++it;
  IRBuilder<> b(&entry, it);
  if (DISubprogram *sp = f_.getSubprogram())
    b.SetCurrentDebugLocation(DILocation::get(f_.getContext(), sp->getLine(), 0, sp));
  frame_ptr_ = b.CreateBitCast(frame_, b.getInt8PtrTy(), "kpath.frame.ptr");
  b.CreateStore(b.getInt64(0), reg_);
  b.CreateCall(api_.enter, {frame_ptr_, b.getInt64(function_id_)});
}

void PathInstrumenter::insert_exit(uint32_t block) {
  ExitKind kind = dag_.exit_kind(block);
  if (kind == ExitKind::kNone || kind == ExitKind::kUnreachable) return;
  BasicBlock *bb = dag_.blocks()[block];
  Instruction *before = kind == ExitKind::kNoReturnCall ? dag_.noreturn_call(block) : bb->getTerminator();
  IRBuilder<> b(before);
  b.SetCurrentDebugLocation(before->getDebugLoc());
  emit_path(b, dag_.graph().edges()[dag_.exit_edge(block)].val);
}

void PathInstrumenter::split_and_insert(const EdgeProbe &p) {
  Instruction *term = p.from->getTerminator();
  unsigned succ = GetSuccessorNumber(p.from, p.to);
  // Merging identical edges gives a switch with repeated targets one new block for all of them.
  BasicBlock *mid = SplitCriticalEdge(term, succ, CriticalEdgeSplittingOptions().setMergeIdenticalEdges());
  if (!mid) report_fatal_error("hcct kpath: cannot split a critical edge in " + f_.getName());
  insert_probe(mid->getTerminator(), p);
}

// For edges no block can be put on (indirectbr/callbr sources into a join block, several invokes
// into one landing pad): `to` keeps its phis and landing pad, then switches on which predecessor it
// was entered from into one probe block per such edge, and continues in `rest`.
void PathInstrumenter::dispatch_at(BasicBlock *to, const std::vector<EdgeProbe> &probes) {
  BasicBlock *rest = to->splitBasicBlock(to->getFirstInsertionPt(), to->getName() + ".kpath.rest");
  tails_[to] = rest;
  IRBuilder<> b(&*to->begin());
  Type *i32 = b.getInt32Ty();
  PHINode *from = b.CreatePHI(i32, 4, "kpath.from");
  DenseMap<BasicBlock *, unsigned> case_of;
  // A source that was itself split by an earlier dispatch reaches `to` from its `rest` block.
  for (unsigned i = 0; i < probes.size(); ++i) case_of[tail(probes[i].from)] = i + 1;
  for (BasicBlock *pred : predecessors(to)) {
    auto it = case_of.find(pred);
    from->addIncoming(ConstantInt::get(i32, it == case_of.end() ? 0 : it->second), pred);
  }
  to->getTerminator()->eraseFromParent();
  IRBuilder<> tail(to);
  SwitchInst *sw = tail.CreateSwitch(from, rest, unsigned(probes.size()));
  for (unsigned i = 0; i < probes.size(); ++i) {
    BasicBlock *bb = BasicBlock::Create(f_.getContext(), to->getName() + ".kpath.edge", &f_, rest);
    Instruction *br = BranchInst::Create(rest, bb);
    insert_probe(br, probes[i]);
    sw->addCase(ConstantInt::get(cast<IntegerType>(i32), i + 1), bb);
  }
}

void PathInstrumenter::promote_register() {
  DominatorTree dt(f_);
  if (isAllocaPromotable(reg_)) PromoteMemToReg({reg_}, dt);
}

void PathInstrumenter::run() {
  std::vector<EdgeProbe> probes = collect_probes();
  // Decide every placement on the untouched CFG; then edit in an order that keeps each block's
  // code sequence right: code on an incoming edge runs before code on an outgoing edge or at exit.
  std::vector<Placement> where;
  for (const EdgeProbe &p : probes) where.push_back(place(p));
  insert_prologue();
  for (size_t i = 0; i < probes.size(); ++i) {
    if (where[i] == Placement::kStartOfTarget)
      insert_probe(&*probes[i].to->getFirstInsertionPt(), probes[i]);
    else if (where[i] == Placement::kSplit)
      split_and_insert(probes[i]);
  }
  for (size_t i = 0; i < probes.size(); ++i)
    if (where[i] == Placement::kEndOfSource) insert_probe(probes[i].from->getTerminator(), probes[i]);
  for (uint32_t v = 0; v < dag_.blocks().size(); ++v) insert_exit(v);
  MapVector<BasicBlock *, std::vector<EdgeProbe>> dispatch;
  for (size_t i = 0; i < probes.size(); ++i)
    if (where[i] == Placement::kDispatch) dispatch[probes[i].to].push_back(probes[i]);
  for (auto &[to, list] : dispatch) dispatch_at(to, list);
  promote_register();
}

}  // namespace hcct::kpath
