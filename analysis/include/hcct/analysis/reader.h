// Reading and validating hcct dump files (docs/FORMAT.md, "Validation").
//
// Every function here either returns data satisfying all invariants of profile.h or throws
// FormatError (bad contents) / IoError (cannot read); the message always starts with the file name.
// Hostile input never crashes, hangs or allocates more than a small multiple of the file's size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

#include "hcct/analysis/profile.h"

namespace hcct::analysis {

// "<file>: <problem>".
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses a complete file image. `name` prefixes error messages and becomes ThreadProfile::source.
ThreadProfile parse_profile(std::span<const unsigned char> bytes, const std::string &name);

// Maps and parses one file. Refuses anything but a regular file (a FIFO would block).
ThreadProfile read_profile(const std::filesystem::path &file);

// `<pid>.<seq>.hcct` -> {pid, seq}; nullopt for any other name (including dotfiles, temporaries).
struct ProfileFileName {
  uint64_t pid;
  uint64_t seq;
};
std::optional<ProfileFileName> parse_profile_file_name(std::string_view file_name);

// Loads a profile directory (every `<pid>.<seq>.hcct`; other names are ignored) or a single file.
// Checks that META's pid and thread_seq agree with the file name. Throws IoError if a directory
// holds no profile file.
ProfileSet read_profiles(const std::filesystem::path &dir_or_file);

}  // namespace hcct::analysis
