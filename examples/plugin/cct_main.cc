// C++ end-to-end example for the GCC plugin: exceptions, virtual calls, templates, lambdas,
// recursion and a shared library, with a calling-context tree that is known exactly.
//
// Contexts (routine keys, counts per run), with n = 4:
//   main > run_shapes                                   1
//   main > run_shapes > Circle::area                    6   (virtual, 6 circles)
//   main > run_shapes > Square::area                    3   (virtual, 3 squares)
//   main > run_shapes > Square::area > Square::side     6   (twice per area)
//   main > sum_twice<int>                               1
//   main > sum_twice<int> > twice<int>                  5
//   main > sum_twice<double>                            1
//   main > sum_twice<double> > twice<double>            5
//   main > for_n<lambda> > main::lambda                 7   (lambda called through a template)
//   main > is_even > is_odd > is_even > ...                 mutual recursion, is_even(9): 10 calls
//   main > descend                                      4   (one per round)
//   main > descend > descend > descend > descend        4 each level (recursion to depth 0)
//   ... each descend level > Guard::~Guard              4   (run by the unwinder)
//   main > descend x4 > fail                            4   (throws Oops)
//   main > lib_sum > lib_step                          50   (shared library)
//   main > lib_each > scaled                           12   (callback from the library)
// After each throw the exit probes of every unwound frame run, so every round enters the same
// contexts again instead of nesting under the previous round's unwound frames.
#include <cstdio>

#include "cct_lib.h"

struct Oops {
  int code;
};

struct Guard {
  int *counter;
  ~Guard();
};
Guard::~Guard() { ++*counter; }

struct Shape {
  virtual ~Shape() = default;
  virtual double area() const = 0;
};
struct Circle : Shape {
  double r;
  explicit Circle(double r) : r(r) {}
  double area() const override { return 3.0 * r * r; }
};
struct Square : Shape {
  double s;
  explicit Square(double s) : s(s) {}
  double side() const { return s; }
  double area() const override { return side() * side(); }
};

__attribute__((noinline)) double run_shapes(Shape *const *shapes, int n) {
  double a = 0;
  for (int i = 0; i < n; ++i)
    a += shapes[i]->area();
  return a;
}

template <typename T> T twice(T x) { return x + x; }
template <typename T> T sum_twice(int n) {
  T s = 0;
  for (int i = 0; i < n; ++i)
    s += twice(T(i));
  return s;
}

template <typename F> int for_n(int n, F f) {
  int s = 0;
  for (int i = 0; i < n; ++i)
    s += f(i);
  return s;
}

bool is_odd(unsigned n);
bool is_even(unsigned n) { return n == 0 ? true : is_odd(n - 1); }
bool is_odd(unsigned n) { return n == 0 ? false : is_even(n - 1); }

[[noreturn]] void fail(int code) { throw Oops{code}; }

int descend(int depth, int *destroyed) {
  Guard g{destroyed};
  if (depth <= 0) {
    if (depth == 0)  // (a path that returns keeps gcc's -Winfinite-recursion quiet)
      fail(42);
    return 0;
  }
  return descend(depth - 1, destroyed) + 1;
}

static int scaled(int x) { return 3 * x; }

int main() {
  volatile int n = 4;  // keeps the counts independent of constant folding
  Circle c1(1), c2(2), c3(3), c4(4), c5(5), c6(6);
  Square s1(1), s2(2), s3(3);
  Shape *shapes[] = {&c1, &s1, &c2, &c3, &s2, &c4, &c5, &s3, &c6};
  double a = run_shapes(shapes, 9);

  long t = sum_twice<int>(n + 1) + long(sum_twice<double>(n + 1));

  int bias = n;
  t += for_n(n + 3, [bias](int i) { return i * bias; });

  t += is_even(unsigned(n) + 5);

  int destroyed = 0;
  for (int round = 0; round < n; ++round) {
    try {
      t += descend(3, &destroyed);
    } catch (const Oops &e) {
      t += e.code;
    }
  }

  t += lib_sum(n * 12 + 2);
  t += lib_each(scaled, n * 3);
  std::printf("%.1f %ld %d\n", a, t, destroyed);
  return 0;
}
