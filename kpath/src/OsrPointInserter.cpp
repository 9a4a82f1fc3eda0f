#include "OsrPointInserter.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "KPathPass.h"
#include "LoopVersioner.h"
#include "PluginError.h"
#include "hcct/guide_format.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Analysis/CFG.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/IR/Verifier.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/PromoteMemToReg.h"

namespace hcct::kpath {

using namespace llvm;

namespace {

cl::opt<std::string> g_guide("hcct-guide", cl::desc("hcct kpath: guidance file (hcct guide) whose loops get OSR points"),
                             cl::init(""));
cl::opt<bool> g_profile("kpath-profile", cl::desc("hcct kpath: insert path-profiling probes (default true)"),
                        cl::init(true));
cl::opt<std::string> g_osr_mode("hcct-osr-mode",
                                cl::desc("hcct kpath: 'point' (default): OSR points that call hcct_osr_handler; "
                                         "'version': each guided loop switches to a compiler-made clone"),
                                cl::init(""));
cl::opt<std::string> g_osr_threshold("hcct-osr-threshold",
                                     cl::desc("hcct kpath: use this threshold for every guided loop (0 acts as 1)"),
                                     cl::init(""));
cl::opt<bool> g_osr_verbose("hcct-osr-verbose", cl::desc("hcct kpath: report each OSR point inserted"), cl::init(false));

constexpr uint32_t kPointVersion = 1;  // HCCT_OSR_POINT_VERSION (hcct/oracle.h)

bool verbose() {
  if (g_osr_verbose) return true;
  const char *env = std::getenv("HCCT_OSR_VERBOSE");
  return env && *env && std::string(env) != "0";
}

std::string guide_path() {
  if (!g_guide.empty()) return g_guide;
  const char *env = std::getenv("HCCT_GUIDE");
  return env ? env : "";
}

// What a guidance file gave: its loops, or why it cannot be used.
struct Guidance {
  std::vector<GuidedLoop> loops;
  std::string error;
};

// The guidance is read once per process (clang compiles one module, opt may run the pass often).
const Guidance &guidance() {
  static std::mutex lock;
  static std::map<std::string, Guidance> cache;
  std::string path = guide_path();
  std::lock_guard<std::mutex> guard(lock);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second;
  Guidance g;
  if (!path.empty()) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> buf = MemoryBuffer::getFile(path);
    std::string error;
    if (!buf)
      g.error = "hcct osr: cannot read the guidance file '" + path + "': " + buf.getError().message();
    else if (!parse_guidance((*buf)->getBuffer(), &g.loops, &error))
      g.error = "hcct osr: guidance file '" + path + "': " + error;
    if (!g.error.empty()) g.loops.clear();
  }
  return cache.emplace(path, std::move(g)).first->second;
}

// The header's first source line, as the guide computes it (kpath metadata: the block's first line,
// else its terminator's).
uint32_t first_line(const BasicBlock &bb) {
  for (const Instruction &i : bb)
    if (const DebugLoc &loc = i.getDebugLoc(); loc && loc.getLine() != 0) return loc.getLine();
  if (const DebugLoc &loc = bb.getTerminator()->getDebugLoc()) return loc.getLine();
  return 0;
}

const DILocation *first_location(const BasicBlock &bb) {
  for (const Instruction &i : bb)
    if (const DebugLoc &loc = i.getDebugLoc(); loc && loc.getLine() != 0) return loc.get();
  return nullptr;
}

// Entry-reachable blocks in layout order: the kpath numbering (FunctionDag::index_blocks).
std::vector<BasicBlock *> numbered_blocks(Function &f) {
  DenseSet<const BasicBlock *> reached{&f.getEntryBlock()};
  std::vector<const BasicBlock *> work{&f.getEntryBlock()};
  while (!work.empty()) {
    const BasicBlock *bb = work.back();
    work.pop_back();
    for (const BasicBlock *s : successors(bb))
      if (reached.insert(s).second) work.push_back(s);
  }
  std::vector<BasicBlock *> out;
  for (BasicBlock &bb : f)
    if (reached.count(&bb)) out.push_back(&bb);
  return out;
}

// Loop headers: targets of DFS back edges (FindFunctionBackedges, as the kpath numbering uses).
DenseSet<const BasicBlock *> loop_headers(const Function &f) {
  SmallVector<std::pair<const BasicBlock *, const BasicBlock *>, 16> back;
  FindFunctionBackedges(f, back);
  DenseSet<const BasicBlock *> out;
  for (auto &[from, to] : back) out.insert(to);
  return out;
}

std::string base_name(StringRef path) { return sys::path::filename(path).str(); }

std::string describe(const GuidedLoop &l) {
  return l.key + " (" + l.function + ", header block " + std::to_string(l.header_block) + ", line " +
         std::to_string(l.line) + ")";
}

Constant *string_constant(Module &m, StringRef s, const Twine &name) {
  Constant *init = ConstantDataArray::getString(m.getContext(), s);
  auto *gv = new GlobalVariable(m, init->getType(), true, GlobalValue::PrivateLinkage, init, name);
  gv->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
  gv->setAlignment(Align(1));
  Constant *zero = ConstantInt::get(Type::getInt32Ty(m.getContext()), 0);
  Constant *idx[] = {zero, zero};
  return ConstantExpr::getInBoundsGetElementPtr(init->getType(), gv, idx);
}

}  // namespace

