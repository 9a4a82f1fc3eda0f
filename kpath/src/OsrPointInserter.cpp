#include "OsrPointInserter.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "KPathPass.h"
#include "LoopVersioner.h"
#include "PluginError.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Analysis/CFG.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/IR/Verifier.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/PromoteMemToReg.h"

namespace hcct::kpath {

using namespace llvm;

namespace {

cl::opt<std::string> g_guide("hcct-guide", cl::desc("hcct kpath: guidance file (hcct guide) whose loops get OSR points"),
                             cl::init(""));
cl::opt<bool> g_profile("kpath-profile", cl::desc("hcct kpath: insert path-profiling probes (default true)"),
                        cl::init(true));
cl::opt<std::string> g_osr_mode("hcct-osr-mode",
                                cl::desc("hcct kpath: 'point' (default): OSR points that call hcct_osr_handler; "
                                         "'version': each guided loop switches to a compiler-made clone"),
                                cl::init(""));
cl::opt<std::string> g_osr_threshold("hcct-osr-threshold",
                                     cl::desc("hcct kpath: use this threshold for every guided loop (0 acts as 1)"),
                                     cl::init(""));
cl::opt<bool> g_osr_verbose("hcct-osr-verbose", cl::desc("hcct kpath: report each OSR point inserted"), cl::init(false));

constexpr uint32_t kPointVersion = 1;  // HCCT_OSR_POINT_VERSION (hcct/oracle.h)

bool verbose() {
  if (g_osr_verbose) return true;
  const char *env = std::getenv("HCCT_OSR_VERBOSE");
  return env && *env && std::string(env) != "0";
}

std::string guide_path() {
  if (!g_guide.empty()) return g_guide;
  const char *env = std::getenv("HCCT_GUIDE");
  return env ? env : "";
}

// What a guidance file gave: its loops, or why it cannot be used.
struct Guidance {
  std::vector<GuidedLoop> loops;
  std::string error;
};

// The guidance is read once per process (clang compiles one module, opt may run the pass often).
const Guidance &guidance() {
  static std::mutex lock;
  static std::map<std::string, Guidance> cache;
  std::string path = guide_path();
  std::lock_guard<std::mutex> guard(lock);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second;
  Guidance g;
  if (!path.empty()) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> buf = MemoryBuffer::getFile(path);
    std::string error;
    if (!buf)
      g.error = "hcct osr: cannot read the guidance file '" + path + "': " + buf.getError().message();
    else if (!parse_guidance((*buf)->getBuffer(), &g.loops, &error))
      g.error = "hcct osr: guidance file '" + path + "': " + error;
    if (!g.error.empty()) g.loops.clear();
  }
  return cache.emplace(path, std::move(g)).first->second;
}

// The header's first source line, as the guide computes it (kpath metadata: the block's first line,
// else its terminator's).
uint32_t first_line(const BasicBlock &bb) {
  for (const Instruction &i : bb)
    if (const DebugLoc &loc = i.getDebugLoc(); loc && loc.getLine() != 0) return loc.getLine();
  if (const DebugLoc &loc = bb.getTerminator()->getDebugLoc()) return loc.getLine();
  return 0;
}

const DILocation *first_location(const BasicBlock &bb) {
  for (const Instruction &i : bb)
    if (const DebugLoc &loc = i.getDebugLoc(); loc && loc.getLine() != 0) return loc.get();
  return nullptr;
}

// Entry-reachable blocks in layout order: the kpath numbering (FunctionDag::index_blocks).
std::vector<BasicBlock *> numbered_blocks(Function &f) {
  DenseSet<const BasicBlock *> reached{&f.getEntryBlock()};
  std::vector<const BasicBlock *> work{&f.getEntryBlock()};
  while (!work.empty()) {
    const BasicBlock *bb = work.back();
    work.pop_back();
    for (const BasicBlock *s : successors(bb))
      if (reached.insert(s).second) work.push_back(s);
  }
  std::vector<BasicBlock *> out;
  for (BasicBlock &bb : f)
    if (reached.count(&bb)) out.push_back(&bb);
  return out;
}

// Loop headers: targets of DFS back edges (FindFunctionBackedges, as the kpath numbering uses).
DenseSet<const BasicBlock *> loop_headers(const Function &f) {
  SmallVector<std::pair<const BasicBlock *, const BasicBlock *>, 16> back;
  FindFunctionBackedges(f, back);
  DenseSet<const BasicBlock *> out;
  for (auto &[from, to] : back) out.insert(to);
  return out;
}

std::string describe(const GuidedLoop &l) {
  return l.key + " (" + l.function + ", header block " + std::to_string(l.header_block) + ", line " +
         std::to_string(l.line) + ")";
}

Constant *string_constant(Module &m, StringRef s, const Twine &name) {
  Constant *init = ConstantDataArray::getString(m.getContext(), s);
  auto *gv = new GlobalVariable(m, init->getType(), true, GlobalValue::PrivateLinkage, init, name);
  gv->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
  gv->setAlignment(Align(1));
  Constant *zero = ConstantInt::get(Type::getInt32Ty(m.getContext()), 0);
  Constant *idx[] = {zero, zero};
  return ConstantExpr::getInBoundsGetElementPtr(init->getType(), gv, idx);
}

}  // namespace

