#include "hcct/analysis/kpath_metadata.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cstring>

#include "byte_cursor.h"
#include "hcct/analysis/reader.h"
#include "hcct/format.h"

namespace hcct::analysis {
namespace {

using kpath::DagEdge;
using kpath::EdgeKind;

kpath::FunctionInfo read_function(ByteCursor &c, size_t files) {
  kpath::FunctionInfo f;
  f.id = c.fixed<uint64_t>("function id");
  f.name = c.str("name");
  f.file = c.u32v("file");
  if (f.file > files) c.fail(f.name + ": file index out of range");
  f.line = c.u32v("line");
  f.flags = c.fixed<uint8_t>("flags");
  if (f.flags & ~kpath::kKnownFlags) c.fail(f.name + ": unknown flags");
  f.num_paths = c.varint("num_paths");
  uint64_t blocks = c.count("block count", 4);
  if (blocks == 0) c.fail(f.name + ": no blocks");
  f.blocks.resize(blocks);
  for (auto &b : f.blocks) {
    uint64_t lines = c.count("line count", 2);
    for (uint64_t i = 0; i < lines; ++i) {
      kpath::SourceLine l{c.u32v("line file"), c.u32v("line")};
      if (l.file >= files) c.fail(f.name + ": line file index out of range");
      b.lines.push_back(l);
    }
    b.term_line = c.u32v("term line");
    b.term_col = c.u32v("term col");
    uint64_t succs = c.count("successor count", 1);
    for (uint64_t i = 0; i < succs; ++i) {
      uint32_t s = c.u32v("successor");
      if (s >= blocks) c.fail(f.name + ": successor out of range");
      b.succs.push_back(s);
    }
  }
  uint64_t edges = c.count("edge count", 4);
  for (uint64_t i = 0; i < edges; ++i) {
    DagEdge e;
    e.from = c.u32v("edge from");
    e.to = c.u32v("edge to");
    uint8_t kind = c.fixed<uint8_t>("edge kind");
    if (e.from >= blocks || e.to > blocks || kind > kpath::kMaxEdgeKind) c.fail(f.name + ": bad edge");
    e.kind = EdgeKind(kind);
    e.val = c.varint("edge value");
    f.edges.push_back(e);
  }
  return f;
}

// The decoder trusts the recorded values only if numbering the recorded DAG reproduces them.
kpath::PathGraph verified_graph(const kpath::FunctionInfo &f, const std::string &where) {
  kpath::PathGraph fresh(uint32_t(f.blocks.size()));
  for (const DagEdge &e : f.edges) fresh.add_edge(e.from, e.to, e.kind);
  if (!fresh.number()) throw FormatError(where + ": " + f.name + ": recorded DAG is cyclic or overflows");
  for (size_t i = 0; i < f.edges.size(); ++i)
    if (fresh.edges()[i].val != f.edges[i].val)
      throw FormatError(where + ": " + f.name + ": recorded edge values disagree with the numbering");
  if (fresh.num_paths() != f.num_paths) throw FormatError(where + ": " + f.name + ": recorded path count is wrong");
  return fresh;
}

bool same_dag(const kpath::FunctionInfo &a, const kpath::FunctionInfo &b) {
  if (a.num_paths != b.num_paths || a.edges.size() != b.edges.size()) return false;
  for (size_t i = 0; i < a.edges.size(); ++i)
    if (a.edges[i].from != b.edges[i].from || a.edges[i].to != b.edges[i].to || a.edges[i].kind != b.edges[i].kind)
      return false;
  return true;
}

}  // namespace

void PathMetadata::add_section(std::span<const unsigned char> bytes, const std::string &object) {
  size_t at = 0;
  while (at < bytes.size()) {
    if (bytes[at] == 0) {  // padding between modules' blobs
      ++at;
      continue;
    }
    std::string region = "hcct_kpath+" + std::to_string(at);
    std::string where = object + ": " + region;
    if (bytes.size() - at < kpath::kMetadataHeader || std::memcmp(&bytes[at], kpath::kMetadataMagic, 4) != 0)
      throw FormatError(where + ": not a kpath metadata blob");
    if (bytes[at + 4] != kpath::kMetadataVersion) throw FormatError(where + ": unsupported version");
    uint32_t len = 0;
    for (int i = 0; i < 4; ++i) len |= uint32_t(bytes[at + 5 + i]) << (8 * i);
    if (len > bytes.size() - at - kpath::kMetadataHeader) throw FormatError(where + ": truncated blob");
    ByteCursor c(bytes.subspan(at + kpath::kMetadataHeader, len), object, region);
    std::string source = c.str("source");
    uint64_t nfiles = c.count("file count", 1);
    std::vector<std::string> files;
    for (uint64_t i = 0; i < nfiles; ++i) files.push_back(c.str("file"));
    uint64_t nfunctions = c.count("function count", 16);
    for (uint64_t i = 0; i < nfunctions; ++i) {
      kpath::FunctionInfo info = read_function(c, files.size());
      kpath::PathGraph graph = verified_graph(info, where);
      auto it = functions_.find(info.id);
      if (it != functions_.end()) {
        // The same inline function from several compilation units: normally identical.
        if (!same_dag(it->second.info, info)) conflicts_.push_back(info.name + " (" + source + ")");
        continue;
      }
      PathFunction pf{std::move(info), files, source, object, std::move(graph)};
      functions_.emplace(pf.info.id, std::move(pf));
    }
    if (!c.done()) c.fail("trailing bytes");
    at += kpath::kMetadataHeader + len;
  }
}

bool PathMetadata::add_elf(const std::filesystem::path &file) {
  elf_version(EV_CURRENT);
  // The path comes from a profile's MODS section: a FIFO or a device there must not block the tool
  // (open without O_NONBLOCK waits for a writer) or stream forever, so only regular files are read.
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw IoError(file.string() + ": not a regular file; no kpath metadata read from it");
  }
  Elf *elf = elf_begin(fd, ELF_C_READ, nullptr);
  bool found = false;
  std::string error;
  size_t shstrndx = 0;
  if (elf && elf_kind(elf) == ELF_K_ELF && elf_getshdrstrndx(elf, &shstrndx) == 0) {
    for (Elf_Scn *scn = nullptr; (scn = elf_nextscn(elf, scn));) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh)) continue;
      const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
      if (!name || std::strcmp(name, kpath::kMetadataSection) != 0 || sh.sh_type == SHT_NOBITS) continue;
      Elf_Data *data = elf_getdata(scn, nullptr);
      if (!data || !data->d_buf) continue;
      try {
        add_section({static_cast<const unsigned char *>(data->d_buf), data->d_size}, file.string());
        found = true;
      } catch (const FormatError &e) {
        error = e.what();
      }
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  if (!error.empty()) throw FormatError(error);
  return found;
}