namespace {

// -hcct-osr-mode, else HCCT_OSR_MODE: point (default) or version; nullopt (the value in *bad)
// otherwise.
std::optional<OsrMode> mode_setting(std::string *bad) {
  std::string mode = g_osr_mode;
  if (mode.empty())
    if (const char *env = std::getenv("HCCT_OSR_MODE")) mode = env;
  if (mode.empty() || mode == "point") return OsrMode::kPoint;
  if (mode == "version") return OsrMode::kVersion;
  *bad = mode;
  return std::nullopt;
}

// -hcct-osr-threshold, else HCCT_OSR_THRESHOLD: a decimal integer that replaces every guided
// loop's threshold (to test or measure a loop version at any switch point); nullopt if unset;
// *bad says what is wrong with a value given.
std::optional<uint64_t> threshold_setting(std::string *bad) {
  std::string value = g_osr_threshold;
  const char *name = "-hcct-osr-threshold";
  if (value.empty())
    if (const char *env = std::getenv("HCCT_OSR_THRESHOLD")) value = env, name = "HCCT_OSR_THRESHOLD";
  if (value.empty()) return std::nullopt;
  uint64_t t = 0;
  bool digits = std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || StringRef(value).getAsInteger(10, t))
    *bad = std::string("hcct osr: ") + name + "='" + value + "' is not a decimal integer in [0, 2^64-1]";
  return t;
}

// HCCT_KPATH_PROFILE: true/false, or nullopt (with the value in *bad) if it is neither.
std::optional<bool> profile_setting(std::string *bad) {
  if (g_profile.getNumOccurrences()) return bool(g_profile);
  const char *env = std::getenv("HCCT_KPATH_PROFILE");
  if (!env || !*env) return true;
  std::string v = env;
  if (v == "0" || v == "false" || v == "no") return false;
  if (v == "1" || v == "true" || v == "yes") return true;
  *bad = v;
  return std::nullopt;
}

}  // namespace

// A bad value was reported as an error by OsrPointInserter's constructor (which the pass runs
// first), so the compilation fails; the probes' default is returned meanwhile.
bool path_profile_enabled() {
  std::string bad;
  return profile_setting(&bad).value_or(true);
}

