// Shadow-stack resynchronisation with chosen stack pointers: skipped exits (longjmp, exceptions
// without cleanup probes), probes of inlined callees sharing their caller's frame, foreign stacks,
// deep recursion, memory exhaustion and restart after fork.
#include <catch2/catch.hpp>

#include "oracle.h"

using namespace hcct;
using test::key_of;

namespace {

using Key = test::ContextKey;

struct Fixture {
  rt::ThreadProfile p;
  explicit Fixture(rt::Mode mode = rt::Mode::kCct, uintptr_t lo = 0, uintptr_t size = ~uintptr_t(0)) {
    rt::ProfileConfig c;
    c.mode = mode;
    c.epsilon = 0.1;
    c.stack_lo = lo;
    c.stack_size = size;
    REQUIRE(p.init(c));
  }
  ~Fixture() { p.destroy(); }
  Key cursor() const { return key_of(p.cursor()); }
};

constexpr uintptr_t A = 0xa0, B = 0xb0, C = 0xc0, D = 0xd0, E = 0xe0;

}  // namespace

TEST_CASE("shadow stack: longjmp target pops exactly the skipped frames", "[shadow-stack]") {
  Fixture f;
  f.p.enter(A, 1, 1000);
  f.p.enter(B, 2, 900);
  f.p.enter(C, 3, 800);
  f.p.enter(D, 4, 700);
  f.p.unwind_to(900);  // longjmp back into B's frame
  CHECK(f.cursor() == Key{{A, 1}, {B, 2}});
  f.p.enter(E, 5, 800);  // a new call from B at the stack depth C had
  CHECK(f.cursor() == Key{{A, 1}, {B, 2}, {E, 5}});
  f.p.exit(E, 800);
  f.p.exit(B, 900);
  f.p.exit(A, 1000);
  CHECK(f.p.depth() == 0);
  CHECK(f.p.unmatched_exits() == 0);
  CHECK(f.p.calls() == 5);
}

TEST_CASE("shadow stack: an exit above skipped frames pops them", "[shadow-stack]") {
  Fixture f;
  f.p.enter(A, 1, 1000);
  f.p.enter(B, 2, 900);
  f.p.enter(C, 3, 800);  // B and C unwound without exit probes (clang + exception)
  f.p.exit(A, 1000);
  CHECK(f.p.depth() == 0);
  CHECK(f.p.unmatched_exits() == 0);
}

TEST_CASE("shadow stack: a deeper enter pops frames below it", "[shadow-stack]") {
  Fixture f;
  f.p.enter(A, 1, 1000);
  f.p.enter(B, 2, 800);
  f.p.enter(C, 3, 700);  // both skipped
  f.p.enter(D, 4, 900);  // next call from A, higher on the stack than B's frame
  CHECK(f.cursor() == Key{{A, 1}, {D, 4}});
}

TEST_CASE("shadow stack: a catch handler's frame pops the frames the exception unwound", "[shadow-stack]") {
  Fixture f;
  f.p.enter(A, 1, 1000);
  for (int i = 0; i < 3; ++i) {  // a loop that calls B from one site; B throws through C
    f.p.enter(B, 2, 900);
    f.p.enter(C, 3, 800);
    f.p.unwind_to(1000);  // __cxa_begin_catch in A
    CHECK(f.cursor() == Key{{A, 1}});
  }
  CHECK(f.p.count_of(f.p.root()->first_child()->first_child()) == 3);
  CHECK(f.p.live_nodes() == 3);
}

TEST_CASE("shadow stack: inlined callees share their caller's stack pointer", "[shadow-stack]") {
  Fixture f;
  f.p.enter(A, 1, 1000);
  f.p.enter(A, 1, 1000);  // A inlined into itself: same frame, same return address
  f.p.enter(B, 1, 1000);
  CHECK(f.cursor() == Key{{A, 1}, {A, 1}, {B, 1}});
  f.p.exit(B, 1000);
  f.p.exit(A, 1000);
  f.p.exit(A, 1000);
  CHECK(f.p.depth() == 0);
  CHECK(f.p.unmatched_exits() == 0);
}

