// An exception thrown through 10 instrumented frames, ROUNDS times (default 100), each caught in
// main, which then calls after(). Expected contexts: main > f1 > ... > f10 (ROUNDS each) and
// main > after (ROUNDS); nothing else below main.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

__attribute__((noinline)) void f10(int i) { throw std::runtime_error(std::to_string(i)); }
#define LEVEL(n, next) \
  __attribute__((noinline)) void f##n(int i) { next(i); __asm__ volatile("" ::: "memory"); }
LEVEL(9, f10)
LEVEL(8, f9)
LEVEL(7, f8)
LEVEL(6, f7)
LEVEL(5, f6)
LEVEL(4, f5)
LEVEL(3, f4)
LEVEL(2, f3)
LEVEL(1, f2)

volatile int sink;
__attribute__((noinline)) void after() { sink = sink + 1; }

int main(int argc, char **argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
  int caught = 0;
  for (int i = 0; i < rounds; ++i) {
    try {
      f1(i);
    } catch (const std::runtime_error &) {
      ++caught;
    }
    after();
  }
  std::printf("caught %d\n", caught);
  return 0;
}