namespace {

// What LLVM 14's JSON parser gets wrong on hostile input, checked on the raw text first:
//  - it recurses once per nesting level: a file of a million '[' would overflow clang's stack (a
//    guidance file is 5 deep; more than kMaxNesting is rejected);
//  - it reads integers with strtoll without checking ERANGE: any literal of magnitude 2^63 or
//    more comes back as 2^63-1 (or -2^63), so a "threshold" of 2^64 silently became 2^63-1.
//    Integer literals must fit in int64_t.
// Returns the problem, or "" if none.
constexpr size_t kMaxNesting = 256;
std::string raw_problem(StringRef text) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        return "nested deeper than " + std::to_string(kMaxNesting) + " levels (at byte " + std::to_string(i) + ")";
    } else if ((c == ']' || c == '}') && depth) {
      --depth;
    } else if (c >= '0' && c <= '9' && (i == 0 || !strchr("0123456789.eE+-", text[i - 1]) || text[i - 1] == '-')) {
      // The integer part of a number (of a negative one too: JSON's parser reads both alike).
      size_t end = i;
      while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
      bool integer = end == text.size() || !strchr(".eE", text[end]);
      uint64_t value;
      if (integer && (text.substr(i, end - i).getAsInteger(10, value) || value > uint64_t(INT64_MAX)))
        return "integer " + text.substr(i, std::min<size_t>(end - i, 40)).str() + (end - i > 40 ? "..." : "") +
               " at byte " + std::to_string(i) + " is out of range (above 2^63-1)";
      i = end - 1;
    }
  }
  return "";
}

// A JSON integer literal (not 1.0 or 1e3) in [lo, hi].
std::optional<uint64_t> integer_in(const json::Value *v, uint64_t lo, uint64_t hi) {
  if (!v) return std::nullopt;
  std::optional<uint64_t> u;
  if (auto x = v->getAsUINT64()) u = *x;
  if (!u || *u < lo || *u > hi) return std::nullopt;
  return u;
}

}  // namespace

namespace {

// The loop's "unroll" recommendations with the blocks of their path (guidance version 2).
std::string parse_patterns(const json::Object &loop, std::vector<GuidedLoop::Pattern> *out) {
  const json::Array *recs = loop.getArray("recommendations");
  const json::Array *paths = loop.getArray("paths");
  if (!recs || !paths) return "";
  for (const json::Value &r : *recs) {
    const json::Object *rec = r.getAsObject();
    if (!rec || rec->getString("kind") != StringRef("unroll")) continue;
    auto path = integer_in(rec->get("path"), 0, UINT64_MAX);
    auto factor = integer_in(rec->get("factor"), 2, 64);
    if (!path || !factor) return "an \"unroll\" recommendation needs an integer \"path\" and a \"factor\" in [2, 64]";
    for (const json::Value &p : *paths) {
      const json::Object *po = p.getAsObject();
      if (!po || integer_in(po->get("id"), 0, UINT64_MAX) != path) continue;
      const json::Array *blocks = po->getArray("blocks");
      if (!blocks) break;  // version 1: no blocks, nothing to specialise for
      GuidedLoop::Pattern pattern{*path, unsigned(*factor), {}};
      for (const json::Value &b : *blocks) {
        auto index = integer_in(&b, 0, UINT32_MAX);
        if (!index) return "path " + std::to_string(*path) + ": \"blocks\" must be integers in [0, 2^32-1]";
        pattern.blocks.push_back(uint32_t(*index));
      }
      if (pattern.blocks.empty()) return "path " + std::to_string(*path) + ": \"blocks\" is empty";
      out->push_back(std::move(pattern));
      break;
    }
  }
  return "";
}

std::string configuration_name(bool late, int opt_level) {
  return std::string(late ? "the late stage" : "the early stage") + " at " +
         (opt_level < 0 ? "an unrecorded -O level" : "-O" + std::to_string(opt_level));
}

}  // namespace

// Block numbers, and so the guidance's header blocks and paths, describe the CFG of one stage and
// optimisation level: guidance made for another configuration would name other blocks.
std::string configuration_mismatch(const GuidedLoop &l, const BuildConfig &build) {
  bool stage_differs = l.late && *l.late != build.late;
  bool level_differs = l.opt_level && build.opt_level >= 0 && *l.opt_level != build.opt_level;
  if (!stage_differs && !level_differs) return "";
  return "loop " + l.key + " (" + l.function + ") was profiled in a build at " +
         configuration_name(l.late.value_or(build.late), l.opt_level.value_or(-1)) + ", this build is at " +
         configuration_name(build.late, build.opt_level) +
         ": its block numbers differ. Profile this configuration and run `hcct guide` again (or build like the profile: "
         "the same -O level and HCCT_KPATH_STAGE)";
}

