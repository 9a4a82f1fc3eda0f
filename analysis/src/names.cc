#include "hcct/analysis/names.h"

#include "hcct/analysis/json.h"
#include "hcct/analysis/text.h"

namespace hcct::analysis {

Names::Names(const std::vector<Module> &modules, bool symbolize, std::shared_ptr<DebugInfoCache> cache,
             WarningSink warn)
    : modules_(modules), module_map_(modules_) {
  if (symbolize) sym_.emplace(modules, std::move(cache), std::move(warn));
}

const Symbol &Names::placeholder(uint64_t address, std::unordered_map<uint64_t, Symbol> &cache) {
  auto it = cache.find(address);
  if (it != cache.end()) return it->second;
  Symbol s;
  s.address = address;
  if (int64_t i = module_map_.find(address); i >= 0) {
    s.module = &modules_[size_t(i)];
    s.offset = address - s.module->bias;
  }
  s.function = address_placeholder(s.module, address);
  return cache.emplace(address, std::move(s)).first->second;
}

size_t Names::module_index(const Module *m) const {
  return size_t(m - (sym_ ? sym_->modules().data() : modules_.data()));
}

const Symbol &Names::routine(uint64_t address) {
  return sym_ ? sym_->routine(address) : placeholder(address, routines_);
}
const Symbol &Names::call_site(uint64_t address) {
  return sym_ ? sym_->call_site(address) : placeholder(address, sites_);
}

namespace {
std::string location(const std::string &file, uint32_t line) {
  if (file.empty()) return {};
  return short_path(file) + (line ? ":" + std::to_string(line) : "");
}
}  // namespace

std::string describe_routine(const Symbol &s) {
  std::string out = s.function;
  std::string loc = location(s.file, s.line);
  if (!loc.empty()) out += " (" + loc + ")";
  if (s.stale) out += " (stale binary)";
  return out;
}

std::string describe_call_site(const Symbol &s) {
  if (s.stale) return s.function + " (stale binary)";
  if (s.frames.empty() || s.file.empty()) return s.function;
  std::string out = location(s.frames[0].file, s.frames[0].line);
  for (size_t k = 0; k + 1 < s.frames.size(); ++k) {
    out += " in " + s.frames[k].function + ", inlined at " + location(s.frames[k + 1].file, s.frames[k + 1].line);
  }
  return out;
}

json time_json(const ThreadMeta &m) {
  json j;
  j["time"] = m.time;
  j["sample_period_ns"] = m.sample_period_ns;
  j["samples"] = m.samples;
  j["samples_lost"] = m.samples_lost;
  j["time_error_bound"] = m.mode == Mode::hcct ? json(m.time_min_count) : json(0);
  return j;
}

json symbol_json(const Symbol &s, bool with_frames) {
  json j;
  j["name"] = s.function;
  j["resolved"] = s.resolved;
  j["file"] = s.file.empty() ? json() : json(s.file);
  j["line"] = s.line ? json(s.line) : json();
  j["module"] = s.module ? json(s.module->path) : json();
  j["offset"] = s.module ? json(hex(s.offset)) : json();
  if (s.stale) j["stale"] = true;
  if (with_frames) {
    json frames = json::array();
    for (const SourceFrame &f : s.frames) {
      frames.push_back({{"function", f.function},
                        {"file", f.file.empty() ? json() : json(f.file)},
                        {"line", f.line ? json(f.line) : json()}});
    }
    j["frames"] = std::move(frames);
  }
  return j;
}

}  // namespace hcct::analysis
