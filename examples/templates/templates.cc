// A template-heavy C++ program (header-only expression templates in tensor.h, small inlinable
// functions, exceptions) with known call counts of its non-inlined functions.
//
//   templates [B [S]]     (defaults: B = 200 batches, S = 2000 steps per batch)
//
// Contexts of the noinline functions (key = routine) and their counts:
//   main                                       1
//   main > simulate                            B
//   main > simulate > step                     B*S
//   main > simulate > check                    B*S      (throws Diverged every K-th call overall)
//   main > simulate > recover                  floor(B*S / K)
//   main > report                              B
// Everything in tensor.h is inline: before inlining each of its functions is a call with probes,
// after inlining none is.
#include <cstdio>
#include <cstdlib>

#include "tensor.h"

#define NOINLINE __attribute__((noinline))

using V = tensor::Vec<double, 64>;
using Sim = tensor::Integrator<double, 64, tensor::Euler>;

constexpr long kThrowEvery = 997;
long checks = 0;

// One step is kSubsteps integrator sub-steps: about 0.15 us of inlined template code per call at
// -O2 on the benchmark machine (docs/BENCHMARKS.md gives the ratio of work to calls).
constexpr int kSubsteps = 4;

NOINLINE void step(Sim &sim, const V &spring) {
  for (int k = 0; k < kSubsteps; ++k) {
    V force;
    force = spring * sim.x;  // element-wise restoring force
    V damped;
    tensor::Scalar<double> c{-0.01};
    damped = force + sim.v * c;
    sim.advance(damped, 0.00025);
  }
}

NOINLINE void check(const Sim &sim) {
  if (++checks % kThrowEvery == 0)
    throw tensor::Diverged(tensor::norm2(sim.x));
}

NOINLINE double recover(Sim &sim, double norm) {
  tensor::Scalar<double> half{0.5};
  sim.v = sim.v * half;
  return norm;
}

NOINLINE double simulate(int batch, int steps) {
  Sim sim;
  V spring;
  for (std::size_t i = 0; i < V::size(); ++i) {
    sim.x[i] = 1.0 + 0.01 * double(i + batch);
    sim.v[i] = 0.0;
    spring[i] = -1.0 - 0.001 * double(i);
  }
  double recovered = 0;
  for (int s = 0; s < steps; ++s) {
    step(sim, spring);
    try {
      check(sim);
    } catch (const tensor::Diverged &d) {
      recovered += recover(sim, d.norm);
    }
  }
  return tensor::norm2(sim.x) + tensor::dot(sim.x, sim.v) + recovered;
}

NOINLINE void report(int batch, double value, double *total) { *total += value * (batch % 2 ? 1 : -1); }

int main(int argc, char **argv) {
  int batches = argc > 1 ? std::atoi(argv[1]) : 200;
  int steps = argc > 2 ? std::atoi(argv[2]) : 2000;
  double total = 0;
  for (int b = 0; b < batches; ++b) report(b, simulate(b, steps), &total);
  std::printf("%.6f %ld\n", total, checks);
  return 0;
}
