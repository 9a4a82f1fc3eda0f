// Machine stacks (issues 13 and 26): coroutines (makecontext/swapcontext), fibers, green threads.
// Each stack keeps its own calling path, rooted where it was first switched into; pruning keeps
// every suspended stack's path; a stack inside the thread's own (a local array) is told apart; a
// return through uc_link (a switch the runtime does not see) is followed at the next event.
#include <catch2/catch.hpp>

#include "oracle.h"

using namespace hcct;
using test::key_of;

namespace {

using Key = test::ContextKey;

constexpr uintptr_t kOwnLo = 0x100000, kOwnSize = 0x100000;  // the thread's stack
constexpr uintptr_t kCoLo = 0x900000, kCoSize = 0x10000;      // a coroutine's (heap, mmap, static)
constexpr uintptr_t MAIN = 0xa0, GEN = 0xb0, PRODUCE = 0xc0, CONSUME = 0xd0, FOO = 0xe0, BAR = 0xf0,
                    BAZ = 0x100;

struct Fixture {
  rt::ThreadProfile p;
  explicit Fixture(rt::Mode mode, double epsilon = 0.1) {
    rt::ProfileConfig c;
    c.mode = mode;
    c.epsilon = epsilon;
    c.stack_lo = kOwnLo;
    c.stack_size = kOwnSize;
    REQUIRE(p.init(c));
  }
  ~Fixture() { p.destroy(); }
  Key cursor() const { return key_of(p.cursor()); }

  uint64_t count_of(const Key &key) const {
    for (const rt::Node *n : test::all_nodes(p.root()))
      if (n->parent() && key_of(n) == key) return p.count_of(n);
    return 0;
  }
};

// A generator ping-ponging with main `rounds` times: every produce under the generator, every
// consume under main; the generator is rooted where main first switched into it.
// `warm`: the tree's peak nodes and bytes after 100 rounds.
void ping_pong(Fixture &f, int rounds, bool check_each, std::pair<size_t, size_t> *warm = nullptr) {
  f.p.enter(MAIN, 1, kOwnLo + 0xff000);
  for (int i = 0; i < rounds; ++i) {
    if (warm && i == 100) *warm = {f.p.peak_nodes(), f.p.tree_bytes()};
    REQUIRE(f.p.switch_stack(kCoLo + 0xf000 - (i == 0 ? 0 : 0x100), kCoLo, kCoSize));
    if (i == 0) f.p.enter(GEN, 0, kCoLo + 0xf000);  // the coroutine's entry function
    f.p.enter(PRODUCE, 2, kCoLo + 0xef00);
    if (check_each) REQUIRE(f.cursor() == Key{{MAIN, 1}, {GEN, 0}, {PRODUCE, 2}});
    f.p.exit(PRODUCE, kCoLo + 0xef00);
    REQUIRE(f.p.switch_stack(kOwnLo + 0xfef00, 0, 0));  // main's context: saved, no uc_stack
    f.p.enter(CONSUME, 3, kOwnLo + 0xfef00);
    if (check_each) REQUIRE(f.cursor() == Key{{MAIN, 1}, {CONSUME, 3}});
    f.p.exit(CONSUME, kOwnLo + 0xfef00);
    if (check_each) REQUIRE(f.p.depth() == 1);
  }
}

}  // namespace

TEST_CASE("stacks: a generator ping-ponging with main keeps two calling contexts", "[stacks]") {
  for (rt::Mode mode : {rt::Mode::kCct, rt::Mode::kHcct}) {
    Fixture f(mode, 0.01);
    ping_pong(f, 1000, true);
    CHECK(f.p.other_stacks() == 1);
    if (mode == rt::Mode::kCct) {
      CHECK(f.count_of({{MAIN, 1}, {CONSUME, 3}}) == 1000);
      CHECK(f.count_of({{MAIN, 1}, {GEN, 0}, {PRODUCE, 2}}) == 1000);
      CHECK(f.p.live_nodes() == 4);
    }
    CHECK(f.p.unmatched_exits() == 0);
    CHECK(f.p.calls() == 2002);
  }
}

