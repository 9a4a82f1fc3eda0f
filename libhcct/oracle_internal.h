// What the online hotness oracle's three parts give each other: the loop registry (oracle.cc), where
// thresholds come from (oracle_input.cc) and the OSR report (osr_report.cc).
#ifndef HCCT_RT_ORACLE_INTERNAL_H
#define HCCT_RT_ORACLE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "hcct/oracle.h"

namespace hcct::rt::oracle {

// The registered loops, newest first (oracle.cc; the list only grows, its links never change).
hcct_oracle_loop *registered_loops();

// ---- Thresholds (oracle_input.cc). Not thread-safe: the registry calls these under its lock.

inline constexpr size_t kSpecBytes = 8192;  // the longest HCCT_ORACLE / hcct_oracle_configure spec + 1

// Reads HCCT_ORACLE_GUIDE and HCCT_ORACLE, once; a value that cannot be used is ignored with one
// line on stderr.
void load_environment();

// Checks a "key=T,key=T" spec: non-empty keys without ',' or '=', decimal thresholds that fit in 64
// bits, no key given two different thresholds. Returns the number of entries, or -1 with the
// problem and its byte offset.
int validate_spec(const char *spec, const char **why, size_t *at);

// Replaces HCCT_ORACLE's spec with `spec` (validated, `len` < kSpecBytes).
void set_spec(const char *spec, size_t len);

// The threshold of `key`: HCCT_ORACLE's (or the configured spec's), else the thresholds file's,
// else `fallback`. `warn`: say when the file gives the key several thresholds.
uint64_t threshold_for(const char *key, uint64_t fallback, bool warn);

}  // namespace hcct::rt::oracle

#endif