bool parse_guidance(StringRef text, std::vector<GuidedLoop> *out, std::string *error) {
  if (std::string problem = raw_problem(text); !problem.empty()) {
    *error = "not JSON: " + problem;
    return false;
  }
  Expected<json::Value> doc = json::parse(text);
  if (!doc) {
    *error = "not JSON: " + toString(doc.takeError());
    return false;
  }
  const json::Object *root = doc->getAsObject();
  if (!root || root->getString("format") != StringRef(hcct::guide_format::kGuideFormat)) {
    *error = "not a guidance file (no \"format\": \"hcct-guide\"; write one with `hcct guide`)";
    return false;
  }
  constexpr uint64_t kVersion = hcct::guide_format::kGuideVersion;
  std::optional<uint64_t> version = integer_in(root->get("version"), 1, kVersion);
  if (!version) {
    *error = "unsupported guidance version (this plugin reads versions 1 to " + std::to_string(kVersion) + ")";
    return false;
  }
  const json::Array *loops = root->getArray("loops");
  if (!loops) {
    *error = "no \"loops\" array";
    return false;
  }
  out->clear();
  size_t index = 0;
  for (const json::Value &v : *loops) {
    std::string where = "loops[" + std::to_string(index++) + "]";
    const json::Object *o = v.getAsObject();
    if (!o) {
      *error = where + " is not an object";
      return false;
    }
    GuidedLoop l;
    auto function = o->getString("function");
    const json::Value *threshold = o->get("threshold");
    if (!function || function->empty() || !o->get("line") || !o->get("header_block") || !threshold) {
      *error = where + ": needs \"function\", \"line\", \"header_block\" and \"threshold\"";
      return false;
    }
    // Numbers that do not fit are errors, never truncated (a line 2^32 + 14 is not line 14).
    auto line = integer_in(o->get("line"), 0, UINT32_MAX);
    auto header = integer_in(o->get("header_block"), 0, UINT32_MAX);
    if (!line || !header) {
      *error = where + ": \"line\" and \"header_block\" must be integers in [0, 2^32-1]";
      return false;
    }
    if (threshold->getAsNull()) continue;  // no OSR point recommended
    auto t = integer_in(threshold, 1, UINT64_MAX);
    if (!t) {
      *error = where + ": \"threshold\" must be a positive integer or null";
      return false;
    }
    l.function = function->str();
    l.line = uint32_t(*line);
    l.header_block = uint32_t(*header);
    l.threshold = *t;
    // Optional members: absent is fine, present with the wrong type is an error (a function_id
    // that is silently dropped would skip the check that tells same-named static functions apart).
    for (const char *member : {"rank", "file", "key", "function_id"}) {
      const json::Value *v = o->get(member);
      if (!v) continue;
      bool is_rank = std::string(member) == "rank";
      if (is_rank ? !integer_in(v, 0, UINT32_MAX) : !v->getAsString()) {
        *error = where + ": \"" + member + "\" must be " + (is_rank ? "an integer in [0, 2^32-1]" : "a string");
        return false;
      }
    }
    // Version 2: the profile's configuration (absent or null: not recorded, not checked).
    if (const json::Value *stage = o->get("stage"); stage && !stage->getAsNull()) {
      auto s = stage->getAsString();
      if (!s || (*s != "early" && *s != "late")) {
        *error = where + ": \"stage\" must be \"early\", \"late\" or null";
        return false;
      }
      l.late = *s == "late";
    }
    if (const json::Value *level = o->get("opt_level"); level && !level->getAsNull()) {
      auto n = integer_in(level, 0, 3);
      if (!n) {
        *error = where + ": \"opt_level\" must be an integer in [0, 3] or null";
        return false;
      }
      l.opt_level = int(*n);
    }
    if (std::string why = parse_patterns(*o, &l.patterns); !why.empty()) {
      *error = where + ": " + why;
      return false;
    }
    if (auto rank = o->get("rank")) l.rank = uint32_t(*integer_in(rank, 0, UINT32_MAX));
    if (auto file = o->getString("file")) l.file = file->str();
    if (auto key = o->getString("key")) l.key = key->str();
    else l.key = (l.file.empty() ? std::string("?") : base_name(l.file)) + ":" + std::to_string(l.line);
    if (auto id = o->getString("function_id")) {
      uint64_t value = 0;
      if (id->getAsInteger(0, value)) {
        *error = where + ": \"function_id\" is not a 64-bit number";
        return false;
      }
      l.function_id = value;
      l.has_function_id = true;
    }
    out->push_back(std::move(l));
  }
  return true;
}