TEST_CASE("shadow stack: frames on a foreign stack are popped by their exits only", "[shadow-stack]") {
  Fixture f(rt::Mode::kCct, /*lo=*/0x100000, /*size=*/0x100000);
  f.p.enter(A, 1, 0x1ff000);
  f.p.enter(B, 2, 0x1fe000);
  f.p.enter(C, 3, 0x900000);  // signal handler on a sigaltstack, far above the thread's stack
  f.p.enter(D, 4, 0x8ff000);
  CHECK(f.cursor() == Key{{A, 1}, {B, 2}, {C, 3}, {D, 4}});
  f.p.exit(D, 0x8ff000);
  f.p.exit(C, 0x900000);
  CHECK(f.cursor() == Key{{A, 1}, {B, 2}});
  f.p.exit(B, 0x1fe000);
  f.p.exit(A, 0x1ff000);
  CHECK(f.p.depth() == 0);
}

TEST_CASE("shadow stack: an exit that matches no frame is ignored", "[shadow-stack]") {
  Fixture f;
  f.p.exit(A, 1000);  // entered before profiling started
  f.p.enter(B, 2, 900);
  f.p.exit(C, 900);
  CHECK(f.cursor() == Key{{B, 2}});
  CHECK(f.p.unmatched_exits() == 2);
}

TEST_CASE("shadow stack: recursion one million frames deep", "[shadow-stack]") {
  for (rt::Mode mode : {rt::Mode::kCct, rt::Mode::kHcct}) {
    Fixture f(mode);
    constexpr uintptr_t kDepth = 1000000;
    uintptr_t top = uintptr_t(1) << 40;
    for (uintptr_t i = 0; i < kDepth; ++i) f.p.enter(A, 1, top - 64 * i);
    CHECK(f.p.depth() == kDepth);
    for (uintptr_t i = kDepth; i-- > 0;) f.p.exit(A, top - 64 * i);
    CHECK(f.p.depth() == 0);
    CHECK(f.p.unmatched_exits() == 0);
    CHECK(f.p.calls() == kDepth);
  }
}

TEST_CASE("memory cap: calls into new contexts are lost, never misattributed", "[shadow-stack]") {
  rt::set_tree_memory_limit(64 * 1024);
  {
    Fixture f;
    uint64_t entered = 0;
    for (uintptr_t i = 0; i < 5000; ++i) {
      f.p.enter(0x1000 + i, 1, 1000);
      f.p.enter(A, 2, 900);  // a call below a lost context must not land under another one
      f.p.exit(A, 900);
      f.p.exit(0x1000 + i, 1000);
      entered += 2;
    }
    CHECK(f.p.out_of_memory());
    CHECK(f.p.calls() + f.p.lost_events() == entered);
    uint64_t sum = 0;
    for (const rt::Node *n : test::all_nodes(f.p.root())) {
      sum += f.p.count_of(n);
      if (n->routine == A) CHECK(n->parent()->routine == 0x1000 + (n->parent()->routine - 0x1000));
      if (n->parent() && n->parent()->parent()) CHECK(n->routine == A);
    }
    CHECK(sum == f.p.calls());
    CHECK(f.p.depth() == 0);
  }
  rt::set_tree_memory_limit(size_t(4096) << 20);
}

TEST_CASE("restart from the current path (after fork)", "[shadow-stack]") {
  for (rt::Mode mode : {rt::Mode::kCct, rt::Mode::kHcct}) {
    Fixture f(mode);
    f.p.enter(A, 1, 1000);
    f.p.enter(B, 2, 900);
    f.p.enter(C, 3, 800);
    f.p.exit(C, 800);
    f.p.restart_from_current_path();
    CHECK(f.p.calls() == 0);
    CHECK(f.cursor() == Key{{A, 1}, {B, 2}});
    CHECK(f.p.live_nodes() == 2);
    f.p.enter(D, 4, 800);
    f.p.exit(D, 800);
    f.p.exit(B, 900);
    f.p.exit(A, 1000);
    CHECK(f.p.calls() == 1);
    CHECK(f.p.unmatched_exits() == 0);
  }
}

