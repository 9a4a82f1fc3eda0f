#include "common.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>

#include "hcct/analysis/merge.h"

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

std::vector<FileSelection> select_files(const InputOptions &in) {
  std::vector<analysis::ProfileFile> all = analysis::list_profiles(in.dir);
  std::vector<FileSelection> out;
  for (const analysis::ProfileFile &f : all) {
    if (in.pid && f.pid != *in.pid) continue;
    if (in.thread && f.seq != *in.thread) continue;
    if (out.empty() || out.back().pid != f.pid) out.push_back({f.pid, {}});
    out.back().files.push_back(f);
  }
  if (out.empty()) {
    std::string have;
    for (size_t i = 0; i < all.size(); ++i) {
      if (i == 0 || all[i].pid != all[i - 1].pid) have += std::string(have.empty() ? "" : "), ") + std::to_string(all[i].pid) + " (threads";
      have += " " + std::to_string(all[i].seq);
    }
    have += ")";
    std::string want = in.pid ? "process " + std::to_string(*in.pid) : "any process";
    if (in.thread) want = "thread " + std::to_string(*in.thread) + " in " + want;
    throw UserError(in.dir + ": no " + want + "; it holds " + have);
  }
  return out;
}

namespace {
void check_listed(const analysis::ProfileFile &f, const std::string &source, const analysis::ThreadMeta &m) {
  if (m.pid != f.pid || m.thread_seq != f.seq)
    throw analysis::FormatError(source + ": META says pid " + std::to_string(m.pid) + " thread_seq " +
                                std::to_string(m.thread_seq) + ", the file name says otherwise");
}
}  // namespace

std::unique_ptr<analysis::ProfileStream> open_stream(const analysis::ProfileFile &f) {
  auto s = std::make_unique<analysis::ProfileStream>(f.path);
  check_listed(f, s->source(), s->meta());
  return s;
}

analysis::ThreadProfile read_listed_profile(const analysis::ProfileFile &f) {
  analysis::ThreadProfile t = analysis::read_profile(f.path);
  check_listed(f, t.source, t.meta);
  return t;
}

void for_each_tree(const InputOptions &in, bool merge, const std::function<void(TreeInput &tree)> &fn) {
  auto cache = std::make_shared<analysis::DebugInfoCache>();
  for (const FileSelection &sel : select_files(in)) {
    if (merge && sel.files.size() > 1) {
      std::vector<analysis::ThreadProfile> threads;
      for (const analysis::ProfileFile &f : sel.files) threads.push_back(read_listed_profile(f));
      analysis::ThreadProfile merged;
      try {
        merged = analysis::merge_threads(std::span<const analysis::ThreadProfile>(threads));
      } catch (const std::invalid_argument &e) {
        throw UserError(in.dir + ": pid " + std::to_string(sel.pid) + ": " + e.what());
      }
      threads.clear();
      analysis::MemorySource src(merged);
      Names names(merged.modules, !in.no_symbols, cache);
      TreeInput t;
      t.meta = &merged.meta;
      t.modules = &merged.modules;
      t.node_count = merged.nodes.size();
      for (const analysis::ProfileFile &f : sel.files) t.threads.push_back(f.seq);
      t.merged = true;
      t.nodes = &src;
      t.names = &names;
      fn(t);
      continue;
    }
    for (const analysis::ProfileFile &f : sel.files) {
      std::unique_ptr<analysis::ProfileStream> stream = open_stream(f);
      analysis::StreamSource src(*stream);
      Names names(stream->modules(), !in.no_symbols, cache);
      Progress progress("reading " + stream->source());
      TreeInput t;
      t.source = stream->source();
      t.meta = &stream->meta();
      t.modules = &stream->modules();
      t.node_count = stream->node_count();
      t.threads = {f.seq};
      t.nodes = &src;
      t.names = &names;
      analysis::ProfileStream *s = stream.get();
      t.progress = [s, &progress](uint64_t) { progress.update(s->bytes_read(), s->file_size()); };
      fn(t);
    }
  }
}