OsrPointInserter::OsrPointInserter(Module &m, BuildConfig config) : m_(m), config_(config) {
  std::string bad;
  if (!profile_setting(&bad)) {
    std::string message = "hcct kpath: HCCT_KPATH_PROFILE='" + bad + "' is not 0 or 1 (or false/true, no/yes)";
    m.getContext().diagnose(PluginError(message));
  }
  if (std::string bad_mode; std::optional<OsrMode> mode = mode_setting(&bad_mode))
    mode_ = *mode;
  else
    m.getContext().diagnose(PluginError("hcct osr: mode '" + bad_mode +
                                        "' (-hcct-osr-mode or HCCT_OSR_MODE) is not 'point' or 'version'"));
  std::string bad_threshold;
  threshold_override_ = threshold_setting(&bad_threshold);
  if (!bad_threshold.empty()) {
    m.getContext().diagnose(PluginError(bad_threshold));
    return;  // and nothing inserted
  }
  const Guidance &g = guidance();
  if (!g.error.empty()) m.getContext().diagnose(PluginError(g.error));  // and no OSR point
  loops_ = g.loops;
  if (threshold_override_)
    for (GuidedLoop &l : loops_) l.threshold = *threshold_override_;
}

void OsrPointInserter::resolve() {
  if (loops_.empty()) return;
  for (const GuidedLoop &l : loops_) {
    Function *f = m_.getFunction(l.function);
    if (!f || !should_instrument(*f)) continue;  // defined in another translation unit
    // A function of the same name elsewhere (a static function of another file).
    if (l.has_function_id && l.function_id != f->getGUID()) {
      if (verbose())
        errs() << "hcct osr: " << describe(l) << ": " << f->getName() << " here is another function (GUID differs)\n";
      continue;
    }
    if (std::string why = configuration_mismatch(l, config_); !why.empty()) {
      m_.getContext().diagnose(PluginError("hcct osr: guidance file '" + guide_path() + "': " + why));
      sites_.clear();
      return;
    }
    std::vector<BasicBlock *> blocks = numbered_blocks(*f);
    DenseSet<const BasicBlock *> headers = loop_headers(*f);
    BasicBlock *header = nullptr;
    std::string problem;
    if (l.header_block >= blocks.size()) {
      problem = "the function has " + std::to_string(blocks.size()) + " blocks";
    } else if (!headers.count(blocks[l.header_block])) {
      problem = "block " + std::to_string(l.header_block) + " is not a loop header";
    } else if (uint32_t line = first_line(*blocks[l.header_block]); line != l.line && line != 0) {
      // (line 0: built without -g; the block number alone identifies the header)
      problem = "block " + std::to_string(l.header_block) + " starts at line " + std::to_string(line);
    } else {
      header = blocks[l.header_block];
    }
    if (!header) {
      // The source moved or the stage differs: fall back to the one header on the guided line.
      std::vector<BasicBlock *> on_line;
      for (uint32_t i = 0; i < blocks.size(); ++i)
        if (headers.count(blocks[i]) && first_line(*blocks[i]) == l.line) on_line.push_back(blocks[i]);
      if (on_line.size() == 1) {
        header = on_line.front();
        uint32_t index = uint32_t(std::find(blocks.begin(), blocks.end(), header) - blocks.begin());
        errs() << "hcct osr: warning: guided loop " << describe(l) << " does not match " << f->getName() << ": "
               << problem << "; using the loop header at line " << l.line << " (block " << index
               << "). Was the guidance made from this source, at the same stage (HCCT_KPATH_STAGE)?\n";
      } else {
        errs() << "hcct osr: warning: guided loop " << describe(l) << " does not match " << f->getName() << ": "
               << problem << ", and " << on_line.size() << " loop headers start at line " << l.line
               << ": no OSR point inserted. Rebuild the guidance from a profile of this source, at the same stage "
                  "(HCCT_KPATH_STAGE).\n";
        continue;
      }
    }
    bool duplicate = false;
    for (const Site &s : sites_) duplicate |= s.header == header;
    if (duplicate) {
      errs() << "hcct osr: warning: guided loop " << describe(l) << " names a header that already has an OSR point\n";
      continue;
    }
    // The patterns' block numbers are valid only where the header's is.
    std::vector<PathPattern> patterns;
    if (header == blocks[std::min<size_t>(l.header_block, blocks.size() - 1)])
      for (const GuidedLoop::Pattern &p : l.patterns) {
        PathPattern resolved{p.path, p.factor, {}};
        for (uint32_t b : p.blocks)
          if (b < blocks.size()) resolved.blocks.push_back(blocks[b]);
        if (resolved.blocks.size() == p.blocks.size()) patterns.push_back(std::move(resolved));
      }
    sites_.push_back({&l, header, std::move(patterns)});
  }
}

