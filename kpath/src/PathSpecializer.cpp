#include "PathSpecializer.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "llvm/ADT/DenseSet.h"
#include "llvm/Analysis/IVDescriptors.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/VectorUtils.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

namespace hcct::kpath {

using namespace llvm;

namespace {

std::string where(const Instruction &i) {
  if (const DebugLoc &loc = i.getDebugLoc(); loc && loc.getLine()) return " (line " + std::to_string(loc.getLine()) + ")";
  return "";
}

// "a store", "an invoke": the opcode with its article, for remarks.
std::string an(const Instruction &i) {
  std::string name = i.getOpcodeName();
  return (std::strchr("aeiou", name[0]) ? "an " : "a ") + name;
}

bool is_division(const Instruction &i) {
  switch (i.getOpcode()) {
    case Instruction::UDiv:
    case Instruction::SDiv:
    case Instruction::URem:
    case Instruction::SRem:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool PathSpecializer::affine_pointer(Value *pointer) const {
  const auto *rec = dyn_cast<SCEVAddRecExpr>(se_.getSCEV(pointer));
  return rec && rec->getLoop() == &loop_ && rec->isAffine();
}

std::string PathSpecializer::check_tree(Plan &p, Value *v, bool allow_loads, bool *reads) {
  auto *i = dyn_cast<Instruction>(v);
  if (!i || !loop_.contains(i)) return "";  // invariant
  if (auto *phi = dyn_cast<PHINode>(i)) {
    if (phi->getParent() == loop_.getHeader() && iv_step_.count(phi)) return "";
    return "a branch of the path depends on a value carried across iterations that is not an induction variable" +
           where(*i);
  }
  if (auto *load = dyn_cast<LoadInst>(i)) {
    if (!allow_loads) return "an address on the path depends on memory" + where(*i);
    if (!load->isSimple()) return "a branch of the path depends on a volatile or atomic load" + where(*i);
    SmallVector<BasicBlock *, 4> latches;
    loop_.getLoopLatches(latches);
    for (BasicBlock *latch : latches)
      if (!dt_.dominates(load->getParent(), latch))
        return "a branch of the path depends on a load that not every iteration executes" + where(*i);
    if (!affine_pointer(load->getPointerOperand()))
      return "a branch of the path depends on a load whose address is not affine in the loop" + where(*i);
    bool pointer_reads = false;
    if (std::string why = check_tree(p, load->getPointerOperand(), false, &pointer_reads); !why.empty()) return why;
    *reads = true;
    const DataLayout &dl = i->getModule()->getDataLayout();
    p.guard_loads.push_back({load->getPointerOperand(), dl.getTypeStoreSize(load->getType()).getFixedSize()});
    return "";
  }
  bool pure = (isa<BinaryOperator>(i) && !is_division(*i)) || isa<CastInst>(i) || isa<GetElementPtrInst>(i) ||
              isa<CmpInst>(i) || isa<SelectInst>(i) || isa<FreezeInst>(i);
  if (!pure) return "a branch of the path depends on " + an(*i) + where(*i);
  for (Value *op : i->operands())
    if (std::string why = check_tree(p, op, allow_loads, reads); !why.empty()) return why;
  return "";
}

std::string PathSpecializer::check(Plan &p, ArrayRef<BasicBlock *> path) {
  BasicBlock *header = loop_.getHeader();
  if (path.empty() || path.front() != header) return "the path does not start at the loop header";
  DenseSet<BasicBlock *> on_path;
  for (size_t k = 0; k < path.size(); ++k) {
    BasicBlock *b = path[k];
    BasicBlock *next = k + 1 < path.size() ? path[k + 1] : header;
    if (!on_path.insert(b).second) return "the path repeats a block";
    if (!loop_.contains(b)) return "the path leaves the loop";
    for (const Loop *inner : loop_.getSubLoops())
      if (inner->contains(b)) return "the path enters an inner loop";
    if (std::find(succ_begin(b), succ_end(b), next) == succ_end(b)) return "the path is not a path of this loop's CFG";
    auto *br = dyn_cast<BranchInst>(b->getTerminator());
    if (!br) return an(*b->getTerminator()) + " on the path";
    if (br->isConditional() && br->getSuccessor(0) != br->getSuccessor(1)) {
      Condition c{br->getCondition(), br->getSuccessor(0) == next, false};
      c.block = b;
      c.next = next;
      p.conditions.push_back(c);
    }
  }
  if (!loop_.isLoopLatch(path.back())) return "the path does not end on a back edge";
  p.body.assign(path.begin(), path.end());
  p.path_length = path.size();
  p.in_body.insert(path.begin(), path.end());

  for (PHINode &phi : header->phis())
    if (const auto *rec = dyn_cast<SCEVAddRecExpr>(se_.getSCEV(&phi)); rec && rec->getLoop() == &loop_ && rec->isAffine())
      if (const auto *step = dyn_cast<SCEVConstant>(rec->getStepRecurrence(se_)))
        iv_step_[&phi] = step->getAPInt().getSExtValue();

  bool any_reads = false;
  for (Condition &c : p.conditions) {
    size_t loads_before = p.guard_loads.size();
    if (std::string why = check_tree(p, c.value, true, &c.reads_memory); !why.empty()) {
      // Not computable before the window runs: the fast loop keeps the branch if it can.
      p.guard_loads.resize(loads_before);
      c.reads_memory = false;
      if (!keep_branch(p, c, on_path).empty()) return why;
      c.kept = true;
      continue;
    }
    any_reads |= c.reads_memory;
    if (!c.reads_memory) find_monotone(c);
  }
  const DataLayout &dl = header->getModule()->getDataLayout();
  for (BasicBlock *b : p.body)
    for (Instruction &i : *b) {
      if (!i.mayWriteToMemory()) continue;
      auto *store = dyn_cast<StoreInst>(&i);
      if (!store || !store->isSimple()) return an(i) + " that may write memory on the path" + where(i);
      bool reads = false;
      if (!affine_pointer(store->getPointerOperand()) || !check_tree(p, store->getPointerOperand(), false, &reads).empty())
        return "a store on the path whose address is not affine in the loop" + where(i);
      p.stores.push_back({store->getPointerOperand(), dl.getTypeStoreSize(store->getValueOperand()->getType()).getFixedSize()});
    }
  for (BasicBlock *b : p.body)
    for (Instruction &i : *b)
      if (auto *load = dyn_cast<LoadInst>(&i)) {
        bool reads = false;
        // An invariant address is a one-element range: checked against the stores as well.
        Value *address = load->getPointerOperand();
        if (load->isSimple() && (affine_pointer(address) || se_.isLoopInvariant(se_.getSCEV(address), &loop_)) &&
            check_tree(p, address, false, &reads).empty())
          p.path_loads.push_back({load->getPointerOperand(), dl.getTypeStoreSize(load->getType()).getFixedSize()});
        else
          p.path_loads_affine = false;
      }
  if (!any_reads) return "";
  // The guard loads for iterations 1..F-1 before they run: only where they would run them.
  SmallVector<BasicBlock *, 4> exiting;
  loop_.getExitingBlocks(exiting);
  for (BasicBlock *b : exiting) {
    if (!on_path.count(b)) return "the loop can be left from a block off the path, so the guard's loads would be speculative";
    for (const Condition &c : p.conditions)
      if (cast<BranchInst>(b->getTerminator())->isConditional() &&
          cast<BranchInst>(b->getTerminator())->getCondition() == c.value && c.reads_memory)
        return "the loop's exit depends on memory, so the guard's loads would be speculative";
  }
  for (BasicBlock *b : loop_.blocks())
    for (Instruction &i : *b) {
      if (!isGuaranteedToTransferExecutionToSuccessor(&i))
        return an(i) + " that might not return is in the loop" + where(i);
      if (isa<CallBase>(i) && i.mayWriteToMemory()) return "a call that may write memory is in the loop" + where(i);
    }
  return "";
}

std::string PathSpecializer::keep_branch(Plan &p, const Condition &c, const DenseSet<BasicBlock *> &on_path) {
  auto *br = cast<BranchInst>(c.block->getTerminator());
  SmallVector<BasicBlock *, 8> work{br->getSuccessor(c.taken ? 1 : 0)};
  SmallVector<BasicBlock *, 8> region;
  DenseSet<BasicBlock *> seen;
  while (!work.empty()) {
    BasicBlock *b = work.pop_back_val();
    // Back on the path (the header included: the iteration ends there), or kept already.
    if (on_path.count(b) || p.in_body.count(b) || !seen.insert(b).second) continue;
    if (!loop_.contains(b)) return "the branch leads out of the loop";
    for (const Loop *inner : loop_.getSubLoops())
      if (inner->contains(b)) return "the branch leads into an inner loop";
    if (!isa<BranchInst>(b->getTerminator())) return "the branch leads to " + an(*b->getTerminator());
    for (Instruction &i : *b)
      if (i.mayWriteToMemory()) return "the branch leads to " + an(i) + " that may write memory" + where(i);
    region.push_back(b);
    for (BasicBlock *next : successors(b)) work.push_back(next);
  }
  p.body.append(region.begin(), region.end());
  p.in_body.insert(region.begin(), region.end());
  return "";
}

bool PathSpecializer::vectorisable(const Plan &p) {
  // The loop state: inductions and reductions as LLVM's own descriptors see them in the loop.
  for (PHINode &phi : loop_.getHeader()->phis()) {
    RecurrenceDescriptor reduction;
    if (!iv_step_.count(&phi) && !RecurrenceDescriptor::isReductionPHI(&phi, &loop_, reduction, nullptr, nullptr, &dt_))
      return false;
  }
  // Memory the vectoriser can analyse where it must (stores are affine already: every load must be
  // too, or invariant), and no access under a kept branch (SSE cannot if-convert one: no masked
  // loads or stores).
  if (!p.stores.empty() && !p.path_loads_affine) return false;
  for (BasicBlock *b : p.body)
    for (Instruction &i : *b) {
      if (auto *call = dyn_cast<CallBase>(&i)) {
        auto *intrinsic = dyn_cast<IntrinsicInst>(call);
        if (!intrinsic || !(isTriviallyVectorizable(intrinsic->getIntrinsicID()) || isa<DbgInfoIntrinsic>(intrinsic) ||
                            intrinsic->isAssumeLikeIntrinsic()))
          return false;
      }
    }
  for (size_t k = p.path_length; k < p.body.size(); ++k)
    for (Instruction &i : *p.body[k])
      if (i.mayReadOrWriteMemory() && !isa<DbgInfoIntrinsic>(i)) return false;
  return true;
}

void PathSpecializer::find_monotone(Condition &c) {
  auto *cmp = dyn_cast<ICmpInst>(c.value);
  if (!cmp || cmp->isEquality()) return;
  for (int side = 0; side < 2; ++side) {
    Value *affine = cmp->getOperand(side), *other = cmp->getOperand(1 - side);
    if (!affine->getType()->isIntegerTy() || !loop_.isLoopInvariant(other)) continue;
    const auto *rec = dyn_cast<SCEVAddRecExpr>(se_.getSCEV(affine));
    if (!rec || rec->getLoop() != &loop_ || !rec->isAffine()) continue;
    const auto *step = dyn_cast<SCEVConstant>(rec->getStepRecurrence(se_));
    if (!step || step->getAPInt().getMinSignedBits() > 32) continue;
    int64_t s = step->getAPInt().getSExtValue();
    if (s == 0 || (cmp->isUnsigned() && s < 0)) continue;
    c.affine_side = side;
    c.affine_step = s;
    return;
  }
}

Value *PathSpecializer::holds_in_window(const Condition &c, unsigned factor, IRBuilder<> &b) {
  auto want = [&](Value *v) { return c.taken ? v : b.CreateNot(v); };
  if (c.affine_side < 0) {
    Value *ok = b.getTrue();
    for (unsigned j = 0; j < factor; ++j) ok = b.CreateAnd(ok, want(at_iteration(c.value, j, b)));
    return ok;
  }
  // x_j = x_0 + j * step is monotone while it does not wrap, and an ordered compare with an
  // invariant is then true on a prefix or a suffix of the window: both ends decide.
  auto *cmp = cast<ICmpInst>(c.value);
  Value *first = at_iteration(cmp, 0, b);
  Value *x0 = at_iteration(cmp->getOperand(c.affine_side), 0, b);
  Value *other = cmp->getOperand(1 - c.affine_side);
  Value *span = ConstantInt::get(x0->getType(), uint64_t(c.affine_step * int64_t(factor - 1)), true);
  Intrinsic::ID add = cmp->isSigned() ? Intrinsic::sadd_with_overflow : Intrinsic::uadd_with_overflow;
  Value *sum = b.CreateBinaryIntrinsic(add, x0, span);
  Value *xl = b.CreateExtractValue(sum, 0), *wraps = b.CreateExtractValue(sum, 1);
  Value *last = c.affine_side == 0 ? b.CreateICmp(cmp->getPredicate(), xl, other) : b.CreateICmp(cmp->getPredicate(), other, xl);
  return b.CreateAnd(b.CreateAnd(want(first), want(last)), b.CreateNot(wraps));
}

Value *PathSpecializer::at_iteration(Value *v, unsigned j, IRBuilder<> &b) {
  // (The guard's phis are not in the loop as LoopInfo knows it: the induction variables first.)
  auto *i = dyn_cast<Instruction>(v);
  auto step = iv_step_.find(v);
  if (!i || (step == iv_step_.end() && !loop_.contains(i))) return v;
  DenseMap<Value *, Value *> &memo = memo_[j];
  if (Value *known = memo.lookup(v)) return known;
  Value *out;
  if (auto it = step; it != iv_step_.end()) {
    int64_t delta = it->second * int64_t(j);
    if (j == 0) {
      out = v;
    } else if (v->getType()->isPointerTy()) {
      Value *bytes = b.CreateBitCast(v, b.getInt8PtrTy(v->getType()->getPointerAddressSpace()));
      out = b.CreateBitCast(b.CreateGEP(b.getInt8Ty(), bytes, b.getInt64(uint64_t(delta))), v->getType());
    } else {
      out = b.CreateAdd(v, ConstantInt::get(v->getType(), uint64_t(delta), true));
    }
  } else {
    Instruction *copy = i->clone();
    for (Use &op : copy->operands()) op.set(at_iteration(op.get(), j, b));
    b.Insert(copy, i->getName() + ".it" + std::to_string(j));
    out = copy;
  }
  memo[v] = out;
  return out;
}

Value *PathSpecializer::disjoint(ArrayRef<Access> stores, ArrayRef<Access> loads, const Extremes &extremes, IRBuilder<> &b,
                                 const char *name) {
  // One range per pointer base (one array each, as a rule): a union over different arrays could
  // span an unrelated one.
  auto ranges = [&](ArrayRef<Access> accesses) {
    std::vector<std::pair<const SCEV *, std::pair<Value *, Value *>>> out;
    for (const Access &a : accesses) {
      auto [first, last] = extremes(a);
      Value *first_low = b.CreateICmpULE(first, last);
      Value *lo = b.CreateSelect(first_low, first, last);
      Value *hi = b.CreateAdd(b.CreateSelect(first_low, last, first), b.getInt64(a.bytes));
      const SCEV *base = se_.getPointerBase(se_.getSCEV(a.pointer));
      auto it = std::find_if(out.begin(), out.end(), [&](auto &g) { return g.first == base; });
      if (it == out.end()) {
        out.push_back({base, {lo, hi}});
      } else {
        it->second.first = b.CreateSelect(b.CreateICmpULT(lo, it->second.first), lo, it->second.first);
        it->second.second = b.CreateSelect(b.CreateICmpUGT(hi, it->second.second), hi, it->second.second);
      }
    }
    return out;
  };
  auto store_ranges = ranges(stores), load_ranges = ranges(loads);
  Value *ok = b.getTrue();
  for (auto &[sb, store] : store_ranges)
    for (auto &[lb, load] : load_ranges)
      ok = b.CreateAnd(ok, b.CreateOr(b.CreateICmpULE(store.second, load.first), b.CreateICmpULE(load.second, store.first)),
                       name);
  return ok;
}

Value *PathSpecializer::no_overlap(ArrayRef<Access> stores, ArrayRef<Access> loads, unsigned factor, IRBuilder<> &b) {
  // Affine addresses: each access's extremes in the window are its first and last iteration's.
  auto window = [&](const Access &a) {
    return std::pair{b.CreatePtrToInt(at_iteration(a.pointer, 0, b), b.getInt64Ty()),
                     b.CreatePtrToInt(at_iteration(a.pointer, factor - 1, b), b.getInt64Ty())};
  };
  return disjoint(stores, loads, window, b, "hcct.spec.disjoint");
}

void PathSpecializer::mark_independent(ArrayRef<BasicBlock *> blocks) {
  // As LoopVersioning does for the accesses its run-time checks separated: the copies' stores get
  // a scope of their own, their loads say that they do not alias it.
  MDBuilder mdb(loop_.getHeader()->getContext());
  MDNode *domain = mdb.createAnonymousAliasScopeDomain("hcct.spec");
  MDNode *scope = mdb.createAnonymousAliasScope(domain, "hcct.spec.stores");
  MDNode *list = MDNode::get(scope->getContext(), {scope});
  for (BasicBlock *b : blocks)
    for (Instruction &i : *b) {
      if (isa<StoreInst>(i))
        i.setMetadata(LLVMContext::MD_alias_scope, MDNode::concatenate(i.getMetadata(LLVMContext::MD_alias_scope), list));
      else if (isa<LoadInst>(i))
        i.setMetadata(LLVMContext::MD_noalias, MDNode::concatenate(i.getMetadata(LLVMContext::MD_noalias), list));
    }
}

void PathSpecializer::build() {
  if (plans_.empty()) return;
  BasicBlock *header = loop_.getHeader();
  Function &f = *header->getParent();
  LLVMContext &ctx = f.getContext();
  // Before the loop changes: SCEV sees it as it was.
  for (Plan &p : plans_)
    if (!p.stores.empty()) p.disjoint_whole_loop = disjoint_whole_loop(p);

  // G takes over the header's role: its phis are the loop state, and every edge into the header
  // now goes to G.
  BasicBlock *guard = BasicBlock::Create(ctx, header->getName() + ".spec.guard", &f, header);
  SmallVector<BasicBlock *, 8> preds(predecessors(header));
  DenseMap<Value *, int64_t> steps;
  SmallVector<PHINode *, 8> state;
  for (PHINode &phi : make_early_inc_range(header->phis())) {
    PHINode *g = PHINode::Create(phi.getType(), phi.getNumIncomingValues() + 1, phi.getName() + ".spec", guard);
    for (unsigned n = 0; n < phi.getNumIncomingValues(); ++n) g->addIncoming(phi.getIncomingValue(n), phi.getIncomingBlock(n));
    if (auto it = iv_step_.find(&phi); it != iv_step_.end()) steps[g] = it->second;
    // The conditions and accesses recorded by check() may be the phi itself.
    for (Plan &p : plans_) {
      for (Condition &c : p.conditions)
        if (c.value == &phi) c.value = g;
      for (SmallVectorImpl<Access> *accesses : std::initializer_list<SmallVectorImpl<Access> *>{&p.stores, &p.guard_loads, &p.path_loads})
        for (Access &a : *accesses)
          if (a.pointer == &phi) a.pointer = g;
    }
    phi.replaceAllUsesWith(g);
    phi.eraseFromParent();
    state.push_back(g);
  }
  iv_step_ = std::move(steps);
  DenseSet<BasicBlock *> seen;
  for (BasicBlock *p : preds)
    if (seen.insert(p).second) p->getTerminator()->replaceUsesOfWith(header, guard);

  // Back-off: after every guard failed the generic body runs F iterations (the smallest factor)
  // before the next try, so that a run of another path pays for one try per F iterations.
  unsigned smallest = plans_.front().factor;
  for (const Plan &p : plans_) smallest = std::min(smallest, p.factor);
  Type *i32 = Type::getInt32Ty(ctx);
  PHINode *skip = PHINode::Create(i32, preds.size() + plans_.size(), "hcct.spec.skip", guard);
  SmallVector<BasicBlock *, 4> checks;
  for (size_t k = 0; k < plans_.size(); ++k)
    checks.push_back(BasicBlock::Create(ctx, header->getName() + ".spec.check" + std::to_string(k), &f, header));
  IRBuilder<> top(guard);
  Value *skipping = top.CreateICmpNE(skip, ConstantInt::get(i32, 0));
  Value *skip_less = top.CreateSub(skip, ConstantInt::get(i32, 1));
  top.CreateCondBr(skipping, header, checks.front());
  PHINode *generic_skip = PHINode::Create(i32, 3, "hcct.spec.skip.left", &*header->getFirstInsertionPt());
  generic_skip->addIncoming(skip_less, guard);
  for (BasicBlock *p : preds) skip->addIncoming(loop_.contains(p) ? static_cast<Value *>(generic_skip) : ConstantInt::get(i32, 0), p);

  // The patterns' guards in order: each failure tries the next, the last one's the generic body.
  for (size_t k = 0; k < plans_.size(); ++k) {
    BasicBlock *failed = k + 1 < plans_.size() ? checks[k + 1] : header;
    auto fail_to = [&](BasicBlock *from) {
      if (failed == header) generic_skip->addIncoming(ConstantInt::get(i32, smallest - 1), from);
      return failed;
    };
    BasicBlock *fast_entry = build_guard(plans_[k], checks[k], fail_to);
    build_fast_loop(plans_[k], fast_entry, guard, state, skip);
  }
}

Value *PathSpecializer::disjoint_whole_loop(const Plan &p) {
  // LoopVersioning's check, once per entry of the clone instead of once per window: each access's
  // extremes over the rest of the loop are its first and last iteration's (affine), or itself.
  BasicBlock *preheader = loop_.getLoopPreheader();
  const SCEV *last = se_.getBackedgeTakenCount(&loop_);
  if (!preheader || isa<SCEVCouldNotCompute>(last)) return nullptr;
  ArrayRef<Access> loads = p.independent ? ArrayRef<Access>(p.path_loads) : p.guard_loads;
  DenseMap<Value *, std::pair<const SCEV *, const SCEV *>> extremes;
  for (ArrayRef<Access> accesses : {ArrayRef<Access>(p.stores), loads})
    for (const Access &a : accesses) {
      const SCEV *s = se_.getSCEV(a.pointer);
      std::pair<const SCEV *, const SCEV *> e{s, s};
      if (const auto *rec = dyn_cast<SCEVAddRecExpr>(s); rec && rec->getLoop() == &loop_ && rec->isAffine())
        e = {rec->getStart(), rec->evaluateAtIteration(last, se_)};
      else if (!se_.isLoopInvariant(s, &loop_))
        return nullptr;
      if (!isSafeToExpand(e.first, se_) || !isSafeToExpand(e.second, se_)) return nullptr;
      extremes[a.pointer] = e;
    }
  SCEVExpander expander(se_, preheader->getModule()->getDataLayout(), "hcct.spec.whole");
  IRBuilder<> b(preheader->getTerminator());
  auto address = [&](const SCEV *s) {
    return b.CreatePtrToInt(expander.expandCodeFor(s, nullptr, preheader->getTerminator()), b.getInt64Ty());
  };
  auto whole_loop = [&](const Access &a) {
    auto [first, end] = extremes.lookup(a.pointer);
    return std::pair{address(first), address(end)};
  };
  return disjoint(p.stores, loads, whole_loop, b, "hcct.spec.disjoint.loop");
}

BasicBlock *PathSpecializer::build_guard(Plan &p, BasicBlock *check, const std::function<BasicBlock *(BasicBlock *)> &fail_to) {
  // (Values of another pattern's guard need not dominate this one's.)
  memo_.assign(p.factor, DenseMap<Value *, Value *>());
  LLVMContext &ctx = check->getContext();
  Function &f = *check->getParent();
  BasicBlock *header = loop_.getHeader();
  // The guard: memory-free conditions and the overlap checks first, then the loads.
  IRBuilder<> b(check);
  Value *ok = b.getTrue();
  for (const Condition &c : p.conditions)
    if (!c.reads_memory && !c.kept) ok = b.CreateAnd(ok, holds_in_window(c, p.factor, b));
  // Reads of the guard after the window's stores must see nothing they wrote; with every load of
  // the fast loop checked, its loads and stores are independent, which the metadata says.
  ArrayRef<Access> checked_loads = p.independent ? ArrayRef<Access>(p.path_loads) : p.guard_loads;
  if (!p.stores.empty() && !p.disjoint_whole_loop) ok = b.CreateAnd(ok, no_overlap(p.stores, checked_loads, p.factor, b));
  BasicBlock *fast_entry = BasicBlock::Create(ctx, header->getName() + ".spec.fast", &f, header);
  BasicBlock *after_guard = fast_entry;
  if (!p.guard_loads.empty()) after_guard = BasicBlock::Create(ctx, header->getName() + ".spec.loads", &f, fast_entry);
  if (p.disjoint_whole_loop) {
    // Disjoint over the whole rest of the loop (checked once, in the preheader): no window check.
    // Else the window's own, in a block of its own, whose values the later blocks do not see.
    BasicBlock *window = BasicBlock::Create(ctx, header->getName() + ".spec.overlap", &f, after_guard);
    BasicBlock *memory_ok = BasicBlock::Create(ctx, header->getName() + ".spec.disjoint", &f, after_guard);
    b.CreateCondBr(ok, memory_ok, fail_to(check));
    BranchInst::Create(after_guard, window, p.disjoint_whole_loop, memory_ok);
    IRBuilder<> w(window);
    auto kept = memo_;
    Value *window_ok = no_overlap(p.stores, checked_loads, p.factor, w);
    memo_ = std::move(kept);
    w.CreateCondBr(window_ok, after_guard, fail_to(window));
  } else {
    b.CreateCondBr(ok, after_guard, fail_to(check));
  }
  if (after_guard != fast_entry) {
    IRBuilder<> l(after_guard);
    Value *ok_loads = l.getTrue();
    for (const Condition &c : p.conditions)
      if (c.reads_memory)
        for (unsigned j = 0; j < p.factor; ++j) {
          Value *v = at_iteration(c.value, j, l);
          ok_loads = l.CreateAnd(ok_loads, c.taken ? v : l.CreateNot(v));
        }
    l.CreateCondBr(ok_loads, fast_entry, fail_to(after_guard));
  }
  return fast_entry;
}

void PathSpecializer::build_fast_loop(Plan &p, BasicBlock *fast_entry, BasicBlock *guard, ArrayRef<PHINode *> state,
                                      PHINode *skip) {
  BasicBlock *header = loop_.getHeader();
  Function &f = *header->getParent();
  LLVMContext &ctx = f.getContext();
  Type *i32 = Type::getInt32Ty(ctx);
  // The fast loop: F iterations of a copy of the body, each guarded branch taken the path's way.
  BasicBlock *fast_header = BasicBlock::Create(ctx, header->getName() + ".spec.loop", &f, header);
  BasicBlock *fast_latch = BasicBlock::Create(ctx, header->getName() + ".spec.next", &f, header);
  BranchInst::Create(fast_header, fast_entry);
  PHINode *iteration = PHINode::Create(i32, 2, "hcct.spec.j", fast_header);
  iteration->addIncoming(ConstantInt::get(i32, 0), fast_entry);
  ValueToValueMapTy map;
  SmallVector<PHINode *, 8> fast_state;
  for (PHINode *g : state) {
    PHINode *s = PHINode::Create(g->getType(), 2, g->getName() + ".fast", fast_header);
    s->addIncoming(g, fast_entry);
    map[g] = s;
    fast_state.push_back(s);
  }
  SmallVector<BasicBlock *, 32> copies;
  DenseMap<BasicBlock *, BasicBlock *> original;
  for (BasicBlock *from : p.body) {
    BasicBlock *copy = CloneBasicBlock(from, map, ".fast", &f);
    copy->moveBefore(header);
    map[from] = copy;
    original[copy] = from;
    copies.push_back(copy);
  }
  // The header's only phi now is the back-off count, which the fast loop does not use.
  auto *header_copy = cast<BasicBlock>(map[header]);
  while (auto *phi = dyn_cast<PHINode>(&header_copy->front())) phi->eraseFromParent();
  BranchInst::Create(header_copy, fast_header);
  map[guard] = fast_latch;  // the back edges
  for (BasicBlock *copy : copies)
    for (Instruction &i : *copy) {
      RemapInstruction(&i, map, RF_NoModuleLevelChanges | RF_IgnoreMissingLocals);
      if (i.isTerminator()) i.setMetadata(LLVMContext::MD_loop, nullptr);
    }
  for (const Condition &c : p.conditions) {
    if (c.kept) continue;
    Instruction *branch = cast<BasicBlock>(map[c.block])->getTerminator();
    BranchInst::Create(c.next == header ? fast_latch : cast<BasicBlock>(map[c.next]), branch);
    branch->eraseFromParent();
  }
  // Phi entries of edges the folding removed.
  for (BasicBlock *copy : copies) {
    DenseSet<BasicBlock *> preds(pred_begin(copy), pred_end(copy));
    for (PHINode &phi : copy->phis())
      for (unsigned n = phi.getNumIncomingValues(); n-- > 0;)
        if (!preds.count(phi.getIncomingBlock(n))) phi.removeIncomingValue(n, /*DeletePHIIfEmpty=*/false);
  }

  // The fast latch: the state each back edge carries (G's value for that latch, as the copy
  // computed it), then F iterations done → G.
  SmallVector<BasicBlock *, 4> back_edges(predecessors(fast_latch));
  IRBuilder<> l(fast_latch);
  l.SetCurrentDebugLocation(p.latch_location);
  for (size_t n = 0; n < state.size(); ++n) {
    PHINode *next = l.CreatePHI(state[n]->getType(), back_edges.size(), state[n]->getName() + ".next");
    for (BasicBlock *from : back_edges) {
      Value *v = state[n]->getIncomingValueForBlock(original[from]);
      Value *mapped = map.lookup(v);
      next->addIncoming(mapped ? mapped : v, from);
    }
    fast_state[n]->addIncoming(next, fast_latch);
    state[n]->addIncoming(next, fast_latch);
  }
  Value *following = l.CreateAdd(iteration, ConstantInt::get(i32, 1), "hcct.spec.j.next");
  iteration->addIncoming(following, fast_latch);
  BranchInst *again = l.CreateCondBr(l.CreateICmpULT(following, ConstantInt::get(i32, p.factor)), fast_header, guard);
  // With a trip count of F the vectoriser's cost model gives up on a short loop; the guard has
  // already paid for the window, and the vectoriser still checks that it may. A width, not
  // `vectorize.enable`: a forced loop that it cannot vectorise is a -Wpass-failed warning for the
  // user. Not unrolled first: LLVM's full unroller runs before the vectoriser and would turn a
  // small body back into F straight-line copies.
  if (p.vectorisable) {
    MDNode *width = MDNode::get(ctx, {MDString::get(ctx, "llvm.loop.vectorize.width"),
                                      ConstantAsMetadata::get(ConstantInt::get(i32, p.factor))});
    MDNode *no_unroll = MDNode::get(ctx, {MDString::get(ctx, "llvm.loop.unroll.disable")});
    MDNode *id = MDNode::getDistinct(ctx, {nullptr, width, no_unroll});
    id->replaceOperandWith(0, id);
    again->setMetadata(LLVMContext::MD_loop, id);
  }
  skip->addIncoming(ConstantInt::get(i32, 0), fast_latch);
  if (p.independent) mark_independent(copies);
}

unsigned PathSpecializer::kept_branches() const {
  if (plans_.empty()) return 0;
  const auto &conditions = plans_.back().conditions;
  return unsigned(std::count_if(conditions.begin(), conditions.end(), [](const Condition &c) { return c.kept; }));
}

std::string PathSpecializer::add(ArrayRef<BasicBlock *> path, unsigned factor) {
  if (factor < 2) return "a factor below 2";
  Plan p;
  p.factor = factor;
  if (std::string why = check(p, path); !why.empty()) return why;
  p.latch_location = path.back()->getTerminator()->getDebugLoc();
  p.independent = !p.stores.empty() && p.path_loads_affine && !p.path_loads.empty();
  p.vectorisable = vectorisable(p);
  plans_.push_back(std::move(p));
  return "";
}

}  // namespace hcct::kpath
