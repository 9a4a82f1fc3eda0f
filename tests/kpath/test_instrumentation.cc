// The instrumentation computes the right path IDs at run time: generated functions (cfg_gen.h) are
// instrumented by kpath.so in opt, run under exec_harness, and in every run the blocks that
// executed (their trace calls) must equal the blocks of the emitted path IDs, decoded and
// concatenated. Covers critical-edge splitting, switch duplicates, indirectbr and landing-pad
// dispatch, noreturn calls, resume, the overflow fallback, and the late (OptimizerLast) stage.
#include <catch2/catch.hpp>

#include "support/command.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "FunctionDag.h"
#include "cfg_gen.h"
#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/Support/SourceMgr.h"

namespace fs = std::filesystem;
using hcct::kpath::FunctionDag;

namespace {

std::string run(const std::string &cmd) { return hcct::test::run_command(cmd); }

fs::path work_dir() { return hcct::test::work_directory("tests/kpath/work/instr"); }

// The trace ids each block calls, in order (after optimisation a block may hold several or none).
std::vector<std::vector<int>> block_traces(const FunctionDag &dag) {
  std::vector<std::vector<int>> out;
  for (llvm::BasicBlock *bb : dag.blocks()) {
    std::vector<int> ids;
    for (llvm::Instruction &i : *bb)
      if (auto *c = llvm::dyn_cast<llvm::CallInst>(&i))
        if (c->getCalledFunction() && c->getCalledFunction()->getName().startswith("t") &&
            c->getCalledFunction()->getName() != "trace")
          ids.push_back(std::stoi(c->getCalledFunction()->getName().drop_front(1).str()));
    out.push_back(ids);
  }
  return out;
}

struct Run {
  std::vector<int> blocks;
  std::vector<uint64_t> paths;
  int enters = 0;
};

std::vector<Run> parse_runs(const std::string &out) {
  std::vector<Run> runs;
  std::istringstream in(out);
  std::string tag;
  while (in >> tag) {
    if (tag == "R") runs.emplace_back();
    else if (tag == "B") { int k; in >> k; runs.back().blocks.push_back(k); }
    else if (tag == "P") { uint64_t id; in >> id; runs.back().paths.push_back(id); }
    else if (tag == "*") { uint64_t id; in >> id; ++runs.back().enters; }
  }
  return runs;
}

// `ir_file` is what gets instrumented; the DAG is rebuilt from it in-process (the numbering is
// deterministic), and each path decodes to the trace ids of its blocks.
// `single_path_probes`: -kpath-single-path-probes (a function with one path and no loop carries a
// probe only with 1; without one it must emit nothing).
void check_program(const fs::path &ir_file, const std::string &pass, uint64_t max_paths, uint64_t seed,
                   bool single_path_probes = true) {
  fs::path dir = ir_file.parent_path();
  std::string stem = ir_file.stem().string(), tag = pass;
  for (char &c : tag)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  fs::path bc = dir / (stem + "." + tag + ".bc"), exe = dir / (stem + "." + tag + ".exe");
  run(std::string(HCCT_OPT) + " -load " + HCCT_KPATH_PLUGIN + " -load-pass-plugin " + HCCT_KPATH_PLUGIN + " -passes='" + pass + "'" +
      " -kpath-max-paths=" + std::to_string(max_paths) + " -kpath-single-path-probes=" + (single_path_probes ? "1 " : "0 ") +
      ir_file.string() + " -o " + bc.string() + " 2>&1");
  run(std::string(HCCT_CLANGXX) + " -O1 " + bc.string() + " " + HCCT_EXEC_HARNESS + " -o " + exe.string() + " 2>&1");
  std::string out = run(exe.string() + " " + std::to_string(seed) + " 40");

  llvm::LLVMContext ctx;
  llvm::SMDiagnostic err;
  auto m = llvm::parseIRFile(ir_file.string(), err, ctx);
  REQUIRE(m);
  std::string why;
  auto dag = FunctionDag::build(*m->getFunction("f"), max_paths, &why);
  REQUIRE(dag);
  auto traces = block_traces(*dag);
  std::vector<Run> runs = parse_runs(out);
  REQUIRE(runs.size() == 40);
  if (!single_path_probes && dag->graph().num_paths() == 1 && dag->restarts().empty()) {
    for (const Run &r : runs) CHECK((r.paths.empty() && r.enters == 0));
    return;
  }
  for (const Run &r : runs) {
    // The ∗ reaches the runtime with the activation's first item (none if it emitted nothing).
    CHECK(r.enters == (r.paths.empty() ? 0 : 1));
    std::vector<int> decoded;
    for (uint64_t id : r.paths) {
      auto path = dag->graph().decode(id);
      REQUIRE(path);
      for (uint32_t b : dag->graph().blocks_of(*path))
        decoded.insert(decoded.end(), traces[b].begin(), traces[b].end());
    }
    REQUIRE(decoded == r.blocks);
  }
}

}  // namespace