namespace {

// -hcct-osr-mode, else HCCT_OSR_MODE: point (default) or version; nullopt (the value in *bad)
// otherwise.
std::optional<OsrMode> mode_setting(std::string *bad) {
  std::string mode = g_osr_mode;
  if (mode.empty())
    if (const char *env = std::getenv("HCCT_OSR_MODE")) mode = env;
  if (mode.empty() || mode == "point") return OsrMode::kPoint;
  if (mode == "version") return OsrMode::kVersion;
  *bad = mode;
  return std::nullopt;
}

// -hcct-osr-threshold, else HCCT_OSR_THRESHOLD: a decimal integer that replaces every guided
// loop's threshold (to test or measure a loop version at any switch point); nullopt if unset;
// *bad says what is wrong with a value given.
std::optional<uint64_t> threshold_setting(std::string *bad) {
  std::string value = g_osr_threshold;
  const char *name = "-hcct-osr-threshold";
  if (value.empty())
    if (const char *env = std::getenv("HCCT_OSR_THRESHOLD")) value = env, name = "HCCT_OSR_THRESHOLD";
  if (value.empty()) return std::nullopt;
  uint64_t t = 0;
  bool digits = std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || StringRef(value).getAsInteger(10, t))
    *bad = std::string("hcct osr: ") + name + "='" + value + "' is not a decimal integer in [0, 2^64-1]";
  return t;
}

// HCCT_KPATH_PROFILE: true/false, or nullopt (with the value in *bad) if it is neither.
std::optional<bool> profile_setting(std::string *bad) {
  if (g_profile.getNumOccurrences()) return bool(g_profile);
  const char *env = std::getenv("HCCT_KPATH_PROFILE");
  if (!env || !*env) return true;
  std::string v = env;
  if (v == "0" || v == "false" || v == "no") return false;
  if (v == "1" || v == "true" || v == "yes") return true;
  *bad = v;
  return std::nullopt;
}

}  // namespace

// A bad value was reported as an error by OsrPointInserter's constructor (which the pass runs
// first), so the compilation fails; the probes' default is returned meanwhile.
bool path_profile_enabled() {
  std::string bad;
  return profile_setting(&bad).value_or(true);
}