TEST_CASE("stacks: memory is flat in the number of switches", "[stacks]") {
  for (rt::Mode mode : {rt::Mode::kCct, rt::Mode::kHcct}) {
    Fixture f(mode, 0.01);
    std::pair<size_t, size_t> warm;
    ping_pong(f, 100000, false, &warm);
    CHECK(f.p.peak_nodes() == warm.first);
    CHECK(f.p.tree_bytes() == warm.second);
    CHECK(f.p.peak_nodes() <= 4);
  }
}

TEST_CASE("stacks: pruning keeps the path of a suspended stack", "[stacks]") {
  // hcct with 2 counters: a flood of cold calls on main evicts everything, including the
  // generator's contexts while it is suspended inside produce.
  Fixture f(rt::Mode::kHcct, 0.5);
  f.p.enter(MAIN, 1, kOwnLo + 0xff000);
  REQUIRE(f.p.switch_stack(kCoLo + 0xf000, kCoLo, kCoSize));
  f.p.enter(GEN, 0, kCoLo + 0xf000);
  f.p.enter(PRODUCE, 2, kCoLo + 0xef00);
  REQUIRE(f.p.switch_stack(kOwnLo + 0xfef00, 0, 0));  // suspended inside produce
  for (uintptr_t i = 0; i < 1000; ++i) {
    f.p.enter(0x10000 + i, 4, kOwnLo + 0xfef00);
    f.p.exit(0x10000 + i, kOwnLo + 0xfef00);
  }
  REQUIRE(f.p.live_nodes() <= 6);  // the bound holds: two counters, two paths
  REQUIRE(f.p.switch_stack(kCoLo + 0xee00, kCoLo, kCoSize));
  CHECK(f.cursor() == Key{{MAIN, 1}, {GEN, 0}, {PRODUCE, 2}});
  f.p.exit(PRODUCE, kCoLo + 0xef00);
  f.p.exit(GEN, kCoLo + 0xf000);
  CHECK(f.p.unmatched_exits() == 0);
  CHECK(f.cursor() == Key{{MAIN, 1}});  // the coroutine's base: where main switched into it
}

TEST_CASE("stacks: a coroutine stack inside the thread's own (a local array), left through uc_link", "[stacks]") {
  // Issue 26: main's frame holds `char stack[8192]`; foo switches to a coroutine running bar on it.
  // Its stack pointer lies above foo's and main's frames: without stacks they were popped as stale.
  constexpr uintptr_t kArray = kOwnLo + 0xf0000, kArraySize = 8192;
  for (rt::Mode mode : {rt::Mode::kCct, rt::Mode::kHcct}) {
    Fixture f(mode);
    f.p.enter(MAIN, 1, kOwnLo + 0xff000);
    f.p.enter(FOO, 2, kOwnLo + 0xef000);
    REQUIRE(f.p.switch_stack(kArray + kArraySize - 64, kArray, kArraySize));
    f.p.enter(BAR, 0, kArray + kArraySize - 64);
    CHECK(f.cursor() == Key{{MAIN, 1}, {FOO, 2}, {BAR, 0}});
    f.p.exit(BAR, kArray + kArraySize - 64);
    // bar returned: glibc switches to uc_link itself, unseen; the next event is foo's exit.
    f.p.exit(FOO, kOwnLo + 0xef000);
    CHECK(f.cursor() == Key{{MAIN, 1}});
    CHECK(f.p.other_stacks() == 0);  // the finished coroutine's stack is forgotten
    f.p.enter(BAZ, 3, kOwnLo + 0xef000);
    CHECK(f.cursor() == Key{{MAIN, 1}, {BAZ, 3}});
    f.p.exit(BAZ, kOwnLo + 0xef000);
    f.p.exit(MAIN, kOwnLo + 0xff000);
    CHECK(f.p.unmatched_exits() == 0);
    CHECK(f.p.depth() == 0);
    if (mode == rt::Mode::kCct) {
      CHECK(f.count_of({{MAIN, 1}, {FOO, 2}, {BAR, 0}}) == 1);
      CHECK(f.count_of({{MAIN, 1}, {BAZ, 3}}) == 1);
    }
  }
}