bool OsrPointInserter::insert() {
  std::map<Function *, std::vector<Site>> by_function;
  for (const Site &s : sites_) by_function[s.header->getParent()].push_back(s);
  bool changed = false;
  for (auto &[f, sites] : by_function) changed |= mode_ == OsrMode::kVersion ? version_in(*f, sites) : insert_in(*f, sites);
  return changed;
}

bool OsrPointInserter::version_in(Function &f, std::vector<Site> sites) {
  OptimizationRemarkEmitter remarks(&f);
  LoopVersioner versioner(f, remarks);
  std::stable_sort(sites.begin(), sites.end(),
                   [&](const Site &a, const Site &b) { return versioner.depth(a.header) > versioner.depth(b.header); });
  bool changed = false;
  for (const Site &s : sites) {
    bool done = versioner.version(s.header, s.loop->threshold, describe(*s.loop), s.patterns);
    changed |= done;
    if (done && verbose())
      errs() << "hcct osr: " << f.getName() << ": loop " << s.loop->key << " versioned, threshold " << s.loop->threshold
             << "\n";
  }
  // Wrong code is never an option: a versioned function that does not verify fails the build.
  std::string problems;
  raw_string_ostream os(problems);
  if (changed && verifyFunction(f, &os))
    m_.getContext().diagnose(PluginError("hcct osr: internal error: versioning " + f.getName().str() +
                                         " made invalid IR: " + os.str()));
  return changed;
}

