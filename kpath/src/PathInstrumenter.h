// Inserts the Ball-Larus probes for one function (docs/KPATH.md, "Instrumentation"):
//   entry:            r = 0; frame = {null, 0}                    (the thesis's ∗ marker, inline)
//   edge e:           r += inc(e)                                 (only where inc(e) != 0)
//   back edge t→h:    step(&frame, F, r + inc(t→exit)); r = inc(entry→h)
//   exit block b:     step(&frame, F, r + inc(b→exit))            (before ret/resume/noreturn call)
// inc = the values moved onto the chords of a spanning tree of the hot edges (Ball-Larus placement,
// path_graph.h chord_increments): every path's increments still sum to its ID.
// `r` lives in an alloca that is promoted to SSA at the end. `step` is the inline fast path
// (follow the window's successor list, count) with a call to __hcct_path_slow on a miss; it is
// built once per module as an internal function and inlined at every site: at once, or at the end
// of clang's optimiser (RuntimeApi::defer_inlining, KPathInlineStepsPass).
#pragma once

#include "hcct/kpath_abi.h"
#include <cstdint>
#include <optional>
#include <vector>

#include "FunctionDag.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

namespace hcct::kpath {

// The node layout, root cache and symbols the inline fast path relies on: hcct/kpath_abi.h.
namespace abi = hcct::kpath_abi;

// The runtime entry points (docs/RUNTIME-ABI.md, "Path profiling probes").
struct RuntimeApi {
  llvm::FunctionCallee slow;      // void __hcct_path_slow(void *frame, uint64_t function_id, uint64_t path_id, uint64_t slot)
  llvm::GlobalVariable *token;    // __thread uint64_t __hcct_path_token (initial-exec)
  llvm::GlobalVariable *roots;    // __thread void *__hcct_path_roots_v4[kRootCacheSize] (initial-exec)
  llvm::GlobalVariable *blpp;     // __thread uint64_t __hcct_path_blpp (initial-exec): k = 1, try the roots on a miss
  llvm::Function *step = nullptr; // internal: the fast path + slow call, inlined at every site (at once or deferred)
  // internal: the slow call alone (the frame's two words, the call, their reloads), inlined at the
  // exits before noreturn calls: a path that ends there ends its activation at most once, and
  // mostly never (error paths), so the fast path's code there would only cost compile time and
  // code size (docs/KPATH.md, "Exits before noreturn calls").
  llvm::Function *cold_step = nullptr;
  // BLPP counter arrays (hcct/kpath_abi.h): the module's thread-local words and its constant table
  // (sized by finish_counters()); null without the fast path.
  llvm::FunctionCallee arm_counters;           // void __hcct_path_counters(const uint64_t *table, uint64_t *tls)
  llvm::FunctionCallee counted;                // void __hcct_path_counted(table, tls, offset, frame, function_id, path_id)
  llvm::GlobalVariable *counter_block = nullptr;  // the module's TLS words {array at k = 1, array for loop-free, state}
  llvm::GlobalVariable *counter_table = nullptr;  // a placeholder until finish_counters()
  std::vector<uint64_t> counter_entries;       // {function ID, offset, paths} per function
  uint64_t counter_words = 1;                  // word 0: the thread's state
  uint64_t max_counter_paths = 0, max_counter_words = 0;
  // `fast_path` false: no inline fast path, every item calls the runtime. Functions with at most
  // `max_counter_paths` paths get counter arrays while the block stays within `max_counter_words`
  // (0: none).
  // `defer_inlining`: the sites call the step through the optimiser, and inline_steps() inlines
  // them at its end (docs/KPATH.md, "Compile time"); otherwise each site is inlined when emitted.
  bool defer_inlining = false;
  static RuntimeApi declare(llvm::Module &m, bool fast_path, uint64_t max_counter_paths = abi::kMaxCounterPaths,
                            uint64_t max_counter_words = abi::kMaxCounterWords, bool defer_inlining = false);
  // The offset of a function's counters in the module's arrays, or 0 when it gets none (too many
  // paths, the arrays full, or no fast path).
  uint64_t allocate_counters(uint64_t function_id, uint64_t paths);
  // Emits the table at its final size (or removes the TLS words and the table when no function
  // has counters).
  void finish_counters(llvm::Module &m);
};

// How a function's items use its BLPP counter array (hcct/kpath_abi.h).
enum class CounterUse : uint64_t {
  kNone = 0,    // no array: the window and the root cache
  kBlpp = 1,    // a function with loops: its first item of an activation while the state has kCountersAll (k = 1)
  kEveryK = 2,  // a function without loops (one item per activation): while the state has kCountersLoopFree
};

// Inlines every call of a step in `f` (RuntimeApi::defer_inlining) and promotes the window and
// owner slots they leave in memory; true if it changed `f`.
bool inline_steps(llvm::Function &f);
// Whether `f` is one of the steps RuntimeApi::declare builds.
bool is_step(const llvm::Function &f);

inline constexpr unsigned kFrameWords = 2;  // struct hcct_path_frame: {node, owner}

// What runs when control crosses one CFG edge.
struct EdgeProbe {
  llvm::BasicBlock *from = nullptr;
  llvm::BasicBlock *to = nullptr;
  uint64_t add = 0;          // r += add (plain edge)
  bool restart = false;      // back or cut edge: emit r + emit_add, then r = reset
  uint64_t emit_add = 0;
  uint64_t reset = 0;
  uint64_t body_offset = 0;  // restart: what emit_path subtracts from the ID before choosing the guess slot
};

class PathInstrumenter {
 public:
  // `counter_offset`: where the function's BLPP counters start in the module's block (0: none).
  PathInstrumenter(llvm::Function &f, const FunctionDag &dag, uint64_t function_id, const RuntimeApi &api,
                   uint64_t counter_offset = 0)
      : f_(f), dag_(dag), function_id_(function_id), api_(api), counter_offset_(counter_offset) {}
  // `promote` false leaves the path register, window and owner in their allocas (registers()), for
  // a later step that adds edges into the body (PathVersioner) and promotes them itself.
  void run(bool promote = true);
  std::vector<llvm::AllocaInst *> registers() const { return {reg_, w_, owner_}; }
  // What a back edge into `header` sets the path register to (the restart), or nullopt if none
  // does.
  std::optional<uint64_t> restart_value(const llvm::BasicBlock *header) const;

