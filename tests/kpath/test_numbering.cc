// Ball-Larus numbering: on random DAGs and on the DAGs of generated LLVM functions (nested and
// irreducible loops, switches with repeated targets, indirectbr, invoke/landing pads, noreturn
// calls), the entry-to-exit paths map one-to-one onto [0, N) and decoding every ID gives its path
// back. Oracle: brute-force enumeration of all paths.
#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <set>

#include "FunctionDag.h"
#include "cfg_gen.h"
#include "hcct/kpath/path_graph.h"
#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using hcct::kpath::DagEdge;
using hcct::kpath::EdgeKind;
using hcct::kpath::FunctionDag;
using hcct::kpath::PathGraph;

namespace {

// Every entry-to-exit path (edge lists), or false if there are more than `cap`.
bool enumerate(const PathGraph &g, size_t cap, std::vector<std::vector<uint32_t>> *out) {
  std::vector<uint32_t> path;
  bool ok = true;
  std::function<void(uint32_t)> walk = [&](uint32_t v) {
    if (!ok) return;
    if (v == g.exit()) {
      if (out->size() >= cap) ok = false;
      else out->push_back(path);
      return;
    }
    for (uint32_t e : g.out(v)) {
      path.push_back(e);
      walk(g.edges()[e].to);
      path.pop_back();
    }
  };
  walk(0);
  return ok;
}

// The bijection property, checked by enumeration.
void check_bijection(const PathGraph &g) {
  std::vector<std::vector<uint32_t>> paths;
  REQUIRE(enumerate(g, 200000, &paths));
  REQUIRE(paths.size() == g.num_paths());
  std::vector<uint8_t> seen(paths.size(), 0);
  for (const auto &p : paths) {
    uint64_t id = g.id_of(p);
    REQUIRE(id < g.num_paths());
    REQUIRE(!seen[id]);
    seen[id] = 1;
    auto back = g.decode(id);
    REQUIRE(back);
    REQUIRE(*back == p);
  }
  CHECK_FALSE(g.decode(g.num_paths()));
}

// A random DAG: edges only go forward in node order; every node reaches the exit.
PathGraph random_dag(std::mt19937_64 &rng, uint32_t n) {
  PathGraph g(n);
  auto pick = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  for (uint32_t v = 0; v < n; ++v) {
    uint32_t k = pick(1, 3);
    for (uint32_t i = 0; i < k; ++i) {
      uint32_t to = (v + 1 < n && pick(0, 4)) ? pick(v + 1, n - 1) : g.exit();
      g.add_edge(v, to, to == g.exit() ? EdgeKind::kExit : EdgeKind::kBranch);
    }
  }
  return g;
}

std::unique_ptr<llvm::Module> parse(llvm::LLVMContext &ctx, const std::string &ir) {
  llvm::SMDiagnostic err;
  auto m = llvm::parseAssemblyString(ir, err, ctx);
  if (!m) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    err.print("gen", os);
    FAIL(os.str() << "\n" << ir);
  }
  REQUIRE_FALSE(llvm::verifyModule(*m, &llvm::errs()));
  return m;
}

// The DAG is the CFG with restart edges taken out: every reachable CFG edge is either a kBranch edge
// or a restart edge, never both, and the DAG's edges come from the CFG.
void check_structure(const FunctionDag &dag) {
  const PathGraph &g = dag.graph();
  std::set<std::pair<uint32_t, uint32_t>> branch, restart, cfg;
  for (const DagEdge &e : g.edges())
    if (e.kind == EdgeKind::kBranch) branch.insert({e.from, e.to});
  for (const auto &r : dag.restarts()) {
    restart.insert({r.from, r.to});
    CHECK(g.edges()[r.break_edge].kind == EdgeKind::kBreak);
    CHECK(g.edges()[r.break_edge].from == r.from);
    CHECK(g.edges()[r.start_edge].kind == EdgeKind::kStart);
    CHECK(g.edges()[r.start_edge].to == r.to);
  }
  for (uint32_t v = 0; v < dag.blocks().size(); ++v)
    for (const llvm::BasicBlock *s : llvm::successors(dag.blocks()[v])) cfg.insert({v, uint32_t(dag.index(s))});
  for (const auto &e : cfg) CHECK(branch.count(e) + restart.count(e) == 1);
  for (const auto &e : branch) CHECK(cfg.count(e));
  for (const auto &e : restart) CHECK(cfg.count(e));
  REQUIRE(g.topological_order());
}

// Ball-Larus chord placement: along every entry-to-exit path the increments sum to the path's ID,
// and a spanning tree of edges (with the virtual exit→entry edge: nodes − 1 of them) carries none.
// `heaviest` (an edge index, or -1) has the largest weight, so it must be in the tree.
void check_chords(const PathGraph &g, const std::vector<uint64_t> &weight, int64_t heaviest) {
  std::vector<uint64_t> inc = g.chord_increments(weight);
  REQUIRE(inc.size() == g.edges().size());
  std::vector<std::vector<uint32_t>> paths;
  REQUIRE(enumerate(g, 200000, &paths));
  for (const auto &p : paths) {
    uint64_t sum = 0;
    for (uint32_t e : p) sum += inc[e];
    REQUIRE(sum == g.id_of(p));
  }
  size_t zero = 0;
  for (uint64_t i : inc) zero += i == 0;
  // Every node is reachable from the entry here, so the tree spans all g.blocks() + 1 nodes.
  CHECK(zero + 1 >= g.blocks());
  if (heaviest >= 0) CHECK(inc[size_t(heaviest)] == 0);
}

}  // namespace