void add_filter_options(CLI::App *sub, FilterOptions &f, bool depth_and_share) {
  sub->add_option("--focus", f.focus,
                  "only contexts through a function matching this regex (ECMAScript, searched in the demangled name)");
  sub->add_option("--ignore", f.ignore, "drop contexts through a function matching this regex");
  if (depth_and_share) {
    sub->add_option("--depth", f.depth, "at most this many levels; deeper selected contexts are charged to their "
                                        "ancestor at this depth (0: all; folded and pprof default to " +
                                        std::to_string(kDefaultStackFrames) + ")");
    // No capture_default_str: unset means "the format's default" (folded and pprof: 1e-6).
    sub->add_option("--min-share", f.min_share,
                    "only contexts whose count is at least floor(F*(N+lost)), and their ancestors (0: all; folded and "
                    "pprof default to 1e-6)")
        ->check(CLI::Range(0.0, 1.0));
    sub->add_option("--min-total", f.min_total,
                    "also keep every context whose subtree (it and everything it called) holds at least "
                    "floor(F*(N+lost)) calls, with its ancestors: where the work is when calls are spread thin")
        ->check(CLI::Range(0.0, 1.0));
  }
}

namespace {
std::regex compile_regex(const std::string &pattern, const char *option) {
  try {
    return std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error &e) {
    throw UserError(std::string(option) + ": invalid regular expression '" + pattern + "': " + e.what());
  }
}
}  // namespace

analysis::TreeFilter make_tree_filter(const FilterOptions &f, Names &names, double min_share) {
  analysis::TreeFilter t;
  t.min_share = min_share;
  t.max_depth = f.depth.value_or(0);
  t.keep_total_share = f.min_total.value_or(-1);
  auto predicate = [&names](std::regex re) {
    auto cache = std::make_shared<std::unordered_map<uint64_t, bool>>();
    return [&names, re = std::move(re), cache](uint64_t routine) {
      auto it = cache->find(routine);
      if (it != cache->end()) return it->second;
      bool m = std::regex_search(names.routine(routine).function, re);
      cache->emplace(routine, m);
      return m;
    };
  };
  if (!f.focus.empty()) t.focus = predicate(compile_regex(f.focus, "--focus"));
  if (!f.ignore.empty()) t.ignore = predicate(compile_regex(f.ignore, "--ignore"));
  return t;
}

namespace {
int64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
}  // namespace

Progress::Progress(std::string label) : label_(std::move(label)), tty_(isatty(STDERR_FILENO)), start_ns_(now_ns()) {}

Progress::~Progress() {
  if (shown_) std::cerr << "\r\033[K" << std::flush;
}

void Progress::update(uint64_t done, uint64_t total) {
  if (!tty_) return;
  int64_t t = now_ns();
  if (t - start_ns_ < 1000000000 || t - last_ns_ < 200000000) return;
  last_ns_ = t;
  shown_ = true;
  const std::string done_share = format_percent(total ? 100.0 * double(done) / double(total) : 0.0, {.digits = 0});
  std::cerr << "\rhcct: " << label_ << ": " << done_share << " (" << human_bytes(done) << " of " << human_bytes(total)
            << ")\033[K" << std::flush;
}

// ---- Names

std::string escape_text(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto hex_byte = [&out](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == 0x1b) {
      out += "\\e";
    } else if (c < 0x20 || c == 0x7f) {
      hex_byte(c);
    } else if (c < 0x80) {
      out += char(c);
    } else {
      // A UTF-8 sequence is kept whole if it is well formed (shortest form, no surrogates, at most
      // U+10FFFF) and not a C1 control; otherwise its first byte is escaped and the rest re-examined.
      size_t len = c >= 0xf8 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
      uint32_t cp = len == 4 ? c & 0x07 : len == 3 ? c & 0x0f : c & 0x1f;
      bool ok = len && i + len <= text.size();
      for (size_t k = 1; ok && k < len; ++k) {
        const unsigned char b = static_cast<unsigned char>(text[i + k]);
        ok = (b >> 6) == 2;
        cp = cp << 6 | (b & 0x3f);
      }
      static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = ok && cp >= kMin[len] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
      if (!ok) {
        hex_byte(c);
      } else if (cp < 0xa0) {
        out += "\\u00";
        out += kHex[cp >> 4];
        out += kHex[cp & 15];
        i += len;
        continue;
      } else {
        out.append(text.substr(i, len));
        i += len;
        continue;
      }
    }
    ++i;
  }
  return out;
}

