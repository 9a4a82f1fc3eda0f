// Writes one thread's profile file (docs/FORMAT.md), atomically: a temporary file renamed into place.
#ifndef HCCT_RT_DUMP_H
#define HCCT_RT_DUMP_H

#include <errno.h>

#include "profile.h"

namespace hcct::rt {

// A growable byte buffer on mmap'd memory (never the program's malloc). One that spills to a file
// (spill_to) writes out what it holds whenever it reaches kSpillBytes, so that a profile file costs
// that much memory while it is written, not its size (a large tree's file is megabytes: the peak
// RSS of a profiled run is reached while it is written).
class ByteBuffer {
 public:
  static constexpr size_t kSpillBytes = 64 * 1024;
  ~ByteBuffer();
  bool append(const void *data, size_t n);
  bool append_varint(uint64_t v);
  bool append_u8(uint8_t v) { return append(&v, 1); }
  bool append_u16(uint16_t v) { return append(&v, 2); }
  bool append_u32(uint32_t v) { return append(&v, 4); }
  bool append_u64(uint64_t v) { return append(&v, 8); }
  // META helpers: `key NUL value NUL`.
  bool append_pair(const char *key, const char *value);
  bool append_pair(const char *key, uint64_t value);
  bool append_pair_double(const char *key, double value);
  // Overwrites `n` bytes at `offset` (counted from the first byte appended), in memory or in the
  // file if they were spilled already.
  bool patch(size_t offset, const void *data, size_t n);
  // The bytes held in memory: all of them, for a buffer that does not spill.
  unsigned char *data() { return data_; }
  size_t size() const { return spilled_ + size_; }
  size_t capacity() const { return capacity_; }
  bool ok() const { return ok_; }
  // From now on byte i goes to file offset base + i of `fd`.
  void spill_to(int fd, size_t base) {
    fd_ = fd;
    base_ = base;
  }
  // Writes out what is held; false (error() says why) if the file refused it.
  bool flush();
  int error() const { return error_; }

 private:
  unsigned char *data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  size_t spilled_ = 0;  // bytes already in the file
  size_t base_ = 0;
  int fd_ = -1;
  int error_ = 0;
  bool ok_ = true;
};

// Assembles sections and writes the file. Other components (kpath) add their own sections.
// True if <dir>/<pid>.<seq>.hcct exists (the name commit writes).
bool profile_file_exists(const char *dir, int pid, uint32_t seq);

class DumpFile {
 public:
  ~DumpFile();
  // Creates the dot-named temporary of <dir>/<pid>.<seq>.hcct, into which the sections stream.
  // Returns 0 or an errno value; nothing is written after a failure.
  int open(const char *dir, int pid, uint32_t seq);
  // Starts a section; its length is patched by end_section.
  void begin_section(uint32_t tag);
  void end_section();
  ByteBuffer &body() { return payload_; }
  // Writes the header and renames the temporary into place. Returns 0 or an errno value (the
  // temporary is removed on failure, or when the file is dropped without a commit).
  int commit();
  // The errno value to report when the sections could not be written.
  int failure() const { return payload_.error() ? payload_.error() : ENOMEM; }

 private:
  ByteBuffer payload_;
  size_t section_start_ = 0;
  uint32_t sections_ = 0;
  int fd_ = -1;
  char final_path_[kMaxPath + 64] = {};
  char tmp_path_[kMaxPath + 96] = {};
};

struct ThreadMeta {
  int pid;
  int ppid;
  int tid;
  uint32_t seq;
  bool live_at_exit;
  uint64_t dropped;
  uint64_t start_ns;
  bool interrupted;  // written from a signal handler that interrupted one of the thread's events
  // Retired ranges the thread's tree was moved off (ThreadState::retired_seen): the module map
  // lists those modules at their retired addresses, any retired since at the addresses the tree
  // still holds.
  uint32_t retired_seen;
  // Time (docs/RUNTIME.md, "Time"), for a profile that samples it: the period and the samples no
  // context was charged with (besides those that found memory exhausted, which the profile knows).
  uint64_t sample_period_ns = 0;
  const char *time_clock = "cpu";  // META `time`: the clock sampled, "cpu" or "wall"
  uint64_t samples_lost = 0;
};

// Static bursting's META keys (docs/FORMAT.md, docs/BURSTING.md).
struct BurstMeta {
  const char *kind = "timer";  // timer or manual
  const char *sync = "auto";
  uint64_t interval_ns = 0;
  uint64_t length_ns = 0;
  uint64_t bursts = 0;         // bursts the thread took part in
  uint64_t events = 0;         // enter events of the thread, profiled or not (if events_known)
  bool events_known = false;   // every event reached the runtime
  double time_fraction = 0;    // fraction of wall time in bursts
  const char *clock = "time";  // events (each thread's own schedule) or time (docs/BURSTING.md)
  uint64_t unwind_frames = 0;         // machine frames unwound at burst starts
  uint64_t unwind_frames_reused = 0;  // frames taken from the thread's previous walk instead
  uint64_t unwind_frames_by_rules = 0;  // of unwind_frames, those stepped with the rule table
};

// Appends the META, MODS and CCT sections for `profile` (`burst`: the sampled profile of a run with
// bursting, else null).
bool write_profile_sections(DumpFile &file, const ThreadProfile &profile, const ThreadMeta &meta,
                            const BurstMeta *burst = nullptr);

// Remembers the module map before a dlclose so unloaded libraries still symbolize.
void remember_modules_before_unload();

// Code unloaded by dlclose is retired: its addresses, in the trees and in the module map, move to a
// range of their own above user space (`address | tag`), so that code loaded later at the same
// addresses is a different routine, symbolized against its own module (docs/RUNTIME.md, "Reused
// addresses"). The list only grows; entries never move.
struct RetiredRange {
  uintptr_t lo, hi;  // the module's addresses while it was loaded
  uintptr_t tag;     // ORed into every address in [lo, hi)
};
// After a dlclose returned: retires the modules remembered before it that are gone now. True if it
// retired any (the caller then makes every thread catch up).
bool retire_unloaded_modules();
// True if a module retired as the `since`-th range or later held `address`: the module instance
// that was loaded there when retired_count() was `since` has been unloaded since.
bool retired_since(uintptr_t address, uint32_t since);
// How many ranges are retired (acquire: their entries are complete), and the i-th.
extern uint32_t g_retired_count __attribute__((visibility("hidden")));
inline uint32_t retired_count() { return __atomic_load_n(&g_retired_count, __ATOMIC_ACQUIRE); }
const RetiredRange &retired_range(uint32_t i);
// The lock of that list, held across fork so that a child never inherits it held.
void lock_module_list();
void unlock_module_list();

// Remembers the command line at start-up (the META `cmdline` of every later dump).
void remember_command();

// The names the runtime gives files in the output directory: `<pid>.<seq>.hcct`, and the
// temporary `.<pid>.<seq>.hcct.<tid>.tmp` each writer renames into place.
struct DumpName {
  uint64_t pid;
  uint64_t seq;
};
bool parse_profile_name(const char *name, DumpName *out);
bool parse_temporary_name(const char *name, DumpName *out);

uint64_t wall_clock_ns();

}  // namespace hcct::rt

#endif