TEST_CASE("instrumentation: decoded path streams replay the executed blocks (early)") {
  fs::path dir = work_dir();
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    kpath_test::GenOptions o;
    o.blocks = 4 + int(seed % 14);
    fs::path ir = dir / ("gen" + std::to_string(seed) + ".ll");
    std::ofstream(ir) << kpath_test::CfgGenerator(seed * 31, o).module();
    INFO("seed " << seed << " file " << ir);
    check_program(ir, "kpath", uint64_t(1) << 62, seed);
    check_program(ir, "kpath", uint64_t(1) << 62, seed, /*single_path_probes=*/false);
    // The overflow fallback: a tiny limit forces cut edges; IDs must still be exact.
    if (seed % 3 == 0) check_program(ir, "kpath", 16 + seed, seed);
  }
}

#if defined(__x86_64__)
constexpr bool kX86_64 = true;
#else
constexpr bool kX86_64 = false;
#endif

// clang's way (the plugin's pipeline callbacks): instrumented at PipelineStart, each site a call of
// the step through the optimiser, the steps inlined at OptimizerLast (docs/KPATH.md, "Compile time").
TEST_CASE("instrumentation: steps inlined at the end of the optimiser replay the executed blocks") {
  fs::path dir = work_dir();
  for (uint64_t seed = 200; seed < 216; ++seed) {
    kpath_test::GenOptions o;
    o.blocks = 5 + int(seed % 12);
    fs::path ir = dir / ("deferred" + std::to_string(seed) + ".ll");
    // On x86-64 the sites then call the preserve_most entries (the harness's trampolines).
    std::ofstream(ir) << (kX86_64 ? "target triple = \"x86_64-pc-linux-gnu\"\n" : "")
                      << kpath_test::CfgGenerator(seed * 17, o).module();
    INFO("seed " << seed << " file " << ir);
    check_program(ir, "default<O2>", uint64_t(1) << 62, seed);
    check_program(ir, "default<O0>", uint64_t(1) << 62, seed);
  }
  // No step is left, and the runtime's cold entries are called with preserve_most (x86-64).
  if (!kX86_64) return;
  fs::path ir = dir / "deferred200.ll";
  fs::path out = dir / "deferred200.o2.ll";
  run(std::string(HCCT_OPT) + " -S -load-pass-plugin " + HCCT_KPATH_PLUGIN + " -passes='default<O2>' " + ir.string() + " -o " +
      out.string() + " 2>&1");
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic err;
  auto m = llvm::parseIRFile(out.string(), err, ctx);
  REQUIRE(m);
  for (const llvm::Function &fn : *m) CHECK_FALSE(fn.getName().startswith("hcct.kpath.step"));
  const llvm::Function *slow = m->getFunction("__hcct_path_slow_pm");
  REQUIRE(slow);
  CHECK(slow->getCallingConv() == llvm::CallingConv::PreserveMost);
  CHECK_FALSE(slow->use_empty());
  for (const llvm::User *u : slow->users())
    if (auto *call = llvm::dyn_cast<llvm::CallInst>(u)) CHECK(call->getCallingConv() == llvm::CallingConv::PreserveMost);
}

TEST_CASE("instrumentation: late stage instruments the optimised CFG correctly") {
  fs::path dir = work_dir();
  for (uint64_t seed = 100; seed < 116; ++seed) {
    kpath_test::GenOptions o;
    o.blocks = 6 + int(seed % 10);
    fs::path raw = dir / ("late" + std::to_string(seed) + ".ll");
    std::ofstream(raw) << kpath_test::CfgGenerator(seed, o).module();
    fs::path opt_ir = dir / ("late" + std::to_string(seed) + ".opt.ll");
    run(std::string(HCCT_OPT) + " -S -passes='default<O2>' " + raw.string() + " -o " + opt_ir.string() + " 2>&1");
    INFO("seed " << seed);
    check_program(opt_ir, "kpath-late", uint64_t(1) << 62, seed);
  }
}