TEST_CASE("stacks: many green threads, each its own path, kept by a restart after fork", "[stacks]") {
  for (rt::Mode mode : {rt::Mode::kCct, rt::Mode::kHcct}) {
    Fixture f(mode, 0.05);
    constexpr int kThreads = 50;
    f.p.enter(MAIN, 1, kOwnLo + 0xff000);
    auto lo = [](int t) { return 0x10000000 + uintptr_t(t) * 0x10000; };
    for (int round = 0; round < 20; ++round) {
      for (int t = 0; t < kThreads; ++t) {  // the scheduler (main) resumes each task in turn
        REQUIRE(f.p.switch_stack(lo(t) + 0xf000, lo(t), 0x10000));
        if (round == 0) f.p.enter(0x5000 + uintptr_t(t) * 16, 5, lo(t) + 0xf000);
        CHECK(f.p.depth() == 1);
        CHECK(f.p.cursor()->routine == 0x5000 + uintptr_t(t) * 16);
        CHECK(f.p.cursor()->parent()->routine == MAIN);
        f.p.enter(PRODUCE, 2, lo(t) + 0xe000);
        f.p.exit(PRODUCE, lo(t) + 0xe000);
        REQUIRE(f.p.switch_stack(kOwnLo + 0xfe000, 0, 0));
        CHECK(f.cursor() == Key{{MAIN, 1}});
      }
      if (round == 10) {
        f.p.restart_from_current_path();  // fork: the child resumes the same tasks
        CHECK(f.p.calls() == 0);
      }
    }
    CHECK(f.p.other_stacks() == kThreads);
    CHECK(f.p.unmatched_exits() == 0);
    CHECK(f.p.calls() == uint64_t(9 * kThreads * 1));  // produce calls after the restart
  }
}

TEST_CASE("stacks: torn-down exits at the base of a coroutine stack in the caller's frame", "[stacks]") {
  // gcc -O2: main's array starts at main's stack pointer, so foo's tail-called exit probe (whose
  // stack pointer is main's) and main's own enter probe report exactly the array's base address.
  // That address belongs to main's stack, not the coroutine's: the coroutine's frames lie above it.
  constexpr uintptr_t kArraySize = 16384, kArray = kOwnLo + 0xe0000;
  Fixture f(rt::Mode::kCct);
  f.p.enter(MAIN, 1, kArray);
  f.p.enter(FOO, 2, kArray - 0x30);
  REQUIRE(f.p.switch_stack(kArray + kArraySize - 16, kArray, kArraySize));
  f.p.enter(BAR, 0, kArray + kArraySize - 32);
  f.p.exit(BAR, kArray + kArraySize - 16, /*torn_down=*/true);
  f.p.exit(FOO, kArray, /*torn_down=*/true);  // after an unseen return through uc_link
  f.p.enter(BAZ, 3, kArray - 0x20);
  CHECK(f.cursor() == Key{{MAIN, 1}, {BAZ, 3}});
  f.p.exit(BAZ, kArray, true);
  f.p.exit(MAIN, kArray + kArraySize + 0x40, true);
  CHECK(f.p.depth() == 0);
  CHECK(f.p.unmatched_exits() == 0);
  CHECK(f.count_of({{MAIN, 1}, {FOO, 2}, {BAR, 0}}) == 1);
}

