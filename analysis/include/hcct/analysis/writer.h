// Writing hcct dump files (docs/FORMAT.md). encode_profile() produces exactly the bytes the
// reader accepts; the lower-level encoders exist for tools that assemble files piecewise and for
// tests that need deliberately malformed but correctly hashed files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hcct/analysis/profile.h"

namespace hcct::analysis {

using Bytes = std::vector<unsigned char>;

struct Section {
  uint32_t tag = 0;
  uint32_t reserved = 0;
  Bytes body;
};

// Header + sections, with the payload size and FNV-1a hash filled in.
// `version`: the header's (an older one only to make test files of older runtimes).
Bytes encode_file(std::span<const Section> sections, uint32_t version = format::kVersion);
// Recomputes the header's hash over bytes[32..] (after a test edited the payload). Requires at
// least a full header.
void reseal(Bytes &file);

Bytes encode_meta(std::span<const std::pair<std::string, std::string>> entries);
// The META entries of `meta`: the format's keys in a fixed order (hcct-only keys only in hcct
// mode), then `extra`.
std::vector<std::pair<std::string, std::string>> meta_entries(const ThreadMeta &meta);
// Throws std::invalid_argument if a path exceeds 65535 bytes or a build-id 255.
Bytes encode_modules(std::span<const Module> modules);
// Throws std::invalid_argument unless nodes[i].parent < i for every i > 0 and nodes is non-empty.
Bytes encode_tree(std::span<const Node> nodes);
// The TIME section of per-node self samples (parallel to the nodes; zeros are not written).
Bytes encode_time(std::span<const uint64_t> samples);

Bytes encode_profile(const ThreadProfile &profile);

// Writes atomically: a dot-prefixed temporary in the same directory, fsync, rename. Throws
// std::system_error (or std::invalid_argument from the encoders).
void write_profile(const std::filesystem::path &file, const ThreadProfile &profile);

// "<pid>.<seq>.hcct"
std::string profile_file_name(uint64_t pid, uint64_t thread_seq);

}  // namespace hcct::analysis