OsrPointInserter::OsrPointInserter(Module &m, BuildConfig config) : m_(m), config_(config) {
  std::string bad;
  if (!profile_setting(&bad)) {
    std::string message = "hcct kpath: HCCT_KPATH_PROFILE='" + bad + "' is not 0 or 1 (or false/true, no/yes)";
    m.getContext().diagnose(PluginError(message));
  }
  if (std::string bad_mode; std::optional<OsrMode> mode = mode_setting(&bad_mode))
    mode_ = *mode;
  else
    m.getContext().diagnose(PluginError("hcct osr: mode '" + bad_mode +
                                        "' (-hcct-osr-mode or HCCT_OSR_MODE) is not 'point' or 'version'"));
  std::string bad_threshold;
  threshold_override_ = threshold_setting(&bad_threshold);
  if (!bad_threshold.empty()) {
    m.getContext().diagnose(PluginError(bad_threshold));
    return;  // and nothing inserted
  }
  const Guidance &g = guidance();
  if (!g.error.empty()) m.getContext().diagnose(PluginError(g.error));  // and no OSR point
  loops_ = g.loops;
  if (threshold_override_)
    for (GuidedLoop &l : loops_) l.threshold = *threshold_override_;
}

void OsrPointInserter::resolve() {
  if (loops_.empty()) return;
  for (const GuidedLoop &l : loops_) {
    Function *f = m_.getFunction(l.function);
    if (!f || !should_instrument(*f)) continue;  // defined in another translation unit
    // A function of the same name elsewhere (a static function of another file).
    if (l.has_function_id && l.function_id != f->getGUID()) {
      if (verbose())
        errs() << "hcct osr: " << describe(l) << ": " << f->getName() << " here is another function (GUID differs)\n";
      continue;
    }
    if (std::string why = configuration_mismatch(l, config_); !why.empty()) {
      m_.getContext().diagnose(PluginError("hcct osr: guidance file '" + guide_path() + "': " + why));
      sites_.clear();
      return;
    }
    std::vector<BasicBlock *> blocks = numbered_blocks(*f);
    DenseSet<const BasicBlock *> headers = loop_headers(*f);
    BasicBlock *header = nullptr;
    std::string problem;
    if (l.header_block >= blocks.size()) {
      problem = "the function has " + std::to_string(blocks.size()) + " blocks";
    } else if (!headers.count(blocks[l.header_block])) {
      problem = "block " + std::to_string(l.header_block) + " is not a loop header";
    } else if (uint32_t line = first_line(*blocks[l.header_block]); line != l.line && line != 0) {
      // (line 0: built without -g; the block number alone identifies the header)
      problem = "block " + std::to_string(l.header_block) + " starts at line " + std::to_string(line);
    } else {
      header = blocks[l.header_block];
    }
    if (!header) {
      // The source moved or the stage differs: fall back to the one header on the guided line.
      std::vector<BasicBlock *> on_line;
      for (uint32_t i = 0; i < blocks.size(); ++i)
        if (headers.count(blocks[i]) && first_line(*blocks[i]) == l.line) on_line.push_back(blocks[i]);
      if (on_line.size() == 1) {
        header = on_line.front();
        uint32_t index = uint32_t(std::find(blocks.begin(), blocks.end(), header) - blocks.begin());
        errs() << "hcct osr: warning: guided loop " << describe(l) << " does not match " << f->getName() << ": "
               << problem << "; using the loop header at line " << l.line << " (block " << index
               << "). Was the guidance made from this source, at the same stage (HCCT_KPATH_STAGE)?\n";
      } else {
        errs() << "hcct osr: warning: guided loop " << describe(l) << " does not match " << f->getName() << ": "
               << problem << ", and " << on_line.size() << " loop headers start at line " << l.line
               << ": no OSR point inserted. Rebuild the guidance from a profile of this source, at the same stage "
                  "(HCCT_KPATH_STAGE).\n";
        continue;
      }
    }
    bool duplicate = false;
    for (const Site &s : sites_) duplicate |= s.header == header;
    if (duplicate) {
      errs() << "hcct osr: warning: guided loop " << describe(l) << " names a header that already has an OSR point\n";
      continue;
    }
    // The patterns' block numbers are valid only where the header's is.
    std::vector<PathPattern> patterns;
    if (header == blocks[std::min<size_t>(l.header_block, blocks.size() - 1)])
      for (const GuidedLoop::Pattern &p : l.patterns) {
        PathPattern resolved{p.path, p.factor, {}};
        for (uint32_t b : p.blocks)
          if (b < blocks.size()) resolved.blocks.push_back(blocks[b]);
        if (resolved.blocks.size() == p.blocks.size()) patterns.push_back(std::move(resolved));
      }
    sites_.push_back({&l, header, std::move(patterns)});
  }
}

