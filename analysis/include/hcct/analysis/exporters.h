// The export formats of `hcct export` (docs/EXPORTS.md): a format library beside the readers, the
// CLI a front end. Each exporter receives the filtered trees one after another, node by node in
// postorder (walk_tree), and writes one output; what it keeps in memory is bounded by the number of
// distinct functions, call sites and locations, not by the number of nodes.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "hcct/analysis/names.h"
#include "hcct/analysis/walk.h"

namespace hcct::analysis {

struct TreeInfo {
  std::string source;  // file, or empty for a merge
  const ThreadMeta *meta = nullptr;
  const std::vector<Module> *modules = nullptr;
  uint64_t node_count = 0;  // nodes in the input tree, root included
  std::vector<uint64_t> threads;  // thread_seq values it covers
  bool merged = false;
  Names *names = nullptr;
  bool symbolized = true;
  double min_share = 0;
  uint64_t threshold = 0;
  Metric metric = Metric::calls;  // what the filters select by and folded / DOT show
};

class Exporter {
 public:
  virtual ~Exporter() = default;
  virtual void begin_tree(const TreeInfo &info) = 0;
  virtual void node(const WalkNode &w, std::span<const WalkNode> path) = 0;
  virtual void end_tree(const WalkStats &stats) = 0;
  // After the last tree.
  virtual void finish() = 0;
  // After finish(): what the output could not hold, one plain sentence each (the tool says them).
  virtual std::vector<std::string> warnings() const { return {}; }
};

// One tree through `exporter`: begin_tree, every kept node, end_tree. Returns the walk's figures
// and, in `charged`, the counts of contexts deeper than filter.max_depth charged to an ancestor.
struct ExportedTree {
  WalkStats stats;
  uint64_t charged = 0;
};
ExportedTree export_tree(Exporter &exporter, const TreeInfo &info, NodeSource &nodes, const TreeFilter &filter,
                         const std::function<void(uint64_t)> &progress = nullptr);

inline const std::vector<std::string> kExportFormats = {"folded", "callgrind", "pprof", "json", "dot"};
bool export_is_binary(const std::string &format);
std::unique_ptr<Exporter> make_exporter(const std::string &format, std::ostream &out);

}  // namespace hcct::analysis