TEST_CASE("stacks: a uc_stack that does not look like makecontext's is not taken for a stack", "[stacks]") {
  // A ucontext_t on the stack that only getcontext filled: uc_stack holds stale bytes. Taken at
  // face value, a huge range holding main's own frames would become a "coroutine stack".
  Fixture f(rt::Mode::kCct);
  f.p.enter(MAIN, 1, kOwnLo + 0xff000);
  f.p.enter(FOO, 2, kOwnLo + 0xfe000);
  // Target deep inside the range, switcher inside it too: not fresh from makecontext.
  // (The target is then found on the thread's own stack, the running one: no switch.)
  f.p.switch_stack(kOwnLo + 0x80000, kOwnLo, 0x7fffffff, kOwnLo + 0xfe000);
  CHECK(f.p.other_stacks() == 0);
  // A fresh context, but the switcher's own frame lies inside its range: refused as well.
  f.p.switch_stack(kOwnLo + 0xfff00, kOwnLo, 0x100000, kOwnLo + 0xfe000);
  CHECK(f.p.other_stacks() == 0);
  CHECK(f.cursor() == Key{{MAIN, 1}, {FOO, 2}});
  // makecontext's: near the top of a range that does not hold the switcher.
  CHECK(f.p.switch_stack(kCoLo + kCoSize - 64, kCoLo, kCoSize, kOwnLo + 0xfe000));
  CHECK(f.p.other_stacks() == 1);
}

TEST_CASE("stacks: a stack made again by makecontext drops the abandoned coroutine's frames", "[stacks]") {
  // A coroutine pool: a generator is abandoned while suspended inside produce, and its stack is
  // handed to a new coroutine (makecontext on the same memory, with the same size or another).
  // The new coroutine's context is rooted where it is first switched into; the old frames, tagged
  // with stack pointers of the old layout, must not be taken for its callers. A context fresh from
  // makecontext starts as a function entered by a call: 8 bytes past a 16-byte boundary, just
  // below the top of its uc_stack (glibc x86-64); the new entry function's frame has the tag the
  // old one had.
  auto fresh_sp = [](uintptr_t size) { return ((kCoLo + size - 8) & ~uintptr_t(15)) - 8; };
  for (rt::Mode mode : {rt::Mode::kCct, rt::Mode::kHcct}) {
    for (uintptr_t new_size : {kCoSize, 2 * kCoSize, kCoSize / 2}) {
      INFO((mode == rt::Mode::kCct ? "cct" : "hcct") << " new size " << new_size);
      Fixture f(mode, 0.01);
      f.p.enter(MAIN, 1, kOwnLo + 0xff000);
      f.p.enter(FOO, 2, kOwnLo + 0xfe000);
      REQUIRE(f.p.switch_stack(fresh_sp(kCoSize), kCoLo, kCoSize, kOwnLo + 0xfdf00));
      f.p.enter(GEN, 0, fresh_sp(kCoSize) + 8);
      REQUIRE(f.p.switch_stack(kOwnLo + 0xfdf00, 0, 0, fresh_sp(kCoSize) - 0x20));  // the generator yields
      // Resumed: a context saved by swapcontext just below the top is not a remade stack (the
      // saved stack pointer is its caller's, 16-byte aligned at the call).
      REQUIRE(f.p.switch_stack(fresh_sp(kCoSize) - 8, kCoLo, kCoSize, kOwnLo + 0xfdf00));
      CHECK(f.cursor() == Key{{MAIN, 1}, {FOO, 2}, {GEN, 0}});
      f.p.enter(PRODUCE, 2, fresh_sp(kCoSize) - 0x40);
      REQUIRE(f.p.switch_stack(kOwnLo + 0xfdf00, 0, 0, fresh_sp(kCoSize) - 0x80));  // yields, never resumed
      f.p.exit(FOO, kOwnLo + 0xfe000);
      f.p.enter(BAR, 3, kOwnLo + 0xfe000);
      REQUIRE(f.p.switch_stack(fresh_sp(new_size), kCoLo, new_size, kOwnLo + 0xfdf00));
      CHECK(f.p.other_stacks() == 1);
      f.p.enter(GEN, 0, fresh_sp(new_size) + 8);
      CHECK(f.cursor() == Key{{MAIN, 1}, {BAR, 3}, {GEN, 0}});
      f.p.enter(CONSUME, 4, fresh_sp(new_size) - 0x40);
      CHECK(f.cursor() == Key{{MAIN, 1}, {BAR, 3}, {GEN, 0}, {CONSUME, 4}});
      f.p.exit(CONSUME, fresh_sp(new_size) - 0x40);
      f.p.exit(GEN, fresh_sp(new_size) + 8);
      // GEN returned through uc_link: unseen, followed at bar's exit.
      f.p.exit(BAR, kOwnLo + 0xfe000);
      CHECK(f.cursor() == Key{{MAIN, 1}});
      CHECK(f.p.other_stacks() == 0);
      CHECK(f.p.unmatched_exits() == 0);
      CHECK(f.count_of({{MAIN, 1}, {FOO, 2}, {GEN, 0}, {PRODUCE, 2}}) == 1);
      CHECK(f.count_of({{MAIN, 1}, {BAR, 3}, {GEN, 0}, {CONSUME, 4}}) == 1);
      CHECK(f.count_of({{MAIN, 1}, {FOO, 2}, {GEN, 0}, {GEN, 0}}) == 0);
    }
  }
}

