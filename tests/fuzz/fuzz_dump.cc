// Fuzz harness: the dump reader (analysis/src/reader.cc, docs/FORMAT.md), in both of its forms.
//
// Each input is read as a dump file twice: as given (so the header and hash checks are fuzzed) and
// resealed (payload size and hash made consistent, so mutations reach META, MODS and the CCT).
// Invariants beyond "no crash":
//  - a rejected file raises FormatError whose message starts with the file name (nothing else
//    escapes: no std::length_error, no bad_alloc);
//  - ProfileStream (the streaming reader, here with a tiny buffer so that every refill path runs)
//    accepts exactly the files parse_profile accepts, and yields the same META, modules and nodes;
//  - an accepted profile satisfies profile.h's invariants, and the analysis writer's encoding of it
//    reads back equal and re-encodes to the same bytes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "fuzz_util.h"
#include "hcct/analysis/hot.h"
#include "hcct/analysis/merge.h"
#include "hcct/analysis/reader.h"
#include "hcct/analysis/writer.h"

namespace an = hcct::analysis;
using hcct::fuzz::require;

namespace {

const std::string kName = "fuzz.hcct";

// The input as a file, for ProfileStream: one memfd, rewritten for every input.
std::string as_file(std::span<const unsigned char> bytes) {
  static int fd = memfd_create("fuzz.hcct", MFD_CLOEXEC);
  require(fd >= 0, "memfd_create works");
  require(ftruncate(fd, 0) == 0, "ftruncate");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = pwrite(fd, bytes.data() + done, bytes.size() - done, off_t(done));
    require(n > 0, "pwrite");
    done += size_t(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

void check_invariants(const an::ThreadProfile &p) {
  require(!p.nodes.empty(), "a profile has a root");
  const an::Node &root = p.nodes[0];
  require(root.routine == 0 && root.call_site == 0 && root.count == 0 && !root.monitored(), "the root is empty");
  for (size_t i = 1; i < p.nodes.size(); ++i) {
    require(p.nodes[i].parent < i, "parents precede their children");
    require((p.nodes[i].flags & ~hcct::format::kNodeKnownFlags) == 0, "only known flag bits");
  }
  for (const an::Module &m : p.modules) require(m.lo <= m.hi, "module ranges are ordered");
  // The tree helpers the tools run on every profile.
  auto ends = an::subtree_ends(p.nodes);
  auto depths = an::node_depths(p.nodes);
  an::ChildIndex children = an::child_index(p.nodes);
  require(ends.size() == p.nodes.size() && depths.size() == p.nodes.size(), "helper sizes");
  require(ends[0] == p.nodes.size(), "the root's subtree is the whole tree");
  require(children.offset.size() == p.nodes.size() + 1 && children.child.size() == p.nodes.size() - 1,
          "every node but the root is someone's child");
}

// What `hcct report` runs on every profile: the (phi, epsilon)-HCCT query and the pruned tree.
void check_hot(const an::ThreadProfile &p, double phi) {
  an::HotSet h = an::query_hot(p, phi);
  require(h.cls.size() == p.nodes.size() && h.cls[0] == an::NodeClass::cold_ancestor, "the root is kept");
  for (size_t i = 1; i < p.nodes.size(); ++i) {
    if (h.cls[i] == an::NodeClass::hot)
      require(p.countable(uint32_t(i)) && p.nodes[i].count >= h.threshold, "hot nodes are countable and reach the threshold");
    if (h.cls[i] != an::NodeClass::pruned)
      require(h.cls[p.nodes[i].parent] != an::NodeClass::pruned, "a kept node's parent is kept");
  }
  an::PrunedTree t = an::prune(p.nodes, h.cls);
  require(t.nodes.size() == 1 + h.hot + h.cold_ancestors, "the pruned tree has the kept nodes");
  for (size_t i = 1; i < t.nodes.size(); ++i) require(t.nodes[i].parent < i, "the pruned tree is in preorder");
}

// What `hcct merge` writes must read back: a thread merged with itself.
void check_merge(const an::ThreadProfile &p) {
  const an::ThreadProfile *twice[] = {&p, &p};
  an::ThreadProfile m;
  try {
    m = an::merge_threads(std::span<const an::ThreadProfile *const>(twice));
  } catch (const std::invalid_argument &e) {
    // Refused by design: sums past 2^64, and a module map whose overlapping modules leave no room
    // above 2^64 to move one (the format lets a thread's modules overlap). Any other refusal of
    // one valid thread is a finding.
    std::string why = e.what();
    require(why.find("overflows 64 bits") != std::string::npos || why.find("no room to place module") != std::string::npos,
            "a thread merges with itself", why);
    return;
  }
  try {
    an::parse_profile(an::encode_profile(m), "merged");
  } catch (const an::FormatError &e) {
    hcct::fuzz::broken("a merged profile reads back", e.what());
  }
}

bool same_meta(const an::ThreadMeta &a, const an::ThreadMeta &b) { return an::meta_entries(a) == an::meta_entries(b); }

bool same_profile(const an::ThreadProfile &a, const an::ThreadProfile &b) {
  return same_meta(a.meta, b.meta) && a.modules == b.modules && a.nodes == b.nodes;
}

// What ProfileStream makes of the same bytes: the profile, or nullopt if it threw FormatError.
std::optional<an::ThreadProfile> stream(std::span<const unsigned char> bytes) {
  std::string path = as_file(bytes);
  try {
    an::ProfileStream s(path, /*buffer_bytes=*/1);
    an::ThreadProfile p;
    p.meta = s.meta();
    p.modules = s.modules();
    require(s.node_count() <= bytes.size(), "a node count is bounded by the file size");
    an::Node n;
    while (s.next(n)) {
      require(s.nodes_read() <= s.node_count(), "the stream stops at its node count");
      p.nodes.push_back(n);
    }
    require(p.nodes.size() == s.node_count(), "the stream yields its node count");
    require(s.bytes_read() == s.file_size(), "the stream read the whole file");
    return p;
  } catch (const an::FormatError &e) {
    hcct::fuzz::require_names_file(e, path);
    return std::nullopt;
  }
}

void one_file(std::span<const unsigned char> bytes) {
  std::optional<an::ThreadProfile> parsed;
  try {
    parsed = an::parse_profile(bytes, kName);
  } catch (const an::FormatError &e) {
    hcct::fuzz::require_names_file(e, kName);
  }
  std::optional<an::ThreadProfile> streamed = stream(bytes);
  require(parsed.has_value() == streamed.has_value(), "ProfileStream accepts exactly what parse_profile accepts",
          parsed ? "only parse_profile accepted" : "only ProfileStream accepted");
  if (!parsed) return;
  require(same_profile(*parsed, *streamed), "ProfileStream reads what parse_profile reads");
  check_invariants(*parsed);

  an::Bytes encoded = an::encode_profile(*parsed);
  an::ThreadProfile again;
  try {
    again = an::parse_profile(encoded, "re-encoded");
  } catch (const an::FormatError &e) {
    hcct::fuzz::broken("the writer's encoding of an accepted profile reads back", e.what());
  }
  require(same_profile(*parsed, again), "a re-encoded profile reads back equal");
  require(an::encode_profile(again) == encoded, "encoding is stable");
  for (double phi : {0.0, 1e-3, 0.5, 1.0}) check_hot(*parsed, phi);
  check_merge(*parsed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::span<const unsigned char> bytes(data, size);
  one_file(bytes);
  std::vector<unsigned char> sealed = hcct::fuzz::resealed(bytes);
  if (!sealed.empty() && !std::equal(sealed.begin(), sealed.end(), bytes.begin())) one_file(sealed);
  return 0;
}
