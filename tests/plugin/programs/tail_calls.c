// Functions whose paths out end in tail calls, in the shapes gcc's tail-call pass ("tailc") leaves
// them after inlining: a return value merged by a PHI from branches of which some end in tail calls
// and some do not, void tail calls in several branches, mutual tail recursion, a tail call to a C
// library function that is not instrumented (and one that calls back into the program), a tail call
// through a function pointer, a tail call that only exists once an inline helper is inlined, and
// an exit by __builtin_return.
// tests/plugin/plugin_tailcall_test.cc builds it with the plugin (stage=early and stage=late) at
// every -O level, with and without sibling calls, and checks the recorded tree against the
// analytic one it derives from the same logic.
//
// The test compiles it with -DTAIL_ROUNDS=N -DTAIL_DEPTH=N (the loop's rounds and is_even's
// argument). It prints a checksum that does not depend on the build.
#include <stdio.h>
#include <stdlib.h>

// noipa: no inlining, cloning, splitting or interprocedural shortcuts, so that every call below is
// one real call and the names in the tree are the source's.
#define NOIPA __attribute__((noipa))

volatile long sink;

NOIPA int work(int x) {
  sink += x;
  return x + 1;
}

NOIPA int twist(int x) {
  sink ^= x;
  return x * 3;
}

NOIPA void note(int x) { sink += x; }

NOIPA void mark(int x) { sink -= x; }

// A return value merged by a PHI: two branches end in tail calls, the third does not.
NOIPA int merged(int x) {
  int r;
  if (x % 3 == 0)
    r = work(x);
  else if (x % 3 == 1)
    r = twist(x);
  else
    r = x + (int)sink;
  return r;
}

// Void tail calls in two branches; the third falls through to the same return.
NOIPA void dispatch(int x) {
  if (x & 1)
    note(x);
  else if (x & 2)
    mark(x);
  else
    sink += 2;
}

// Mutual tail recursion: is_even(n) > is_odd(n - 1) > ... n + 1 frames when not sibling calls.
NOIPA int is_odd(unsigned n);
NOIPA int is_even(unsigned n) {
  if (n == 0)
    return 1;
  return is_odd(n - 1);
}
NOIPA int is_odd(unsigned n) {
  if (n == 0)
    return 0;
  return is_even(n - 1);
}

// A tail call to a C library function (no probes) on one path.
NOIPA long measure(const char *digits, int x) {
  if (x & 1)
    return strtol(digits, NULL, 10);
  return x;
}

// A void tail call to a C library function that calls back into the program: sorting two elements
// compares them exactly once.
NOIPA int compare(const void *a, const void *b) {
  return *(const int *)a - *(const int *)b;
}
NOIPA void sort_pair(int *pair) {
  if (pair[0] == pair[1])
    return;
  qsort(pair, 2, sizeof pair[0], compare);
}

// A tail call through a function pointer the compiler cannot resolve.
typedef int (*op_fn)(int);
op_fn volatile ops[2] = {work, twist};
NOIPA int indirect(int x) {
  if (x < 0)
    return 0;
  return ops[x & 1](x);
}

// After inlining pick into outer: a tail call to work on one path, twist(x) + 1 on the other, and
// the guard's constant on a third, all merged at one return.
static inline __attribute__((always_inline)) int pick(int x) {
  if (x & 4)
    return work(x);
  return twist(x) + 1;
}
NOIPA int outer(int x) {
  if (x > 1000000)
    return -1;
  return pick(x);
}

// Leaves by __builtin_return, not by a return statement: the untyped forwarding of its arguments.
NOIPA int doubled(int x) { return 2 * x; }
NOIPA int forward(int x) {
  (void)x;
  void *args = __builtin_apply_args();
  __builtin_return(__builtin_apply((void (*)())doubled, args, 64));
}

int main(void) {
  long sum = 0;
  for (int i = 0; i < TAIL_ROUNDS; ++i) {
    sum += merged(i);
    dispatch(i);
    sum += indirect(i);
    sum += measure("12", i);
    int pair[2] = {i % 5, 2};
    sort_pair(pair);
    sum += pair[0];
    sum += outer(i);
    sum += forward(i);
  }
  sum += is_even(TAIL_DEPTH);
  printf("%ld %ld\n", sum, (long)sink);
  return 0;
}
