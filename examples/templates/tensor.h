// A small header-only expression-template library: the kind of C++ whose many tiny inline
// functions (accessors, operators, functors, compile-time unrolled loops) dominate a profile taken
// before inlining. Everything here is inline; nothing here is a real call in an optimised build.
#pragma once
#include <cstddef>
#include <stdexcept>

namespace tensor {

template <typename T, std::size_t N>
struct Vec {
  T data[N];
  static constexpr std::size_t size() { return N; }
  T &operator[](std::size_t i) { return data[i]; }
  const T &operator[](std::size_t i) const { return data[i]; }
  template <typename E>
  Vec &operator=(const E &e) {
    for (std::size_t i = 0; i < N; ++i) data[i] = e[i];
    return *this;
  }
};

struct Add {
  template <typename T>
  static T apply(T a, T b) { return a + b; }
};
struct Mul {
  template <typename T>
  static T apply(T a, T b) { return a * b; }
};
struct Sub {
  template <typename T>
  static T apply(T a, T b) { return a - b; }
};

template <typename L, typename R, typename Op>
struct Bin {
  const L &l;
  const R &r;
  auto operator[](std::size_t i) const { return Op::apply(l[i], r[i]); }
};

template <typename T>
struct Scalar {
  T v;
  T operator[](std::size_t) const { return v; }
};

template <typename L, typename R>
Bin<L, R, Add> operator+(const L &l, const R &r) { return {l, r}; }
template <typename L, typename R>
Bin<L, R, Mul> operator*(const L &l, const R &r) { return {l, r}; }
template <typename L, typename R>
Bin<L, R, Sub> operator-(const L &l, const R &r) { return {l, r}; }

// Compile-time unrolled reduction: Unroll<N>::dot recurses through N template instances.
template <std::size_t I>
struct Unroll {
  template <typename A, typename B>
  static double dot(const A &a, const B &b) { return a[I - 1] * b[I - 1] + Unroll<I - 1>::dot(a, b); }
};
template <>
struct Unroll<0> {
  template <typename A, typename B>
  static double dot(const A &, const B &) { return 0.0; }
};

template <typename T, std::size_t N>
T dot(const Vec<T, N> &a, const Vec<T, N> &b) { return Unroll<N>::dot(a, b); }

template <typename T, std::size_t N>
T norm2(const Vec<T, N> &a) { return dot(a, a); }

// A policy-based integrator: the step rule is a template argument.
template <typename T, std::size_t N, typename Rule>
struct Integrator {
  Vec<T, N> x, v;
  void advance(const Vec<T, N> &force, T dt) {
    Scalar<T> h{dt};
    Vec<T, N> a;
    a = force * h;
    Rule::update(x, v, a, h);
  }
};

struct Euler {
  template <typename V, typename S>
  static void update(V &x, V &v, const V &a, const S &h) {
    v = v + a;
    x = x + v * h;
  }
};

struct Diverged : std::runtime_error {
  explicit Diverged(double at) : std::runtime_error("diverged"), norm(at) {}
  double norm;
};

}  // namespace tensor