 private:
  enum class Placement { kEndOfSource, kStartOfTarget, kSplit, kDispatch };

  std::vector<uint64_t> edge_weights() const;
  std::vector<EdgeProbe> collect_probes() const;
  Placement place(const EdgeProbe &p) const;
  void insert_prologue();
  void insert_probe(llvm::Instruction *before, const EdgeProbe &p);
  void insert_exit(uint32_t block);
  // `cold`: through api_.cold_step (a runtime call) instead of the inline fast path.
  void emit_path(llvm::IRBuilder<> &b, uint64_t add, uint64_t body_offset, bool cold = false);
  void split_and_insert(const EdgeProbe &p);
  void dispatch_at(llvm::BasicBlock *to, const std::vector<EdgeProbe> &probes);
  void promote_register();
  // The block that now ends with `bb`'s original terminator (dispatch splits move it).
  llvm::BasicBlock *tail(llvm::BasicBlock *bb) const { return tails_.lookup(bb) ? tails_.lookup(bb) : bb; }

  llvm::Function &f_;
  const FunctionDag &dag_;
  uint64_t function_id_;
  const RuntimeApi &api_;
  uint64_t counter_offset_;
  std::vector<uint64_t> inc_;          // per DAG edge: its increment (0 on the spanning tree)
  llvm::AllocaInst *reg_ = nullptr;    // the path register r
  llvm::AllocaInst *w_ = nullptr;      // the window (KsfNode *), a register after promotion
  llvm::AllocaInst *owner_ = nullptr;  // the frame's owner value, a register after promotion
  llvm::AllocaInst *frame_ = nullptr;  // struct hcct_path_frame
  llvm::Value *frame_ptr_ = nullptr;   // frame_ as i8*
  llvm::DenseMap<llvm::BasicBlock *, llvm::BasicBlock *> tails_;
  std::vector<llvm::CallInst *> steps_;  // calls of api_.step, inlined at the end
};

}  // namespace hcct::kpath
