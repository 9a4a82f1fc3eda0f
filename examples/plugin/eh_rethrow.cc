// Exceptions thrown and rethrown through several frames, with known calling-context counts of its
// noinline functions in every build (before or after inlining, gcc or clang).
//
//   eh_rethrow [R]        (default R = 300)
//
// Round i (0 <= i < R) calls top(i) from main, then after(i). thrower(i) throws Error when
// i % 3 != 0 (T = the number of such i). The exception leaves thrower, then pass_through (whose
// Guard is destroyed by the unwinder), is caught in rethrower (which calls note and rethrows with
// `throw;`), passes translator's try block and is caught there, which calls wrap and throws a
// different exception (Wrapped), caught in top, which calls recover.
//
// Contexts of the noinline functions (key = routine) and their counts:
//   main                                                    1
//   main > top                                              R
//   main > top > translator                                 R
//   main > top > translator > rethrower                     R
//   main > top > translator > rethrower > pass_through      R
//   ... > pass_through > Guard::Guard                       R
//   ... > pass_through > thrower                            R
//   ... > pass_through > Guard::~Guard                      R   (T of them during unwinding)
//   main > top > translator > rethrower > note              T
//   main > top > translator > wrap                          T
//   main > top > recover                                    T
//   main > after                                            R
// and nothing else below main among these functions.
#include <cstdio>
#include <cstdlib>

#define NOINLINE __attribute__((noinline))

struct Error {
  int code;
};
struct Wrapped {
  int code;
};

volatile int sink;

struct Guard {
  NOINLINE Guard() { sink = sink + 1; }
  NOINLINE ~Guard() { sink = sink - 1; }
};

NOINLINE void thrower(int i) {
  if (i % 3 != 0)
    throw Error{i};
  sink = sink + i;
}

NOINLINE void pass_through(int i) {
  Guard guard;
  thrower(i);
  __asm__ volatile("" ::: "memory");  // keeps the call a call, not a tail call
}

NOINLINE void note(int code) { sink = sink + code; }

NOINLINE void rethrower(int i) {
  try {
    pass_through(i);
  } catch (Error &e) {
    note(e.code);
    throw;
  }
}

NOINLINE int wrap(int code) { return code * 2 + 1; }

NOINLINE void translator(int i) {
  try {
    rethrower(i);
  } catch (const Error &e) {
    throw Wrapped{wrap(e.code)};
  }
}

NOINLINE int recover(int code) { return code % 7; }

NOINLINE int top(int i) {
  try {
    translator(i);
    return 0;
  } catch (const Wrapped &w) {
    return recover(w.code);
  }
}

NOINLINE void after(int i) { sink = sink + i; }

int main(int argc, char **argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 300;
  long total = 0;
  for (int i = 0; i < rounds; ++i) {
    total += top(i);
    after(i);
  }
  std::printf("%ld\n", total);
  return 0;
}
