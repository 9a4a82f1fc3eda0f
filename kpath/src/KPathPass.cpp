// Plugin entry point and the module pass. Where it runs (docs/KPATH.md, "Pipeline position"):
//   early (default): at PipelineStart, before any optimisation, on the CFG clang emitted: path IDs
//     are stable across -O levels and map to source statements; the probes then constrain the
//     optimiser (a loop that emits cannot be vectorised) and inlined callees keep their own probes.
//   late: at OptimizerLast, on the optimised CFG: fewer, cheaper probes, but IDs describe the
//     optimised code (inlined functions disappear into their callers).
// Choose with `-mllvm -kpath-stage=late` (clang needs `-Xclang -load -Xclang kpath.so` for -mllvm
// to know the option) or the environment variable HCCT_KPATH_STAGE=late; with opt, use
// -passes=kpath or -passes=kpath-late.
#include "KPathPass.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "FunctionDag.h"
#include "MetadataBuilder.h"
#include "OsrPointInserter.h"
#include "PathInstrumenter.h"
#include "PassSwitch.h"
#include "PathVersioner.h"
#include "PluginError.h"
#include "llvm/Analysis/ConstantFolding.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/Scalar/SimplifyCFG.h"
#include "llvm/Transforms/InstCombine/InstCombine.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {

cl::opt<std::string> g_stage("kpath-stage", cl::desc("hcct kpath: instrument 'early' (PipelineStart) or 'late' (OptimizerLast)"),
                             cl::init(""));
cl::opt<uint64_t> g_max_paths("kpath-max-paths",
                              cl::desc("hcct kpath: largest number of acyclic paths per function before edges are cut"),
                              cl::init(uint64_t(1) << 62));
cl::opt<int> g_fast_path("kpath-fast-path",
                         cl::desc("hcct kpath: 1 = the inline fast path (default), 0 = every item calls the runtime"),
                         cl::init(-1));
cl::opt<int> g_burst("kpath-burst",
                     cl::desc("hcct kpath: 1 = also an uninstrumented copy of every body, run between bursts (burst=1)"),
                     cl::init(-1));
cl::opt<int> g_burst_outline(
    "kpath-burst-outline",
    cl::desc("hcct kpath: with -kpath-burst=1, the instrumented copy in a function of its own (1, default) or in the body (0)"),
    cl::init(-1));
cl::opt<uint64_t> g_counter_paths(
    "kpath-counter-paths",
    cl::desc("hcct kpath: BLPP counter arrays for functions with at most this many paths (0: none; default hcct/kpath_abi.h)"),
    cl::init(hcct::kpath_abi::kMaxCounterPaths));
cl::opt<uint64_t> g_counter_words("kpath-counter-words",
                                  cl::desc("hcct kpath: at most this many counter words per module and thread"),
                                  cl::init(hcct::kpath_abi::kMaxCounterWords));
cl::opt<int> g_single_path(
    "kpath-single-path-probes",
    cl::desc("hcct kpath: 1 = probe functions without loops that can run only one path too; 0 (default) = leave them "
             "without probes"),
    cl::init(-1));
cl::opt<bool> g_verbose("kpath-verbose", cl::desc("hcct kpath: report each function's path count"), cl::init(false));

constexpr char kDoneFlag[] = "hcct.kpath.instrumented";

// -kpath-burst, else HCCT_KPATH_BURST, else off: the two versions of each body that static bursting
// of path profiles runs (PathVersioner.h; docs/KPATH.md, "Bursting").
bool versions() { return hcct::kpath::switch_setting(g_burst, "HCCT_KPATH_BURST", false); }

// -kpath-stage, else HCCT_KPATH_STAGE, else early (late with -kpath-burst=1); an empty optional
// (with the value in *bad) if it is neither early nor late.
std::optional<bool> stage_setting(std::string *bad) {
  std::string stage = g_stage;
  if (stage.empty())
    if (const char *env = std::getenv("HCCT_KPATH_STAGE")) stage = env;
  // Unset: early, but late for a build with versions for bursting, where the late stage costs
  // less between bursts (docs/KPATH.md, "Bursting": measured on bench/real).
  if (stage.empty()) return versions();
  if (stage == "early") return false;
  if (stage == "late") return true;
  *bad = stage;
  return std::nullopt;
}