TEST_CASE("stacks: a running stack made again from another stack drops its frames", "[stacks]") {
  // The runtime still takes the coroutine's stack for the running one (control left it without a
  // swapcontext and no event ran since) when its memory is made into a new context and switched
  // into: the switcher's frame lies outside it. Its old frames are stale for the new coroutine.
  // The switcher's frame tells where control is when it is known; when it is not (a stack never
  // announced, here 0), the running stack's frames go and its base stays.
  auto fresh_sp = ((kCoLo + kCoSize - 8) & ~uintptr_t(15)) - 8;
  for (rt::Mode mode : {rt::Mode::kCct, rt::Mode::kHcct}) for (uintptr_t from_sp : {kOwnLo + 0xfdf00, uintptr_t(0)}) {
    INFO((mode == rt::Mode::kCct ? "cct" : "hcct") << " switcher " << from_sp);
    Fixture f(mode, 0.01);
    f.p.enter(MAIN, 1, kOwnLo + 0xff000);
    f.p.enter(FOO, 2, kOwnLo + 0xfe000);
    REQUIRE(f.p.switch_stack(fresh_sp, kCoLo, kCoSize, kOwnLo + 0xfdf00));
    f.p.enter(GEN, 0, fresh_sp + 8);
    f.p.enter(PRODUCE, 2, fresh_sp - 0x40);
    // produce longjmps back to foo on the thread's stack (unseen); foo makes a new coroutine there.
    REQUIRE(f.p.switch_stack(fresh_sp, kCoLo, kCoSize, from_sp));
    f.p.enter(BAZ, 0, fresh_sp + 8);
    CHECK(f.cursor() == Key{{MAIN, 1}, {FOO, 2}, {BAZ, 0}});
    f.p.exit(BAZ, fresh_sp + 8);
    f.p.exit(FOO, kOwnLo + 0xfe000);
    CHECK(f.cursor() == Key{{MAIN, 1}});
    CHECK(f.p.unmatched_exits() == 0);
  }
}

TEST_CASE("stacks: memory stays flat while a pool remakes abandoned coroutines' stacks", "[stacks]") {
  // hcct with 2 counters: every round abandons a coroutine with its own cold entry function on the
  // pool's stack. An abandoned path is unpinned and pruned when its stack is made again.
  auto fresh_sp = ((kCoLo + kCoSize - 8) & ~uintptr_t(15)) - 8;
  Fixture f(rt::Mode::kHcct, 0.5);
  f.p.enter(MAIN, 1, kOwnLo + 0xff000);
  for (uintptr_t i = 0; i < 1000; ++i) {
    REQUIRE(f.p.switch_stack(fresh_sp, kCoLo, kCoSize, kOwnLo + 0xfdf00));
    f.p.enter(0x10000 + i, 0, fresh_sp + 8);
    CHECK(f.p.depth() == 1);  // on the coroutine's stack, above its base
    f.p.enter(PRODUCE, 2, fresh_sp - 0x40);
    REQUIRE(f.p.switch_stack(kOwnLo + 0xfdf00, 0, 0, fresh_sp - 0x80));
  }
  CHECK(f.p.other_stacks() == 1);
  CHECK(f.p.live_nodes() <= 6);  // two counters, main's path and the suspended coroutine's
  CHECK(f.p.unmatched_exits() == 0);
}
