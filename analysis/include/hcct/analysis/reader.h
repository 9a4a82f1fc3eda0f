// Reading and validating hcct dump files (docs/FORMAT.md, "Validation").
//
// Every function here either returns data satisfying all invariants of profile.h or throws
// FormatError (bad contents) / IoError (cannot read); the message always starts with the file name.
// Hostile input never crashes, hangs or allocates more than a small multiple of the file's size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
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

// One file's nodes one at a time, in preorder, in memory independent of the tree's size (a buffer
// of `buffer_bytes` plus the current root path). The constructor reads and checks the header, the
// section table, META and MODS; next() checks every node as it goes (the same rules as
// read_profile) and, after the last node, the payload hash and the totals, so that a file is known
// to be valid exactly when next() has returned false. Until then a consumer has seen nodes of a
// file that may still turn out corrupt: write results somewhere provisional (or accept an error
// after partial output). Throws FormatError / IoError like read_profile.
class ProfileStream {
 public:
  explicit ProfileStream(const std::filesystem::path &file, size_t buffer_bytes = size_t(1) << 20);
  ~ProfileStream();
  ProfileStream(const ProfileStream &) = delete;
  ProfileStream &operator=(const ProfileStream &) = delete;

  const std::string &source() const;
  const ThreadMeta &meta() const;
  const std::vector<Module> &modules() const;
  uint64_t node_count() const;
  // The TIME section: (node index, self samples) for every node with samples, by increasing index
  // (empty when the profile has no time metric).
  const std::vector<std::pair<uint32_t, uint64_t>> &time_samples() const;
  // The next node (its parent index filled in); the index of the node is nodes_read() - 1
  // afterwards. false once all nodes were read and the whole file verified.
  bool next(Node &node);
  uint64_t nodes_read() const;
  // For progress displays.
  uint64_t file_size() const;
  uint64_t bytes_read() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> d_;
};

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

// The profile files of a directory (or the single file given), sorted by pid and thread_seq,
// without reading them. A single file's pid and seq come from its name if it has a profile name,
// else from its META (read then). Throws IoError like read_profiles.
struct ProfileFile {
  uint64_t pid = 0;
  uint64_t seq = 0;
  std::filesystem::path path;
};
std::vector<ProfileFile> list_profiles(const std::filesystem::path &dir_or_file);

}  // namespace hcct::analysis