bool stage_is_late() {
  std::string bad;
  return stage_setting(&bad).value_or(false);
}

// -kpath-fast-path, else HCCT_KPATH_FAST_PATH, else on. Off exists to measure what the fast path
// buys (docs/BENCHMARKS.md, "kpath").
bool fast_path() { return hcct::kpath::switch_setting(g_fast_path, "HCCT_KPATH_FAST_PATH", true); }


// -kpath-burst-outline, else HCCT_KPATH_BURST_OUTLINE, else on: which functions keep their own
// body between bursts and run both copies in a function of their own (PathVersioner.h). At the
// early stage only functions without loops: a join would pass the addresses of locals the
// optimiser has yet to promote, pinning them to memory in the native body.
hcct::kpath::PathVersioner::Outline outline_mode(bool late) {
  using Outline = hcct::kpath::PathVersioner::Outline;
  if (!hcct::kpath::switch_setting(g_burst_outline, "HCCT_KPATH_BURST_OUTLINE", true)) return Outline::kNever;
  return late ? Outline::kAlways : Outline::kLoopFree;
}

// -kpath-counter-paths, else HCCT_KPATH_COUNTER_PATHS, else the default: the largest path count
// of a function that gets BLPP counter arrays (hcct/kpath_abi.h; 0: none).
uint64_t counter_paths() {
  if (g_counter_paths.getNumOccurrences()) return g_counter_paths;
  if (const char *env = std::getenv("HCCT_KPATH_COUNTER_PATHS")) return std::strtoull(env, nullptr, 10);
  return g_counter_paths;
}

// -kpath-single-path-probes, else HCCT_KPATH_SINGLE_PATH_PROBES, else off: whether a function
// without loops that can run only one path (one_feasible_path) gets a probe. Its profile is one
// count, its number of activations, in every forest at every k; what it costs is a probe at every
// call of a small helper, inlined into its callers' loops at the early stage (zstd's MEM_read32,
// ZSTD_VecMask_next, ...: docs/KPATH.md, "Functions without probes").
bool single_path_probes() {
  return hcct::kpath::switch_setting(g_single_path, "HCCT_KPATH_SINGLE_PATH_PROBES", false);
}

using hcct::kpath::DagEdge;
using hcct::kpath::EdgeKind;
using hcct::kpath::FunctionDag;
using hcct::kpath::PathGraph;

// What `v` evaluates to when it depends only on constants and on calls of functions whose whole body
// is `ret C` (zstd's MEM_isLittleEndian and MEM_64bits, tested by its MEM_readLE64, MEM_writeLE32,
// ZSTD_NbCommonBytes, ...), or null. At the early stage such tests are still calls; the inliner
// folds them later, with the increments of the paths they rule out.
Constant *constant_value(Value *v, const DataLayout &dl, unsigned depth = 0) {
  if (auto *c = dyn_cast<Constant>(v)) return c;
  if (depth > 8) return nullptr;
  if (auto *call = dyn_cast<CallInst>(v)) {
    Function *callee = call->getCalledFunction();
    if (!callee || callee->isDeclaration() || !callee->isDefinitionExact() || callee->isInterposable() ||
        callee->size() != 1)
      return nullptr;
    auto *ret = dyn_cast<ReturnInst>(callee->getEntryBlock().getTerminator());
    if (!ret || !ret->getReturnValue()) return nullptr;
    for (const Instruction &i : callee->getEntryBlock())
      if (&i != ret && !isa<DbgInfoIntrinsic>(i)) return nullptr;
    return dyn_cast<Constant>(ret->getReturnValue());
  }
  auto operand = [&](unsigned i) { return constant_value(cast<Instruction>(v)->getOperand(i), dl, depth + 1); };
  if (auto *cmp = dyn_cast<CmpInst>(v)) {
    Constant *a = operand(0), *b = a ? operand(1) : nullptr;
    return b ? ConstantFoldCompareInstOperands(cmp->getPredicate(), a, b, dl) : nullptr;
  }
  if (auto *cast_inst = dyn_cast<CastInst>(v)) {
    Constant *a = operand(0);
    return a ? ConstantFoldCastOperand(cast_inst->getOpcode(), a, cast_inst->getDestTy(), dl) : nullptr;
  }
  if (auto *bin = dyn_cast<BinaryOperator>(v)) {
    Constant *a = operand(0), *b = a ? operand(1) : nullptr;
    return b ? ConstantFoldBinaryOpOperands(bin->getOpcode(), a, b, dl) : nullptr;
  }
  return nullptr;
}