bool OsrPointInserter::insert_in(Function &f, const std::vector<Site> &sites) {
  LLVMContext &ctx = m_.getContext();
  Type *i8p = Type::getInt8PtrTy(ctx);
  Type *i32 = Type::getInt32Ty(ctx);
  Type *i64 = Type::getInt64Ty(ctx);
  // struct hcct_osr_point (hcct/oracle.h)
  StructType *point_ty = StructType::getTypeByName(ctx, "hcct.osr.point");
  if (!point_ty) point_ty = StructType::create(ctx, {i32, i32, i8p, i8p, i64, i32, i32, i64, i8p}, "hcct.osr.point");
  PointerType *point_ptr = PointerType::getUnqual(point_ty);
  FunctionType *handler_ty = FunctionType::get(Type::getVoidTy(ctx), {point_ptr, i64}, false);
  Function *handler = m_.getFunction("hcct_osr_handler");
  Value *callee = nullptr;
  if (!handler) {
    handler = Function::Create(handler_ty, GlobalValue::ExternalWeakLinkage, "hcct_osr_handler", m_);
  }
  callee = handler->getFunctionType() == handler_ty ? static_cast<Value *>(handler)
                                                    : ConstantExpr::getBitCast(handler, PointerType::getUnqual(handler_ty));
  // Only a handler that may be missing at run time needs the address test.
  bool test_address = handler->hasExternalWeakLinkage();

  SmallVector<std::pair<const BasicBlock *, const BasicBlock *>, 16> back;
  FindFunctionBackedges(f, back);
  std::vector<AllocaInst *> counters;
  IRBuilder<> entry(&*f.getEntryBlock().getFirstInsertionPt());
  MDNode *weights = MDBuilder(ctx).createBranchWeights(1, 1u << 20);

  for (const Site &s : sites) {
    const GuidedLoop &l = *s.loop;
    BasicBlock *h = s.header;
    // The loop: latches are the sources of back edges into h; the body reaches a latch without
    // passing h. Entry edges come from everything else.
    DenseSet<BasicBlock *> body{h};
    std::vector<BasicBlock *> work;
    for (auto &[from, to] : back)
      if (to == h) {
        auto *latch = const_cast<BasicBlock *>(from);
        if (body.insert(latch).second) work.push_back(latch);
      }
    while (!work.empty()) {
      BasicBlock *v = work.back();
      work.pop_back();
      for (BasicBlock *p : predecessors(v))
        if (body.insert(p).second) work.push_back(p);
    }
    if (body.size() == 1 && std::none_of(back.begin(), back.end(), [&](auto &e) { return e.first == h && e.second == h; })) {
      errs() << "hcct osr: warning: " << describe(l) << ": the header has no back edge any more: no OSR point\n";
      continue;
    }

    Constant *point_init = ConstantStruct::get(
        point_ty, {ConstantInt::get(i32, kPointVersion), ConstantInt::get(i32, l.line),
                   string_constant(m_, l.key, "hcct.osr.key"), string_constant(m_, l.function, "hcct.osr.function"),
                   ConstantInt::get(i64, l.threshold), ConstantInt::get(i32, l.header_block), ConstantInt::get(i32, l.rank),
                   ConstantInt::get(i64, 0), ConstantPointerNull::get(cast<PointerType>(i8p))});
    // Writable: the runtime's default handler counts events in it.
    auto *point = new GlobalVariable(m_, point_ty, false, GlobalValue::InternalLinkage, point_init, "hcct.osr.point");
    point->setAlignment(Align(8));

    AllocaInst *count = entry.CreateAlloca(i64, nullptr, "hcct.osr.count");
    entry.CreateStore(ConstantInt::get(i64, 0), count);
    counters.push_back(count);
    std::vector<BasicBlock *> preds(pred_begin(h), pred_end(h));
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    for (BasicBlock *p : preds)
      if (!body.count(p)) new StoreInst(ConstantInt::get(i64, 0), count, p->getTerminator());

    const DILocation *loc = first_location(*h);
    IRBuilder<> b(&*h->getFirstInsertionPt());
    if (loc) b.SetCurrentDebugLocation(DebugLoc(loc));
    Value *c = b.CreateAdd(b.CreateLoad(i64, count, "hcct.osr.c"), ConstantInt::get(i64, 1), "hcct.osr.c1");
    b.CreateStore(c, count);
    Value *hit = b.CreateICmpEQ(c, ConstantInt::get(i64, l.threshold), "hcct.osr.hit");
    Instruction *rest = cast<Instruction>(hit)->getNextNode();
    Instruction *then = SplitBlockAndInsertIfThen(hit, rest, false, weights);
    then->getParent()->setName("hcct.osr.fire");
    if (test_address) {
      IRBuilder<> t(then);
      Value *present = t.CreateICmpNE(handler, ConstantPointerNull::get(handler->getType()), "hcct.osr.handler");
      then = SplitBlockAndInsertIfThen(present, then, false);
      then->getParent()->setName("hcct.osr.call");
    }
    IRBuilder<> t(then);
    if (loc) t.SetCurrentDebugLocation(DebugLoc(loc));
    CallInst *call = t.CreateCall(handler_ty, callee, {point, c});
    call->addFnAttr(Attribute::Cold);
    if (verbose())
      errs() << "hcct osr: " << f.getName() << ": OSR point " << l.key << " at header block " << l.header_block << " (line "
             << l.line << "), threshold " << l.threshold << "\n";
  }
  if (counters.empty()) return false;
  DominatorTree dt(f);
  std::vector<AllocaInst *> promotable;
  for (AllocaInst *a : counters)
    if (isAllocaPromotable(a)) promotable.push_back(a);
  if (!promotable.empty()) PromoteMemToReg(promotable, dt);
  return true;
}

}  // namespace hcct::kpath
