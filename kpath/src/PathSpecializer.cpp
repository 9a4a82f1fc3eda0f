#include "PathSpecializer.h"

#include <cstring>

#include "llvm/ADT/DenseSet.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/MDBuilder.h"
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

std::string PathSpecializer::check_tree(Value *v, bool allow_loads, bool *reads) {
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
    if (std::string why = check_tree(load->getPointerOperand(), false, &pointer_reads); !why.empty()) return why;
    *reads = true;
    const DataLayout &dl = i->getModule()->getDataLayout();
    guard_loads_.push_back({load->getPointerOperand(), dl.getTypeStoreSize(load->getType()).getFixedSize()});
    return "";
  }
  bool pure = (isa<BinaryOperator>(i) && !is_division(*i)) || isa<CastInst>(i) || isa<GetElementPtrInst>(i) ||
              isa<CmpInst>(i) || isa<SelectInst>(i) || isa<FreezeInst>(i);
  if (!pure) return "a branch of the path depends on " + an(*i) + where(*i);
  for (Value *op : i->operands())
    if (std::string why = check_tree(op, allow_loads, reads); !why.empty()) return why;
  return "";
}

std::string PathSpecializer::check(ArrayRef<BasicBlock *> path) {
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
    if (br->isConditional() && br->getSuccessor(0) != br->getSuccessor(1))
      conditions_.push_back({br->getCondition(), br->getSuccessor(0) == next, false});
  }
  if (!loop_.isLoopLatch(path.back())) return "the path does not end on a back edge";

  for (PHINode &phi : header->phis())
    if (const auto *rec = dyn_cast<SCEVAddRecExpr>(se_.getSCEV(&phi)); rec && rec->getLoop() == &loop_ && rec->isAffine())
      if (const auto *step = dyn_cast<SCEVConstant>(rec->getStepRecurrence(se_)))
        iv_step_[&phi] = step->getAPInt().getSExtValue();

  bool any_reads = false;
  for (Condition &c : conditions_) {
    if (std::string why = check_tree(c.value, true, &c.reads_memory); !why.empty()) return why;
    any_reads |= c.reads_memory;
    if (!c.reads_memory) find_monotone(c);
  }
  const DataLayout &dl = header->getModule()->getDataLayout();
  for (BasicBlock *b : path)
    for (Instruction &i : *b) {
      if (!i.mayWriteToMemory()) continue;
      auto *store = dyn_cast<StoreInst>(&i);
      if (!store || !store->isSimple()) return an(i) + " that may write memory on the path" + where(i);
      bool reads = false;
      if (!affine_pointer(store->getPointerOperand()) || !check_tree(store->getPointerOperand(), false, &reads).empty())
        return "a store on the path whose address is not affine in the loop" + where(i);
      stores_.push_back({store->getPointerOperand(), dl.getTypeStoreSize(store->getValueOperand()->getType()).getFixedSize()});
    }
  for (BasicBlock *b : path)
    for (Instruction &i : *b)
      if (auto *load = dyn_cast<LoadInst>(&i)) {
        bool reads = false;
        if (load->isSimple() && affine_pointer(load->getPointerOperand()) &&
            check_tree(load->getPointerOperand(), false, &reads).empty())
          path_loads_.push_back({load->getPointerOperand(), dl.getTypeStoreSize(load->getType()).getFixedSize()});
        else
          path_loads_affine_ = false;
      }
  if (!any_reads) return "";
  // The guard loads for iterations 1..F-1 before they run: only where they would run them.
  SmallVector<BasicBlock *, 4> exiting;
  loop_.getExitingBlocks(exiting);
  for (BasicBlock *b : exiting) {
    if (!on_path.count(b)) return "the loop can be left from a block off the path, so the guard's loads would be speculative";
    for (const Condition &c : conditions_)
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

std::pair<Value *, Value *> PathSpecializer::window_range(ArrayRef<Access> group, unsigned factor, IRBuilder<> &b) {
  // Affine addresses: each access's extremes in the window are its first and last iteration's.
  Type *intptr = b.getInt64Ty();
  Value *lo = nullptr, *hi = nullptr;
  for (const Access &a : group) {
    Value *first = b.CreatePtrToInt(at_iteration(a.pointer, 0, b), intptr);
    Value *last = b.CreatePtrToInt(at_iteration(a.pointer, factor - 1, b), intptr);
    Value *first_low = b.CreateICmpULE(first, last);
    Value *a_lo = b.CreateSelect(first_low, first, last);
    Value *a_hi = b.CreateAdd(b.CreateSelect(first_low, last, first), b.getInt64(a.bytes));
    lo = lo ? b.CreateSelect(b.CreateICmpULT(a_lo, lo), a_lo, lo) : a_lo;
    hi = hi ? b.CreateSelect(b.CreateICmpUGT(a_hi, hi), a_hi, hi) : a_hi;
  }
  return {lo, hi};
}

Value *PathSpecializer::no_overlap(ArrayRef<Access> stores, ArrayRef<Access> loads, unsigned factor, IRBuilder<> &b) {
  // One range per pointer base (one array each, as a rule): a union over different arrays could
  // span an unrelated one.
  auto groups = [&](ArrayRef<Access> accesses) {
    std::vector<std::pair<const SCEV *, SmallVector<Access, 8>>> out;
    for (const Access &a : accesses) {
      const SCEV *base = se_.getPointerBase(se_.getSCEV(a.pointer));
      auto it = std::find_if(out.begin(), out.end(), [&](auto &g) { return g.first == base; });
      if (it == out.end()) it = out.insert(out.end(), {base, {}});
      it->second.push_back(a);
    }
    return out;
  };
  auto store_groups = groups(stores), load_groups = groups(loads);
  Value *ok = b.getTrue();
  for (auto &[sb, sg] : store_groups) {
    auto [store_lo, store_hi] = window_range(sg, factor, b);
    for (auto &[lb, lg] : load_groups) {
      auto [load_lo, load_hi] = window_range(lg, factor, b);
      ok = b.CreateAnd(ok, b.CreateOr(b.CreateICmpULE(store_hi, load_lo), b.CreateICmpULE(load_hi, store_lo)),
                       "hcct.spec.disjoint");
    }
  }
  return ok;
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

void PathSpecializer::build(ArrayRef<BasicBlock *> path, unsigned factor) {
  BasicBlock *header = loop_.getHeader();
  Function &f = *header->getParent();
  LLVMContext &ctx = f.getContext();
  memo_.assign(factor, DenseMap<Value *, Value *>());

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
    for (Condition &c : conditions_)
      if (c.value == &phi) c.value = g;
    for (Access &a : stores_)
      if (a.pointer == &phi) a.pointer = g;
    for (SmallVectorImpl<Access> *accesses : {static_cast<SmallVectorImpl<Access> *>(&guard_loads_), static_cast<SmallVectorImpl<Access> *>(&path_loads_)})
      for (Access &a : *accesses)
        if (a.pointer == &phi) a.pointer = g;
    phi.replaceAllUsesWith(g);
    phi.eraseFromParent();
    state.push_back(g);
  }
  iv_step_ = std::move(steps);
  DenseSet<BasicBlock *> seen;
  for (BasicBlock *p : preds)
    if (seen.insert(p).second) p->getTerminator()->replaceUsesOfWith(header, guard);

  // Back-off: after a failed guard the generic body runs F iterations before the next guard, so
  // that a run of another path pays for one guard per F iterations, not one per iteration.
  Type *i32 = Type::getInt32Ty(ctx);
  PHINode *skip = PHINode::Create(i32, preds.size() + 1, "hcct.spec.skip", guard);
  BasicBlock *check = BasicBlock::Create(ctx, header->getName() + ".spec.check", &f, header);
  IRBuilder<> top(guard);
  Value *skipping = top.CreateICmpNE(skip, ConstantInt::get(i32, 0));
  Value *skip_less = top.CreateSub(skip, ConstantInt::get(i32, 1));
  top.CreateCondBr(skipping, header, check);
  PHINode *generic_skip = PHINode::Create(i32, 3, "hcct.spec.skip.left", &*header->getFirstInsertionPt());
  generic_skip->addIncoming(skip_less, guard);
  for (BasicBlock *p : preds) skip->addIncoming(loop_.contains(p) ? static_cast<Value *>(generic_skip) : ConstantInt::get(i32, 0), p);
  Constant *back_off = ConstantInt::get(i32, factor - 1);

  // The guard: memory-free conditions and the overlap checks first, then the loads.
  IRBuilder<> b(check);
  Value *ok = b.getTrue();
  for (const Condition &c : conditions_)
    if (!c.reads_memory) ok = b.CreateAnd(ok, holds_in_window(c, factor, b));
  // Reads of the guard after the window's stores must see nothing they wrote; with every load of
  // the path checked, the copies' loads and stores are independent, which the metadata below says.
  bool independent = !stores_.empty() && path_loads_affine_ && !path_loads_.empty();
  if (!stores_.empty()) ok = b.CreateAnd(ok, no_overlap(stores_, independent ? ArrayRef<Access>(path_loads_) : guard_loads_, factor, b));
  BasicBlock *fast_entry = BasicBlock::Create(ctx, header->getName() + ".spec.fast", &f, header);
  BasicBlock *after_guard = fast_entry;
  if (!guard_loads_.empty()) after_guard = BasicBlock::Create(ctx, header->getName() + ".spec.loads", &f, fast_entry);
  b.CreateCondBr(ok, after_guard, header);
  generic_skip->addIncoming(back_off, check);
  if (after_guard != fast_entry) {
    generic_skip->addIncoming(back_off, after_guard);
    IRBuilder<> l(after_guard);
    Value *ok_loads = l.getTrue();
    for (const Condition &c : conditions_)
      if (c.reads_memory)
        for (unsigned j = 0; j < factor; ++j) {
          Value *v = at_iteration(c.value, j, l);
          ok_loads = l.CreateAnd(ok_loads, c.taken ? v : l.CreateNot(v));
        }
    l.CreateCondBr(ok_loads, fast_entry, header);
  }

  // F copies of the path, each branch taken the path's way; iteration j starts from the state
  // that iteration j - 1 leaves on the back edge.
  BasicBlock *latch = path.back();
  DenseMap<PHINode *, Value *> current;
  for (PHINode *g : state) current[g] = g;
  BasicBlock *into = fast_entry;
  SmallVector<BasicBlock *, 64> fast_blocks;
  for (unsigned j = 0; j < factor; ++j) {
    ValueToValueMapTy map;
    for (PHINode *g : state) map[g] = current[g];
    SmallVector<Instruction *, 64> copies;
    for (size_t k = 0; k < path.size(); ++k) {
      BasicBlock *from = path[k];
      BasicBlock *copy = k == 0 && j == 0 ? fast_entry
                                          : BasicBlock::Create(ctx, from->getName() + ".spec" + std::to_string(j), &f, header);
      fast_blocks.push_back(copy);
      if (copy != into) BranchInst::Create(copy, into);
      for (Instruction &i : *from) {
        if (auto *phi = dyn_cast<PHINode>(&i)) {  // one predecessor on the path: its value
          if (k == 0) continue;                    // (the header's is the back-off count)
          Value *in = phi->getIncomingValueForBlock(path[k - 1]);
          Value *mapped = map.lookup(in);
          map[phi] = mapped ? mapped : in;
          continue;
        }
        if (i.isTerminator()) break;
        Instruction *c = i.clone();
        c->setName(i.getName());
        copy->getInstList().push_back(c);
        map[&i] = c;
        copies.push_back(c);
      }
      into = copy;
    }
    for (Instruction *c : copies) RemapInstruction(c, map, RF_NoModuleLevelChanges | RF_IgnoreMissingLocals);
    for (PHINode *g : state) {
      Value *next = g->getIncomingValueForBlock(latch);
      Value *mapped = map.lookup(next);
      current[g] = mapped ? mapped : next;
    }
  }
  BranchInst::Create(guard, into);
  for (PHINode *g : state) g->addIncoming(current[g], into);
  skip->addIncoming(ConstantInt::get(i32, 0), into);
  if (independent) mark_independent(fast_blocks);
}

std::string PathSpecializer::specialize(ArrayRef<BasicBlock *> path, unsigned factor) {
  if (factor < 2) return "a factor below 2";
  if (std::string why = check(path); !why.empty()) return why;
  build(path, factor);
  return "";
}

}  // namespace hcct::kpath