// The successor a terminator always takes, when its condition is such a constant, or null.
const BasicBlock *fixed_successor(const Instruction *term, const DataLayout &dl) {
  if (auto *br = dyn_cast<BranchInst>(term); br && br->isConditional())
    if (auto *c = dyn_cast_or_null<ConstantInt>(constant_value(br->getCondition(), dl)))
      return br->getSuccessor(c->isZero() ? 1 : 0);
  if (auto *sw = dyn_cast<SwitchInst>(term))
    if (auto *c = dyn_cast_or_null<ConstantInt>(constant_value(sw->getCondition(), dl)))
      return sw->findCaseValue(c)->getCaseSuccessor();
  return nullptr;
}

// Whether a function without loops can run only one of its paths: one path, or every branch where
// paths part is decided by constants (fixed_successor). Such a function carries no probe ("Functions
// without probes" in docs/KPATH.md).
bool one_feasible_path(const FunctionDag &dag, const DataLayout &dl) {
  const PathGraph &g = dag.graph();
  if (!dag.restarts().empty()) return false;
  if (g.num_paths() == 1) return true;
  // Paths from each node to the exit over the edges that can be taken, saturated at 2, in
  // reverse topological order (the DAG's nodes, found by a depth-first search from the entry).
  std::vector<uint8_t> paths(g.blocks() + 1, 0), state(g.blocks() + 1, 0);
  std::vector<const BasicBlock *> fixed(g.blocks(), nullptr);
  for (uint32_t v = 0; v < g.blocks(); ++v) fixed[v] = fixed_successor(dag.blocks()[v]->getTerminator(), dl);
  auto feasible = [&](const DagEdge &e) {
    return e.kind != EdgeKind::kBranch || !fixed[e.from] || fixed[e.from] == dag.blocks()[e.to];
  };
  paths[g.exit()] = 1;
  state[g.exit()] = 2;
  std::vector<std::pair<uint32_t, size_t>> stack{{0, 0}};
  state[0] = 1;
  while (!stack.empty()) {
    auto &[v, next] = stack.back();
    if (next < g.out(v).size()) {
      const DagEdge &e = g.edges()[g.out(v)[next++]];
      // (push_back may move `v` and `next`: nothing below uses them before the next round)
      if (feasible(e) && state[e.to] == 0) {
        state[e.to] = 1;
        stack.push_back({e.to, 0});
      }
      continue;
    }
    unsigned sum = 0;
    for (uint32_t i : g.out(v))
      if (feasible(g.edges()[i])) sum += paths[g.edges()[i].to];
    paths[v] = uint8_t(sum > 2 ? 2 : sum);
    state[v] = 2;
    stack.pop_back();
  }
  return paths[0] == 1;
}

}  // namespace

