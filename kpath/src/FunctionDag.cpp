#include "FunctionDag.h"

#include <algorithm>
#include <map>

#include "llvm/Analysis/CFG.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"

namespace hcct::kpath {

using namespace llvm;

namespace {

// Funclet-based EH (Windows) has terminators with no edge into their successors that an
// instrumentation could use; Linux never produces them.
bool uses_funclets(const Function &f) {
  for (const BasicBlock &bb : f)
    if (bb.isEHPad() && !bb.isLandingPad()) return true;
  return false;
}

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
uint64_t saturating_mul(uint64_t a, uint64_t b) {
  return (a != 0 && b > UINT64_MAX / a) ? UINT64_MAX : a * b;
}

}  // namespace

int64_t FunctionDag::index(const BasicBlock *bb) const {
  auto it = index_.find(bb);
  return it == index_.end() ? -1 : int64_t(it->second);
}

void FunctionDag::index_blocks(Function &f) {
  // Reachability first, so that unreachable blocks (never executed) get no node.
  DenseSet<const BasicBlock *> reached;
  std::vector<const BasicBlock *> work{&f.getEntryBlock()};
  reached.insert(&f.getEntryBlock());
  while (!work.empty()) {
    const BasicBlock *bb = work.back();
    work.pop_back();
    for (const BasicBlock *s : successors(bb))
      if (reached.insert(s).second) work.push_back(s);
  }
  // Layout order keeps the numbering stable for unchanged code and the entry at index 0.
  for (BasicBlock &bb : f) {
    if (!reached.count(&bb)) continue;
    index_[&bb] = uint32_t(blocks_.size());
    blocks_.push_back(&bb);
  }
}

void FunctionDag::classify_exits() {
  exit_kinds_.assign(blocks_.size(), ExitKind::kNone);
  noreturn_calls_.assign(blocks_.size(), nullptr);
  for (uint32_t i = 0; i < blocks_.size(); ++i) {
    Instruction *term = blocks_[i]->getTerminator();
    if (isa<ReturnInst>(term)) {
      exit_kinds_[i] = ExitKind::kReturn;
    } else if (isa<ResumeInst>(term)) {
      exit_kinds_[i] = ExitKind::kResume;
    } else if (isa<UnreachableInst>(term)) {
      exit_kinds_[i] = ExitKind::kUnreachable;
      // The path ends at the last call that cannot return (the block's code before it ran).
      for (Instruction *p = term->getPrevNode(); p; p = p->getPrevNode()) {
        auto *call = dyn_cast<CallInst>(p);
        if (call && call->doesNotReturn() && !isa<IntrinsicInst>(call)) {
          exit_kinds_[i] = ExitKind::kNoReturnCall;
          noreturn_calls_[i] = call;
          break;
        }
      }
    }
  }
}

// Out-edges of each block, in the order that fixes the numbering: CFG successors in terminator
// order (duplicates merged, restart edges left out), then the kBreak dummy, then the kExit edge; the
// entry also gets one kStart dummy per restart target, in block order.
void FunctionDag::build_graph(const EdgeSet &restart) {
  graph_ = PathGraph(uint32_t(blocks_.size()));
  restarts_.clear();
  exit_edges_.assign(blocks_.size(), 0);
  std::map<uint32_t, uint32_t> break_edge, start_edge;  // block -> dummy edge index
  std::vector<uint32_t> headers;
  for (auto [from, to] : restart) headers.push_back(to);
  std::sort(headers.begin(), headers.end());
  headers.erase(std::unique(headers.begin(), headers.end()), headers.end());

  for (uint32_t v = 0; v < blocks_.size(); ++v) {
    DenseSet<uint32_t> seen;
    bool is_latch = false;
    for (BasicBlock *s : successors(blocks_[v])) {
      uint32_t w = index_.lookup(s);
      if (restart.count({v, w})) {
        is_latch = true;
        continue;
      }
      if (seen.insert(w).second) graph_.add_edge(v, w, EdgeKind::kBranch);
    }
    if (is_latch) break_edge[v] = graph_.add_edge(v, graph_.exit(), EdgeKind::kBreak);
    if (exit_kinds_[v] != ExitKind::kNone)
      exit_edges_[v] = graph_.add_edge(v, graph_.exit(), EdgeKind::kExit);
    if (v == 0)
      for (uint32_t h : headers) start_edge[h] = graph_.add_edge(0, h, EdgeKind::kStart);
  }
  for (auto [from, to] : restart) {
    RestartEdge r;
    r.from = from;
    r.to = to;
    r.break_edge = break_edge[from];
    r.start_edge = start_edge[to];
    restarts_.push_back(r);
  }
  std::sort(restarts_.begin(), restarts_.end(),
            [](const RestartEdge &a, const RestartEdge &b) { return std::pair(a.from, a.to) < std::pair(b.from, b.to); });
}

// Greedy overflow fallback: the block that the most entry-to-exit paths pass through (paths into
// it × paths out of it, saturating). Cutting all its incoming forward edges turns that product into
// a sum, so only blocks with at least two paths on each side qualify.
int64_t FunctionDag::pick_cut_target(const EdgeSet &restart) const {
  auto order = graph_.topological_order();
  if (!order) return -1;
  std::vector<uint64_t> into(graph_.blocks() + 1, 0), out(graph_.blocks() + 1, 0);
  std::vector<uint32_t> branch_in(graph_.blocks() + 1, 0);
  into[0] = 1;
  for (uint32_t v : *order)
    for (uint32_t e : graph_.out(v)) {
      const DagEdge &d = graph_.edges()[e];
      into[d.to] = saturating_add(into[d.to], into[v]);
      if (d.kind == EdgeKind::kBranch) ++branch_in[d.to];
    }
  for (auto it = order->rbegin(); it != order->rend(); ++it) {
    uint32_t v = *it;
    if (v == graph_.exit()) {
      out[v] = 1;
      continue;
    }
    for (uint32_t e : graph_.out(v)) out[v] = saturating_add(out[v], out[graph_.edges()[e].to]);
  }
  int64_t best = -1;
  uint64_t best_score = 0;
  for (uint32_t v = 1; v < graph_.blocks(); ++v) {
    if (branch_in[v] == 0 || into[v] < 2 || out[v] < 2) continue;
    uint64_t score = saturating_mul(into[v], out[v]);
    if (best < 0 || score > best_score) {
      best = v;
      best_score = score;
    }
  }
  (void)restart;
  return best;
}

std::optional<FunctionDag> FunctionDag::build(Function &f, uint64_t max_paths, std::string *why) {
  if (f.isDeclaration()) {
    *why = "declaration";
    return std::nullopt;
  }
  if (uses_funclets(f)) {
    *why = "funclet-based exception handling is not supported";
    return std::nullopt;
  }
  FunctionDag dag;
  dag.index_blocks(f);
  dag.classify_exits();

  // DFS back edges: correct for irreducible loops too (any edge to a block on the DFS stack).
  SmallVector<std::pair<const BasicBlock *, const BasicBlock *>, 16> back;
  FindFunctionBackedges(f, back);
  EdgeSet restart;
  for (auto [from, to] : back) restart.insert({dag.index_.lookup(from), dag.index_.lookup(to)});
  DenseSet<std::pair<uint32_t, uint32_t>> back_set = restart;

  for (;;) {
    dag.build_graph(restart);
    if (dag.graph_.number(max_paths)) break;
    int64_t target = dag.pick_cut_target(restart);
    if (target < 0) {
      *why = "too many paths and no edge left to cut";
      return std::nullopt;
    }
    for (const DagEdge &e : dag.graph_.edges())
      if (e.kind == EdgeKind::kBranch && e.to == uint32_t(target)) {
        restart.insert({e.from, e.to});
        ++dag.cut_count_;
      }
  }
  for (RestartEdge &r : dag.restarts_) r.cut = !back_set.count({r.from, r.to});
  return dag;
}

}  // namespace hcct::kpath