// Ball-Larus placement: the increments sit on the chords of a spanning tree of the estimated
// frequencies, so the hot side of a branch carries no instruction, whichever successor it is (the
// numbering alone gives the first successor 0 and the second an add). Exactness is the test above.
TEST_CASE("instrumentation: the hot side of a loop's branch carries no increment") {
  fs::path dir = work_dir();
  for (bool hot_first : {true, false}) {
    std::string first = hot_first ? "hot" : "cold", second = hot_first ? "cold" : "hot";
    std::string weights = hot_first ? "!{!\"branch_weights\", i32 1000, i32 1}" : "!{!\"branch_weights\", i32 1, i32 1000}";
    std::string ir =
        "define void @f(i32 %n, i32* %p) {\n"
        "entry:\n  br label %header\n"
        "header:\n  %i = phi i32 [ 0, %entry ], [ %i1, %latch ]\n  %v = load volatile i32, i32* %p\n"
        "  %c = icmp eq i32 %v, 0\n  br i1 %c, label %" + first + ", label %" + second + ", !prof !0\n"
        "hot:\n  store volatile i32 1, i32* %p\n  br label %latch\n"
        "cold:\n  store volatile i32 2, i32* %p\n  br label %latch\n"
        "latch:\n  %i1 = add i32 %i, 1\n  %d = icmp slt i32 %i1, %n\n  br i1 %d, label %header, label %exit\n"
        "exit:\n  ret void\n}\n"
        "!0 = " + weights + "\n";
    fs::path src = dir / (std::string("hot_") + first + ".ll"), out = dir / (std::string("hot_") + first + ".kpath.ll");
    std::ofstream(src) << ir;
    run(std::string(HCCT_OPT) + " -S -load-pass-plugin " + HCCT_KPATH_PLUGIN + " -passes=kpath " + src.string() + " -o " +
        out.string() + " 2>&1");
    llvm::LLVMContext ctx;
    llvm::SMDiagnostic err;
    auto m = llvm::parseIRFile(out.string(), err, ctx);
    REQUIRE(m);
    llvm::Function *f = m->getFunction("f");
    REQUIRE(f);
    INFO("hot successor first: " << hot_first);
    size_t hot_size = 0, cold_size = 0;
    for (llvm::BasicBlock &bb : *f) {
      if (bb.getName() == "hot") hot_size = bb.size();
      if (bb.getName() == "cold") cold_size = bb.size();
    }
    CHECK(hot_size == 2);   // its store and branch: no increment on the edges in or out
    CHECK(cold_size == 3);  // the store, the branch and the increment of the path register
  }
}

TEST_CASE("instrumentation: a path that ends before a noreturn call goes to the runtime with no inline fast path") {
  // The exit before `abort` runs at most once per activation (on error paths mostly never): its
  // item is a plain runtime call in the abort's own block, where the ordinary exit keeps the
  // inline fast path (its window test, guesses and root cache: blocks of their own). That the
  // IDs stay right is the replay test's (cfg_gen.h makes noreturn calls too).
  fs::path dir = work_dir();
  std::string ir =
      "declare void @abort() noreturn nounwind\n"
      "define void @f(i32 %n, i32* %p) {\n"
      "entry:\n  br label %header\n"
      "header:\n  %i = phi i32 [ 0, %entry ], [ %i1, %latch ]\n  %v = load volatile i32, i32* %p\n"
      "  %c = icmp eq i32 %v, 7\n  br i1 %c, label %fail, label %latch\n"
      "fail:\n  call void @abort()\n  unreachable\n"
      "latch:\n  %i1 = add i32 %i, 1\n  %d = icmp slt i32 %i1, %n\n  br i1 %d, label %header, label %exit\n"
      "exit:\n  ret void\n}\n";
  fs::path src = dir / "noreturn_exit.ll", out = dir / "noreturn_exit.kpath.ll";
  std::ofstream(src) << ir;
  run(std::string(HCCT_OPT) + " -S -load-pass-plugin " + HCCT_KPATH_PLUGIN + " -passes=kpath " + src.string() + " -o " +
      out.string() + " 2>&1");
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic err;
  auto m = llvm::parseIRFile(out.string(), err, ctx);
  REQUIRE(m);
  llvm::Function *f = m->getFunction("f");
  REQUIRE(f);
  auto calls_to = [](const llvm::BasicBlock &bb, llvm::StringRef name) {
    int n = 0;
    for (const llvm::Instruction &i : bb)
      if (auto *c = llvm::dyn_cast<llvm::CallInst>(&i))
        if (c->getCalledFunction() && c->getCalledFunction()->getName() == name) ++n;
    return n;
  };
  int abort_blocks = 0, slow_calls = 0;
  for (llvm::BasicBlock &bb : *f) {
    slow_calls += calls_to(bb, "__hcct_path_slow");
    if (calls_to(bb, "abort") == 0) continue;
    ++abort_blocks;
    CHECK(calls_to(bb, "__hcct_path_slow") == 1);  // the item, in the abort's own block
  }
  CHECK(abort_blocks == 1);
  // The back edge and the return: one inline fast path each, with its slow call; and the abort's.
  CHECK(slow_calls == 3);
}
