#include "PathInstrumenter.h"

#include <functional>

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Analysis/ValueTracking.h"

#include "llvm/Analysis/BlockFrequencyInfo.h"
#include "llvm/Analysis/BranchProbabilityInfo.h"
#include "llvm/Analysis/CFG.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Dominators.h"
#include "llvm/ADT/Triple.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/PromoteMemToReg.h"

namespace hcct::kpath {

using namespace llvm;

namespace {

constexpr char kStepAttribute[] = "hcct-kpath-step";

// The guess slot of an ID whose loop-body part is `body` (PathInstrumenter::emit_path): the parity
// of the one bits among its low 16, as an i64 0 or 1. The parity of an i8 (x86-64: test + setnp);
// on an i64 masked to 8 bits LLVM 14 sometimes emits a whole software popcount.
Value *guess_slot(IRBuilder<> &b, Value *body) {
  Value *folded = b.CreateTrunc(b.CreateXor(body, b.CreateLShr(body, 8)), b.getInt8Ty());
  Function *ctpop = Intrinsic::getDeclaration(b.GetInsertBlock()->getModule(), Intrinsic::ctpop, {b.getInt8Ty()});
  return b.CreateZExt(b.CreateAnd(b.CreateCall(ctpop, {folded}), b.getInt8(1)), b.getInt64Ty(), "kpath.guess.slot");
}

// A call of a runtime entry in the entry's convention (RuntimeApi::declare).
void call_runtime(IRBuilder<> &b, FunctionCallee entry, ArrayRef<Value *> args) {
  CallInst *call = b.CreateCall(entry, args);
  if (auto *f = dyn_cast<Function>(entry.getCallee()->stripPointerCasts())) call->setCallingConv(f->getCallingConv());
}

// The inline fast path (libhcct/kpath_forest.h, path_fast_step, is its C++ twin). The window `w`
// and the frame's `owner` live in the caller's registers (allocas promoted after inlining).
// A function with a counter array (hcct/kpath_abi.h; `use` and `offset` are the site's constants)
// first, if it has no loops:
//   if (p = tls[loop-free]) { ++p[offset + id]; return } __hcct_path_counted(...); return
// and, with loops, on the first item: if (p = tls[k = 1]) { ++p[offset + id]; return } (arming
// the module once through __hcct_path_counters). Otherwise:
//   if (!w) {                                             (the activation's first item)
//     r = __hcct_path_roots_v4[root_slot(F, id)];  (hcct/kpath_abi.h: (root_base(F) + id) & 1023)
//     if (r && r->path == id && r->root_function == F) { owner = __hcct_path_token; hit(r) } goto slow;
//   }
//   if (owner != __hcct_path_token) goto slow;
//   pick = w->guess[slot];                                (slot: the site's choice, emit_path)
//   if (pick->path != id) {
//     pick = w->guess[slot ^ 1];
//     if (pick->path != id) {
//       if (__hcct_path_blpp && the root cache has (F, id)) { w->guess[slot] = r; hit(r) }  (k = 1)
//       goto slow;
//     }
//   }
//   hit(pick): ++pick->count; w = pick; return
//   slow: frame = {w, owner}; __hcct_path_slow(&frame, F, id, slot); w = frame.node; owner = frame.owner
// Guesses are never null (the runtime's sentinel, path ~0, stands for "none"), so the loads need no
// tests. Each load is of one aligned word; the increment is one instruction (x86-64: `incq mem`, no
// lock), so a signal handler on the same thread never sees it half done. Nodes are i64[8] (KsfNode).
Function *build_step(Module &m, FunctionCallee slow, GlobalVariable *token, GlobalVariable *roots, GlobalVariable *blpp,
                     bool fast_path, const RuntimeApi &api, const char *name = "hcct.kpath.step") {
  LLVMContext &c = m.getContext();
  Type *i64 = Type::getInt64Ty(c);
  Type *ptr = Type::getInt8PtrTy(c);
  PointerType *i64p = i64->getPointerTo();
  // (frame, &w, &owner, function ID, path ID, the ID's loop-body part (emit_path), counter offset
  // (0: none), counter use (CounterUse))
  auto *fty = FunctionType::get(Type::getVoidTy(c), {ptr, i64p->getPointerTo(), i64p, i64, i64, i64, i64, i64}, false);
  Function *f = Function::Create(fty, GlobalValue::InternalLinkage, name, m);
  f->addFnAttr(Attribute::NoUnwind);
  // Deferred, the optimiser sees one call per site, and inline_steps() inlines them at its end.
  f->addFnAttr(api.defer_inlining ? Attribute::NoInline : Attribute::AlwaysInline);
  f->addFnAttr(kStepAttribute);
  Argument *frame_arg = f->getArg(0), *w_slot = f->getArg(1), *owner_slot = f->getArg(2), *fn = f->getArg(3),
           *id = f->getArg(4), *body_arg = f->getArg(5), *counter_offset = f->getArg(6),
           *counter_use = f->getArg(7);
  BasicBlock *entry = BasicBlock::Create(c, "entry", f);
  BasicBlock *slow_bb = BasicBlock::Create(c, "slow", f);
  BasicBlock *done = BasicBlock::Create(c, "done", f);
  MDBuilder md(c);
  MDNode *likely = md.createBranchWeights(2000, 1), *unlikely = md.createBranchWeights(1, 2000);

  IRBuilder<> b(entry);
  auto word_ptr = [&](IRBuilder<> &at, Value *base, unsigned i) {
    return at.CreateConstInBoundsGEP1_64(i64, base, i);
  };
  Value *w = b.CreateLoad(i64p, w_slot, "kpath.w");
  Value *owner = b.CreateLoad(i64, owner_slot, "kpath.owner");
  if (!fast_path) {
    b.CreateBr(slow_bb);
  } else {
    BasicBlock *first = BasicBlock::Create(c, "first", f, slow_bb);
    BasicBlock *check = BasicBlock::Create(c, "owner", f, slow_bb);
    // BLPP counter arrays (hcct/kpath_abi.h): `counter_use` and `counter_offset` are the site's
    // constants, so every test of them folds away when the step is inlined.
    BasicBlock *count_bb = nullptr;
    Constant *tls = nullptr;   // the module's words (hcct/kpath_abi.h): {array at k = 1, array for loop-free, state}
    PHINode *array = nullptr;  // the counter array that count_bb increments
    auto tls_word = [&](unsigned i) { return ConstantExpr::getInBoundsGetElementPtr(i64, tls, ConstantInt::get(i64, i)); };
    auto load_array = [&](IRBuilder<> &at, unsigned word, const Twine &name) {
      return at.CreateLoad(i64p, ConstantExpr::getBitCast(tls_word(word), i64p->getPointerTo()), name);
    };
    if (api.counter_block) {
      tls = ConstantExpr::getBitCast(api.counter_block, i64p);
      count_bb = BasicBlock::Create(c, "counters.hit", f, slow_bb);
      IRBuilder<> hb0(count_bb);
      array = hb0.CreatePHI(i64p, 2, "kpath.counters");
      // A function without loops emits one item per activation, so its forest is its roots, whose
      // counts are BLPP counters at every k: its items count in the thread's array whenever the
      // runtime set the pointer (armed, not tracing), with no window test. Everything else is one
      // call, out of line (kCountedSymbol: arms the module, or takes the item as the runtime's),
      // so that the probe stays small enough for the inliner to inline small helpers as in the
      // native build (with the root cache and two calls inline, zstd's MEM_readLE64 and friends
      // were not).
      BasicBlock *loop_free = BasicBlock::Create(c, "counters.loopfree", f, slow_bb);
      BasicBlock *cold = BasicBlock::Create(c, "counters.cold", f, slow_bb);
      BasicBlock *rest = BasicBlock::Create(c, "window", f, slow_bb);
      b.CreateCondBr(b.CreateICmpEQ(counter_use, ConstantInt::get(i64, uint64_t(CounterUse::kEveryK))), loop_free, rest);
      IRBuilder<> lb(loop_free);
      Value *counters = load_array(lb, abi::kCountersLoopFreeWord, "kpath.counters.loopfree");
      lb.CreateCondBr(lb.CreateIsNull(counters), cold, count_bb, unlikely);
      array->addIncoming(counters, loop_free);
      lb.SetInsertPoint(cold);
      call_runtime(lb, api.counted, {ConstantExpr::getBitCast(api.counter_table, i64p), tls, counter_offset, frame_arg, fn, id});
      lb.CreateBr(done);
      b.SetInsertPoint(rest);
    }
    b.CreateCondBr(b.CreateIsNull(w), first, check);
    b.SetInsertPoint(check);
    Value *tok = b.CreateLoad(i64, token, "kpath.token");
    BasicBlock *look = BasicBlock::Create(c, "look", f, slow_bb);
    b.CreateCondBr(b.CreateICmpEQ(owner, tok), look, slow_bb, likely);
    b.SetInsertPoint(look);
    // The slot is computed where a window is used (and again on the slow path), not at the site:
    // an activation's first item and BLPP counter arrays never pay for it.
    Value *slot_arg = guess_slot(b, body_arg);
    BasicBlock *hit = BasicBlock::Create(c, "hit", f, slow_bb);
    IRBuilder<> hb(hit);
    PHINode *found = hb.CreatePHI(i64p, 3, "kpath.found");
    // The guess in the slot the site chose from the path ID, which the program computed well
    // before: the loop-carried chain from window to window is this one load; the label is then
    // checked in the picked node's own line, off that chain (the branch is predicted).
    auto guess = [&](IRBuilder<> &at, Value *slot, const Twine &name) {
      Value *index = at.CreateAdd(slot, ConstantInt::get(i64, abi::kGuessWord));
      return at.CreateLoad(i64p, at.CreateBitCast(at.CreateInBoundsGEP(i64, w, index), i64p->getPointerTo()), name);
    };
    Value *pick = guess(b, slot_arg, "kpath.pick");
    BasicBlock *second = BasicBlock::Create(c, "second", f, slow_bb);
    b.CreateCondBr(b.CreateICmpEQ(b.CreateLoad(i64, pick, "kpath.label"), id), hit, second, likely);
    found->addIncoming(pick, look);
    // Second chance, off the hot path: the other slot, where the runtime keeps a child displaced by
    // one that chose the same slot, so that two such hot next windows still avoid the call.
    IRBuilder<> sb2(second);
    Value *other = guess(sb2, sb2.CreateXor(slot_arg, ConstantInt::get(i64, 1)), "kpath.other");
    BasicBlock *blpp_bb = BasicBlock::Create(c, "blpp", f, slow_bb);
    sb2.CreateCondBr(sb2.CreateICmpEQ(sb2.CreateLoad(i64, other, "kpath.other.label"), id), hit, blpp_bb);
    found->addIncoming(other, second);
    // The root cache entry for (F, id), if it is that root: `at` branches to `hit` with it or to
    // the slow path. root_slot(F, id): F is each site's constant, so the base folds when the step
    // is inlined.
    auto root_lookup = [&](BasicBlock *at, const Twine &name, BasicBlock *slow_bb,
                           const std::function<void(IRBuilder<> &, Value *)> &on_hit) {
      IRBuilder<> fb(at);
      Value *base = fb.CreateLShr(fb.CreateMul(fn, ConstantInt::get(i64, abi::kRootHashMultiplier)), 64 - abi::kRootCacheBits);
      Value *slot = fb.CreateAnd(fb.CreateAdd(base, id), ConstantInt::get(i64, abi::kRootCacheSize - 1), "kpath.slot");
      Value *entry_ptr = fb.CreateInBoundsGEP(roots->getValueType(), roots, {fb.getInt64(0), slot});
      Value *root = fb.CreateLoad(i64p, fb.CreateBitCast(entry_ptr, i64p->getPointerTo()), "kpath.root");
      BasicBlock *root_label = BasicBlock::Create(c, name + ".label", f, hit);
      fb.CreateCondBr(fb.CreateIsNull(root), slow_bb, root_label, unlikely);
      fb.SetInsertPoint(root_label);
      Value *rl = fb.CreateLoad(i64, word_ptr(fb, root, abi::kPathWord), "kpath.root.path");
      Value *rf = fb.CreateLoad(i64, word_ptr(fb, root, abi::kRootFunctionWord), "kpath.root.function");
      BasicBlock *root_hit = BasicBlock::Create(c, name + ".hit", f, hit);
      fb.CreateCondBr(fb.CreateAnd(fb.CreateICmpEQ(rl, id), fb.CreateICmpEQ(rf, fn)), root_hit, slow_bb, likely);
      fb.SetInsertPoint(root_hit);
      on_hit(fb, root);
      fb.CreateBr(hit);
      found->addIncoming(root, root_hit);
    };
    // Third chance, BLPP only (k = 1: every item is a root, and two guesses are too few for a
    // dispatch loop): the root cache, as for a first item. A hit becomes the window's guess in the
    // item's slot, as the runtime would make it, so that a repeated transition is taken by the
    // first guess next time instead of this longer way (what the runtime's set_guess does, without
    // moving the displaced guess; BLPP forests are never swept, and the node is this thread's).
    // Not emitted for a function with a counter array (the constant test folds): at k = 1 its
    // window is always null, so this code would never run, and at every site it would only
    // add to the probe's size and register pressure.
    IRBuilder<> bb(blpp_bb);
    BasicBlock *blpp_test = BasicBlock::Create(c, "blpp.test", f, slow_bb);
    BasicBlock *blpp_root = BasicBlock::Create(c, "blpp.root", f, slow_bb);
    bb.CreateCondBr(bb.CreateICmpEQ(counter_use, ConstantInt::get(i64, uint64_t(CounterUse::kNone))), blpp_test, slow_bb);
    bb.SetInsertPoint(blpp_test);
    bb.CreateCondBr(bb.CreateICmpNE(bb.CreateLoad(i64, blpp, "kpath.blpp"), ConstantInt::get(i64, 0)), blpp_root, slow_bb);
    root_lookup(blpp_root, "blpp.root", slow_bb, [&](IRBuilder<> &at, Value *root) {
      Value *index = at.CreateAdd(slot_arg, ConstantInt::get(i64, abi::kGuessWord));
      at.CreateStore(root, at.CreateBitCast(at.CreateInBoundsGEP(i64, w, index), i64p->getPointerTo()));
    });
    Triple triple(m.getTargetTriple());
    auto increment = [&](IRBuilder<> &at, Value *word) {
      if (triple.getArch() == Triple::x86_64) {
        // One read-modify-write instruction, without a lock prefix: a handler on this thread cannot
        // split it, and no other thread counts into this thread's nodes (or counter block).
        auto *asm_ty = FunctionType::get(Type::getVoidTy(c), {i64p, i64p}, false);
        InlineAsm *inc = InlineAsm::get(asm_ty, "incq $0", "=*m,*m,~{dirflag},~{fpsr},~{flags}", /*sideeffect=*/true);
        CallInst *call = at.CreateCall(asm_ty, inc, {word, word});
        call->addParamAttr(0, Attribute::get(c, Attribute::ElementType, i64));
        call->addParamAttr(1, Attribute::get(c, Attribute::ElementType, i64));
        call->addFnAttr(Attribute::NoUnwind);
      } else {
        at.CreateAtomicRMW(AtomicRMWInst::Add, word, ConstantInt::get(i64, 1), MaybeAlign(8), AtomicOrdering::Monotonic,
                           c.getOrInsertSyncScopeID("singlethread"));
      }
    };
    // The activation's first item (at k = 1 with counter arrays, every item: the window stays
    // null). A function with counters (`counter_offset`, the site's constant, folds the test away
    // when inlined) counts into its module's thread-local block while the thread's state word
    // says so: one increment, no runtime call, no hash (hcct/kpath_abi.h). The state is set by
    // the runtime on the thread's first such item; otherwise the root cache, as before.
    BasicBlock *root_first = first;
    if (api.counter_block) {
      // A function with loops: its array counts at k = 1 only (the pointer in its own word), where
      // the window then stays null, so every item comes here. While the module is not armed for
      // the thread (state 0) the runtime is asked once.
      root_first = BasicBlock::Create(c, "root", f, slow_bb);
      BasicBlock *counted = BasicBlock::Create(c, "counters", f, root_first);
      BasicBlock *unset = BasicBlock::Create(c, "counters.unset", f, root_first);
      BasicBlock *arm = BasicBlock::Create(c, "counters.arm", f, root_first);
      IRBuilder<> fb(first);
      fb.CreateCondBr(fb.CreateICmpEQ(counter_use, ConstantInt::get(i64, uint64_t(CounterUse::kBlpp))), counted,
                      root_first);
      fb.SetInsertPoint(counted);
      Value *counters = load_array(fb, abi::kCountersAllWord, "kpath.counters.all");
      fb.CreateCondBr(fb.CreateIsNull(counters), unset, count_bb, unlikely);
      array->addIncoming(counters, counted);
      fb.SetInsertPoint(unset);
      Value *state = fb.CreateLoad(i64, tls_word(abi::kCountersStateWord), "kpath.counters.state");
      fb.CreateCondBr(fb.CreateICmpEQ(state, ConstantInt::get(i64, abi::kCountersUnset)), arm, root_first, unlikely);
      fb.SetInsertPoint(arm);
      call_runtime(fb, api.arm_counters, {ConstantExpr::getBitCast(api.counter_table, i64p), tls});
      Value *armed = load_array(fb, abi::kCountersAllWord, "kpath.counters.armed");
      fb.CreateCondBr(fb.CreateIsNull(armed), root_first, count_bb);
      array->addIncoming(armed, arm);
      fb.SetInsertPoint(count_bb);
      increment(fb, fb.CreateInBoundsGEP(i64, array, fb.CreateAdd(counter_offset, id), "kpath.counter"));
      fb.CreateBr(done);
    }
    root_lookup(root_first, "root", slow_bb, [&](IRBuilder<> &at, Value *) {
      at.CreateStore(at.CreateLoad(i64, token, "kpath.token"), owner_slot);
    });
    increment(hb, word_ptr(hb, found, abi::kCountWord));
    hb.CreateStore(found, w_slot);
    hb.CreateBr(done);
  }
  IRBuilder<> sb(slow_bb);
  Value *slow_slot = guess_slot(sb, body_arg);
  Value *frame_node = sb.CreateBitCast(word_ptr(sb, sb.CreateBitCast(frame_arg, i64p), abi::kFrameNodeWord),
                                       i64p->getPointerTo());
  Value *frame_owner = word_ptr(sb, sb.CreateBitCast(frame_arg, i64p), abi::kFrameOwnerWord);
  sb.CreateStore(w, frame_node);
  sb.CreateStore(owner, frame_owner);
  call_runtime(sb, slow, {frame_arg, fn, id, slow_slot});
  sb.CreateStore(sb.CreateLoad(i64p, frame_node, "kpath.w.after"), w_slot);
  sb.CreateStore(sb.CreateLoad(i64, frame_owner, "kpath.owner.after"), owner_slot);
  sb.CreateBr(done);
  IRBuilder<>(done).CreateRetVoid();
  return f;
}

void inline_step(CallInst &call) {
  InlineFunctionInfo info;
  if (!InlineFunction(call, info).isSuccess())
    report_fatal_error("hcct kpath: cannot inline the path step in " + call.getFunction()->getName());
}

}  // namespace

RuntimeApi RuntimeApi::declare(Module &m, bool fast_path, uint64_t max_counter_paths, uint64_t max_counter_words,
                               bool defer_inlining) {
  LLVMContext &c = m.getContext();
  Type *void_ty = Type::getVoidTy(c);
  Type *ptr = Type::getInt8PtrTy(c);
  Type *i64 = Type::getInt64Ty(c);
  // The runtime never throws and never unwinds: the slow call is a plain call, never an invoke,
  // and adds no exception edges.
  AttributeList attrs = AttributeList().addFnAttribute(c, Attribute::NoUnwind);
  RuntimeApi api;
  api.defer_inlining = defer_inlining;
  // On x86-64 the sites call the runtime's preserve_most entries (hcct/kpath_abi.h,
  // kSlowSavingSymbol): no spill or reload around a call, fewer values for the register
  // allocator to keep apart, so a smaller and faster-to-compile probe. Elsewhere the C entries.
  const bool saving = Triple(m.getTargetTriple()).getArch() == Triple::x86_64;
  auto declare_entry = [&](const char *c_symbol, const char *saving_symbol, FunctionType *type) {
    FunctionCallee entry = m.getOrInsertFunction(saving ? saving_symbol : c_symbol, type, attrs);
    if (auto *f = dyn_cast<Function>(entry.getCallee()); f && saving) {
      f->setCallingConv(CallingConv::PreserveMost);
      // Through the GOT, bound at load time: glibc's lazy-binding resolver, which a PLT call runs
      // on its first call, keeps only the C convention's argument registers (it clobbers r10).
      f->addFnAttr(Attribute::NonLazyBind);
    }
    return entry;
  };
  api.slow = declare_entry(abi::kSlowSymbol, abi::kSlowSavingSymbol, FunctionType::get(void_ty, {ptr, i64, i64, i64}, false));
  api.token = m.getGlobalVariable(abi::kTokenSymbol);
  if (!api.token) {
    api.token = new GlobalVariable(m, i64, false, GlobalValue::ExternalLinkage, nullptr, abi::kTokenSymbol, nullptr,
                                   GlobalValue::InitialExecTLSModel);
  }
  api.roots = m.getGlobalVariable(abi::kRootsSymbol);
  if (!api.roots) {
    api.roots = new GlobalVariable(m, ArrayType::get(ptr, abi::kRootCacheSize), false, GlobalValue::ExternalLinkage, nullptr,
                                   abi::kRootsSymbol, nullptr, GlobalValue::InitialExecTLSModel);
  }
  api.blpp = m.getGlobalVariable(abi::kBlppSymbol);
  if (!api.blpp) {
    api.blpp = new GlobalVariable(m, i64, false, GlobalValue::ExternalLinkage, nullptr, abi::kBlppSymbol, nullptr,
                                  GlobalValue::InitialExecTLSModel);
  }
  if (fast_path && max_counter_paths > 0 && max_counter_words > 1) {
    // Placeholders of the right kinds; finish_counters() replaces them once the sizes are known.
    api.max_counter_paths = max_counter_paths;
    api.max_counter_words = max_counter_words;
    Type *i64p = i64->getPointerTo();
    api.arm_counters = declare_entry(abi::kCountersSymbol, abi::kCountersSavingSymbol, FunctionType::get(void_ty, {i64p, i64p}, false));
    api.counted = declare_entry(abi::kCountedSymbol, abi::kCountedSavingSymbol,
                                FunctionType::get(void_ty, {i64p, i64p, i64, ptr, i64, i64}, false));
    auto *words_ty = ArrayType::get(i64, abi::kCountersTlsWords);
    api.counter_block = new GlobalVariable(m, words_ty, false, GlobalValue::InternalLinkage,
                                           ConstantAggregateZero::get(words_ty), "hcct.kpath.counters", nullptr,
                                           GlobalValue::GeneralDynamicTLSModel);
    api.counter_block->setAlignment(Align(32));
    api.counter_table = new GlobalVariable(m, ArrayType::get(i64, 1), true, GlobalValue::InternalLinkage,
                                           ConstantAggregateZero::get(ArrayType::get(i64, 1)), "hcct.kpath.counter_table.tmp");
  }
  api.step = build_step(m, api.slow, api.token, api.roots, api.blpp, fast_path, api);
  api.cold_step = build_step(m, api.slow, api.token, api.roots, api.blpp, /*fast_path=*/false, api, "hcct.kpath.step.cold");
  return api;
}

uint64_t RuntimeApi::allocate_counters(uint64_t function_id, uint64_t paths) {
  if (!counter_block || paths == 0 || paths > max_counter_paths || paths > max_counter_words - counter_words) return 0;
  uint64_t offset = counter_words;
  counter_words += paths;
  counter_entries.insert(counter_entries.end(), {function_id, offset, paths});
  return offset;
}

void RuntimeApi::finish_counters(Module &m) {
  if (!counter_block) return;
  if (counter_entries.empty() && counter_block->use_empty() && counter_table->use_empty()) {
    counter_block->eraseFromParent();
    counter_table->eraseFromParent();
    counter_block = counter_table = nullptr;
    return;
  }
  // The table at its final size (a use left in dead code of an -O0 build links to an empty one).
  std::vector<uint64_t> words = {abi::kCounterTableVersion, counter_entries.size() / abi::kCounterEntryWords, counter_words};
  words.insert(words.end(), counter_entries.begin(), counter_entries.end());
  Constant *init = ConstantDataArray::get(m.getContext(), words);
  auto *table = new GlobalVariable(m, init->getType(), true, GlobalValue::InternalLinkage, init, "");
  table->takeName(counter_table);
  counter_table->replaceAllUsesWith(ConstantExpr::getBitCast(table, counter_table->getType()));
  counter_table->eraseFromParent();
  counter_table = table;
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

// How often each DAG edge is expected to run, for the spanning tree of the increments: a CFG edge's
// frequency from LLVM's static estimate (BlockFrequencyInfo: loop depth, branch heuristics and
// any branch weights), doubled where an increment would need a block of its own (a critical edge),
// plus one so that every CFG edge outweighs the dummy and exit edges. Those weigh 0: their
// increments cost nothing extra (they are folded into the constant a restart emits and resets, or
// into the exit's ID), so they are the chords of choice.
std::vector<uint64_t> PathInstrumenter::edge_weights() const {
  const PathGraph &g = dag_.graph();
  const auto &blocks = dag_.blocks();
  DominatorTree dt(f_);
  LoopInfo li(dt);
  BranchProbabilityInfo bpi(f_, li);
  BlockFrequencyInfo bfi(f_, bpi, li);
  std::vector<uint64_t> weight(g.edges().size(), 0);
  for (size_t i = 0; i < g.edges().size(); ++i) {
    const DagEdge &e = g.edges()[i];
    if (e.kind != EdgeKind::kBranch) continue;
    BasicBlock *from = blocks[e.from], *to = blocks[e.to];
    uint64_t freq = (bfi.getBlockFreq(from) * bpi.getEdgeProbability(from, to)).getFrequency();
    uint64_t scaled = freq > (UINT64_MAX >> 2) ? (UINT64_MAX >> 2) : freq;
    EdgeProbe p;
    p.from = from;
    p.to = to;
    bool own_block = place(p) >= Placement::kSplit;
    weight[i] = (own_block ? 2 * scaled : scaled) + 1;
  }
  return weight;
}

std::vector<EdgeProbe> PathInstrumenter::collect_probes() const {
  const PathGraph &g = dag_.graph();
  const auto &blocks = dag_.blocks();
  std::vector<EdgeProbe> probes;
  for (size_t i = 0; i < g.edges().size(); ++i) {
    const DagEdge &e = g.edges()[i];
    if (e.kind != EdgeKind::kBranch || inc_[i] == 0) continue;
    EdgeProbe p;
    p.from = blocks[e.from];
    p.to = blocks[e.to];
    p.add = inc_[i];
    probes.push_back(p);
  }
  // Back edges out of one latch share its kBreak edge, so their paths' IDs coincide: the slot's
  // start must be a function of the break edge, not of the back edge (emit_path).
  DenseMap<uint32_t, uint64_t> start_of_break;
  for (const RestartEdge &r : dag_.restarts()) start_of_break.try_emplace(r.break_edge, g.edges()[r.start_edge].val);
  for (const RestartEdge &r : dag_.restarts()) {
    EdgeProbe p;
    p.from = blocks[r.from];
    p.to = blocks[r.to];
    p.restart = true;
    p.emit_add = inc_[r.break_edge];
    p.reset = inc_[r.start_edge];
    p.body_offset = g.edges()[r.break_edge].val + start_of_break.lookup(r.break_edge);
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

// The guess slot: the parity of the one bits among the low 16 of the ID's loop-body part,
// id − body_offset = r − start in the values' numbering, where r would be the path register before
// the break or exit edge and start the value a restart sets it to when the site's loop iterates (0
// at an exit; for a latch with several back edges, which share its break edge and so their IDs,
// the first one's). Iteration paths of a loop body made of two-way branches then number like binary
// numbers, one bit per branch, so two paths that differ in one branch never share a slot
// (docs/KPATH.md, "Guesses"). The offset is a constant of the site and a path ID always ends at the
// same site, so the slot is a function of the ID, as the runtime needs, whatever edges carry the
// increments.
void PathInstrumenter::emit_path(IRBuilder<> &b, uint64_t add, uint64_t body_offset, bool cold) {
  Type *i64 = b.getInt64Ty();
  Value *r = b.CreateLoad(i64, reg_, "kpath.r");
  Value *id = add ? b.CreateAdd(r, b.getInt64(add), "kpath.id") : r;
  Value *body = body_offset ? b.CreateSub(id, b.getInt64(body_offset), "kpath.body") : id;
  CounterUse use = counter_offset_ == 0 ? CounterUse::kNone
                   : dag_.restarts().empty() ? CounterUse::kEveryK
                                             : CounterUse::kBlpp;
  steps_.push_back(b.CreateCall(cold ? api_.cold_step : api_.step, {frame_ptr_, w_, owner_, b.getInt64(function_id_), id, body,
                                            b.getInt64(counter_offset_), b.getInt64(uint64_t(use))}));
}

void PathInstrumenter::insert_probe(Instruction *before, const EdgeProbe &p) {
  IRBuilder<> b(before);
  if (p.restart) {
    emit_path(b, p.emit_add, p.body_offset);
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
  w_ = top.CreateAlloca(top.getInt64Ty()->getPointerTo(), nullptr, "kpath.window");
  owner_ = top.CreateAlloca(top.getInt64Ty(), nullptr, "kpath.owner");
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
  // The ∗ marker: no window, no owner (the runtime starts the activation's stream at its first
  // item). Both live in registers; the frame is written only around a slow call.
  b.CreateStore(ConstantPointerNull::get(cast<PointerType>(w_->getAllocatedType())), w_);
  b.CreateStore(b.getInt64(0), owner_);
}

void PathInstrumenter::insert_exit(uint32_t block) {
  ExitKind kind = dag_.exit_kind(block);
  if (kind == ExitKind::kNone || kind == ExitKind::kUnreachable) return;
  BasicBlock *bb = dag_.blocks()[block];
  Instruction *before = kind == ExitKind::kNoReturnCall ? dag_.noreturn_call(block) : bb->getTerminator();
  IRBuilder<> b(before);
  b.SetCurrentDebugLocation(before->getDebugLoc());
  uint32_t exit_edge = dag_.exit_edge(block);
  // A path that ends before a noreturn call (tcc_error, abort, a longjmp or a throw) ends the
  // activation: it runs at most once per activation, and on error paths mostly never. There the
  // item goes to the runtime with no inline fast path (its counts are the same: an activation's
  // first item, or the next window, found by the runtime instead of by the guesses). tcc's
  // tccgen.c had 111 such exits, each with a whole fast path (docs/BENCHMARKS.md, "Seventh pass").
  emit_path(b, inc_[exit_edge], dag_.graph().edges()[exit_edge].val, kind == ExitKind::kNoReturnCall);
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
  std::vector<AllocaInst *> allocas;
  for (AllocaInst *a : {reg_, w_, owner_})
    if (isAllocaPromotable(a)) allocas.push_back(a);
  PromoteMemToReg(allocas, dt);
}

std::optional<uint64_t> PathInstrumenter::restart_value(const BasicBlock *header) const {
  for (const RestartEdge &r : dag_.restarts())
    if (!r.cut && dag_.blocks()[r.to] == header) return inc_[r.start_edge];
  return std::nullopt;
}

void PathInstrumenter::run(bool promote) {
  // Increments only on the chords of a maximum spanning tree of the estimated edge frequencies
  // (path_graph.h, chord_increments): the same IDs as the values give, with no instruction on the
  // hot edges. Decided on the untouched CFG, like the placements.
  inc_ = dag_.graph().chord_increments(edge_weights());
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
  if (!api_.defer_inlining)
    for (CallInst *call : steps_) inline_step(*call);
  if (promote) promote_register();
}

bool is_step(const Function &f) { return f.hasFnAttribute(kStepAttribute); }

bool inline_steps(Function &f) {
  // The calls, and the window and owner slots they name (allocas of this function, moved into its
  // entry block when the optimiser inlined an instrumented function here).
  std::vector<CallInst *> calls;
  for (BasicBlock &bb : f)
    for (Instruction &i : bb)
      if (auto *call = dyn_cast<CallInst>(&i))
        if (Function *callee = call->getCalledFunction(); callee && is_step(*callee)) calls.push_back(call);
  if (calls.empty()) return false;
  SmallSetVector<AllocaInst *, 8> slots;  // (the frame is passed on to the runtime: not promotable)
  for (CallInst *call : calls) {
    for (Value *arg : call->args())
      if (auto *a = dyn_cast<AllocaInst>(getUnderlyingObject(arg))) slots.insert(a);
    inline_step(*call);
  }
  std::vector<AllocaInst *> promotable;
  for (AllocaInst *a : slots)
    if (isAllocaPromotable(a)) promotable.push_back(a);
  if (!promotable.empty()) {
    DominatorTree dt(f);
    PromoteMemToReg(promotable, dt);
  }
  return true;
}

}  // namespace hcct::kpath
