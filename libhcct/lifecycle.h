// The process's ways out, as the interposers of exits.cc see them (runtime.cc implements them).
#ifndef HCCT_RT_LIFECYCLE_H
#define HCCT_RT_LIFECYCLE_H

#include "common.h"

namespace hcct::rt {

// True while this process may write its profile: profiling, not finished, and not a vfork child
// (which shares the parent's memory and must leave the parent's profile alone).
bool leaving_process_can_dump();
// The whole-process dump, for ways out that skip exit()'s destructors (_exit, _Exit).
// Async-signal-safe in the sense the runtime needs: no malloc, no locks the program holds.
void finish_before_leaving();
// daemon(): the parent leaves with _exit right after fork, inside libc; the fork-parent handler
// writes the profile when this thread marked itself. Unmarking resumes profiling in a parent whose
// fork failed.
void mark_leaving_after_fork(bool on);

// exec: every thread's profile as it stands is written first; a failed exec resumes profiling.
struct ExecSnapshot {
  void *threads;
  size_t count;
  size_t bytes;
};
bool snapshot_before_exec(ExecSnapshot *snap);  // false: nothing to resume
void resume_after_exec(ExecSnapshot *snap);

// Finds the definitions the interposers of exits.cc pass calls on to (the runtime's constructor).
void resolve_ways_out();

// With option follow=1: the "LD_PRELOAD=…" and "HCCT_OPTIONS=…" entries this process started
// with, to put back into a child's explicit environment; null when not following or not set.
const char *preload_to_follow();
const char *options_to_follow();

}  // namespace hcct::rt

#endif
