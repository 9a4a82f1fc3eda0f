// Reading kpath path metadata (kpath/include/hcct/kpath/metadata.h) from ELF files and decoding
// (function ID, path ID) into basic blocks and source lines.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "hcct/kpath/metadata.h"

namespace hcct::analysis {

// One instrumented function, ready to decode.
struct PathFunction {
  kpath::FunctionInfo info;
  std::vector<std::string> files;  // the module's file table
  std::string module_source;       // the compilation unit
  std::string object;              // the ELF file it was read from
  kpath::PathGraph graph;          // numbered; verified against the recorded values
};

struct SourceRef {
  std::string file;
  uint32_t line = 0;
  friend bool operator==(const SourceRef &, const SourceRef &) = default;
};

struct DecodedPath {
  std::vector<uint32_t> blocks;  // block indices in the function's layout order
  bool after_back_edge = false;  // starts at a loop header (the previous path took a back edge)
  bool at_back_edge = false;     // ends by taking a back edge (the next path starts at a header)
  std::vector<SourceRef> lines;  // source lines of its blocks, consecutive repeats merged
};

class PathMetadata {
 public:
  // Decodes the blobs of one `hcct_kpath` section. Throws FormatError on malformed contents or
  // recorded values that disagree with a fresh numbering of the recorded DAG.
  void add_section(std::span<const unsigned char> bytes, const std::string &object);
  // Reads the section from an ELF file; false if the file has none (or cannot be opened). IoError
  // if `file` is not a regular file (a FIFO or device named in a profile is never read from).
  bool add_elf(const std::filesystem::path &file);

  const PathFunction *find(uint64_t function_id) const;
  const std::unordered_map<uint64_t, PathFunction> &functions() const { return functions_; }
  // Functions seen twice with different DAGs (e.g. inline functions compiled differently).
  const std::vector<std::string> &conflicts() const { return conflicts_; }

 private:
  std::unordered_map<uint64_t, PathFunction> functions_;
  std::vector<std::string> conflicts_;
};

std::optional<DecodedPath> decode_path(const PathFunction &f, uint64_t path_id);

// "file.c:12-14,17" style summary of a decoded path's lines (files other than `home` are named).
std::string describe_lines(const DecodedPath &p, const std::string &home);

}  // namespace hcct::analysis