void note(std::string_view msg) { std::cerr << "hcct: note: " << escape_text(msg) << "\n"; }

void warn_always(std::string_view msg) { std::cerr << "hcct: warning: " << escape_text(msg) << "\n"; }

// Every thread file gets its own Symbolizer, and each reports a missing or stale binary once; the
// user needs to hear it once per run.
void warn(std::string_view msg) {
  static std::set<std::string, std::less<>> seen;
  if (seen.insert(std::string(msg)).second) warn_always(msg);
}

void warn_recorded_losses(const std::vector<std::filesystem::path> &files) {
  analysis::ThreadMeta total;  // calls, lost, unmatched_exits summed over the files
  for (const std::filesystem::path &f : files) {
    try {
      analysis::ProfileStream s(f.string());  // reads META and MODS, not the tree
      const analysis::ThreadMeta &m = s.meta();
      total.calls += m.calls;
      total.lost += m.lost;
      total.unmatched_exits += m.unmatched_exits;
    } catch (const std::exception &) {
    }
  }
  for (const std::string &w : loss_warnings(total)) warn_always(w);
}

std::string indentation(uint32_t depth) {
  const uint32_t level = depth ? depth - 1 : 0;
  if (level < kIndentLevels) return std::string(2 * size_t(level), ' ');
  return std::string(2 * size_t(kIndentLevels - 1), ' ') + "[depth " + std::to_string(depth) + "] ";
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

std::string thread_label(const ThreadProfile &t) {
  const analysis::ThreadMeta &m = t.meta;
  if (const std::string *merged = m.find_extra(format::meta::kMergedThreads))
    return "pid " + std::to_string(m.pid) + ", threads " + *merged + " merged";
  if (const std::string *from = m.find_extra(format::meta::kMergedFrom))
    return "pid " + std::to_string(m.pid) + ", merged from " + *from + " (pid.thread)";
  return "pid " + std::to_string(m.pid) + ", thread " + std::to_string(m.thread_seq) + " (tid " + std::to_string(m.tid) +
         ", " + std::string(analysis::to_string(m.status)) + ")";
}

void print_json(const json &j, std::ostream &out) {
  // Invalid UTF-8 in paths or symbol names is replaced rather than aborting the dump.
  out << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  std::filesystem::path target(path_);
  tmp_ = (target.parent_path() / ("." + target.filename().string() + ".tmp." + std::to_string(getpid()))).string();
  buffer_.resize(size_t(1) << 20);
  file_.rdbuf()->pubsetbuf(buffer_.data(), std::streamsize(buffer_.size()));
  file_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!file_) throw UserError(path_ + ": cannot write: " + std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (tmp_.empty()) return;
  file_.close();
  std::remove(tmp_.c_str());
}

std::ostream &OutputFile::stream() { return path_.empty() ? std::cout : file_; }

void OutputFile::commit() {
  if (path_.empty()) {
    std::cout.flush();
    return;
  }
  file_.close();
  if (!file_) throw UserError(path_ + ": error writing: " + std::strerror(errno));
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) throw UserError(path_ + ": " + std::strerror(errno));
  tmp_.clear();
}

// "time cpu at 1000 Hz: 2,013 samples (2.013 s), lost 0 (0.00%)" (+ hcct's error bound).
std::string time_summary(const analysis::ThreadMeta &m) {
  char buf[160];
  double hz = 1e9 / double(m.sample_period_ns);
  uint64_t all = m.samples + m.samples_lost;
  std::snprintf(buf, sizeof buf, "time %s at %.0f Hz: ", m.time.c_str(), hz);
  std::string out = escape_text(buf) + with_commas(m.samples) + " samples";
  std::snprintf(buf, sizeof buf, " (%.3f s), lost ", double(m.samples) * double(m.sample_period_ns) / 1e9);
  out += buf + with_commas(m.samples_lost);
  out += " (" + format_percent(all ? 100.0 * double(m.samples_lost) / double(all) : 0.0) + ")";
  if (m.mode == analysis::Mode::hcct) out += ", time min_count " + with_commas(m.time_min_count);
  return out;
}

}  // namespace hcct::cli