bool OsrPointInserter::insert() {
  std::map<Function *, std::vector<Site>> by_function;
  for (const Site &s : sites_) by_function[s.header->getParent()].push_back(s);
  bool changed = false;
  for (auto &[f, sites] : by_function) changed |= mode_ == OsrMode::kVersion ? version_in(*f, sites) : insert_in(*f, sites);
  return changed;
}

bool OsrPointInserter::version_in(Function &f, std::vector<Site> sites) {
  OptimizationRemarkEmitter remarks(&f);
  LoopVersioner versioner(f, remarks);
  std::stable_sort(sites.begin(), sites.end(),
                   [&](const Site &a, const Site &b) { return versioner.depth(a.header) > versioner.depth(b.header); });
  bool changed = false;
  for (const Site &s : sites) {
    bool done = versioner.version(s.header, s.loop->threshold, describe(*s.loop), s.patterns);
    changed |= done;
    if (done && verbose())
      errs() << "hcct osr: " << f.getName() << ": loop " << s.loop->key << " versioned, threshold " << s.loop->threshold
             << "\n";
  }
  // Wrong code is never an option: a versioned function that does not verify fails the build.
  std::string problems;
  raw_string_ostream os(problems);
  if (changed && verifyFunction(f, &os))
    m_.getContext().diagnose(PluginError("hcct osr: internal error: versioning " + f.getName().str() +
                                         " made invalid IR: " + os.str()));
  return changed;
}

