// Merging calling-context trees: the threads of one process (`hcct report --merge-threads`,
// `hcct merge --per-process`), or threads of several processes and runs (`hcct merge`).
//
// Nodes are matched by their path of (routine, call_site) pairs from the root; matched nodes' counts
// add. Semantics by mode (all threads must share mode and key):
//  - cct: exact. Every merged count is the exact number of entries into that context over all
//    threads, and calls = Σ calls.
//  - hcct: each thread's tree is a Space-Saving summary whose estimates overcount by at most that
//    thread's min_count, and whose unmonitored contexts have true counts of at most min_count. A
//    merged node is monitored if it was monitored in some thread; its estimate is the sum of the
//    monitored estimates, which is within Σ min_count of the true count in both directions (the
//    error bounds add). So min_count, calls and counters become sums, epsilon the largest ε.
//  - empty: calls add, the tree is the root.
// Flags: monitored and on-path are OR-ed (on-path then means "on some thread's calling path").
// META: pid/ppid/exe/cmdline/runtime/key/mode from the first thread; thread_seq and tid of the
// first thread; status live-at-exit if any thread was; dropped, tree_bytes and nodes_peak add;
// max_depth is the maximum; start_ns the minimum, end_ns the maximum; extra key
// "merged_threads" lists the merged thread_seq values, comma-separated. Modules are the union
// (identical entries once), in first-seen order.
//
// Addresses are normalised before nodes are matched, so that trees recorded at other load addresses
// (ASLR, other processes, other runs) line up: a module (same path, build-id and size) seen again
// at another address is moved onto its first occurrence, i.e. every address becomes (module,
// offset) expressed in the first occurrence's address space; a different module whose range would
// collide with one already placed is moved above all placed modules (by a multiple of 2 MiB).
// Addresses in no module are kept as they are. The merged MODS section describes the merged
// address space, so the result symbolizes like any profile.
//
// Across processes (merge_profiles) META also takes pid/ppid/exe/cmdline from the first input,
// thread_seq 0, and instead of "merged_threads" the key "merged_from" lists every merged input as
// pid.thread_seq (inputs that are merges contribute their own lists).
#pragma once

#include <span>

#include "hcct/analysis/profile.h"

namespace hcct::analysis {

// Throws std::invalid_argument for an empty span or threads that differ in pid, mode or key.
ThreadProfile merge_threads(std::span<const ThreadProfile> threads);
// The same, for threads held elsewhere (no copies of large trees).
ThreadProfile merge_threads(std::span<const ThreadProfile *const> threads);

// Threads of any processes or runs. Throws std::invalid_argument for an empty span or inputs that
// differ in mode or key.
ThreadProfile merge_profiles(std::span<const ThreadProfile *const> threads);

// A sampled profile (static bursting: META sampled_fraction f) as whole-run estimates: every
// count, calls, lost and min_count multiplied by 1/f and rounded as merges scale them, the
// sampled_fraction key dropped and burst_scaled = 1 added (docs/BURSTING.md, "The estimator").
// Other profiles are returned unchanged. Throws std::invalid_argument if a count overflows.
ThreadProfile scale_sampled(const ThreadProfile &profile);

}  // namespace hcct::analysis