const PathFunction *PathMetadata::find(uint64_t id) const {
  auto it = functions_.find(id);
  return it == functions_.end() ? nullptr : &it->second;
}

std::optional<DecodedPath> decode_path(const PathFunction &f, uint64_t id) {
  auto edges = f.graph.decode(id);
  if (!edges) return std::nullopt;
  DecodedPath p;
  p.blocks = f.graph.blocks_of(*edges);
  p.after_back_edge = f.graph.edges()[edges->front()].kind == EdgeKind::kStart;
  p.at_back_edge = f.graph.edges()[edges->back()].kind == EdgeKind::kBreak;
  for (uint32_t b : p.blocks)
    for (const kpath::SourceLine &l : f.info.blocks[b].lines) {
      SourceRef r{f.files[l.file], l.line};
      if (p.lines.empty() || !(p.lines.back() == r)) p.lines.push_back(r);
    }
  return p;
}

std::string describe_lines(const DecodedPath &p, const std::string &home) {
  // Runs of ascending consecutive lines ("12-14"), prefixed by the file name where it changes
  // away from `home` (inlined code in late-stage builds, headers).
  std::string out, file = home;
  uint32_t lo = 0, hi = 0;
  auto flush = [&] {
    if (!lo) return;
    out += std::to_string(lo);
    if (hi != lo) out += "-" + std::to_string(hi);
    out += ",";
    lo = 0;
  };
  for (const SourceRef &r : p.lines) {
    if (r.file != file) {
      flush();
      file = r.file;
      out += file.substr(file.find_last_of('/') + 1) + ":";
    } else if (lo && (r.line == hi || r.line == hi + 1)) {
      hi = r.line;
      continue;
    } else {
      flush();
    }
    lo = hi = r.line;
  }
  flush();
  if (!out.empty()) out.pop_back();
  if (out.empty()) out = "(no line info)";
  if (p.after_back_edge) out = "^" + out;  // starts at a loop header
  if (p.at_back_edge) out += "^";          // ends on a back edge
  return out;
}

}  // namespace hcct::analysis
