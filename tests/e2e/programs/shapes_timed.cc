// examples/shapes.cc with each thread's own CPU clock read around two phases (issue 17's independent
// oracle): the iterations that throw (i % 7 == 0: checked_area > fail, and the exception's way back
// to the handler) and the others (virtual area calls and scaled<double>), each in a function of
// its own so that it is one calling context. Prints, per thread t,
//   cpu t<t> plain_phase <seconds>
//   cpu t<t> throwing_phase <seconds>
//   cpu t<t> total <seconds>
//   shapes_timed [T [I]]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

__attribute__((no_instrument_function)) static double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

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

__attribute__((noinline)) double run_iterations(const Shape &square, const Shape &circle, int iterations,
                                                bool throwing) {
  double total = 0;
  for (int i = 0; i < iterations; ++i) {
    if ((i % 7 == 0) != throwing) continue;
    const Shape &shape = i % 2 ? square : circle;
    try {
      total += scaled<double>(checked_area(shape, i), 2);
    } catch (const std::runtime_error &) {
      total -= 1;
    }
  }
  return total;
}

__attribute__((noinline)) double plain_phase(const Shape &square, const Shape &circle, int iterations) {
  return run_iterations(square, circle, iterations, false);
}

__attribute__((noinline)) double throwing_phase(const Shape &square, const Shape &circle, int iterations) {
  return run_iterations(square, circle, iterations, true);
}

__attribute__((noinline)) double worker(int id, int iterations) {
  Square square(1.0 + id);
  Circle circle(0.5 + id);
  double t0 = cpu_now();
  double total = plain_phase(square, circle, iterations);
  double t1 = cpu_now();
  total += throwing_phase(square, circle, iterations);
  double t2 = cpu_now();
  std::printf("cpu t%d plain_phase %.6f\ncpu t%d throwing_phase %.6f\n", id, t1 - t0, id, t2 - t1);
  return total;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  int iterations = argc > 2 ? std::atoi(argv[2]) : 1000000;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<double> results(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&results, t, iterations] {
      results[t] = worker(t, iterations);
      std::printf("cpu t%d total %.6f\n", t, cpu_now());
    });
  for (auto &th : pool) th.join();
  double sum = 0;
  for (double r : results) sum += r;
  std::printf("threads %d, iterations %d, checksum %.3f\n", threads, iterations, sum);
  return 0;
}
