// A C++ program with virtual calls, templates, lambdas, exceptions and std::thread whose
// calling-context counts are known in closed form.
//
//   shapes [T [I]]    (defaults: T = 4 threads, I = 1000000 iterations per thread)
//
// Per thread t, with I iterations i = 0 .. I-1 (contexts by routine, below the thread's lambda):
//   worker                                 1
//   worker > checked_area                  I
//   worker > checked_area > Square::area   #{i odd,  i % 7 != 0}
//   worker > checked_area > Circle::area   #{i even, i % 7 != 0}
//   worker > scaled<double>                #{i % 7 != 0}
//   worker > fail                          #{i % 7 == 0}   (throws; caught in worker)
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

struct Shape {
  virtual ~Shape() = default;
  virtual double area() const = 0;
};

struct Square : Shape {
  explicit Square(double side) : side(side) {}
  __attribute__((noinline)) double area() const override { return side * side; }
  double side;
};

struct Circle : Shape {
  explicit Circle(double radius) : radius(radius) {}
  __attribute__((noinline)) double area() const override { return 3.14159265358979 * radius * radius; }
  double radius;
};

template <typename T>
__attribute__((noinline)) T scaled(T value, int factor) {
  return value * factor;
}

__attribute__((noinline)) void fail(int i) { throw std::runtime_error("bad shape " + std::to_string(i)); }

__attribute__((noinline)) double checked_area(const Shape &shape, int i) {
  if (i % 7 == 0) fail(i);
  return shape.area();
}

__attribute__((noinline)) double worker(int id, int iterations) {
  Square square(1.0 + id);
  Circle circle(0.5 + id);
  double total = 0;
  for (int i = 0; i < iterations; ++i) {
    const Shape &shape = i % 2 ? static_cast<const Shape &>(square) : circle;
    try {
      total += scaled<double>(checked_area(shape, i), 2);
    } catch (const std::runtime_error &) {
      total -= 1;
    }
  }
  return total;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  int iterations = argc > 2 ? std::atoi(argv[2]) : 1000000;
  std::vector<double> results(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&results, t, iterations] { results[t] = worker(t, iterations); });
  for (auto &th : pool) th.join();
  double sum = 0;
  for (double r : results) sum += r;
  std::printf("threads %d, iterations %d, checksum %.3f\n", threads, iterations, sum);
  return 0;
}
