// Open OSR points from a guidance file (docs/GUIDE.md, "OSR points"). For each loop of the
// guidance (`hcct guide`) with a threshold, whose function this module defines:
//   entry edges of the loop:   count = 0
//   top of the header:         count += 1; if (count == T) [cold] if (&hcct_osr_handler) hcct_osr_handler(&point, count)
// `count` is a per-frame register (an alloca promoted to SSA): thread- and recursion-safe, nothing
// on the loop's path but an add, a compare and a branch that is taken once per entry.
//
// The guidance names a loop by function (linkage name and GUID), header block (the kpath
// numbering: entry-reachable blocks in layout order, at the same stage as the profile) and the
// header's first source line. resolve() finds the headers on the CFG as clang emitted it, before
// the path probes (if any) split edges; insert() adds the code afterwards, so the probes' numbering
// is that of the uninstrumented function, the same as the profile's.
//
// Guidance file: -mllvm -hcct-guide=FILE (clang also needs -Xclang -load -Xclang kpath.so to know
// the option) or the environment variable HCCT_GUIDE=FILE at compile time. Path probes are
// inserted unless -mllvm -kpath-profile=false or HCCT_KPATH_PROFILE=0.
//
// With -mllvm -hcct-osr-mode=version (HCCT_OSR_MODE=version) a guided loop gets no handler call
// but a compiler-made version that the loop transfers to at its threshold (LoopVersioner.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "llvm/IR/BasicBlock.h"
#include "llvm/IR/Module.h"
#include "GuidanceFile.h"
#include "LoopVersioner.h"

namespace hcct::kpath {

// What a guided loop gets: an open OSR point that calls hcct_osr_handler, or a compiler-made
// loop version entered at the threshold (LoopVersioner.h).
enum class OsrMode { kPoint, kVersion };

// Whether the pass inserts path-profiling probes (default: yes).
bool path_profile_enabled();

class OsrPointInserter {
 public:
  // Reads the guidance file named by -hcct-guide / HCCT_GUIDE, if any. A bad file is an error
  // diagnostic (its path and reason) on the module's context, which fails the compilation; no
  // OSR point is inserted then.
  OsrPointInserter(llvm::Module &m, BuildConfig config);
  bool active() const { return !loops_.empty(); }
  // Finds the guided headers of this module's functions; warns about loops that do not match.
  void resolve();
  // Inserts the OSR points found by resolve(). Returns whether the module changed.
  bool insert();

 private:
  struct Site {
    const GuidedLoop *loop;
    llvm::BasicBlock *header;
    std::vector<PathPattern> patterns;  // resolved to this module's blocks
  };
  bool insert_in(llvm::Function &f, const std::vector<Site> &sites);
  bool version_in(llvm::Function &f, std::vector<Site> sites);

  llvm::Module &m_;
  std::vector<GuidedLoop> loops_;
  std::vector<Site> sites_;
  BuildConfig config_;
  OsrMode mode_ = OsrMode::kPoint;
  std::optional<uint64_t> threshold_override_;
};

}  // namespace hcct::kpath
