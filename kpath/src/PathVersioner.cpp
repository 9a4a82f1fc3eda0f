#include "PathVersioner.h"

#include <algorithm>
#include <cstdlib>

#include "PassSwitch.h"
#include "hcct/kpath_abi.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/CFG.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/Local.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"
#include "llvm/Transforms/Utils/PromoteMemToReg.h"

namespace hcct::kpath {

using namespace llvm;
namespace abi = hcct::kpath_abi;

namespace {

cl::opt<int> g_burst_indirectbr(
    "kpath-burst-indirectbr",
    cl::desc("hcct kpath: with -kpath-burst=1, also version functions with computed gotos (1; the default on the "
             "event clock), or keep them instrumented, their paths counted exhaustively (0; the default on the "
             "time gate)"),
    cl::init(-1));

cl::opt<int> g_burst_thread_counters(
    "kpath-burst-thread-counters",
    cl::desc("hcct kpath: with -kpath-burst=1, in an executable, count path starts per thread (1, default) or in "
             "process-wide counters (0)"),
    cl::init(-1));

// -kpath-burst-thread-counters, else HCCT_KPATH_BURST_THREAD_COUNTERS, else on. Off only to
// measure what per-thread counters buy (docs/KPATH.md, "Per-thread start counters").
bool thread_counters_wanted() {
  return switch_setting(g_burst_thread_counters, "HCCT_KPATH_BURST_THREAD_COUNTERS", true);
}

cl::opt<int> g_burst_event_clock(
    "kpath-burst-event-clock",
    cl::desc("hcct kpath: with -kpath-burst=1, in an executable, count bursts in path starts per thread (1, "
             "default: a thread-local countdown at every start point) or follow the process-wide time gate (0)"),
    cl::init(-1));

// -kpath-burst-event-clock, else HCCT_KPATH_BURST_EVENT_CLOCK, else on. The time gate samples the
// start points of phases that profiling slows down less at a higher rate, and the iteration after
// a long one more often (docs/KPATH.md, "The event clock"); off to measure that, and for programs
// that cannot give every thread the TLS word.
bool event_clock_wanted() { return switch_setting(g_burst_event_clock, "HCCT_KPATH_BURST_EVENT_CLOCK", true); }

// Code that goes into an executable (a PIE, or built without -fPIC): its TLS is static, at a fixed
// offset from the thread pointer, and a module-local thread-local variable is reached in one
// instruction (`%fs:var@tpoff`).
bool executable(const Module &m) { return m.getPIELevel() != PIELevel::Default || m.getPICLevel() == PICLevel::NotPIC; }

// -kpath-burst-indirectbr, else HCCT_KPATH_BURST_INDIRECTBR, else on where the module has the event
// clock. An interpreter's dispatch loop is one start point for every opcode of every phase of the
// program, which time-based bursts sample at different rates: its sequences' estimates erred by
// 20-40 % on Lua on the time gate, where the exhaustive counts are exact; on the event clock
// 1.3-5.2 %, for 1.34 -> 1.19x native's instructions between bursts (docs/KPATH.md, "Computed
// gotos").
bool version_computed_gotos(const Module &m) {
  return switch_setting(g_burst_indirectbr, "HCCT_KPATH_BURST_INDIRECTBR", executable(m) && event_clock_wanted());
}

}  // namespace

VersionApi::VersionApi(Module &m) : m_(m), thread_counters_(executable(m) && thread_counters_wanted()) {
  LLVMContext &c = m.getContext();
  Type *i8 = Type::getInt8Ty(c);
  gate_ = m.getNamedGlobal(abi::kGateSymbol);
  if (!gate_)
    gate_ = new GlobalVariable(m, i8, false, GlobalValue::ExternalLinkage, nullptr, abi::kGateSymbol);
  // In an executable (a PIE, or code built without -fPIC), the gate is read at a fixed distance from
  // the code: the linker copies it into the executable (a copy relocation; libhcct reaches it through
  // its GOT, so both see the one byte). Otherwise every gate test first loads its address from the
  // GOT: one instruction more per call and per loop iteration between bursts. A shared library keeps
  // the GOT (its gate may be another module's).
  if (executable(m)) gate_->setDSOLocal(true);
  // The event clock (hcct/kpath_abi.h, kTickSymbol): the thread's countdown, one instruction away
  // in an executable's static TLS (`%fs:__hcct_kpath_countdown@tpoff`); a shared library's TLS would
  // be dynamic (a __tls_get_addr call per start), so it keeps the gate. One word for all the
  // executable's units: linkonce_odr in a COMDAT group, hidden, so the linker keeps one copy.
  if (executable(m) && event_clock_wanted()) {
    Type *i64 = Type::getInt64Ty(c);
    countdown_ = m.getNamedGlobal(abi::kCountdownSymbol);
    if (!countdown_)
      countdown_ = new GlobalVariable(m, i64, false, GlobalValue::LinkOnceODRLinkage, ConstantInt::get(i64, 0),
                                      abi::kCountdownSymbol, nullptr, GlobalValue::LocalExecTLSModel);
    countdown_->setVisibility(GlobalValue::HiddenVisibility);
    countdown_->setDSOLocal(true);
    countdown_->setComdat(m.getOrInsertComdat(abi::kCountdownSymbol));
    countdown_->setAlignment(Align(8));
    tick_ = m.getOrInsertFunction(abi::kTickSymbol, i8, i64->getPointerTo());
    if (auto *fn = dyn_cast<Function>(tick_.getCallee())) {
      fn->addFnAttr(Attribute::NoUnwind);
      fn->addFnAttr(Attribute::Cold);
    }
  }
  switch_ = m.getOrInsertFunction(abi::kSwitchSymbol, Type::getVoidTy(c), Type::getInt64Ty(c));
  if (auto *fn = dyn_cast<Function>(switch_.getCallee())) {
    fn->addFnAttr(Attribute::NoUnwind);
    fn->addFnAttr(Attribute::Cold);
  }
}

GlobalVariable *VersionApi::add_function(uint64_t function_id, const std::vector<uint32_t> &start_blocks) {
  auto *type = ArrayType::get(Type::getInt64Ty(m_.getContext()), start_blocks.size());
  auto *counters = new GlobalVariable(m_, type, false, GlobalValue::InternalLinkage, Constant::getNullValue(type),
                                      "hcct.kpath.starts");
  counters->setAlignment(Align(8));
  entries_.push_back({function_id, start_blocks, counters});
  return counters;
}

// Per-thread counters (an executable): every function's counters move into one module-level
// thread-local array, in table order, so that the runtime finds a thread's counters at one address
// (abi::VersionTable::thread_counters) and each increment stays one instruction
// (`addq $1, %fs:hcct.kpath.thread_starts@tpoff+8i`): the counters are no longer shared by threads
// (zstd's four workers bounced their cache lines between cores). Returns the function that gives
// the calling thread's array.
Function *VersionApi::move_counters_to_tls(uint64_t &words) {
  LLVMContext &c = m_.getContext();
  Type *i64 = Type::getInt64Ty(c);
  words = 0;
  for (const Entry &e : entries_) words += e.start_blocks.size();
  auto *type = ArrayType::get(i64, words);
  auto *array = new GlobalVariable(m_, type, false, GlobalValue::InternalLinkage, Constant::getNullValue(type),
                                   "hcct.kpath.thread_starts", nullptr, GlobalValue::LocalExecTLSModel);
  array->setAlignment(Align(64));  // (its own cache lines: a TLS block's neighbours are the thread's)
  uint64_t offset = 0;
  for (Entry &e : entries_) {
    Constant *at = ConstantExpr::getInBoundsGetElementPtr(
        type, array, ArrayRef<Constant *>{ConstantInt::get(i64, 0), ConstantInt::get(i64, offset)});
    e.counters->replaceAllUsesWith(ConstantExpr::getBitCast(at, e.counters->getType()));
    e.counters->eraseFromParent();
    e.counters = nullptr;
    offset += e.start_blocks.size();
  }
  auto *fty = FunctionType::get(i64->getPointerTo(), false);
  Function *f = Function::Create(fty, GlobalValue::InternalLinkage, "hcct.kpath.thread_starts_of", m_);
  f->addFnAttr(Attribute::NoUnwind);
  f->addFnAttr(Attribute::NoInline);
  IRBuilder<> b(BasicBlock::Create(c, "entry", f));
  b.CreateRet(b.CreateConstInBoundsGEP2_64(type, array, 0, 0));
  return f;
}

// The table (hcct/kpath_abi.h, VersionTable) and a constructor that registers it, a destructor
// that unregisters it (the runtime then keeps a copy: the module's memory may go with dlclose).
void VersionApi::emit_table() {
  if (entries_.empty()) return;
  LLVMContext &c = m_.getContext();
  Type *i64 = Type::getInt64Ty(c), *i32 = Type::getInt32Ty(c);
  uint64_t thread_words = 0;
  Function *thread_counters = thread_counters_ ? move_counters_to_tls(thread_words) : nullptr;
  auto *fn_type = StructType::create(c, {i64, i64, i64->getPointerTo(), i32->getPointerTo()}, "hcct.kpath.version_function");
  std::vector<Constant *> functions;
  for (const Entry &e : entries_) {
    auto *blocks_type = ArrayType::get(i32, e.start_blocks.size());
    std::vector<Constant *> blocks;
    for (uint32_t b : e.start_blocks) blocks.push_back(ConstantInt::get(i32, b));
    auto *blocks_gv = new GlobalVariable(m_, blocks_type, true, GlobalValue::PrivateLinkage,
                                         ConstantArray::get(blocks_type, blocks), "hcct.kpath.start_blocks");
    Constant *zero = ConstantInt::get(i64, 0);
    functions.push_back(ConstantStruct::get(
        fn_type, {ConstantInt::get(i64, e.function_id), ConstantInt::get(i64, e.start_blocks.size()),
                  e.counters ? ConstantExpr::getInBoundsGetElementPtr(e.counters->getValueType(), e.counters,
                                                                      ArrayRef<Constant *>{zero, zero})
                             : ConstantPointerNull::get(i64->getPointerTo()),
                  ConstantExpr::getInBoundsGetElementPtr(blocks_type, blocks_gv, ArrayRef<Constant *>{zero, zero})}));
  }
  auto *array_type = ArrayType::get(fn_type, functions.size());
  auto *array = new GlobalVariable(m_, array_type, true, GlobalValue::PrivateLinkage,
                                   ConstantArray::get(array_type, functions), "hcct.kpath.version_functions");
  auto *counters_fn_type = FunctionType::get(i64->getPointerTo(), false)->getPointerTo();
  auto *table_type =
      StructType::create(c, {i64, i64, fn_type->getPointerTo(), counters_fn_type, i64, i64}, "hcct.kpath.version_table");
  Constant *zero = ConstantInt::get(i64, 0);
  auto *table = new GlobalVariable(
      m_, table_type, true, GlobalValue::PrivateLinkage,
      ConstantStruct::get(table_type, {ConstantInt::get(i64, abi::kVersionTableVersion), ConstantInt::get(i64, functions.size()),
                                       ConstantExpr::getInBoundsGetElementPtr(array_type, array, ArrayRef<Constant *>{zero, zero}),
                                       thread_counters ? static_cast<Constant *>(thread_counters)
                                                       : ConstantPointerNull::get(counters_fn_type),
                                       ConstantInt::get(i64, thread_words),
                                       ConstantInt::get(i64, countdown_ ? abi::kVersionEventClock : 0)}),
      "hcct.kpath.version_table");
  auto make_caller = [&](const char *name, const char *callee) {
    auto *fty = FunctionType::get(Type::getVoidTy(c), false);
    Function *f = Function::Create(fty, GlobalValue::InternalLinkage, name, m_);
    f->addFnAttr(Attribute::NoUnwind);
    IRBuilder<> b(BasicBlock::Create(c, "entry", f));
    FunctionCallee target = m_.getOrInsertFunction(callee, Type::getVoidTy(c), Type::getInt8PtrTy(c));
    b.CreateCall(target, {b.CreateBitCast(table, b.getInt8PtrTy())});
    b.CreateRetVoid();
    return f;
  };
  appendToGlobalCtors(m_, make_caller("hcct.kpath.register_versions", abi::kRegisterVersionsSymbol), 0);
  appendToGlobalDtors(m_, make_caller("hcct.kpath.unregister_versions", abi::kUnregisterVersionsSymbol), 0);
}

namespace {

// A value used outside its block (or by a phi) lives across a block boundary, where control may
// move to the other copy: it goes to a stack slot (promoted back to registers by finish()).
bool crosses_blocks(const Instruction &i) {
  for (const User *u : i.users()) {
    const auto *ui = cast<Instruction>(u);
    if (ui->getParent() != i.getParent() || isa<PHINode>(ui)) return true;
  }
  return false;
}

bool static_alloca(const Instruction &i) {
  const auto *a = dyn_cast<AllocaInst>(&i);
  return a && isa<ConstantInt>(a->getArraySize());
}

// Whether an edge out of `from` can get a block of its own: not out of an indirectbr (its targets
// are named by their addresses). (A cut edge out of one is not counted at its target: that start's
// T is then low, which the estimator reports as a counter below its sampled paths.)
bool splittable(const BasicBlock *from) { return !isa<IndirectBrInst>(from->getTerminator()); }

// A new block on the edge from → to (all of from's successor slots that name `to`); the phis of
// `to` then take from's values from it, once.
BasicBlock *on_edge(Function &f, BasicBlock *from, BasicBlock *to, const Twine &name) {
  BasicBlock *mid = BasicBlock::Create(f.getContext(), name, &f, to);
  BranchInst::Create(to, mid);
  Instruction *term = from->getTerminator();
  for (unsigned i = 0; i < term->getNumSuccessors(); ++i)
    if (term->getSuccessor(i) == to) term->setSuccessor(i, mid);
  for (PHINode &phi : to->phis()) {
    bool first = true;
    for (unsigned i = 0; i < phi.getNumIncomingValues();) {
      if (phi.getIncomingBlock(i) != from) {
        ++i;
      } else if (first) {
        phi.setIncomingBlock(i, mid);
        first = false;
        ++i;
      } else {
        phi.removeIncomingValue(i, false);
      }
    }
  }
  return mid;
}

}  // namespace

bool PathVersioner::supported(const Function &f) {
  bool computed_gotos = version_computed_gotos(*f.getParent());
  for (const BasicBlock &bb : f) {
    for (const Instruction &i : bb) {
      if (isa<CallBrInst>(i) || (isa<IndirectBrInst>(i) && !computed_gotos)) return false;
      if (i.getType()->isTokenTy() && crosses_blocks(i)) return false;
    }
    if (bb.isEHPad() && !bb.isLandingPad()) return false;  // funclet EH (never on Linux)
  }
  // A back edge gets a block of its own (the counter and the gate test); an indirectbr's edges
  // cannot (their targets are named by their addresses).
  SmallVector<std::pair<const BasicBlock *, const BasicBlock *>, 16> back_edges;
  FindFunctionBackedges(f, back_edges);
  for (auto &[from, to] : back_edges)
    if (isa<IndirectBrInst>(from->getTerminator())) return false;
  return true;
}

// The tables of f's block addresses: a computed goto's dispatch table (`static const void *const
// disptab[] = {&&L_OP_MOVE, ...}`, a constant of the module that only f reads). Each copy of the
// body gets a table of its own blocks' addresses (an indirectbr may only reach blocks of its own
// function, and each copy must stay in itself). False if a block address is used otherwise: by
// an instruction, another function, or a global that is not f's own constant; or if an address
// read from a table lives across blocks (clang's unoptimised code: each handler loads the next
// address and branches to one indirectbr through a phi), where it could cross from one copy into
// the other and send it to the other copy's blocks. The optimised code (the late stage) loads it
// in the indirectbr's own block.
bool PathVersioner::block_address_tables(const Function &f, std::vector<GlobalVariable *> &tables) {
  // A load of a table entry whose only use is an indirectbr in its own block.
  auto dispatches_here = [&](const User *u, const BasicBlock *where) {
    const auto *load = dyn_cast<LoadInst>(u);
    if (!load || load->getFunction() != &f || (where && load->getParent() != where)) return false;
    for (const User *v : load->users())
      if (!isa<IndirectBrInst>(v) || cast<Instruction>(v)->getParent() != load->getParent()) return false;
    return true;
  };
  auto only_f_reads = [&](const GlobalVariable &g) {
    std::vector<const User *> users(g.user_begin(), g.user_end());
    for (size_t n = 0; n < users.size(); ++n) {
      const User *u = users[n];
      if (const auto *gep = dyn_cast<GetElementPtrInst>(u)) {
        for (const User *v : gep->users())
          if (!dispatches_here(v, gep->getParent())) return false;
      } else if (isa<ConstantExpr>(u)) {
        users.insert(users.end(), u->user_begin(), u->user_end());
      } else if (!dispatches_here(u, nullptr)) {
        return false;
      }
    }
    return true;
  };
  for (const BasicBlock &bb : f) {
    if (!bb.hasAddressTaken()) continue;
    BlockAddress *address = BlockAddress::lookup(&bb);
    if (!address) continue;
    std::vector<const User *> users(address->user_begin(), address->user_end());
    for (size_t n = 0; n < users.size(); ++n) {
      const User *u = users[n];
      if (const auto *g = dyn_cast<GlobalVariable>(u)) {
        if (!g->isConstant() || !g->hasLocalLinkage() || !only_f_reads(*g)) return false;
        if (std::find(tables.begin(), tables.end(), g) == tables.end()) tables.push_back(const_cast<GlobalVariable *>(g));
      } else if (isa<ConstantAggregate>(u) || isa<ConstantExpr>(u)) {
        users.insert(users.end(), u->user_begin(), u->user_end());
      } else {
        return false;
      }
    }
  }
  return true;
}

// `table`'s contents with the addresses of `from`'s blocks replaced by those of the blocks of `to`
// that `blocks` maps them to.
Constant *PathVersioner::retarget(GlobalVariable &table, Function &from, Function &to, const ValueToValueMapTy &blocks) {
  ValueToValueMapTy addresses;
  for (BasicBlock &bb : from)
    if (bb.hasAddressTaken())
      if (BlockAddress *address = BlockAddress::lookup(&bb))
        if (Value *copy = blocks.lookup(&bb)) addresses[address] = BlockAddress::get(&to, cast<BasicBlock>(copy));
  return MapValue(table.getInitializer(), addresses);
}

GlobalVariable *PathVersioner::new_table(GlobalVariable &table, Constant *contents, const Twine &suffix) {
  auto *copy = new GlobalVariable(*table.getParent(), table.getValueType(), true, table.getLinkage(), contents,
                                  table.getName() + suffix, &table);
  copy->copyAttributesFrom(&table);
  made_tables_.push_back(copy);
  return copy;
}

void PathVersioner::demote(Function &f, const std::vector<Instruction *> &also) {
  BasicBlock &entry = f.getEntryBlock();
  // (The slots go to the top of the entry: a fixed insertion point could be a cast that dropping
  // lifetime markers below leaves unused, which its demotion then erases.)
  Instruction *alloca_point = nullptr;
  std::vector<Instruction *> values;
  std::vector<PHINode *> phis;
  DenseSet<Instruction *> extra(also.begin(), also.end());
  // As reg2mem does: first every value used across blocks, phis included (their uses then reload
  // from the slot where they are), then the phis themselves (a store in each predecessor; a phi's
  // own reload is used only in its block after the first step). `also`: the values an outlined
  // copy's joins store (a static alloca among them: its address, which the join replaces by the
  // caller's).
  for (BasicBlock &bb : f)
    for (Instruction &i : bb) {
      if (auto *phi = dyn_cast<PHINode>(&i)) phis.push_back(phi);
      bool entry_alloca = &bb == &entry && isa<AllocaInst>(i);
      if ((!entry_alloca && !i.getType()->isVoidTy() && crosses_blocks(i)) || extra.count(&i)) values.push_back(&i);
    }
  for (Instruction *i : values) {
    if (isa<AllocaInst>(i)) {
      // Its lifetime markers would then name the caller's variable on a join: dropped.
      std::vector<Instruction *> users{i};
      for (size_t n = 0; n < users.size(); ++n)
        for (User *u : users[n]->users())
          if (auto *ui = dyn_cast<Instruction>(u); ui && (isa<BitCastInst>(ui) || ui->isLifetimeStartOrEnd()))
            users.push_back(ui);
      for (Instruction *u : make_range(users.rbegin(), users.rend()))
        if (u->isLifetimeStartOrEnd()) u->eraseFromParent();
    }
    if (AllocaInst *slot = DemoteRegToStack(*i, false, alloca_point)) {
      slots_.push_back(slot);
      slot_of_[i] = slot;
    }
  }
  for (PHINode *phi : phis)
    if (AllocaInst *slot = DemotePHIToStack(phi, alloca_point)) {
      slots_.push_back(slot);
      phi_slot_of_[phi] = slot;  // (where its predecessors store: a join at its header stores there too)
    }
}

bool PathVersioner::outlinable(const Function &f) {
  if (f.isVarArg()) return false;
  for (const Argument &a : f.args())
    if (a.hasInAllocaAttr() || a.hasPreallocatedAttr() || a.hasSwiftErrorAttr()) return false;
  for (const BasicBlock &bb : f)
    for (const Instruction &i : bb)
      if (const auto *call = dyn_cast<CallInst>(&i); call && call->isMustTailCall()) return false;
  return true;
}

bool PathVersioner::has_loops(const Function &f) {
  SmallVector<std::pair<const BasicBlock *, const BasicBlock *>, 16> back_edges;
  FindFunctionBackedges(f, back_edges);
  return !back_edges.empty();
}

// Per loop header of f_ (not a landing pad: no counter there), the values live into it. A value
// defined in a block that strictly dominates the header is live there if some use is reachable
// from the header (conservative: a use after a redefinition cannot happen in SSA); the header's
// phis are, with the value of the back edge. Every such value crosses blocks, so the outlined
// copy has a slot for it.
void PathVersioner::find_resumes() {
  SmallVector<std::pair<const BasicBlock *, const BasicBlock *>, 16> back_edges;
  FindFunctionBackedges(f_, back_edges);
  DominatorTree dt(f_);
  DenseSet<const BasicBlock *> seen;
  for (auto &[from, to] : back_edges) {
    auto *h = const_cast<BasicBlock *>(to);
    if (h->isEHPad() || !seen.insert(h).second) continue;
    Resume r;
    r.header = h;
    for (PHINode &phi : h->phis()) r.live.push_back(&phi);
    SmallPtrSet<const BasicBlock *, 32> reach{h};
    SmallVector<const BasicBlock *, 64> work{h};
    while (!work.empty())
      for (const BasicBlock *s : successors(work.pop_back_val()))
        if (reach.insert(s).second) work.push_back(s);
    auto used_from_header = [&](const Instruction &i) {
      for (const Use &u : i.uses()) {
        const auto *ui = cast<Instruction>(u.getUser());
        const BasicBlock *at = ui->getParent();
        if (const auto *phi = dyn_cast<PHINode>(ui)) at = phi->getIncomingBlock(u);
        if (reach.count(at)) return true;
      }
      return false;
    };
    std::vector<Instruction *> above;  // outermost block first, so that operands come before users
    for (DomTreeNode *n = dt.getNode(h)->getIDom(); n; n = n->getIDom()) {
      std::vector<Instruction *> block;
      for (Instruction &i : *n->getBlock())
        if (!i.getType()->isVoidTy() && used_from_header(i)) block.push_back(&i);
      above.insert(above.begin(), block.begin(), block.end());
    }
    DenseSet<const Value *> available;  // passed or recomputed
    auto recomputable = [&](const Instruction &i) {
      if (!isa<GetElementPtrInst>(i) && !isa<CastInst>(i)) return false;
      for (const Value *op : i.operands()) {
        if (isa<Constant>(op) || available.count(op)) continue;
        // (f.kpath's own argument is the same value, but for one the ABI copies per call.)
        const auto *a = dyn_cast<Argument>(op);
        if (!a || a->hasPassPointeeByValueCopyAttr() || a->hasByRefAttr()) return false;
      }
      return true;
    };
    for (Instruction *i : above) {
      (recomputable(*i) ? r.remat : r.live).push_back(i);
      available.insert(i);
    }
    std::vector<Type *> types;
    for (Instruction *i : r.live) types.push_back(i->getType());
    r.buffer = StructType::get(f_.getContext(), types);
    resumes_.push_back(std::move(r));
  }
}

// f.kpath: f's body with two more parameters (where: 0 = the entry, else the counter index of the
// header to resume at; live: the join's buffer), internal, never inlined (a caller that inlined
// it would carry the instrumented copy again).
void PathVersioner::outline() {
  LLVMContext &c = f_.getContext();
  std::vector<Type *> params(f_.getFunctionType()->param_begin(), f_.getFunctionType()->param_end());
  params.push_back(Type::getInt64Ty(c));
  params.push_back(Type::getInt8PtrTy(c));
  auto *type = FunctionType::get(f_.getReturnType(), params, false);
  Function *g = Function::Create(type, GlobalValue::InternalLinkage, f_.getAddressSpace(), f_.getName() + ".kpath",
                                 f_.getParent());
  auto arg = g->arg_begin();
  for (Argument &a : f_.args()) {
    arg->setName(a.getName());
    outline_map_[&a] = &*arg++;
  }
  arg->setName("kpath.where");
  (++arg)->setName("kpath.live");
  // f keeps its tables; f.kpath reads copies that name its own blocks (filled once they exist).
  for (GlobalVariable *t : tables_) outline_map_[t] = new_table(*t, nullptr, ".kpath");
  SmallVector<ReturnInst *, 8> returns;
  CloneFunctionInto(g, &f_, outline_map_, CloneFunctionChangeType::LocalChangesOnly, returns);
  for (GlobalVariable *t : tables_) cast<GlobalVariable>(outline_map_[t])->setInitializer(retarget(*t, f_, *g, outline_map_));
  for (GlobalVariable *&t : tables_) t = cast<GlobalVariable>(outline_map_[t]);
  g->setLinkage(GlobalValue::InternalLinkage);
  g->setVisibility(GlobalValue::DefaultVisibility);
  g->setDLLStorageClass(GlobalValue::DefaultStorageClass);
  g->setComdat(nullptr);
  g->removeFnAttr(Attribute::AlwaysInline);
  g->addFnAttr(Attribute::NoInline);
  outlined_ = g;
}

bool PathVersioner::prepare() {
  if (!supported(f_) || !block_address_tables(f_, tables_)) return false;
  std::vector<Instruction *> also;
  if (outline_ != Outline::kNever && outlinable(f_) && (outline_ == Outline::kAlways || !has_loops(f_))) {
    find_resumes();
    outline();
    // (Raw pointers: the map's handles follow the replacements demotion makes.)
    for (Resume &r : resumes_)
      for (Instruction *i : r.live) {
        r.outlined.push_back(cast<Instruction>(outline_map_[i]));
        also.push_back(r.outlined.back());
      }
    for (Resume &r : resumes_)
      for (Instruction *i : r.remat) {
        r.remat_outlined.push_back(cast<Instruction>(outline_map_[i]));
        also.push_back(r.remat_outlined.back());
      }
  }
  Function &f = target();
  demote(f, also);
  for (BasicBlock &bb : f) originals_.push_back(&bb);
  // Static allocas of the entry are shared by both copies (the program's variables and the slots:
  // whichever copy runs, it sees the same state); everything else is cloned.
  std::vector<std::pair<AllocaInst *, Instruction *>> shared;
  for (BasicBlock *bb : originals_) {
    BasicBlock *copy = CloneBasicBlock(bb, map_, ".nb", &f);
    map_[bb] = copy;
  }
  for (Instruction &i : f.getEntryBlock())
    if (static_alloca(i)) {
      auto *a = cast<AllocaInst>(&i);
      shared.push_back({a, cast<Instruction>(map_[a])});
      map_[a] = a;
    }
  // The uninstrumented copy's dispatch tables: its own blocks.
  for (GlobalVariable *t : tables_) map_[t] = new_table(*t, retarget(*t, f, f, map_), ".nb");
  for (BasicBlock *bb : originals_) {
    auto *copy = cast<BasicBlock>(map_[bb]);
    for (Instruction &i : *copy) RemapInstruction(&i, map_, RF_NoModuleLevelChanges | RF_IgnoreMissingLocals);
  }
  for (auto &[original, clone] : shared) clone->eraseFromParent();
  // One declaration per variable: the copy's dbg.declare of the shared allocas would repeat it.
  for (BasicBlock *bb : originals_)
    for (Instruction &i : make_early_inc_range(*cast<BasicBlock>(map_[bb])))
      if (isa<DbgDeclareInst>(i) || isa<DbgAddrIntrinsic>(i)) i.eraseFromParent();
  return true;
}

void PathVersioner::abandon() {
  if (outlined_) {  // f is untouched
    outlined_->eraseFromParent();
    outlined_ = nullptr;
    drop_tables();
    return;
  }
  std::vector<BasicBlock *> copies;
  for (BasicBlock *bb : originals_) copies.push_back(cast<BasicBlock>(map_[bb]));
  for (BasicBlock *bb : copies) bb->dropAllReferences();
  for (BasicBlock *bb : copies) bb->eraseFromParent();
  drop_tables();
  std::vector<AllocaInst *> promote;
  for (AllocaInst *a : slots_)
    if (isAllocaPromotable(a)) promote.push_back(a);
  DominatorTree dt(f_);
  PromoteMemToReg(promote, dt);
}

void PathVersioner::drop_tables() {
  for (GlobalVariable *t : make_range(made_tables_.rbegin(), made_tables_.rend())) {
    t->removeDeadConstantUsers();
    if (t->use_empty()) t->eraseFromParent();
  }
  made_tables_.clear();
}

// counters[index] + 1, a plain load, add and store: a start point's exact count, kept in both
// copies. Per thread in an executable (VersionApi::move_counters_to_tls); elsewhere process-wide and
// racy between threads, as -fprofile-instr-generate's counters are.
StoreInst *PathVersioner::count_start(IRBuilder<> &b, GlobalVariable *counters, unsigned index) {
  Type *i64 = b.getInt64Ty();
  Value *p = b.CreateConstInBoundsGEP2_64(counters->getValueType(), counters, 0, index);
  return b.CreateStore(b.CreateAdd(b.CreateLoad(i64, p, "kpath.start.count"), b.getInt64(1)), p);
}

// The shared gate, read volatile (the burst thread flips it): true while a burst is open.
Value *PathVersioner::gate_open(IRBuilder<> &b) const {
  LoadInst *g = b.CreateLoad(b.getInt8Ty(), api_.gate(), "kpath.gate");
  g->setVolatile(true);
  return b.CreateICmpNE(g, b.getInt8(0));
}

namespace {
// abi::countdown_open(v) in IR: one subtraction and an unsigned compare.
Value *countdown_in_burst(IRBuilder<> &b, Value *v) {
  return b.CreateICmpULE(b.CreateSub(v, b.getInt64(uint64_t(abi::kCountdownBurstLow))),
                         b.getInt64(abi::kCountdownBurstSpan));
}

// `dest` gets from `pred` the values its phis get from `like`.
void copy_incoming(BasicBlock *dest, BasicBlock *like, BasicBlock *pred) {
  for (PHINode &phi : dest->phis()) phi.addIncoming(phi.getIncomingValueForBlock(like), pred);
}
}  // namespace

// Ends b's block (before its terminator, which goes: it branched to one of the two) with the test
// that picks the copy at a start point: to `open` in a burst, else to `closed`. `open_likely`: the
// test of the instrumented copy, which stays unless the burst is over. The time gate: a volatile
// byte load and a branch. The event clock: the thread's countdown minus one, and a sign test
// (closed) or a range test (open); when the period is over (closed: below zero), the runtime's
// tick, which sets the next period and says which it is.
CallInst *PathVersioner::branch_on_gate(IRBuilder<> &b, BasicBlock *open, BasicBlock *closed, bool open_likely,
                                        bool ask_runtime) const {
  MDBuilder md(b.getContext());
  MDNode *likely = md.createBranchWeights(2000, 1), *unlikely = md.createBranchWeights(1, 2000);
  BasicBlock *here = b.GetInsertBlock();
  Instruction *old = b.GetInsertPoint() != here->end() ? &*b.GetInsertPoint() : nullptr;
  if (!api_.countdown()) {
    b.CreateCondBr(gate_open(b), open, closed, open_likely ? likely : unlikely);
    if (old) old->eraseFromParent();
    return nullptr;
  }
  Type *i64 = b.getInt64Ty();
  GlobalVariable *countdown = api_.countdown();
  Value *n = b.CreateSub(b.CreateLoad(i64, countdown, "kpath.countdown"), b.getInt64(1));
  b.CreateStore(n, countdown);
  if (!ask_runtime) {  // f's own body: below zero, f.kpath decides (decide_in_outlined)
    b.CreateCondBr(b.CreateICmpSGE(n, b.getInt64(0)), closed, open, likely);
    if (old) old->eraseFromParent();
    return nullptr;
  }
  // Only when the period is over, or (the uninstrumented copy) below zero: the runtime's tick.
  Function *f = here->getParent();
  BasicBlock *tick = BasicBlock::Create(b.getContext(), here->getName() + ".tick", f);
  IRBuilder<> tb(tick);
  tb.SetCurrentDebugLocation(b.getCurrentDebugLocation());
  CallInst *now_open = tb.CreateCall(api_.tick_fn(), {countdown});
  tb.CreateCondBr(tb.CreateICmpNE(now_open, tb.getInt8(0)), open, closed, unlikely);
  copy_incoming(open, here, tick);
  copy_incoming(closed, here, tick);
  if (!open_likely) {
    // The uninstrumented copy: below zero, the tick says whether a burst is open (one that began
    // elsewhere in the thread: the tick leaves it as it is) or begins. Testing the burst's range
    // here took two 64-bit constants, which the code generator kept in registers across the loop
    // (zstd's ZSTD_row_update.kpath: two more loop invariants spilled to the stack); the tick runs
    // once per burst boundary and loop.
    b.CreateCondBr(b.CreateICmpSGE(n, b.getInt64(0)), closed, tick, likely);
    if (old) old->eraseFromParent();
    return now_open;
  }
  // The instrumented copy: in the burst's range, stay; at or above zero, leave; else the tick.
  BasicBlock *other_test = BasicBlock::Create(b.getContext(), here->getName() + ".clock", f);
  b.CreateCondBr(countdown_in_burst(b, n), open, other_test, likely);
  if (old) old->eraseFromParent();
  IRBuilder<> ob(other_test);
  ob.SetCurrentDebugLocation(b.getCurrentDebugLocation());
  // (The word again, not n: a second use of n would keep the first test from folding into one
  // range test on the decremented word.)
  Value *again = ob.CreateLoad(i64, countdown, "kpath.countdown");
  ob.CreateCondBr(ob.CreateICmpSGE(again, ob.getInt64(0)), closed, tick);
  copy_incoming(closed, here, other_test);
  for (PHINode &phi : closed->phis()) phi.removeIncomingValue(here, /*DeletePHIIfEmpty=*/false);  // (no longer its predecessor)
  return now_open;
}

// The event clock in f.kpath, entered from f's body because f's countdown went below zero (f
// decremented it): still in a burst, or else the runtime's tick decides. So f's own body never
// calls the tick: a call there that returns into f's body made f keep its arguments in
// callee-saved registers, with a stack frame, on every call (Lua's lua_pushvalue: 3 pushes, 3
// pops and 2 moves more than on the time gate).
BasicBlock *PathVersioner::decide_in_outlined(BasicBlock *open, BasicBlock *closed, const DebugLoc &loc) const {
  Function &f = *open->getParent();
  LLVMContext &c = f.getContext();
  BasicBlock *decide = BasicBlock::Create(c, open->getName() + ".clock", &f);
  BasicBlock *tick = BasicBlock::Create(c, open->getName() + ".tick", &f);
  IRBuilder<> b(decide);
  b.SetCurrentDebugLocation(loc);
  Value *v = b.CreateLoad(b.getInt64Ty(), api_.countdown(), "kpath.countdown");
  b.CreateCondBr(countdown_in_burst(b, v), open, tick);
  IRBuilder<> tb(tick);
  tb.SetCurrentDebugLocation(loc);
  Value *now_open = tb.CreateCall(api_.tick_fn(), {api_.countdown()});
  tb.CreateCondBr(tb.CreateICmpNE(now_open, tb.getInt8(0)), open, closed);
  return decide;
}

void PathVersioner::finish(const FunctionDag &dag, const PathInstrumenter &inst, uint64_t function_id) {
  Function &f = target();
  LLVMContext &c = f.getContext();
  DebugLoc loc;
  if (DISubprogram *sp = f.getSubprogram()) loc = DILocation::get(c, sp->getLine(), 0, sp);

  // Start points: the entry, then every block a restart starts a path at — loop headers after a
  // back edge, and the targets of edges cut because the function's paths overflowed, which restart
  // through the same dummy edge (a path decodes as starting there either way) — in DAG block order.
  std::vector<uint32_t> starts{0};
  DenseMap<BasicBlock *, uint64_t> reset;  // original header -> what its back edges' restart sets r to
  DenseSet<BasicBlock *> started;
  for (const RestartEdge &r : dag.restarts()) {
    BasicBlock *h = dag.blocks()[r.to];
    if (h->isEHPad()) continue;
    if (!r.cut && !reset.count(h)) reset[h] = *inst.restart_value(h);
    if (started.insert(h).second) starts.push_back(r.to);
  }
  std::sort(starts.begin() + 1, starts.end());
  GlobalVariable *counters = api_.add_function(function_id, starts);
  DenseMap<BasicBlock *, unsigned> counter_of;
  for (unsigned i = 1; i < starts.size(); ++i) counter_of[dag.blocks()[starts[i]]] = i;

  auto count = [&](IRBuilder<> &b, unsigned index) { count_start(b, counters, index); };
  auto copy_of = [&](BasicBlock *bb) { return cast<BasicBlock>(map_[bb]); };
  std::vector<AllocaInst *> regs = inst.registers();  // r, w, owner

  // Per header: where an activation joins the instrumented copy (a fresh window at the header, r
  // as its restart sets it) and where it leaves it.
  DenseMap<BasicBlock *, BasicBlock *> join, leave;
  for (auto &[h, r_reset] : reset) {
    BasicBlock *j = BasicBlock::Create(c, h->getName() + ".kpath.join", &f);
    IRBuilder<> b(j);
    b.SetCurrentDebugLocation(loc);
    b.CreateCall(api_.switch_fn(), {b.getInt64(abi::kSwitchJoin)});
    b.CreateStore(b.getInt64(r_reset), regs[0]);
    b.CreateStore(Constant::getNullValue(regs[1]->getAllocatedType()), regs[1]);
    b.CreateStore(b.getInt64(0), regs[2]);
    b.CreateBr(h);
    for (PHINode &phi : h->phis()) phi.addIncoming(Constant::getNullValue(phi.getType()), j);  // (dispatch: no probe)
    join[h] = j;
    BasicBlock *l = BasicBlock::Create(c, h->getName() + ".kpath.leave", &f);
    IRBuilder<> lb(l);
    lb.SetCurrentDebugLocation(loc);
    lb.CreateCall(api_.switch_fn(), {lb.getInt64(abi::kSwitchLeave)});
    lb.CreateBr(copy_of(h));
    leave[h] = l;
  }

  // Back edges of the instrumented copy, as they are after instrumentation (a probe may sit on a
  // block of its own on the edge); the copy is still unreachable, so this walks the original only.
  SmallVector<std::pair<const BasicBlock *, const BasicBlock *>, 16> back_edges;
  FindFunctionBackedges(f, back_edges);
  for (auto &[from_c, to_c] : back_edges) {
    auto *from = const_cast<BasicBlock *>(from_c);
    auto *to = const_cast<BasicBlock *>(to_c);
    auto it = counter_of.find(to);
    if (it == counter_of.end()) continue;
    BasicBlock *mid = on_edge(f, from, to, to->getName() + ".kpath.gate");
    IRBuilder<> b(mid->getTerminator());
    b.SetCurrentDebugLocation(loc);
    count(b, it->second);
    branch_on_gate(b, to, leave[to], /*open_likely=*/true);
  }
  // Back edges of the uninstrumented copy: the same CFG edges as the DAG's.
  BackEdgeTests copy_tests;  // per header of the uninstrumented copy
  for (const RestartEdge &r : dag.restarts()) {
    BasicBlock *h = dag.blocks()[r.to];
    auto it = counter_of.find(h);
    if (r.cut || it == counter_of.end()) continue;
    BasicBlock *to = copy_of(h);
    BasicBlock *mid = on_edge(f, copy_of(dag.blocks()[r.from]), to, to->getName() + ".kpath.gate");
    IRBuilder<> b(mid->getTerminator());
    b.SetCurrentDebugLocation(loc);
    StoreInst *counted = count_start(b, counters, it->second);
    CallInst *tick = branch_on_gate(b, join[h], to, /*open_likely=*/false);
    copy_tests[to].push_back({counted, tick});
  }

  // Cut edges into a start point: counted (a forward edge: no gate test, no change of copies). In
  // the uninstrumented copy the edge is the CFG's; in the instrumented one a probe may now sit on
  // it, so the edge into h is the one whose source leads back to the cut's source through blocks
  // the instrumenter added.
  DenseSet<const BasicBlock *> dag_blocks(dag.blocks().begin(), dag.blocks().end());
  auto origin = [&](BasicBlock *p) {
    for (int hops = 0; p && !dag_blocks.count(p) && hops < 8; ++hops) p = p->getSinglePredecessor() ? p->getSinglePredecessor() : (pred_empty(p) ? nullptr : *pred_begin(p));
    return p;
  };
  std::vector<std::pair<BasicBlock *, BasicBlock *>> cuts;  // (source, target), original blocks
  for (const RestartEdge &r : dag.restarts()) {
    BasicBlock *h = dag.blocks()[r.to];
    auto it = counter_of.find(h);
    if (!r.cut || it == counter_of.end()) continue;
    BasicBlock *from = dag.blocks()[r.from];
    cuts.push_back({from, h});
    std::vector<BasicBlock *> into;
    for (BasicBlock *p : predecessors(h))
      if (origin(p) == from && std::find(into.begin(), into.end(), p) == into.end()) into.push_back(p);
    for (BasicBlock *p : into) {
      if (!splittable(p)) continue;
      BasicBlock *mid = on_edge(f, p, h, h->getName() + ".kpath.cut");
      IRBuilder<> b(mid->getTerminator());
      b.SetCurrentDebugLocation(loc);
      count(b, it->second);
    }
    if (!splittable(copy_of(from))) continue;
    BasicBlock *mid = on_edge(f, copy_of(from), copy_of(h), h->getName() + ".kpath.cut");
    IRBuilder<> b(mid->getTerminator());
    b.SetCurrentDebugLocation(loc);
    count(b, it->second);
  }

  // The new entry: the shared static allocas, the entry counter, the gate.
  BasicBlock *entry = &f.getEntryBlock();
  BasicBlock *top = BasicBlock::Create(c, "kpath.versions", &f, entry);
  std::vector<Instruction *> allocas;
  for (Instruction &i : *entry)
    if (static_alloca(i)) allocas.push_back(&i);
  // The instrumenter's frame pointer cast is used by every probe, and the join blocks skip this
  // block: it moves up with its alloca.
  for (Instruction &i : *entry)
    if (isa<BitCastInst>(i) && isa<AllocaInst>(i.getOperand(0)) && static_alloca(*cast<Instruction>(i.getOperand(0)))) allocas.push_back(&i);
  for (Instruction *a : allocas) a->moveBefore(*top, top->end());
  IRBuilder<> b(top);
  b.SetCurrentDebugLocation(loc);
  if (!outlined_) {
    count(b, 0);
    // (A versioned build is made for bursting: between bursts, where most calls run, it is closed.)
    branch_on_gate(b, entry, copy_of(entry), /*open_likely=*/false);
  } else {
    // Called by f with the gate open (f counted the start): the entry, or a join at a header whose
    // live values the buffer holds, stored where this copy keeps them.
    Argument *where = f.getArg(f.arg_size() - 2), *live = f.getArg(f.arg_size() - 1);
    // (On the event clock f came here because its countdown went below zero: decide first.)
    bool clock = api_.countdown() != nullptr;
    SwitchInst *dispatch =
        b.CreateSwitch(where, clock ? decide_in_outlined(entry, copy_of(entry), loc) : entry, unsigned(resumes_.size()));
    for (const Resume &r : resumes_) {
      auto *h = cast<BasicBlock>(outline_map_[r.header]);
      auto it = counter_of.find(h);
      if (it == counter_of.end()) continue;  // (f has no join there either)
      BasicBlock *resume = BasicBlock::Create(c, h->getName() + ".kpath.resume", &f);
      IRBuilder<> rb(resume);
      rb.SetCurrentDebugLocation(loc);
      Value *buffer = rb.CreateBitCast(live, r.buffer->getPointerTo());
      ValueToValueMapTy value_of;  // f's value -> the same here
      for (Argument &a : f_.args()) value_of[&a] = outline_map_[&a];
      for (unsigned n = 0; n < r.live.size(); ++n) {
        // A phi of the header: where its predecessors store (the header copies it to the slot its
        // uses read); any other value: the slot its uses read. None: a cast whose only uses were
        // the lifetime markers demote() dropped (nothing reads it here).
        Value *v = rb.CreateLoad(r.buffer->getElementType(n), rb.CreateStructGEP(r.buffer, buffer, n));
        value_of[r.live[n]] = v;
        bool header_phi = isa<PHINode>(r.live[n]) && r.live[n]->getParent() == r.header;
        if (AllocaInst *slot = (header_phi ? phi_slot_of_ : slot_of_).lookup(r.outlined[n])) rb.CreateStore(v, slot);
      }
      // The values recomputed from f.kpath's arguments and the passed ones, operands first.
      for (unsigned n = 0; n < r.remat.size(); ++n) {
        Instruction *v = r.remat[n]->clone();
        v->setDebugLoc(loc);
        rb.Insert(v, r.remat[n]->getName());
        RemapInstruction(v, value_of, RF_NoModuleLevelChanges | RF_IgnoreMissingLocals);
        value_of[r.remat[n]] = v;
        if (AllocaInst *slot = slot_of_.lookup(r.remat_outlined[n])) rb.CreateStore(v, slot);
      }
      rb.CreateBr(clock ? decide_in_outlined(join[h], copy_of(h), loc) : join[h]);
      dispatch->addCase(b.getInt64(it->second), resume);
    }
    wire_native(counters, counter_of, cuts);
  }

  std::vector<AllocaInst *> promote;
  for (AllocaInst *a : slots_)
    if (isAllocaPromotable(a)) promote.push_back(a);
  for (AllocaInst *a : regs)
    if (isAllocaPromotable(a)) promote.push_back(a);
  DominatorTree dt(f);
  PromoteMemToReg(promote, dt);
  // An activation that a burst caught stays in f.kpath until it returns, its loops running in the
  // uninstrumented copy once the burst is over: a long loop (zstd's ZSTD_row_update) runs there
  // for most of its iterations. Its call-free loops keep the clock in a register, as f's do.
  if (outlined_ && api_.countdown()) keep_clock_in_registers(f, copy_tests);
}

// f's own body between bursts: the start counters and the gate tests at its entry and back edges;
// with the gate open, the entry tail-calls f.kpath and a back edge joins it at the header.
void PathVersioner::wire_native(GlobalVariable *counters, const DenseMap<BasicBlock *, unsigned> &counter_of,
                                const std::vector<std::pair<BasicBlock *, BasicBlock *>> &cuts) {
  LLVMContext &c = f_.getContext();
  DebugLoc loc;  // (f's own subprogram: f.kpath has a copy of it)
  if (DISubprogram *sp = f_.getSubprogram()) loc = DILocation::get(c, sp->getLine(), 0, sp);
  auto count = [&](IRBuilder<> &b, unsigned index) { count_start(b, counters, index); };
  auto call_outlined = [&](IRBuilder<> &b, uint64_t where, Value *live) {
    std::vector<Value *> args;
    for (Argument &a : f_.args()) args.push_back(&a);
    args.push_back(b.getInt64(where));
    args.push_back(live);
    CallInst *call = b.CreateCall(outlined_, args);
    call->setCallingConv(outlined_->getCallingConv());
    if (f_.getReturnType()->isVoidTy()) b.CreateRetVoid();
    else b.CreateRet(call);
    return call;
  };
  BasicBlock *entry = &f_.getEntryBlock();
  BasicBlock *top = BasicBlock::Create(c, "kpath.versions", &f_, entry);
  std::vector<Instruction *> allocas;
  for (Instruction &i : *entry)
    if (static_alloca(i)) allocas.push_back(&i);
  for (Instruction *a : allocas) a->moveBefore(*top, top->end());
  IRBuilder<> b(top);
  b.SetCurrentDebugLocation(loc);
  // One buffer for every join (they never overlap), not one per header: a function with many loops
  // (SQLite's sqlite3VdbeExec: 79 headers) had a stack frame of their sum (181 KB against native's
  // 472 bytes), which every call moved its callees' frames down by.
  DenseMap<BasicBlock *, const Resume *> resume_of;
  const DataLayout &layout = f_.getParent()->getDataLayout();
  uint64_t buffer_bytes = 1;
  Align buffer_align(8);
  for (const Resume &r : resumes_) {
    resume_of[r.header] = &r;
    buffer_bytes = std::max<uint64_t>(buffer_bytes, layout.getTypeAllocSize(r.buffer));
    buffer_align = std::max(buffer_align, layout.getABITypeAlign(r.buffer));
  }
  AllocaInst *buffer = nullptr;
  if (!resumes_.empty()) {
    buffer = b.CreateAlloca(ArrayType::get(b.getInt8Ty(), buffer_bytes), nullptr, "kpath.live");
    buffer->setAlignment(buffer_align);
  }
  count(b, 0);
  BasicBlock *instrumented = BasicBlock::Create(c, "kpath.instrumented", &f_);
  branch_on_gate(b, instrumented, entry, /*open_likely=*/false, /*ask_runtime=*/false);
  IRBuilder<> ib(instrumented);
  ib.SetCurrentDebugLocation(loc);
  call_outlined(ib, 0, Constant::getNullValue(ib.getInt8PtrTy()))->setTailCall();

  // One join per header, shared by its back edges (the header's phis' values come through phis of
  // the join): the stores of the live values once per header, not once per back edge.
  struct Join {
    BasicBlock *block;
    std::vector<PHINode *> phis;  // per live value, for the header's phis; else null
  };
  DenseMap<BasicBlock *, Join> join_of;
  BackEdgeTests back_edge_tests;
  SmallVector<std::pair<const BasicBlock *, const BasicBlock *>, 16> back_edges;
  FindFunctionBackedges(f_, back_edges);
  for (auto &[from_c, to_c] : back_edges) {
    auto *from = const_cast<BasicBlock *>(from_c);
    auto *h = const_cast<BasicBlock *>(to_c);
    auto it = counter_of.find(cast<BasicBlock>(outline_map_[h]));
    const Resume *r = resume_of.lookup(h);
    if (it == counter_of.end() || !r) continue;
    BasicBlock *mid = on_edge(f_, from, h, h->getName() + ".kpath.gate");
    auto [join, created] = join_of.try_emplace(h);
    if (created) {
      join->second.block = BasicBlock::Create(c, h->getName() + ".kpath.join", &f_);
      IRBuilder<> jb(join->second.block);
      jb.SetCurrentDebugLocation(loc);
      for (Instruction *v : r->live) {
        PHINode *in = nullptr;
        if (auto *phi = dyn_cast<PHINode>(v); phi && phi->getParent() == h) in = jb.CreatePHI(phi->getType(), 2);
        join->second.phis.push_back(in);
      }
      Value *live = jb.CreateBitCast(buffer, r->buffer->getPointerTo());
      for (unsigned n = 0; n < r->live.size(); ++n)
        jb.CreateStore(join->second.phis[n] ? join->second.phis[n] : static_cast<Value *>(r->live[n]),
                       jb.CreateStructGEP(r->buffer, live, n));
      call_outlined(jb, it->second, jb.CreateBitCast(buffer, jb.getInt8PtrTy()));
    }
    for (unsigned n = 0; n < r->live.size(); ++n)
      if (PHINode *in = join->second.phis[n]) in->addIncoming(cast<PHINode>(r->live[n])->getIncomingValueForBlock(mid), mid);
    IRBuilder<> mb(mid->getTerminator());
    mb.SetCurrentDebugLocation(loc);
    StoreInst *counted = count_start(mb, counters, it->second);
    branch_on_gate(mb, join->second.block, h, /*open_likely=*/false, /*ask_runtime=*/false);
    back_edge_tests[h].push_back({counted, nullptr});
  }
  // The cut edges into start points, in f's own body (a block of f.kpath that demotion added has
  // no counterpart in f: such a cut is not counted here).
  DenseMap<const BasicBlock *, BasicBlock *> original_of;
  for (BasicBlock &bb : f_)
    if (Value *v = outline_map_.lookup(&bb)) original_of[cast<BasicBlock>(v)] = &bb;
  for (auto &[from_g, h_g] : cuts) {
    BasicBlock *from = original_of.lookup(from_g), *h = original_of.lookup(h_g);
    auto it = counter_of.find(h_g);
    if (!from || !h || it == counter_of.end() || !splittable(from)) continue;
    BasicBlock *mid = on_edge(f_, from, h, h->getName() + ".kpath.cut");
    IRBuilder<> b(mid->getTerminator());
    b.SetCurrentDebugLocation(loc);
    count(b, it->second);
  }
  if (api_.countdown()) keep_clock_in_registers(f_, back_edge_tests);
}

namespace {
// Whether a loop's counts must stay in memory: its body can call code that reaches the countdown or
// the start counters — any call, memcpy/memmove/memset included (they may lower to a call of the
// program's own, instrumented definition), but for other intrinsics and the clock's own ticks
// (`ticks`: the register is written back around them) — or it may wait on another thread (an
// atomic or volatile access: a spin-wait can run while the final dump reads the counters, which
// would miss the loop's iterations so far).
bool keeps_counts_in_memory(const Loop &l, const SmallPtrSetImpl<const CallInst *> &ticks) {
  for (const BasicBlock *bb : l.blocks())
    for (const Instruction &i : *bb) {
      if (const auto *call = dyn_cast<CallBase>(&i);
          call && (!isa<IntrinsicInst>(call) || isa<AnyMemIntrinsic>(call)) && !ticks.count(dyn_cast<CallInst>(call)))
        return true;
      if (i.isAtomic() || i.isVolatile()) return true;
    }
  return false;
}
}  // namespace

// The event clock in an innermost loop that calls nothing: the countdown lives in a register from
// the loop's entry, and the header's start counter is not incremented per iteration but advanced
// at the loop's exits by what the countdown went down by in the loop (every decrement in such a
// loop is a back edge into its header). Each iteration then costs `dec %reg; js`, no memory
// read-modify-write (the two `addq $1, %fs:starts+8i` / `decq %fs:countdown` carried a
// store-forwarding dependency from one iteration to the next, ~5 cycles: zstd's match finder,
// sqlite's VDBE loops; what LLVM's InstrProfiling calls counter promotion). The countdown is
// written back at every exit, the join into the instrumented copy (a burst begins) among them, so
// T(s) and the schedule stay exact. In f's own body a loop calls nothing at all; in f.kpath's
// uninstrumented copy its back edges may call the tick, which reads and sets the countdown: the
// register is written back before the call (and the counter advanced) and read again after it, as
// at an exit and an entry. Nothing else reads the countdown or these counters while the loop runs;
// a signal handler that runs versioned code meanwhile has its own decrements of the countdown
// overwritten at the loop's exit (its start counters are its own increments, kept): the schedule
// shifts by a few starts.
void PathVersioner::keep_clock_in_registers(Function &f, const BackEdgeTests &tests) {
  if (tests.empty()) return;
  GlobalVariable *countdown = api_.countdown();
  DominatorTree dt(f);
  LoopInfo loops(dt);
  LLVMContext &c = f.getContext();
  Type *i64 = Type::getInt64Ty(c);
  IRBuilder<> entry_builder(&*f.getEntryBlock().getFirstInsertionPt());
  std::vector<AllocaInst *> slots;
  for (Loop *l : loops.getLoopsInPreorder()) {
    BasicBlock *h = l->getHeader();
    auto tested = tests.find(h);
    if (!l->isInnermost() || tested == tests.end()) continue;
    SmallPtrSet<const CallInst *, 4> ticks;
    // Every countdown access in the loop must be one of the header's own back-edge tests (a load
    // and a store), and every edge in and out must get a block of its own.
    size_t expected = 2 * tested->second.size();
    for (const BackEdgeTest &t : tested->second)
      if (t.tick) ticks.insert(t.tick);
    if (keeps_counts_in_memory(*l, ticks)) continue;
    size_t accesses = 0;
    for (BasicBlock *bb : l->blocks())
      for (Instruction &i : *bb)
        if (getLoadStorePointerOperand(&i) == countdown) ++accesses;
    if (accesses != expected) continue;
    bool splittable_edges = true;
    for (BasicBlock *p : predecessors(h))
      if (!l->contains(p)) splittable_edges &= splittable(p) && !isa<CallBrInst>(p->getTerminator());
    SmallVector<Loop::Edge, 8> exits;
    l->getExitEdges(exits);
    for (auto &[from, to] : exits)
      splittable_edges &= splittable(from) && !isa<CallBrInst>(from->getTerminator()) && !to->isEHPad();
    if (!splittable_edges) continue;

    AllocaInst *now = entry_builder.CreateAlloca(i64, nullptr, "kpath.countdown.reg");
    AllocaInst *at_entry = entry_builder.CreateAlloca(i64, nullptr, "kpath.countdown.entered");
    // (Only `now` becomes a register. `at_entry` stays a stack slot, written once per entry into
    // the loop and read at its exits: promoted, it let loop strength reduction rewrite the countdown
    // as at_entry plus a second induction variable, `add; mov; add; jns` per iteration instead of
    // `dec; jns`.)
    slots.push_back(now);
    for (BasicBlock *bb : l->blocks())
      for (Instruction &i : *bb)
        if (getLoadStorePointerOperand(&i) == countdown) {
          if (auto *load = dyn_cast<LoadInst>(&i)) load->setOperand(load->getPointerOperandIndex(), now);
          else cast<StoreInst>(i).setOperand(cast<StoreInst>(i).getPointerOperandIndex(), now);
        }
    // The per-iteration counts go: the exits add what the countdown went down by.
    Value *counter = tested->second.front().count->getPointerOperand();
    for (const BackEdgeTest &t : tested->second) {
      auto *add = cast<Instruction>(t.count->getValueOperand());
      auto *load = cast<Instruction>(add->getOperand(0));
      t.count->eraseFromParent();
      add->eraseFromParent();
      load->eraseFromParent();
    }
    // What the loop counted since `at_entry`, written back; `b` then reads the countdown again.
    auto write_back = [&](IRBuilder<> &b) {
      Value *v = b.CreateLoad(i64, now, "kpath.countdown.now");
      b.CreateStore(v, countdown);
      Value *iterations = b.CreateSub(b.CreateLoad(i64, at_entry, "kpath.countdown.entered"), v);
      b.CreateStore(b.CreateAdd(b.CreateLoad(i64, counter, "kpath.start.count"), iterations), counter);
    };
    auto read_again = [&](IRBuilder<> &b) {
      Value *v = b.CreateLoad(i64, countdown, "kpath.countdown");
      b.CreateStore(v, now);
      b.CreateStore(v, at_entry);
    };
    for (const CallInst *tick : ticks) {
      auto *call = const_cast<CallInst *>(tick);
      IRBuilder<> before(call);
      before.SetCurrentDebugLocation(call->getDebugLoc());
      write_back(before);
      IRBuilder<> after(call->getNextNode());
      after.SetCurrentDebugLocation(call->getDebugLoc());
      read_again(after);
    }
    std::vector<BasicBlock *> outside;
    for (BasicBlock *p : predecessors(h))
      if (!l->contains(p) && std::find(outside.begin(), outside.end(), p) == outside.end()) outside.push_back(p);
    for (BasicBlock *p : outside) {
      BasicBlock *in = on_edge(f, p, h, h->getName() + ".kpath.enter");
      IRBuilder<> b(in->getTerminator());
      b.SetCurrentDebugLocation(h->getFirstNonPHI()->getDebugLoc());
      read_again(b);
    }
    std::vector<std::pair<BasicBlock *, BasicBlock *>> exit_edges;
    for (auto &[from, to] : exits)
      if (std::find(exit_edges.begin(), exit_edges.end(), std::make_pair(const_cast<BasicBlock *>(from), const_cast<BasicBlock *>(to))) == exit_edges.end())
        exit_edges.push_back({const_cast<BasicBlock *>(from), const_cast<BasicBlock *>(to)});
    for (auto &[from, to] : exit_edges) {
      BasicBlock *out = on_edge(f, from, to, h->getName() + ".kpath.exit");
      IRBuilder<> b(out->getTerminator());
      b.SetCurrentDebugLocation(from->getTerminator()->getDebugLoc());
      write_back(b);
    }
  }
  if (slots.empty()) return;
  DominatorTree promoted(f);
  PromoteMemToReg(slots, promoted);
}

}  // namespace hcct::kpath
