// Random LLVM IR functions for the kpath tests: loops (natural and irreducible), conditional
// branches, switches with repeated targets, indirectbr, invoke with shared landing pads (catching
// and cleanup+resume), calls to a noreturn function, and dead-end `unreachable` blocks.
//
// Every block starts with `call void @tK()` (K = block number; distinct callees, so that the
// optimiser cannot merge the calls of different blocks) and every choice is read from
// `@decide(i32 m)` in [0, m). Choice 0 always moves to a later block, so once the harness's supply
// of decisions runs out (decide returns 0) the function finishes: generated programs terminate.
#pragma once

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kpath_test {

struct GenOptions {
  int blocks = 10;
  bool exceptions = true;
  bool indirect = true;
  bool noreturn = true;
  bool dead_ends = false;  // `unreachable` blocks: fine for static tests, UB if executed
};

class CfgGenerator {
 public:
  CfgGenerator(uint64_t seed, GenOptions o) : rng_(seed), o_(o) {}

  // A module defining `void @f()`.
  std::string module() {
    n_ = o_.blocks;
    kinds_.assign(n_, kNormal);
    // The last block returns; a few others become landing pads, die blocks or dead ends.
    for (int i = 2; i < n_ - 1; ++i) {
      int r = pick(100);
      if (o_.exceptions && r < 12) kinds_[i] = r < 8 ? kCatchPad : kCleanupPad;
      else if (o_.noreturn && r < 17) kinds_[i] = kDie;
      else if (o_.dead_ends && r < 20) kinds_[i] = kDead;
    }
    std::ostringstream body, globals;
    for (int i = 0; i < n_; ++i) block(i, body, globals);
    std::ostringstream m;
    m << "";
    for (int i = 0; i < n_; ++i) m << "declare void @t" << i << "()\n";
    m << "declare void @trace(i32)\n"
         "declare i32 @decide(i32)\n"
         "declare void @maybe_throw(i32)\n"
         "declare void @die() noreturn\n"
         "declare i32 @__gxx_personality_v0(...)\n"
         "declare i8* @__cxa_begin_catch(i8*)\n"
         "declare void @__cxa_end_catch()\n"
      << globals.str()
      << "define void @f() personality i8* bitcast (i32 (...)* @__gxx_personality_v0 to i8*) {\n"
      << body.str() << "}\n";
    return m.str();
  }

 private:
  enum Kind { kNormal, kCatchPad, kCleanupPad, kDie, kDead };

  int pick(int n) { return int(std::uniform_int_distribution<int>(0, n - 1)(rng_)); }

  bool is_pad(int i) const { return kinds_[i] == kCatchPad || kinds_[i] == kCleanupPad; }
  // A block a normal edge may go to: never the entry, never a landing pad.
  bool branchable(int i) const { return i > 0 && !is_pad(i); }
  // A later ordinary block (choice 0): the function always makes progress towards its end.
  int safe_target(int i) {
    std::vector<int> c;
    for (int j = i + 1; j < n_; ++j)
      if (branchable(j) && kinds_[j] != kDie && kinds_[j] != kDead) c.push_back(j);
    return c[pick(int(c.size()))];
  }
  int any_target() {
    for (;;) {
      int j = 1 + pick(n_ - 1);
      if (branchable(j)) return j;
    }
  }
  int any_pad() {
    std::vector<int> c;
    for (int j = 0; j < n_; ++j)
      if (is_pad(j)) c.push_back(j);
    return c.empty() ? -1 : c[pick(int(c.size()))];
  }
  // Indirectbr targets must not include the entry or pads; die/dead blocks are allowed.
  static std::string label(int j) { return "%b" + std::to_string(j); }

  void block(int i, std::ostringstream &out, std::ostringstream &globals) {
    std::string b = "b" + std::to_string(i);
    out << b << ":\n";
    if (kinds_[i] == kCatchPad || kinds_[i] == kCleanupPad) {
      bool cleanup = kinds_[i] == kCleanupPad;
      out << "  %" << b << ".lp = landingpad { i8*, i32 } " << (cleanup ? "cleanup" : "catch i8* null") << "\n";
      if (!cleanup) {
        out << "  %" << b << ".ex = extractvalue { i8*, i32 } %" << b << ".lp, 0\n";
        out << "  %" << b << ".cx = call i8* @__cxa_begin_catch(i8* %" << b << ".ex)\n";
        out << "  call void @__cxa_end_catch()\n";
      }
    }
    if (kinds_[i] == kDead) {
      out << "  unreachable\n";
      return;
    }
    out << "  call void @t" << i << "()\n";
    if (kinds_[i] == kCleanupPad) {
      out << "  resume { i8*, i32 } %" << b << ".lp\n";
      return;
    }
    if (kinds_[i] == kDie) {
      out << "  call void @die()\n  unreachable\n";
      return;
    }
    if (i == n_ - 1) {
      out << "  ret void\n";
      return;
    }
    int safe = safe_target(i);
    int r = pick(100);
    int pad = any_pad();
    if (r < 8) {
      out << "  ret void\n";
    } else if (r < 25) {
      out << "  br label " << label(safe) << "\n";
    } else if (r < 55) {
      out << "  %" << b << ".v = call i32 @decide(i32 2)\n";
      out << "  %" << b << ".c = icmp ne i32 %" << b << ".v, 0\n";
      out << "  br i1 %" << b << ".c, label " << label(any_target()) << ", label " << label(safe) << "\n";
    } else if (r < 72) {
      int m = 2 + pick(4);
      out << "  %" << b << ".v = call i32 @decide(i32 " << m << ")\n";
      out << "  switch i32 %" << b << ".v, label " << label(safe) << " [";
      // Repeated targets on purpose.
      int t = any_target();
      for (int c = 1; c < m; ++c) {
        if (pick(3)) t = any_target();
        out << " i32 " << c << ", label " << label(t);
      }
      out << " ]\n";
    } else if (r < 85 && o_.indirect) {
      int m = 2 + pick(3);
      std::vector<int> t{safe};
      for (int c = 1; c < m; ++c) t.push_back(pick(4) ? any_target() : t.back());
      globals << "@" << b << ".tbl = private constant [" << m << " x i8*] [";
      for (int c = 0; c < m; ++c) globals << (c ? ", " : "") << "i8* blockaddress(@f, " << label(t[c]) << ")";
      globals << "]\n";
      out << "  %" << b << ".v = call i32 @decide(i32 " << m << ")\n";
      out << "  %" << b << ".p = getelementptr [" << m << " x i8*], [" << m << " x i8*]* @" << b
          << ".tbl, i32 0, i32 %" << b << ".v\n";
      out << "  %" << b << ".a = load i8*, i8** %" << b << ".p\n";
      out << "  indirectbr i8* %" << b << ".a, [";
      for (int c = 0; c < m; ++c) out << (c ? ", " : "") << "label " << label(t[c]);
      out << "]\n";
    } else if (pad >= 0) {
      out << "  %" << b << ".v = call i32 @decide(i32 2)\n";
      out << "  invoke void @maybe_throw(i32 %" << b << ".v) to label " << label(safe) << " unwind label "
          << label(pad) << "\n";
    } else {
      out << "  br label " << label(safe) << "\n";
    }
  }

  std::mt19937_64 rng_;
  GenOptions o_;
  int n_ = 0;
  std::vector<Kind> kinds_;
};

}  // namespace kpath_test
