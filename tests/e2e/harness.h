// Running real programs under the runtime and reading back what they wrote.
#ifndef HCCT_TESTS_E2E_HARNESS_H
#define HCCT_TESTS_E2E_HARNESS_H

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hcct/analysis/profile.h"
#include "hcct/analysis/reader.h"
#include "hcct/analysis/symbolizer.h"

namespace e2e {

struct Result {
  int status = -1;  // exit status, or 128 + signal
  std::string out, err;
  long max_rss_kb = 0;  // the program's peak resident set (wait4's ru_maxrss)
};

// Runs argv with extra environment entries ("K=V"); captures stdout and stderr.
Result run(const std::vector<std::string> &argv, const std::vector<std::string> &env = {});

// Runs argv under LD_PRELOAD=libhcct.so with HCCT_OPTIONS=`options`:out=<fresh dir>.
struct Profiled {
  Result result;
  std::filesystem::path dir;
};
Profiled run_profiled(const std::vector<std::string> &argv, const std::string &options);

std::filesystem::path fresh_dir(const std::string &name);

// A context as the names of its functions from the thread's root, e.g. {"main", "fib", "fib"}.
using NamePath = std::vector<std::string>;

// Counts of every countable context of `profile`, by function names. Names are the symbolizer's
// demangled names without parameter lists ("Square::area", "scaled<double>").
std::map<NamePath, uint64_t> named_counts(const hcct::analysis::ThreadProfile &profile);

// The same, keeping only frames whose function is in `keep` (the others are spliced out), with
// counts of merged contexts added: the projection of the tree on the functions a test knows.
std::map<NamePath, uint64_t> projected_counts(const hcct::analysis::ThreadProfile &profile,
                                              const std::set<std::string> &keep);

// Counts of every countable context of `profile` by its path as text with repeated frames
// run-length encoded: "main>rec*4000>leaf" ("main>rec>leaf" for a run of one). For deep recursion,
// where named_counts holds one string per frame of every context (quadratic in the depth) and
// comparing such paths dominated a test's time. The text is unambiguous only for names without '>'
// and '*' (C functions, not templates or operators).
std::map<std::string, uint64_t> run_length_counts(const hcct::analysis::ThreadProfile &profile);

// One frame run of such a path: `name`, or `name*run` for run > 1.
std::string frame_run(const std::string &name, uint64_t run);

std::string short_name(const std::string &demangled);

// Self time samples of every context of a timed profile by function names (the root: {}).
std::map<NamePath, uint64_t> named_samples(const hcct::analysis::ThreadProfile &profile);

}  // namespace e2e

#endif
