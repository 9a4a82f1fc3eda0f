// Fuzz harness: the kpath path metadata reader (analysis/src/kpath_metadata.cc; the format is in
// kpath/include/hcct/kpath/metadata.h), fed the contents of an `hcct_kpath` ELF section: blobs of
// one or more modules, possibly separated by zero padding.
//
// Invariants beyond "no crash": rejection is a FormatError naming the object; for every accepted
// function, every path ID below num_paths decodes (the sampled ones: 0, the last, and a few from
// the input) to an entry-to-exit path whose edge values sum to the ID, IDs from num_paths up do
// not decode, the decoded lines describe without failing; and the function, written again by the
// pass's MetadataWriter, reads back the same.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "hcct/analysis/kpath_metadata.h"
#include "hcct/analysis/reader.h"
#include "hcct/kpath/metadata.h"

namespace an = hcct::analysis;
namespace kp = hcct::kpath;
using hcct::fuzz::require;

namespace {

const std::string kObject = "fuzz.elf";

bool same_function(const kp::FunctionInfo &a, const kp::FunctionInfo &b) {
  if (a.id != b.id || a.name != b.name || a.file != b.file || a.line != b.line || a.flags != b.flags ||
      a.num_paths != b.num_paths || a.blocks != b.blocks || a.edges.size() != b.edges.size())
    return false;
  for (size_t i = 0; i < a.edges.size(); ++i) {
    const kp::DagEdge &x = a.edges[i], &y = b.edges[i];
    if (x.from != y.from || x.to != y.to || x.kind != y.kind || x.val != y.val) return false;
  }
  return true;
}

void check_decode(const an::PathFunction &f, uint64_t id) {
  auto edges = f.graph.decode(id);
  std::optional<an::DecodedPath> path = an::decode_path(f, id);
  if (id >= f.info.num_paths) {
    require(!edges && !path, "IDs from num_paths up do not decode");
    return;
  }
  require(edges && path, "every ID below num_paths decodes", f.info.name + " id " + std::to_string(id));
  require(f.graph.id_of(*edges) == id, "a decoded path's edge values sum to its ID");
  require(f.graph.edges()[edges->back()].to == f.graph.exit(), "a decoded path ends at the exit");
  for (uint32_t b : path->blocks) require(b < f.info.blocks.size(), "decoded blocks exist");
  require(!an::describe_lines(*path, f.files.empty() ? "" : f.files[0]).empty(), "a path describes");
}

void check_round_trip(const an::PathFunction &f) {
  kp::ModuleInfo m;
  m.source = f.module_source;
  m.files = f.files;
  m.functions.push_back(f.info);
  std::vector<uint8_t> blob = kp::MetadataWriter().encode(m);
  an::PathMetadata again;
  try {
    again.add_section(blob, "re-encoded");
  } catch (const an::FormatError &e) {
    hcct::fuzz::broken("an accepted function, written again, reads back", e.what());
  }
  const an::PathFunction *g = again.find(f.info.id);
  require(g && same_function(f.info, g->info) && g->files == f.files && g->module_source == f.module_source,
          "an accepted function, written again, reads back the same");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  an::PathMetadata meta;
  try {
    meta.add_section({data, size}, kObject);
  } catch (const an::FormatError &e) {
    hcct::fuzz::require_names_file(e, kObject);
    return 0;
  }
  // A few IDs to try from the input's last bytes, beside the edges of the ID range.
  uint64_t salt = 0;
  for (size_t i = size > 8 ? size - 8 : 0; i < size; ++i) salt = salt << 8 | data[i];
  for (const auto &[id, f] : meta.functions()) {
    require(id == f.info.id, "functions are indexed by their ID");
    uint64_t n = f.info.num_paths;
    require(n >= 1, "a function has a path");
    for (uint64_t path : {uint64_t(0), n - 1, n, salt % n, (salt >> 17) % n, salt}) check_decode(f, path);
    check_round_trip(f);
  }
  return 0;
}
