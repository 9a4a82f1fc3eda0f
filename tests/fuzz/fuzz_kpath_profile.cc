// Fuzz harness: the kpath sections of dump files, KPTH (path forest) and KTRC (path trace)
// (analysis/src/kpath_profile.cc, docs/FORMAT.md "KPTH", "KTRC").
//
// Two input forms, chosen by the first byte:
//  - even: a whole dump file, resealed (payload size and hash made consistent) and parsed by
//    parse_thread_paths;
//  - odd: the bodies alone, wrapped into a valid minimal dump (an empty cct-mode CCT): bytes 1-2 are
//    the KPTH body's length (little-endian, cut to what is there), then the KPTH body, then, if bit 1
//    of the first byte is set, the rest is a KTRC section's body. This lets mutations change the
//    bodies' lengths, which the section table would otherwise pin.
// Invariants beyond "no crash": rejection is a FormatError naming the file; an accepted forest is in
// preorder with children labelled by their root's function, no deeper than its kind allows, its
// counts summing to `paths`; the k-IPF built from it (Algorithms 5-6, what `hcct paths` runs) has
// no sequence longer than k; a trace splits into activation streams that hold every path record.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "hcct/analysis/kpath_ipf.h"
#include "hcct/analysis/kpath_profile.h"
#include "hcct/analysis/reader.h"
#include "hcct/analysis/writer.h"

namespace an = hcct::analysis;
namespace format = hcct::format;
using hcct::fuzz::require;

namespace {

const std::string kName = "fuzz.hcct";

// A valid dump around the given kpath section bodies.
an::Bytes wrap(std::span<const unsigned char> kpth, std::optional<std::span<const unsigned char>> ktrc) {
  an::ThreadProfile p;
  p.meta.runtime = "fuzz";
  p.meta.mode = an::Mode::cct;
  p.nodes.resize(1);
  std::vector<an::Section> sections{
      {format::kTagMeta, 0, an::encode_meta(an::meta_entries(p.meta))},
      {format::kTagModules, 0, an::encode_modules(p.modules)},
      {format::kTagTree, 0, an::encode_tree(p.nodes)},
      {format::kTagPaths, 0, an::Bytes(kpth.begin(), kpth.end())},
  };
  if (ktrc) sections.push_back({format::kTagPathTrace, 0, an::Bytes(ktrc->begin(), ktrc->end())});
  return an::encode_file(sections);
}

void check_forest(const an::KsfForest &f) {
  require(f.k >= 1 && f.k <= 256, "k in [1, 256]");
  uint32_t max_depth = f.kind == an::ForestKind::kWindow ? f.k : std::max(2 * f.k - 2, f.k);
  std::vector<uint32_t> depth(f.nodes.size());
  uint64_t sum = 0;
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const an::KsfNode &n = f.nodes[i];
    if (n.parent == an::kNoParent) {
      depth[i] = 1;
    } else {
      require(n.parent < i, "forest parents precede their children");
      require(f.k > 1, "a BLPP forest has only roots");
      require(n.label.function == f.nodes[n.parent].label.function, "a child has its root's function");
      depth[i] = depth[n.parent] + 1;
    }
    require(depth[i] <= max_depth, "forest depth within the kind's bound");
    sum += n.count;
  }
  require(sum == f.paths, "forest counts sum to paths");

  an::Ipf ipf = an::make_k_ipf(f, f.k);
  for (const an::IpfNode &n : ipf.nodes()) require(n.depth >= 1 && n.depth <= f.k, "k-IPF sequences are at most k long");
}

void check_trace(const std::vector<an::TraceRecord> &trace) {
  size_t paths = 0;
  for (const an::TraceRecord &r : trace) paths += !r.enter;
  size_t streamed = 0;
  for (const auto &s : an::activation_streams(trace)) streamed += s.size();
  require(streamed == paths, "activation streams hold every path record");
}

void one_file(std::span<const unsigned char> bytes) {
  std::optional<an::ThreadPaths> t;
  try {
    t = an::parse_thread_paths(bytes, kName);
  } catch (const an::FormatError &e) {
    hcct::fuzz::require_names_file(e, kName);
    return;
  }
  if (!t) return;
  check_forest(t->forest);
  if (t->trace) check_trace(*t->trace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  std::span<const unsigned char> rest(data + 1, size - 1);
  if (!(data[0] & 1)) {
    std::vector<unsigned char> sealed = hcct::fuzz::resealed(rest);
    if (!sealed.empty()) one_file(sealed);
    return 0;
  }
  if (rest.size() < 2) return 0;
  size_t kpth_len = std::min<size_t>(rest[0] | size_t(rest[1]) << 8, rest.size() - 2);
  auto kpth = rest.subspan(2, kpth_len);
  std::optional<std::span<const unsigned char>> ktrc;
  if (data[0] & 2) ktrc = rest.subspan(2 + kpth_len);
  one_file(wrap(kpth, ktrc));
  return 0;
}
