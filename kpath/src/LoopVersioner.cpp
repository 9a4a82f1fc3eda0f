#include "LoopVersioner.h"

#include <algorithm>
#include <optional>

#include "PathSpecializer.h"
#include "llvm/ADT/Triple.h"
#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/LoopSimplify.h"
#include "llvm/Transforms/Utils/LoopUtils.h"
#include "llvm/Transforms/Utils/PromoteMemToReg.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"

namespace hcct::kpath {

using namespace llvm;

namespace {

// Scalar evolution of the function as it is now (the pass manager's analyses are not at hand in a
// module pass that changes the function under them).
struct Scev {
  Scev(Function &f, DominatorTree &dt, LoopInfo &li)
      : tlii(Triple(f.getParent()->getTargetTriple())), tli(tlii), ac(f), se(f, tli, ac, dt, li) {}
  TargetLibraryInfoImpl tlii;
  TargetLibraryInfo tli;
  AssumptionCache ac;
  ScalarEvolution se;
};

// Why one instruction of the loop forbids cloning it, or nullptr.
const char *instruction_refusal(const Instruction &i, const Loop &loop) {
  if (isa<IndirectBrInst>(i)) return "an indirect branch (computed goto) in the loop";
  if (isa<CallBrInst>(i)) return "an asm goto (callbr) in the loop";
  if (isa<VAArgInst>(i)) return "va_arg in the loop";
  // An alloca inside a loop allocates per iteration: a variable-length array, whose stacksave /
  // stackrestore pairing a transfer in mid-iteration would have to keep.
  if (isa<AllocaInst>(i)) return "a variable-length array (alloca) in the loop";
  if (isa<CatchSwitchInst>(i) || isa<CatchPadInst>(i) || isa<CleanupPadInst>(i) || isa<CatchReturnInst>(i) ||
      isa<CleanupReturnInst>(i))
    return "funclet-based exception handling (catchswitch/cleanuppad), which Linux never emits";
  if (const auto *intrinsic = dyn_cast<IntrinsicInst>(&i)) {
    Intrinsic::ID id = intrinsic->getIntrinsicID();
    if (id == Intrinsic::stacksave || id == Intrinsic::stackrestore) return "a variable-length array (stacksave) in the loop";
  }
  if (const auto *call = dyn_cast<CallBase>(&i)) {
    if (call->cannotDuplicate()) return "a call that must not be duplicated (noduplicate) in the loop";
    if (call->hasFnAttr(Attribute::ReturnsTwice)) return "setjmp (a returns_twice call) in the loop";
  }
  // A token cannot flow through a phi, so it cannot be merged after the two versions.
  if (i.getType()->isTokenTy())
    for (const User *u : i.users())
      if (!loop.contains(cast<Instruction>(u))) return "a token value used after the loop";
  return nullptr;
}

bool is_coroutine(const Function &f) {
  if (f.isPresplitCoroutine()) return true;
  for (const BasicBlock &bb : f)
    for (const Instruction &i : bb)
      if (const auto *call = dyn_cast<CallBase>(&i))
        if (const Function *callee = call->getCalledFunction(); callee && callee->getName().startswith("llvm.coro."))
          return true;
  return false;
}

}  // namespace

LoopVersioner::LoopVersioner(Function &f, OptimizationRemarkEmitter &remarks) : f_(f), remarks_(remarks) { recompute(); }

void LoopVersioner::recompute() {
  dt_.recalculate(f_);
  li_.releaseMemory();
  li_.analyze(dt_);
}

std::string LoopVersioner::refusal(const Loop &loop) const {
  // setjmp anywhere in the function: a longjmp back into it may resume with register values the
  // transfer's phis do not describe (and clang keeps such functions unoptimised for that reason).
  if (f_.callsFunctionThatReturnsTwice()) return "the function calls setjmp (a returns_twice function)";
  if (is_coroutine(f_)) return "the function is a coroutine";
  if (loop.getHeader()->isEHPad()) return "the loop header is an exception handler";
  for (const BasicBlock *bb : loop.blocks()) {
    if (bb->hasAddressTaken()) return "a block of the loop has its address taken (computed goto target)";
    for (const Instruction &i : *bb)
      if (const char *why = instruction_refusal(i, loop)) return why;
  }
  if (!loop.isSafeToClone()) return "LLVM's Loop::isSafeToClone() refuses it";
  return "";
}

std::string LoopVersioner::canonicalize(Loop &loop) {
  // loop-simplify: a preheader, dedicated exit blocks (only the loop branches to them, so their
  // phis can take the clone's values), and a header that only the preheader enters from outside.
  simplifyLoop(&loop, &dt_, &li_, nullptr, nullptr, nullptr, /*PreserveLCSSA=*/false);
  if (!loop.getLoopPreheader()) return "no dedicated preheader could be made";
  if (!loop.hasDedicatedExits()) return "no dedicated exit blocks could be made";
  formLCSSARecursively(loop, dt_, &li_, nullptr);
  return "";
}

void LoopVersioner::merge_exits(const Loop &base, const SmallVectorImpl<BasicBlock *> &exits, ValueToValueMapTy &map) {
  for (BasicBlock *exit : exits)
    for (PHINode &phi : exit->phis()) {
      // One incoming entry per edge from the base loop, copied for the clone's twin edge.
      unsigned n = phi.getNumIncomingValues();
      for (unsigned i = 0; i < n; ++i) {
        BasicBlock *from = phi.getIncomingBlock(i);
        if (!base.contains(from)) continue;
        Value *v = phi.getIncomingValue(i);
        if (Value *twin = map.lookup(v)) v = twin;
        phi.addIncoming(v, cast<BasicBlock>(map[from]));
      }
    }
}

void LoopVersioner::map_header_state(BasicBlock *header, BasicBlock *clone_entry, ValueToValueMapTy &map) {
  // The transfer happens at the top of the header, after its phis: their values are the state of
  // this iteration, and they become the clone header's values on the transfer edge.
  for (PHINode &phi : header->phis()) cast<PHINode>(map[&phi])->setIncomingValueForBlock(clone_entry, &phi);
}

namespace {

// How the split trigger reads a header's exit test `x pred n` (the loop goes on while it holds),
// with x an affine recurrence of constant step that does not wrap.
struct ExitTest {
  bool up;                        // x grows
  bool is_signed;                 // the order the test (and x's no-wrap flag) uses
  bool stops_at_bound;            // the loop ends exactly when x reaches a value: `<`, `>`, `!=` by ±1
  ICmpInst::Predicate before;     // strict order along x's travel: `a before b`
};

// The tests a split can bound: x must travel towards n in the test's order, `!=` only when x meets
// n exactly (`meets_n`: a unit step, or one that divides n − start). x must not wrap in that order
// before the loop ends: SCEV's no-wrap flag says so, or the test itself does when the loop ends at
// the first value that fails it and x passes through it (`<`, `>` by ±1; `!=` meeting n). `!=`
// takes the signed order if x is nsw, else the unsigned one (either is right; the flag's order lets
// `at` be reached from a negative start).
std::optional<ExitTest> read_exit_test(ICmpInst::Predicate pred, const APInt &step, bool meets_n, bool nsw, bool nuw) {
  const bool up = step.isStrictlyPositive();
  ExitTest t{up, false, false, ICmpInst::BAD_ICMP_PREDICATE};
  switch (pred) {
    case ICmpInst::ICMP_SLT: case ICmpInst::ICMP_ULT: case ICmpInst::ICMP_SGT: case ICmpInst::ICMP_UGT:
      t.stops_at_bound = true;
      [[fallthrough]];
    case ICmpInst::ICMP_SLE: case ICmpInst::ICMP_ULE: case ICmpInst::ICMP_SGE: case ICmpInst::ICMP_UGE:
      if (ICmpInst::isLT(pred) || ICmpInst::isLE(pred) ? !up : up) return std::nullopt;
      t.is_signed = ICmpInst::isSigned(pred);
      break;
    case ICmpInst::ICMP_NE:
      if (!meets_n) return std::nullopt;
      t.is_signed = nsw;
      t.stops_at_bound = true;
      break;
    default: return std::nullopt;
  }
  if (!(t.is_signed ? nsw : nuw) && !(t.stops_at_bound && (step.abs().isOne() || (pred == ICmpInst::ICMP_NE && meets_n))))
    return std::nullopt;
  t.before = up ? (t.is_signed ? ICmpInst::ICMP_SLT : ICmpInst::ICMP_ULT)
                : (t.is_signed ? ICmpInst::ICMP_SGT : ICmpInst::ICMP_UGT);
  return t;
}

}  // namespace

bool LoopVersioner::split_at_threshold(Loop &base, BasicBlock *clone_entry, uint64_t threshold) {
  BasicBlock *header = base.getHeader();
  BasicBlock *preheader = base.getLoopPreheader();
  auto *br = dyn_cast<BranchInst>(header->getTerminator());
  if (!preheader || !br || !br->isConditional()) return false;
  // The clone starts by running the whole header again: it must have no effects of its own.
  for (Instruction &i : *header)
    if (!isa<PHINode>(i) && !i.isTerminator() && (i.mayHaveSideEffects() || isa<AllocaInst>(i))) return false;
  auto *cmp = dyn_cast<ICmpInst>(br->getCondition());
  if (!cmp) return false;
  unsigned stay = base.contains(br->getSuccessor(0)) ? 0 : 1;
  if (!base.contains(br->getSuccessor(stay)) || base.contains(br->getSuccessor(1 - stay))) return false;
  BasicBlock *exit = br->getSuccessor(1 - stay);
  // Normalised: the loop goes on while `x pred n`.
  ICmpInst::Predicate pred = stay == 0 ? cmp->getPredicate() : cmp->getInversePredicate();
  Value *x = cmp->getOperand(0), *n = cmp->getOperand(1);
  Scev scev(f_, dt_, li_);
  ScalarEvolution &se = scev.se;
  // Invariant as a value, even if computed in the header (`p < a + n` at -O0).
  auto invariant = [&](Value *v) { return se.isLoopInvariant(se.getSCEV(v), &base); };
  if (!invariant(n)) {
    std::swap(x, n);
    pred = ICmpInst::getSwappedPredicate(pred);
  }
  if (!invariant(n) || !(x->getType()->isIntegerTy() || x->getType()->isPointerTy())) return false;
  const auto *rec = dyn_cast<SCEVAddRecExpr>(se.getSCEV(x));
  if (!rec || rec->getLoop() != &base || !rec->isAffine()) return false;
  const auto *step = dyn_cast<SCEVConstant>(rec->getStepRecurrence(se));
  if (!step || step->getAPInt().isZero()) return false;
  // x meets n exactly: a unit step, or one that divides the distance (`p != a + n` by elements).
  const SCEV *distance = se.getMinusSCEV(se.getSCEV(n), rec->getStart());
  const SCEV *step_size = se.getConstant(step->getAPInt().abs());
  bool meets_n = step->getAPInt().abs().isOne() ||
                 (distance->getType() == step_size->getType() && se.getURemExpr(distance, step_size)->isZero());
  std::optional<ExitTest> test = read_exit_test(pred, step->getAPInt(), meets_n, rec->getNoWrapFlags(SCEV::FlagNSW) != 0,
                                                rec->getNoWrapFlags(SCEV::FlagNUW) != 0);
  if (!test) return false;
  // x at header execution T: start ± (T - 1) * |step|, if that fits (else x never gets there).
  // A pointer (ordered unsigned) is computed on its address bits, its step being in bytes.
  const DataLayout &dl = f_.getParent()->getDataLayout();
  const bool pointer = x->getType()->isPointerTy();
  if (pointer && pred == ICmpInst::ICMP_NE) {  // `!=` by ±1 needs no flag; addresses are unsigned
    test->is_signed = false;
    test->before = test->up ? ICmpInst::ICMP_ULT : ICmpInst::ICMP_UGT;
  }
  if (pointer && test->is_signed) return false;
  unsigned width = pointer ? dl.getIndexTypeSizeInBits(x->getType()) : x->getType()->getIntegerBitWidth();
  APInt executions(width + 64, std::max<uint64_t>(threshold, 1) - 1);
  APInt span = executions * step->getAPInt().abs().zext(width + 64);
  if (span.getActiveBits() > (test->is_signed ? width - 1 : width)) return false;
  if (!isSafeToExpand(rec->getStart(), se) || !isSafeToExpand(se.getSCEV(n), se)) return false;
  SCEVExpander expander(se, dl, "hcct.osr");
  IRBuilder<> b(preheader->getTerminator());
  Value *start = expander.expandCodeFor(rec->getStart(), x->getType(), preheader->getTerminator());
  // n in the preheader (the bound is computed there); the header keeps using its own n.
  Value *limit = base.isLoopInvariant(n) ? n : expander.expandCodeFor(se.getSCEV(n), n->getType(), preheader->getTerminator());
  Intrinsic::ID move = test->up ? (test->is_signed ? Intrinsic::sadd_with_overflow : Intrinsic::uadd_with_overflow)
                                : (test->is_signed ? Intrinsic::ssub_with_overflow : Intrinsic::usub_with_overflow);
  Type *bits = pointer ? dl.getIndexType(x->getType()) : x->getType();
  Value *sum = b.CreateBinaryIntrinsic(move, pointer ? b.CreatePtrToInt(start, bits) : start,
                                       ConstantInt::get(bits, span.trunc(width)));
  Value *at = b.CreateExtractValue(sum, 0, "hcct.osr.at");
  Value *beyond = b.CreateExtractValue(sum, 1);
  if (pointer) {
    // Only compared, never dereferenced: the address from the same pointer, not inbounds.
    Value *bytes = b.CreateBitCast(start, b.getInt8PtrTy(x->getType()->getPointerAddressSpace()));
    Value *offset = ConstantInt::get(bits, (test->up ? span : -span).trunc(width));
    at = b.CreateBitCast(b.CreateGEP(b.getInt8Ty(), bytes, offset), x->getType(), "hcct.osr.at");
  }
  // The base loop's new test. When x stops exactly at the value that ends the loop (`<`, `>`, and
  // `!=` with a unit step), one compare against the nearer of n and `at` does (nothing per
  // iteration); a non-strict test (`<=`, `>=`) keeps its compare and adds `x` strictly before `at`.
  IRBuilder<> h(br);
  Value *go_on = nullptr;
  if (test->stops_at_bound) {
    Value *nearer = b.CreateICmp(test->before, at, limit);
    Value *bound = b.CreateSelect(b.CreateAnd(nearer, b.CreateNot(beyond)), at, limit, "hcct.osr.bound");
    go_on = h.CreateICmp(pred, x, bound, "hcct.osr.below");
  } else {
    Value *before_at = h.CreateOr(beyond, h.CreateICmp(test->before, x, at), "hcct.osr.before");
    go_on = h.CreateAnd(h.CreateICmp(pred, x, n), before_at, "hcct.osr.below");
  }
  // The base loop stops at the bound; the clone takes over if the loop was not done.
  BasicBlock *split = BasicBlock::Create(f_.getContext(), header->getName() + ".osr.split", &f_, exit);
  BranchInst *nb = BranchInst::Create(br->getSuccessor(stay), split, go_on, header);
  nb->copyMetadata(*br);
  nb->setMetadata(LLVMContext::MD_prof, nullptr);
  br->eraseFromParent();
  IRBuilder<> s(split);
  s.SetCurrentDebugLocation(nb->getDebugLoc());
  s.CreateCondBr(s.CreateICmp(pred, x, n, "hcct.osr.more"), clone_entry, exit);
  for (PHINode &phi : exit->phis()) phi.replaceIncomingBlockWith(header, split);
  for (PHINode &phi : clone_entry->phis()) phi.replaceIncomingBlockWith(header, split);
  return true;
}

void LoopVersioner::insert_trigger(Loop &base, BasicBlock *clone_entry, uint64_t threshold) {
  BasicBlock *header = base.getHeader();
  LLVMContext &ctx = f_.getContext();
  Type *i64 = Type::getInt64Ty(ctx);
  // Header executions of this entry; a register, so thread- and recursion-safe.
  PHINode *count = PHINode::Create(i64, 2, "hcct.osr.count", header->getFirstNonPHI());
  IRBuilder<> b(header->getFirstNonPHI());
  b.SetCurrentDebugLocation(header->getTerminator()->getDebugLoc());
  Value *next = b.CreateAdd(count, ConstantInt::get(i64, 1), "hcct.osr.next", /*HasNUW=*/true);
  // Threshold 0 switches at the first header execution, like 1.
  Value *hit = b.CreateICmpEQ(next, ConstantInt::get(i64, std::max<uint64_t>(threshold, 1)), "hcct.osr.hit");
  for (BasicBlock *pred : predecessors(header)) count->addIncoming(base.contains(pred) ? next : ConstantInt::get(i64, 0), pred);
  BasicBlock *rest = SplitBlock(header, cast<Instruction>(hit)->getNextNode(), &dt_, &li_, nullptr,
                                header->getName() + ".base");
  Instruction *old = header->getTerminator();
  // Taken once per entry that reaches the threshold.
  MDNode *weights = MDBuilder(ctx).createBranchWeights(1, uint32_t(std::min<uint64_t>(threshold, UINT32_MAX - 1) + 1));
  BranchInst *transfer = BranchInst::Create(clone_entry, rest, hit, header);
  transfer->setMetadata(LLVMContext::MD_prof, weights);
  transfer->setDebugLoc(old->getDebugLoc());
  old->eraseFromParent();
}

void LoopVersioner::refuse(const Loop *loop, BasicBlock *header, const std::string &what, const std::string &why) {
  remarks_.emit([&] {
    DebugLoc loc = loop ? loop->getStartLoc() : DebugLoc();
    return OptimizationRemarkMissed(kOsrRemarkPass, "NotVersioned", loc, header)
           << "loop " << what << " not versioned: " << why;
  });
}

void LoopVersioner::promote_allocas() {
  std::vector<AllocaInst *> allocas;
  for (Instruction &i : f_.getEntryBlock())
    if (auto *a = dyn_cast<AllocaInst>(&i); a && isAllocaPromotable(a)) allocas.push_back(a);
  if (allocas.empty()) return;
  PromoteMemToReg(allocas, dt_);
  recompute();
}

std::string LoopVersioner::specialize(Loop &clone, const std::vector<PathPattern> &patterns, ValueToValueMapTy &map) {
  Scev scev(f_, dt_, li_);
  PathSpecializer specializer(clone, dt_, scev.se);
  std::string text;
  for (const PathPattern &p : patterns) {
    std::vector<BasicBlock *> blocks;
    for (BasicBlock *b : p.blocks)
      if (Value *twin = map.lookup(b)) blocks.push_back(cast<BasicBlock>(twin));
    std::string why = blocks.size() == p.blocks.size() ? specializer.add(blocks, p.factor) : "a block of the path is not in the loop";
    std::string pattern = "path " + std::to_string(p.path) + " x" + std::to_string(p.factor);
    if (why.empty()) {
      text += "; the clone is specialised for " + pattern + " (one guard checks its branches for " +
              std::to_string(p.factor) + " iterations";
      if (unsigned kept = specializer.kept_branches())
        text += "; " + std::to_string(kept) +
                (kept == 1 ? " branch on the iteration's own values stays" : " branches on the iteration's own values stay") +
                " in the fast loop";
      text += ")";
    }
    else
      text += "; not specialised for " + pattern + ": " + why;
  }
  specializer.build();
  return text;
}

bool LoopVersioner::version(BasicBlock *header, uint64_t threshold, const std::string &what,
                            const std::vector<PathPattern> &patterns) {
  promote_allocas();  // SCEV (the split trigger, specialisation) needs SSA form
  Loop *loop = li_.getLoopFor(header);
  if (!loop || loop->getHeader() != header) {
    refuse(nullptr, header, what, "not a natural loop (irreducible control flow)");
    return false;
  }
  if (std::string why = refusal(*loop); !why.empty()) {
    refuse(loop, header, what, why);
    return false;
  }
  if (std::string why = canonicalize(*loop); !why.empty()) {
    refuse(loop, header, what, why);
    return false;
  }
  SmallVector<BasicBlock *, 8> exits;
  loop->getUniqueExitBlocks(exits);
  // An empty block between the preheader and the header: cloned, it becomes the clone's entry,
  // which only the transfer edge reaches (a preheader's own code and phis must not run twice).
  BasicBlock *preheader = loop->getLoopPreheader();
  BasicBlock *entry = SplitBlock(preheader, preheader->getTerminator(), &dt_, &li_, nullptr,
                                 header->getName() + ".osr.from");
  ValueToValueMapTy map;
  SmallVector<BasicBlock *, 32> blocks;
  cloneLoopWithPreheader(entry, header, loop, map, ".osr", &li_, &dt_, blocks);
  remapInstructionsInBlocks(blocks, map);
  auto *clone_entry = cast<BasicBlock>(map[entry]);
  merge_exits(*loop, exits, map);
  map_header_state(header, clone_entry, map);
  bool split = split_at_threshold(*loop, clone_entry, threshold);
  if (!split) insert_trigger(*loop, clone_entry, threshold);
  DebugLoc loc = loop->getStartLoc();
  recompute();
  std::string specialised;
  if (!patterns.empty()) {
    auto *clone_header = cast<BasicBlock>(map[header]);
    specialised = specialize(*li_.getLoopFor(clone_header), patterns, map);
    recompute();
  }
  remarks_.emit([&] {
    return OptimizationRemark(kOsrRemarkPass, "Versioned", loc, header)
           << "loop " << what << " versioned: the base loop transfers to its clone at header execution "
           << std::to_string(std::max<uint64_t>(threshold, 1)) << " of each entry ("
           << (split ? "iteration space split at the threshold" : "counter") << ")" << specialised;
  });
  return true;
}

}  // namespace hcct::kpath