TEST_CASE("shadow stack: exit probes tail-called after the frame is released", "[shadow-stack]") {
  // gcc ends void functions with `jmp __cyg_profile_func_exit`: the probe's stack pointer is then
  // the caller's. In recursion that equals the outer frame's tag, which must survive.
  Fixture f;
  f.p.enter(A, 1, 1000);  // A's body runs at 1000
  f.p.enter(A, 2, 900);   // recursive call made from A's body at 1000 - (return address) ...
  f.p.enter(A, 3, 800);
  f.p.exit(A, 900, /*torn_down=*/true);  // innermost A returns to the middle one (sp 900)
  CHECK(f.cursor() == Key{{A, 1}, {A, 2}});
  f.p.enter(B, 4, 800);  // the middle A goes on calling
  f.p.exit(B, 900, true);
  CHECK(f.cursor() == Key{{A, 1}, {A, 2}});
  f.p.exit(A, 1000, true);
  CHECK(f.cursor() == Key{{A, 1}});
  f.p.exit(A, 1100, true);
  CHECK(f.p.depth() == 0);
  CHECK(f.p.unmatched_exits() == 0);
  f.p.exit(A, 1200, true);  // nothing left below: unmatched
  CHECK(f.p.unmatched_exits() == 1);
}

TEST_CASE("shadow stack: a torn-down exit also pops frames skipped below it", "[shadow-stack]") {
  Fixture f;
  f.p.enter(A, 1, 1000);
  f.p.enter(B, 2, 900);
  f.p.enter(C, 3, 800);  // C skipped its exit (longjmp into B without interposition)
  f.p.exit(B, 1000, true);
  CHECK(f.cursor() == Key{{A, 1}});
  CHECK(f.p.unmatched_exits() == 0);
}

TEST_CASE("shadow stack: a torn-down exit keeps an inlined frame entered over pushed arguments", "[shadow-stack]") {
  // sqlite (issue 13): A pushed 16 bytes of stack arguments for a call, and gcc deferred their pop;
  // B, inlined into A, entered meanwhile (its tag 16 below A's stack pointer). After the pop, A
  // calls void C, whose exit is tail-called at A's stack pointer: C exits, B is still live.
  Fixture f;
  f.p.enter(A, 1, 2000);
  f.p.enter(B, 2, 1000 - 16);
  f.p.enter(C, 3, 1000 - 8 - 16);  // C's probe under its two pushes
  f.p.exit(C, 1000, /*torn_down=*/true);
  CHECK(f.cursor() == Key{{A, 1}, {B, 2}});
  f.p.enter(D, 4, 1000 - 24);  // the next callee lands under B, not under A
  CHECK(f.cursor() == Key{{A, 1}, {B, 2}, {D, 4}});
  f.p.exit(D, 1000 - 24);
  f.p.exit(B, 1000 - 16);
  CHECK(f.cursor() == Key{{A, 1}});
  CHECK(f.p.unmatched_exits() == 0);
}

TEST_CASE("shadow stack: an inlined frame entered over pushed arguments exits after their pop", "[shadow-stack]") {
  // sqlite (found on bench/real, 2 unmatched exits a run): sqlite3RefillIndex pushes two stack
  // arguments for a call and gcc defers their pop; the inlined sqlite3ResolvePartIdxLabel (B)
  // enters meanwhile, its tag 16 below A's stack pointer. After the pop B calls C and exits with a
  // plain call at A's stack pointer: B is the exiting frame, not a stale one.
  for (rt::Mode mode : {rt::Mode::kCct, rt::Mode::kHcct}) {
    Fixture f(mode);
    f.p.enter(A, 1, 2000);
    f.p.enter(B, 2, 1000 - 16);
    f.p.enter(C, 3, 1000 - 32);  // C's probe under its pushes: B stays live
    f.p.exit(C, 1000 - 32);
    CHECK(f.cursor() == Key{{A, 1}, {B, 2}});
    f.p.exit(B, 1000);
    CHECK(f.cursor() == Key{{A, 1}});
    CHECK(f.p.unmatched_exits() == 0);
    // A stale frame of another function below the exit's stack pointer is still popped, and the
    // frame at the stack pointer exits (longjmp past D).
    f.p.enter(B, 2, 1000);
    f.p.enter(D, 4, 900);
    f.p.exit(B, 1000);
    CHECK(f.cursor() == Key{{A, 1}});
    CHECK(f.p.unmatched_exits() == 0);
  }
}

