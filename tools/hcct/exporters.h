// The export formats of `hcct export` (docs/EXPORTS.md). Each exporter receives the filtered trees
// one after another, node by node in postorder (analysis::walk_tree), and writes one output; what
// it keeps in memory is bounded by the number of distinct functions, call sites and locations, not
// by the number of nodes.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "common.h"

namespace hcct::cli {

struct TreeInfo {
  std::string source;  // file, or empty for a merge
  const analysis::ThreadMeta *meta = nullptr;
  const std::vector<analysis::Module> *modules = nullptr;
  uint64_t node_count = 0;  // nodes in the input tree, root included
  std::vector<uint64_t> threads;  // thread_seq values it covers
  bool merged = false;
  Names *names = nullptr;
  bool symbolized = true;
  double min_share = 0;
  uint64_t threshold = 0;
};

class Exporter {
 public:
  virtual ~Exporter() = default;
  virtual void begin_tree(const TreeInfo &info) = 0;
  virtual void node(const analysis::WalkNode &w, std::span<const analysis::WalkNode> path) = 0;
  virtual void end_tree(const analysis::WalkStats &stats) = 0;
  // After the last tree.
  virtual void finish() = 0;
};

inline const std::vector<std::string> kExportFormats = {"folded", "callgrind", "pprof", "json", "dot"};
bool export_is_binary(const std::string &format);
std::unique_ptr<Exporter> make_exporter(const std::string &format, std::ostream &out);

}  // namespace hcct::cli
