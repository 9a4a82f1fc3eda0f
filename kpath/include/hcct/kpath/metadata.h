// Path metadata: what the pass records about every instrumented function so that any
// (function ID, path ID) decodes offline to basic blocks and source lines (docs/KPATH.md,
// "Metadata"). The pass writes one blob per module into the ELF section `hcct_kpath`; the linker
// concatenates the blobs of all modules. The reader is analysis/kpath_metadata.{h,cc}.
//
// Blob: magic "HKPM", u8 version (1), u32 body length (little-endian), body:
//   str source              the module's source file name as the compiler saw it
//   varint files, str × files   file table for the line records
//   varint functions, per function:
//     u64 id                function ID (what the probes pass; see function_id())
//     str name              linkage name
//     varint file, varint line   definition (file index + 1, 0 = unknown)
//     u8 flags              kFlag*
//     varint num_paths      N: path IDs are 0 .. N-1
//     varint blocks, per block:
//       varint lines, per line: varint file index, varint line   (distinct consecutive lines)
//       varint term_line, varint term_col    the terminator's location (0 = unknown)
//       varint succs, varint × succs         CFG successors in terminator order (duplicates kept)
//     varint edges, per edge (grouped by `from`, in numbering order):
//       varint from, varint to (blocks = virtual exit), u8 kind, varint val
// Strings are varint length + bytes. Varints are unsigned LEB128.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hcct/kpath/path_graph.h"

namespace hcct::kpath {

inline constexpr char kMetadataSection[] = "hcct_kpath";
inline constexpr char kMetadataMagic[4] = {'H', 'K', 'P', 'M'};
inline constexpr uint8_t kMetadataVersion = 1;
inline constexpr size_t kMetadataHeader = 9;

// Function flags.
inline constexpr uint8_t kFlagCutEdges = 1u << 0;  // path count overflowed: extra edges were cut
inline constexpr uint8_t kFlagLate = 1u << 1;      // instrumented after optimisation (OptimizerLast)
// The build's optimisation level (clang's -O speed level 0..3; -Os/-Oz count as 2), when the pass
// knew it (clang does, `opt -passes=kpath` does not): the CFG the path IDs describe depends on it,
// so `hcct guide` records it and the OSR inserter checks it (docs/GUIDE.md).
inline constexpr uint8_t kFlagOptLevelKnown = 1u << 2;
inline constexpr unsigned kOptLevelShift = 3;
inline constexpr uint8_t kOptLevelMask = 3u << kOptLevelShift;
// No loop and only one path that can run (one path, or the others ruled out by tests of functions
// that return a constant): the function carries no probe (that path's count would be its number of
// calls, which the pass leaves to call profilers), so its k-IPF is absent from every profile
// (docs/KPATH.md, "Functions without probes").
inline constexpr uint8_t kFlagNotProbed = 1u << 5;
inline constexpr uint8_t kKnownFlags = kFlagCutEdges | kFlagLate | kFlagOptLevelKnown | kOptLevelMask | kFlagNotProbed;

// The flags' optimisation level, or -1 if not recorded.
constexpr int opt_level_of(uint8_t flags) {
  return flags & kFlagOptLevelKnown ? int((flags & kOptLevelMask) >> kOptLevelShift) : -1;
}
constexpr uint8_t opt_level_flags(int level) {
  return level < 0 ? 0 : uint8_t(kFlagOptLevelKnown | (uint8_t(level > 3 ? 3 : level) << kOptLevelShift));
}

struct SourceLine {
  uint32_t file = 0;  // index into ModuleInfo::files
  uint32_t line = 0;
  friend bool operator==(const SourceLine &, const SourceLine &) = default;
};

struct BlockInfo {
  std::vector<SourceLine> lines;
  uint32_t term_line = 0;
  uint32_t term_col = 0;
  std::vector<uint32_t> succs;
  friend bool operator==(const BlockInfo &, const BlockInfo &) = default;
};

struct FunctionInfo {
  uint64_t id = 0;
  std::string name;
  uint32_t file = 0;  // file index + 1; 0 = unknown
  uint32_t line = 0;
  uint8_t flags = 0;
  uint64_t num_paths = 0;
  std::vector<BlockInfo> blocks;
  std::vector<DagEdge> edges;  // grouped by `from` in numbering order
};

struct ModuleInfo {
  std::string source;
  std::vector<std::string> files;
  std::vector<FunctionInfo> functions;
};

// The DAG of `f` with the recorded values (callers verify them with a fresh number()).
inline PathGraph graph_of(const FunctionInfo &f) {
  PathGraph g(uint32_t(f.blocks.size()));
  for (const DagEdge &e : f.edges) g.set_val(g.add_edge(e.from, e.to, e.kind), e.val);
  return g;
}

class MetadataWriter {
 public:
  std::vector<uint8_t> encode(const ModuleInfo &m) {
    body_.clear();
    str(m.source);
    varint(m.files.size());
    for (const std::string &f : m.files) str(f);
    varint(m.functions.size());
    for (const FunctionInfo &f : m.functions) function(f);
    std::vector<uint8_t> out(kMetadataMagic, kMetadataMagic + 4);
    out.push_back(kMetadataVersion);
    uint32_t n = uint32_t(body_.size());
    for (int i = 0; i < 4; ++i) out.push_back(uint8_t(n >> (8 * i)));
    out.insert(out.end(), body_.begin(), body_.end());
    return out;
  }

 private:
  void varint(uint64_t v) {
    while (v >= 0x80) {
      body_.push_back(uint8_t(v | 0x80));
      v >>= 7;
    }
    body_.push_back(uint8_t(v));
  }
  void str(const std::string &s) {
    varint(s.size());
    body_.insert(body_.end(), s.begin(), s.end());
  }
  void function(const FunctionInfo &f) {
    for (int i = 0; i < 8; ++i) body_.push_back(uint8_t(f.id >> (8 * i)));
    str(f.name);
    varint(f.file);
    varint(f.line);
    body_.push_back(f.flags);
    varint(f.num_paths);
    varint(f.blocks.size());
    for (const BlockInfo &b : f.blocks) {
      varint(b.lines.size());
      for (const SourceLine &l : b.lines) {
        varint(l.file);
        varint(l.line);
      }
      varint(b.term_line);
      varint(b.term_col);
      varint(b.succs.size());
      for (uint32_t s : b.succs) varint(s);
    }
    varint(f.edges.size());
    for (const DagEdge &e : f.edges) {
      varint(e.from);
      varint(e.to);
      body_.push_back(uint8_t(e.kind));
      varint(e.val);
    }
  }
  std::vector<uint8_t> body_;
};

}  // namespace hcct::kpath