TEST_CASE("shadow stack: a split function's exit at its caller's stack pointer", "[shadow-stack]") {
  // f's header (and enter probe) inlined into A at A's stack pointer 1000; the rest, f.part.0,
  // ends with `jmp __cyg_profile_func_exit`, whose stack pointer is then A's too.
  Fixture f;
  f.p.enter(A, 1, 1000);
  f.p.enter(B, 2, 1000);
  f.p.enter(C, 3, 900);
  f.p.exit(C, 900);
  f.p.exit(B, 1000, /*torn_down=*/true);
  CHECK(f.cursor() == Key{{A, 1}});
  CHECK(f.p.unmatched_exits() == 0);
}

TEST_CASE("wide nodes: restart after fork and rebuild_path keep the child index right", "[shadow-stack][wide-site]") {
  constexpr uintptr_t kFanOut = 200;
  for (rt::Mode mode : {rt::Mode::kCct, rt::Mode::kHcct}) {
    Fixture f(mode);
    f.p.enter(A, 1, 1000);
    for (uintptr_t i = 0; i < kFanOut; ++i) {  // A calls 200 handlers from one site
      f.p.enter(0x1000 + 16 * i, 2, 900);
      f.p.exit(0x1000 + 16 * i, 900);
    }
    // cct keeps every handler; hcct (10 counters) pruned all but the monitored ones.
    CHECK(f.p.indexed_children() == (mode == rt::Mode::kCct ? kFanOut : f.p.counters()));
    CHECK(f.p.index_consistent());
    f.p.enter(0x1000 + 16 * 7, 2, 900);  // the fork happens inside handler 7
    f.p.restart_from_current_path();
    CHECK(f.p.index_consistent());
    CHECK(f.p.indexed_children() == 0);  // the new tree holds the path only
    CHECK(f.cursor() == Key{{A, 1}, {0x1000 + 16 * 7, 2}});
    f.p.exit(0x1000 + 16 * 7, 900);
    for (uintptr_t i = 0; i < kFanOut; ++i) {
      f.p.enter(0x1000 + 16 * i, 2, 900);
      f.p.exit(0x1000 + 16 * i, 900);
    }
    CHECK(f.p.index_consistent());
    CHECK(f.p.indexed_children() > 0);
    CHECK(f.p.calls() == kFanOut);
    // Static bursting re-synchronises the path through the wide node, then leaves it.
    rt::PathEntry path[] = {{A, 1, 1000}, {0x1000 + 16 * 150, 2, 900}, {B, 3, 800}};
    f.p.rebuild_path(path, 3);
    CHECK(f.cursor() == Key{{A, 1}, {0x1000 + 16 * 150, 2}, {B, 3}});
    CHECK(f.p.index_consistent());
    f.p.exit(B, 800);
    f.p.exit(0x1000 + 16 * 150, 900);
    f.p.enter(0x1000 + 16 * 151, 2, 900);
    CHECK(f.cursor() == Key{{A, 1}, {0x1000 + 16 * 151, 2}});
    f.p.exit(0x1000 + 16 * 151, 900);
    f.p.exit(A, 1000);
    CHECK(f.p.index_consistent());
    CHECK(f.p.unmatched_exits() == 0);
    if (mode == rt::Mode::kHcct) CHECK(f.p.live_nodes() <= f.p.counters() + 1);
  }
}

TEST_CASE("wide nodes: a memory cap reached while indexing loses calls, never misattributes", "[shadow-stack][wide-site]") {
  rt::set_tree_memory_limit(64 * 1024);
  {
    Fixture f;
    uint64_t entered = 1;
    f.p.enter(A, 1, 1000);
    for (uintptr_t i = 0; i < 5000; ++i, ++entered) {
      f.p.enter(0x1000 + 16 * i, 2, 900);
      f.p.exit(0x1000 + 16 * i, 900);
    }
    f.p.exit(A, 1000);
    CHECK(f.p.out_of_memory());
    CHECK(f.p.calls() + f.p.lost_events() == entered);
    CHECK(f.p.index_consistent());
    CHECK(f.p.unmatched_exits() == 0);
  }
  rt::set_tree_memory_limit(size_t(4096) << 20);
}
