#include "common.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>

namespace hcct::cli {

using analysis::ProfileSet;
using analysis::Symbol;
using analysis::ThreadProfile;

CLI::Option *add_input_options(CLI::App *sub, InputOptions &in, bool symbols) {
  sub->add_option("DIR", in.dir, "profile directory written by 'hcct record', or one .hcct file")
      ->capture_default_str();
  sub->add_option("--pid", in.pid, "only the process with this pid");
  CLI::Option *thread =
      sub->add_option("--thread", in.thread, "only the thread with this number (thread_seq; 0 = main thread)");
  sub->add_flag("--json", in.json, "machine-readable output on stdout (docs/CLI.md)");
  if (symbols) sub->add_flag("--no-symbols", in.no_symbols, "print addresses as module+offset; do not read binaries");
  return thread;
}

std::vector<Selection> select(const ProfileSet &set, const InputOptions &in) {
  std::vector<Selection> out;
  for (const analysis::Process &p : set.processes) {
    if (in.pid && p.pid != *in.pid) continue;
    Selection s{&p, {}};
    for (const ThreadProfile &t : p.threads)
      if (!in.thread || t.meta.thread_seq == *in.thread) s.threads.push_back(&t);
    if (!s.threads.empty()) out.push_back(std::move(s));
  }
  if (out.empty()) {
    std::string have;
    for (const analysis::Process &p : set.processes) {
      have += have.empty() ? "" : ", ";
      have += std::to_string(p.pid) + " (threads";
      for (const ThreadProfile &t : p.threads) have += " " + std::to_string(t.meta.thread_seq);
      have += ")";
    }
    std::string want = in.pid ? "process " + std::to_string(*in.pid) : "any process";
    if (in.thread) want = "thread " + std::to_string(*in.thread) + " in " + want;
    throw UserError(set.location + ": no " + want + "; it holds " + have);
  }
  return out;
}

// ---- Names

namespace {
// Every thread file gets its own Symbolizer, and each reports a missing or stale binary once; the
// user needs to hear it once per run.
void warn_once(const std::string &msg) {
  static std::set<std::string> seen;
  if (seen.insert(msg).second) std::cerr << "hcct: warning: " << msg << "\n";
}
}  // namespace

Names::Names(const std::vector<analysis::Module> &modules, bool symbolize,
             std::shared_ptr<analysis::DebugInfoCache> cache)
    : modules_(modules) {
  if (symbolize) sym_.emplace(modules, std::move(cache), warn_once);
}

const Symbol &Names::placeholder(uint64_t address, std::unordered_map<uint64_t, Symbol> &cache) {
  auto it = cache.find(address);
  if (it != cache.end()) return it->second;
  Symbol s;
  s.address = address;
  for (const analysis::Module &m : modules_) {
    if (m.contains(address)) {
      s.module = &m;
      s.offset = address - m.bias;
      break;
    }
  }
  s.function = analysis::address_placeholder(s.module, address);
  return cache.emplace(address, std::move(s)).first->second;
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
    for (const analysis::SourceFrame &f : s.frames) {
      frames.push_back({{"function", f.function},
                        {"file", f.file.empty() ? json() : json(f.file)},
                        {"line", f.line ? json(f.line) : json()}});
    }
    j["frames"] = std::move(frames);
  }
  return j;
}

// ---- Formatting

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string with_commas(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string percent(uint64_t part, uint64_t whole) {
  if (!whole) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", static_cast<double>(100.0L * part / whole));
  return buf;
}

std::string human_bytes(uint64_t b) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string short_path(const std::string &path) {
  static const std::string cwd = [] {
    std::error_code ec;
    std::string c = std::filesystem::current_path(ec).string();
    return ec ? std::string() : c + "/";
  }();
  if (!cwd.empty() && cwd != "/" && path.size() > cwd.size() && path.compare(0, cwd.size(), cwd) == 0)
    return path.substr(cwd.size());
  return path;
}

std::string shell_join(const std::vector<std::string> &args) {
  std::string out;
  for (const std::string &a : args) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](unsigned char c) {
      return std::isalnum(c) || std::string_view("-_./=:,+@%").find(char(c)) != std::string_view::npos;
    });
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

std::string thread_label(const ThreadProfile &t) {
  const analysis::ThreadMeta &m = t.meta;
  if (const std::string *merged = m.find_extra("merged_threads"))
    return "pid " + std::to_string(m.pid) + ", threads " + *merged + " merged";
  return "pid " + std::to_string(m.pid) + ", thread " + std::to_string(m.thread_seq) + " (tid " + std::to_string(m.tid) +
         ", " + std::string(analysis::to_string(m.status)) + ")";
}

void print_json(const json &j) {
  // Invalid UTF-8 in paths or symbol names is replaced rather than aborting the dump.
  std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

}  // namespace hcct::cli