namespace hcct::kpath {

bool should_instrument(const Function &f) {
  if (f.isDeclaration() || f.hasAvailableExternallyLinkage()) return false;
  if (f.hasFnAttribute(Attribute::Naked)) return false;
  // The runtime's own code, if it is ever compiled with the plugin.
  if (f.getName().startswith("__hcct") || f.getName().startswith("__cyg_profile") || f.getName().startswith("hcct.kpath."))
    return false;
  return true;
}

PreservedAnalyses KPathPass::run(Module &m, ModuleAnalysisManager &) {
  // A bad stage fails the compilation with one clear error (the pass then runs at the early
  // position, which is where it is registered in that case).
  if (std::string bad; !stage_setting(&bad)) {
    m.getContext().diagnose(PluginError("hcct kpath: stage '" + bad + "' (-kpath-stage or HCCT_KPATH_STAGE) is not 'early' or 'late'"));
    return PreservedAnalyses::all();
  }
  // A module instrumented twice (both stages, or opt then clang) would emit every path twice.
  if (m.getModuleFlag(kDoneFlag)) return PreservedAnalyses::all();
  m.addModuleFlag(Module::Warning, kDoneFlag, 1);
  // OSR points from a guidance file (OsrPointInserter.h): headers found on the CFG as it is now,
  // code inserted after the path probes, so that both use the profile's block numbering.
  OsrPointInserter osr(m, {options_.late, options_.opt_level});
  osr.resolve();
  if (!path_profile_enabled()) return osr.insert() ? PreservedAnalyses::none() : PreservedAnalyses::all();
  const bool version_api_wanted = versions();
  // (Not with versions: the versioner's copies are built around the inlined probes.)
  RuntimeApi api = RuntimeApi::declare(m, fast_path(), counter_paths(), g_counter_words,
                                       options_.defer_step_inlining && !version_api_wanted);
  MetadataBuilder meta(m);
  std::optional<VersionApi> version_api;
  if (version_api_wanted) version_api.emplace(m);
  bool changed = false;
  // Every function's DAG first, so that the module's counter block goes to the functions with the
  // fewest paths first: in a large module (SQLite's amalgamation: 2 399 functions, 950 k paths
  // among those under the bound) first come, first served would leave later small functions,
  // hot ones among them, without arrays.
  struct Candidate {
    Function *f;       // the program's function (its ID, its name in the metadata)
    Function *target;  // what is numbered and instrumented: f, or its outlined copy
    FunctionDag dag;
    std::unique_ptr<PathVersioner> versioner;  // static bursting's second copy, or null
  };
  std::vector<Candidate> candidates;
  struct Unprobed {
    Function *f;
    FunctionDag dag;
  };
  std::vector<Unprobed> unprobed;
  const bool probe_single_path = single_path_probes();
  // (Versioning may add functions: the list first.)
  std::vector<Function *> functions;
  for (Function &f : m)
    if (should_instrument(f)) functions.push_back(&f);
  for (Function *fp : functions) {
    Function &f = *fp;
    std::string why;
    // Versioning first: it adds an unreachable copy that the DAG, the metadata and the probes
    // never see, and it must come before them (it moves values to stack slots).
    std::unique_ptr<PathVersioner> versioner;
    if (version_api) {
      versioner = std::make_unique<PathVersioner>(f, *version_api, outline_mode(options_.late));
      if (!versioner->prepare()) versioner.reset();
    }
    Function &target = versioner ? versioner->target() : f;
    std::optional<FunctionDag> dag = FunctionDag::build(target, options_.max_paths, &why);
    if (!dag) {
      if (versioner) versioner->abandon();
      errs() << "hcct kpath: " << f.getName() << " not instrumented: " << why << "\n";
      continue;
    }
    if (!probe_single_path && one_feasible_path(*dag, m.getDataLayout())) {
      // Nothing can vary: recorded in the metadata as not probed, and left as it is.
      if (versioner) {
        versioner->abandon();
        dag = FunctionDag::build(f, options_.max_paths, &why);
      }
      if (dag) unprobed.push_back({&f, std::move(*dag)});
      continue;
    }
    candidates.push_back({&f, &target, std::move(*dag), std::move(versioner)});
  }
  std::vector<size_t> by_paths(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) by_paths[i] = i;
  std::stable_sort(by_paths.begin(), by_paths.end(), [&](size_t a, size_t b) {
    return candidates[a].dag.graph().num_paths() < candidates[b].dag.graph().num_paths();
  });
  std::vector<uint64_t> counter_offset(candidates.size(), 0);
  for (size_t i : by_paths)
    counter_offset[i] = api.allocate_counters(candidates[i].f->getGUID(), candidates[i].dag.graph().num_paths());
  for (size_t i = 0; i < candidates.size(); ++i) {
    Function &f = *candidates[i].f;
    Function &target = *candidates[i].target;
    const FunctionDag &dag = candidates[i].dag;
    PathVersioner *versioner = candidates[i].versioner.get();
    uint64_t id = f.getGUID();
    meta.add(target, dag, id, uint8_t((options_.late ? kFlagLate : 0) | opt_level_flags(options_.opt_level)), f.getName());
    if (g_verbose)
      errs() << "hcct kpath: " << f.getName() << ": " << dag.blocks().size() << " blocks, "
             << dag.graph().num_paths() << " paths" << (dag.has_cut_edges() ? " (edges cut)" : "")
             << (counter_offset[i] ? ", counter array" : "") << "\n";
    PathInstrumenter instrumenter(target, dag, id, api, counter_offset[i]);
    instrumenter.run(/*promote=*/!versioner);
    if (versioner) versioner->finish(dag, instrumenter, id);
    changed = true;
  }
  for (Unprobed &u : unprobed) {
    meta.add(*u.f, u.dag, u.f->getGUID(),
             uint8_t(kFlagNotProbed | (options_.late ? kFlagLate : 0) | opt_level_flags(options_.opt_level)));
    if (g_verbose)
      errs() << "hcct kpath: " << u.f->getName() << ": " << u.dag.graph().num_paths()
             << (u.dag.graph().num_paths() == 1 ? " path" : " paths, 1 not ruled out by constant tests")
             << ", no loop: not probed\n";
  }
  meta.emit();
  if (version_api) version_api->emit_table();
  if (api.step->use_empty()) api.step->eraseFromParent();
  if (api.cold_step->use_empty()) api.cold_step->eraseFromParent();
  api.finish_counters(m);
  changed |= osr.insert();
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

PreservedAnalyses KPathInlineStepsPass::run(Module &m, ModuleAnalysisManager &mam) {
  FunctionAnalysisManager &fam = mam.getResult<FunctionAnalysisManagerModuleProxy>(m).getManager();
  // What the optimiser does to the inlined steps when they are there from the start, in two cheap
  // passes on the changed functions only: the window is a constant null at an activation's first
  // sites and the site's constants decide branches (without this, zstd_lazy.c kept 424 loads
  // through a null window that can never run), and Lua's dispatch loop needs the combining (+10 %
  // instructions in luaV_execute without it; docs/BENCHMARKS.md, "Session 16: the step inlined at
  // the end").
  FunctionPassManager cleanup;
  cleanup.addPass(InstCombinePass());
  cleanup.addPass(SimplifyCFGPass());
  bool changed = false;
  for (Function &f : m) {
    if (f.isDeclaration() || !inline_steps(f)) continue;
    changed = true;
    fam.invalidate(f, PreservedAnalyses::none());
    fam.invalidate(f, cleanup.run(f, fam));
  }
  // (At -O0 nothing else removes them.)
  for (Function &f : make_early_inc_range(m))
    if (is_step(f) && f.use_empty()) {
      f.eraseFromParent();
      changed = true;
    }
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

}  // namespace hcct::kpath

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  using hcct::kpath::KPathOptions;
  using hcct::kpath::KPathPass;
  using hcct::kpath::KPathInlineStepsPass;
  return {LLVM_PLUGIN_API_VERSION, "hcct-kpath", "0.1", [](PassBuilder &pb) {
            pb.registerPipelineStartEPCallback([](ModulePassManager &mpm, OptimizationLevel level) {
              if (!stage_is_late())
                mpm.addPass(KPathPass(KPathOptions{false, g_max_paths, int(level.getSpeedupLevel()), true}));
            });
            pb.registerOptimizerLastEPCallback([](ModulePassManager &mpm, OptimizationLevel level) {
              if (stage_is_late()) mpm.addPass(KPathPass(KPathOptions{true, g_max_paths, int(level.getSpeedupLevel())}));
              else mpm.addPass(KPathInlineStepsPass());
            });
            pb.registerPipelineParsingCallback(
                [](StringRef name, ModulePassManager &mpm, ArrayRef<PassBuilder::PipelineElement>) {
                  if (name != "kpath" && name != "kpath-late") return false;
                  mpm.addPass(KPathPass(KPathOptions{name == "kpath-late", g_max_paths}));
                  return true;
                });
          }};
}
