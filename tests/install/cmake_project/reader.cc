// Reads a profile with the installed analysis library (hcct::analysis): the calls of every thread.
#include <cstdint>
#include <iostream>

#include <hcct/analysis/reader.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: reader DIR\n";
    return 2;
  }
  const hcct::analysis::ProfileSet set = hcct::analysis::read_profiles(argv[1]);
  uint64_t calls = 0;
  for (const auto &process : set.processes)
    for (const auto &thread : process.threads) calls += thread.meta.calls;
  std::cout << "calls " << calls << "\n";
  return 0;
}