bool OsrPointInserter::insert_in(Function &f, const std::vector<Site> &sites) {
  LLVMContext &ctx = m_.getContext();
  Type *i8p = Type::getInt8PtrTy(ctx);
  Type *i32 = Type::getInt32Ty(ctx);
  Type *i64 = Type::getInt64Ty(ctx);
  // struct hcct_osr_point (hcct/oracle.h)
  StructType *point_ty = StructType::getTypeByName(ctx, "hcct.osr.point");
  if (!point_ty) point_ty = StructType::create(ctx, {i32, i32, i8p, i8p, i64, i32, i32, i64, i8p}, "hcct.osr.point");
  PointerType *point_ptr = PointerType::getUnqual(point_ty);
  FunctionType *handler_ty = FunctionType::get(Type::getVoidTy(ctx), {point_ptr, i64}, false);
  Function *handler = m_.getFunction("hcct_osr_handler");
  Value *callee = nullptr;
  if (!handler) {
    handler = Function::Create(handler_ty, GlobalValue::ExternalWeakLinkage, "hcct_osr_handler", m_);
  }
  callee = handler->getFunctionType() == handler_ty ? static_cast<Value *>(handler)
                                                    : ConstantExpr::getBitCast(handler, PointerType::getUnqual(handler_ty));
  // Only a handler that may be missing at run time needs the address test.
  bool test_address = handler->hasExternalWeakLinkage();

  SmallVector<std::pair<const BasicBlock *, const BasicBlock *>, 16> back;
  FindFunctionBackedges(f, back);
  std::vector<AllocaInst *> counters;
  IRBuilder<> entry(&*f.getEntryBlock().getFirstInsertionPt());
  MDNode *weights = MDBuilder(ctx).createBranchWeights(1, 1u << 20);

  for (const Site &s : sites) {
    const GuidedLoop &l = *s.loop;
    BasicBlock *h = s.header;
    // The loop: latches are the sources of back edges into h; the body reaches a latch without
    // passing h. Entry edges come from everything else.
    DenseSet<BasicBlock *> body{h};
    std::vector<BasicBlock *> work;
    for (auto &[from, to] : back)
      if (to == h) {
        auto *latch = const_cast<BasicBlock *>(from);
        if (body.insert(latch).second) work.push_back(latch);
      }
    while (!work.empty()) {
      BasicBlock *v = work.back();
      work.pop_back();
      for (BasicBlock *p : predecessors(v))
        if (body.insert(p).second) work.push_back(p);
    }
    if (body.size() == 1 && std::none_of(back.begin(), back.end(), [&](auto &e) { return e.first == h && e.second == h; })) {
      errs() << "hcct osr: warning: " << describe(l) << ": the header has no back edge any more: no OSR point\n";
      continue;
    }

    Constant *point_init = ConstantStruct::get(
        point_ty, {ConstantInt::get(i32, kPointVersion), ConstantInt::get(i32, l.line),
                   string_constant(m_, l.key, "hcct.osr.key"), string_constant(m_, l.function, "hcct.osr.function"),
                   ConstantInt::get(i64, l.threshold), ConstantInt::get(i32, l.header_block), ConstantInt::get(i32, l.rank),
                   ConstantInt::get(i64, 0), ConstantPointerNull::get(cast<PointerType>(i8p))});
    // Writable: the runtime's default handler counts events in it.
    auto *point = new GlobalVariable(m_, point_ty, false, GlobalValue::InternalLinkage, point_init, "hcct.osr.point");
    point->setAlignment(Align(8));

    AllocaInst *count = entry.CreateAlloca(i64, nullptr, "hcct.osr.count");
    entry.CreateStore(ConstantInt::get(i64, 0), count);
    counters.push_back(count);
    std::vector<BasicBlock *> preds(pred_begin(h), pred_end(h));
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    for (BasicBlock *p : preds)
      if (!body.count(p)) new StoreInst(ConstantInt::get(i64, 0), count, p->getTerminator());

    const DILocation *loc = first_location(*h);
    IRBuilder<> b(&*h->getFirstInsertionPt());
    if (loc) b.SetCurrentDebugLocation(DebugLoc(loc));
    Value *c = b.CreateAdd(b.CreateLoad(i64, count, "hcct.osr.c"), ConstantInt::get(i64, 1), "hcct.osr.c1");
    b.CreateStore(c, count);
    Value *hit = b.CreateICmpEQ(c, ConstantInt::get(i64, l.threshold), "hcct.osr.hit");
    Instruction *rest = cast<Instruction>(hit)->getNextNode();
    Instruction *then = SplitBlockAndInsertIfThen(hit, rest, false, weights);
    then->getParent()->setName("hcct.osr.fire");
    if (test_address) {
      IRBuilder<> t(then);
      Value *present = t.CreateICmpNE(handler, ConstantPointerNull::get(handler->getType()), "hcct.osr.handler");
      then = SplitBlockAndInsertIfThen(present, then, false);
      then->getParent()->setName("hcct.osr.call");
    }
    IRBuilder<> t(then);
    if (loc) t.SetCurrentDebugLocation(DebugLoc(loc));
    CallInst *call = t.CreateCall(handler_ty, callee, {point, c});
    call->addFnAttr(Attribute::Cold);
    if (verbose())
      errs() << "hcct osr: " << f.getName() << ": OSR point " << l.key << " at header block " << l.header_block << " (line "
             << l.line << "), threshold " << l.threshold << "\n";
  }
  if (counters.empty()) return false;
  DominatorTree dt(f);
  std::vector<AllocaInst *> promotable;
  for (AllocaInst *a : counters)
    if (isAllocaPromotable(a)) promotable.push_back(a);
  if (!promotable.empty()) PromoteMemToReg(promotable, dt);
  return true;
}

}  // namespace hcct::kpath