TEST_CASE("numbering: random DAGs map paths one-to-one onto 0 .. N-1") {
  std::mt19937_64 rng(42);
  for (int t = 0; t < 300; ++t) {
    uint32_t n = 1 + uint32_t(rng() % 14);
    PathGraph g = random_dag(rng, n);
    REQUIRE(g.number());
    check_bijection(g);
  }
}

TEST_CASE("numbering: increments on the chords of a maximum spanning tree sum to the same IDs") {
  std::mt19937_64 rng(7);
  for (int t = 0; t < 300; ++t) {
    uint32_t n = 1 + uint32_t(rng() % 14);
    PathGraph g = random_dag(rng, n);
    REQUIRE(g.number());
    std::vector<uint64_t> weight(g.edges().size());
    for (uint64_t &w : weight) w = rng() % 100;
    // The heaviest edge is in the tree unless it joins the entry to the exit, which the virtual
    // exit→entry edge already joins.
    int64_t heaviest = int64_t(rng() % weight.size());
    const DagEdge &h = g.edges()[size_t(heaviest)];
    if (h.from == 0 && h.to == g.exit()) heaviest = -1;
    else weight[size_t(heaviest)] = 1000;
    INFO("trial " << t);
    check_chords(g, weight, heaviest);
    check_chords(g, std::vector<uint64_t>(g.edges().size(), 0), -1);  // all ties
  }
}

TEST_CASE("numbering: overflow is reported, never wrapped") {
  // A chain of 70 diamonds has 2^70 paths.
  PathGraph g(141);
  for (uint32_t i = 0; i < 70; ++i) {
    uint32_t top = 2 * i, next = 2 * i + 2;
    g.add_edge(top, top + 1, EdgeKind::kBranch);
    g.add_edge(top, next, EdgeKind::kBranch);
    g.add_edge(top + 1, next, EdgeKind::kBranch);
  }
  g.add_edge(140, g.exit(), EdgeKind::kExit);
  CHECK_FALSE(g.number());
  CHECK_FALSE(g.number(uint64_t(1) << 40));
  PathGraph small(5);
  small.add_edge(0, 1, EdgeKind::kBranch);
  small.add_edge(0, 2, EdgeKind::kBranch);
  small.add_edge(1, 2, EdgeKind::kBranch);
  small.add_edge(2, small.exit(), EdgeKind::kExit);
  CHECK(small.number(2));
  CHECK_FALSE(small.number(1));
}

TEST_CASE("numbering: generated LLVM CFGs (loops, irreducible, switch, indirectbr, EH, noreturn)") {
  llvm::LLVMContext ctx;
  size_t with_loops = 0, irreducible_like = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    kpath_test::GenOptions o;
    o.blocks = 3 + int(seed % 12);
    o.dead_ends = seed % 3 == 0;
    std::string ir = kpath_test::CfgGenerator(seed, o).module();
    auto m = parse(ctx, ir);
    llvm::Function *f = m->getFunction("f");
    std::string why;
    auto dag = FunctionDag::build(*f, UINT64_MAX, &why);
    INFO("seed " << seed << "\n" << ir);
    REQUIRE(dag);
    check_structure(*dag);
    check_bijection(dag->graph());
    CHECK_FALSE(dag->has_cut_edges());
    std::vector<uint64_t> weight(dag->graph().edges().size());
    for (size_t e = 0; e < weight.size(); ++e) weight[e] = (seed * 31 + e * 17) % 13;
    check_chords(dag->graph(), weight, -1);
    if (!dag->restarts().empty()) ++with_loops;
    std::set<uint32_t> headers;
    for (const auto &r : dag->restarts()) headers.insert(r.to);
    if (headers.size() > 1) ++irreducible_like;
  }
  // The generator must actually produce loops, many with several headers.
  CHECK(with_loops > 150);
  CHECK(irreducible_like > 50);
}

TEST_CASE("numbering: overflow fallback cuts edges until the count fits") {
  llvm::LLVMContext ctx;
  size_t cut = 0, infeasible = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    kpath_test::GenOptions o;
    o.blocks = 8 + int(seed % 10);
    std::string ir = kpath_test::CfgGenerator(seed * 7919, o).module();
    auto m = parse(ctx, ir);
    llvm::Function *f = m->getFunction("f");
    std::string why;
    uint64_t limit = 6 + seed % 20;
    auto dag = FunctionDag::build(*f, limit, &why);
    INFO("seed " << seed << " limit " << limit << "\n" << ir);
    if (!dag) {  // a limit below the number of exits cannot be met: refused, never a wrong ID
      ++infeasible;
      continue;
    }
    CHECK(dag->graph().num_paths() <= limit);
    check_structure(*dag);
    check_bijection(dag->graph());
    check_chords(dag->graph(), std::vector<uint64_t>(dag->graph().edges().size(), 1), -1);
    for (const auto &r : dag->restarts())
      if (r.cut) ++cut;
  }
  CHECK(cut > 0);
  CHECK(infeasible < 20);
}
