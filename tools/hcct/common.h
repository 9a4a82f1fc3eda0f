// Shared pieces of the hcct subcommands: registration, input selection, symbol lookup and output
// formatting. A new subcommand is a cmd_<name>.cc defining add_<name>_command() plus one line in
// main.cc.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "hcct/analysis/json.h"
#include "hcct/analysis/names.h"
#include "hcct/analysis/profile.h"
#include "hcct/analysis/reader.h"
#include "hcct/analysis/symbolizer.h"
#include "hcct/analysis/text.h"
#include "hcct/analysis/walk.h"

namespace hcct::cli {

// The formatting every output shares lives in the analysis library (hcct/analysis/text.h,
// names.h, json.h), beside the exporters that use it too.
using analysis::base_name;
using analysis::calls_summary;
using analysis::describe_call_site;
using analysis::describe_routine;
using analysis::format_percent;
using analysis::hex;
using analysis::json;
using analysis::loss_warnings;
using analysis::percent;
using analysis::PercentStyle;
using analysis::share_percent;
using analysis::shell_join;
using analysis::short_path;
using analysis::symbol_json;
using analysis::with_commas;

// What a subcommand does once the command line parsed; returns the exit code.
using Action = std::function<int()>;
// Each subcommand file defines one of these: it adds its subcommand to `app` and, from the
// subcommand's parse callback, stores its work in `action`.
using Registrar = void (*)(CLI::App &app, Action &action);

void add_record_command(CLI::App &app, Action &action);
void add_report_command(CLI::App &app, Action &action);
void add_dump_command(CLI::App &app, Action &action);
void add_info_command(CLI::App &app, Action &action);
void add_paths_command(CLI::App &app, Action &action);  // cmd_paths.cc (kpath)
void add_guide_command(CLI::App &app, Action &action);  // cmd_guide.cc (kpath: OSR guidance)
void add_export_command(CLI::App &app, Action &action);
void add_compare_command(CLI::App &app, Action &action);
void add_diff_command(CLI::App &app, Action &action);   // cmd_compare.cc: what changed between runs
void add_merge_command(CLI::App &app, Action &action);
void add_view_command(CLI::App &app, Action &action);   // cmd_view.cc: the HTML flame graph page

// An error the user can fix (bad input, missing file): main prints "hcct: <what>" and exits 1.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- Messages. Bytes read from files (META values, module paths, symbol names) must not reach
// the terminal raw: a newline would forge a second "hcct:" line, an escape sequence would drive the
// terminal. Everything printed goes through escape_text (docs/CLI.md, "Untrusted text").

// `text` with every byte that could change what a terminal shows escaped: C0 controls and DEL
// as \n, \t, \e or \xNN; a backslash as \\; bytes that are not valid UTF-8 as \xNN; the C1
// controls (U+0080..U+009F) as \u00NN. Valid printable UTF-8 passes unchanged.
std::string escape_text(std::string_view text);
// "hcct: warning: <msg>" on stderr, escaped, once per distinct message.
void warn(std::string_view msg);
// "hcct: warning: <msg>" on stderr, escaped, every time (messages about one specific input).
void warn_always(std::string_view msg);
// "hcct: note: <msg>" on stderr, escaped: what a default did to the output, and how to avoid it.
void note(std::string_view msg);

// ---- Lost and unmatched calls (docs/CLI.md, "Lost calls and unmatched exits").

// "time cpu at 1000 Hz: 2,013 samples (2.013 s), lost 0 (0.00%)" (+ hcct's error bound), for a
// profile with a time metric.
std::string time_summary(const analysis::ThreadMeta &m);

// `hcct record`'s summary: one warning each for lost calls and unmatched exits over the files a
// run wrote (their META only; files that cannot be read are left to the other subcommands).
void warn_recorded_losses(const std::vector<std::filesystem::path> &files);

// ---- Output files.

// An output file written under a temporary name in its directory and renamed over `path` by
// commit(): an error half-way (a corrupt input is only known to be corrupt once read to its end, a
// full disk) leaves the previous file, or nothing, never a truncated one. Without commit() the
// temporary is removed. With an empty path, stream() is standard output and commit() flushes it.
class OutputFile {
 public:
  explicit OutputFile(std::string path);
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  ~OutputFile();
  std::ostream &stream();
  void commit();  // UserError naming the file if it cannot be completed

 private:
  std::string path_, tmp_;
  std::vector<char> buffer_;  // outlives file_: on an error the stream flushes into it while closing
  std::ofstream file_;
};

// ---- Input selection shared by report, dump, info (and later commands).

struct InputOptions {
  std::string dir = "hcct.data";
  std::optional<uint64_t> pid;
  std::optional<uint64_t> thread;
  bool json = false;
  bool no_symbols = false;
};

// Adds DIR (positional, default hcct.data), --pid, --thread, --json and (if `symbols`) --no-symbols.
// Returns the --thread option so that callers can declare exclusions.
CLI::Option *add_input_options(CLI::App *sub, InputOptions &in, bool symbols = true);

struct Selection {
  const analysis::Process *process;
  std::vector<const analysis::ThreadProfile *> threads;
};
// The processes and threads of `set` that --pid / --thread select; UserError if nothing matches.
std::vector<Selection> select(const analysis::ProfileSet &set, const InputOptions &in);

// The profile files that --pid / --thread select, grouped by process, without reading them;
// UserError if nothing matches.
struct FileSelection {
  uint64_t pid;
  std::vector<analysis::ProfileFile> files;
};
std::vector<FileSelection> select_files(const InputOptions &in);

// Opens a stream on a listed file, or reads it whole, and checks META's pid and thread_seq against
// its name.
std::unique_ptr<analysis::ProfileStream> open_stream(const analysis::ProfileFile &f);
analysis::ThreadProfile read_listed_profile(const analysis::ProfileFile &f);

// ---- Filters shared by report and the exports (docs/EXPORTS.md, "Filters").

// Formats that write every context's whole stack (folded, pprof) grow with depth × contexts: they
// keep this many frames unless --depth says otherwise, and deeper contexts are charged to their
// ancestor at that depth (totals kept, the charge stated).
inline constexpr uint32_t kDefaultStackFrames = 128;
// ... and leave out contexts below this share of all calls (a 573k-context profile made a 1.6 GB
// folded file that viewers choke on, for boxes narrower than a pixel); the loss is stated.
inline constexpr double kDefaultStackMinShare = 1e-6;

struct FilterOptions {
  std::string focus, ignore;  // ECMAScript regular expressions, searched in demangled function names
  std::optional<uint32_t> depth;  // --depth; 0: all levels; unset: the exporter's default
  std::optional<double> min_share;  // --min-share; unset: the exporter's default (0 or kDefaultStackMinShare)
  std::optional<double> min_total;  // --min-total; unset: off
};
// --focus, --ignore (and, if `depth_and_share`, --depth and --min-share).
void add_filter_options(CLI::App *sub, FilterOptions &f, bool depth_and_share = true);

// ---- Progress on a terminal: "hcct: <label>: 45% ..." on stderr, only when stderr is a tty and
// the work has taken longer than a second; the line is cleared when done.
class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress();
  void update(uint64_t done_bytes, uint64_t total_bytes);

 private:
  std::string label_;
  bool tty_;
  bool shown_ = false;
  int64_t start_ns_, last_ns_ = 0;
};

// ---- Names: symbolized, or placeholders only with --no-symbols.

// analysis::Names whose symbolizer warnings go through warn() (once per distinct message).
class Names : public analysis::Names {
 public:
  Names(const std::vector<analysis::Module> &modules, bool symbolize, std::shared_ptr<analysis::DebugInfoCache> cache)
      : analysis::Names(modules, symbolize, std::move(cache), [](const std::string &msg) { warn(msg); }) {}
};

// The walker's focus/ignore predicates for one tree: regex searches over the symbolized routine
// names, cached per address. `names` must outlive the filter.
analysis::TreeFilter make_tree_filter(const FilterOptions &f, Names &names, double min_share);

// ---- One pass over every selected tree (report, export).

struct TreeInput {
  std::string source;  // the file; empty for a merge
  const analysis::ThreadMeta *meta = nullptr;
  const std::vector<analysis::Module> *modules = nullptr;
  uint64_t node_count = 0;
  std::vector<uint64_t> threads;  // thread_seq values
  bool merged = false;
  analysis::NodeSource *nodes = nullptr;
  Names *names = nullptr;
  std::function<void(uint64_t)> progress;  // for walk_tree
};
// Per selected file a stream (memory independent of the tree's size); with `merge`, per process
// the in-memory merge of its selected threads. `fn` must consume tree.nodes to the end (that is
// when a streamed file is verified).
void for_each_tree(const InputOptions &in, bool merge, const std::function<void(TreeInput &tree)> &fn);

// ---- Formatting.

// Text trees indent two spaces per level up to kIndentLevels levels; deeper lines keep that indent
// and start with "[depth D] ", so a line's width does not grow with the depth of the tree and the
// output of a deep recursion stays linear in its number of contexts (docs/CLI.md).
inline constexpr uint32_t kIndentLevels = 32;
// The indentation of a line at `depth` (1 = a child of the root).
std::string indentation(uint32_t depth);

std::string human_bytes(uint64_t bytes);
// A short "pid P, thread S (tid T, status)" label.
std::string thread_label(const analysis::ThreadProfile &t);

// Writes `j` to stdout followed by a newline.
void print_json(const json &j, std::ostream &out = std::cout);

}  // namespace hcct::cli
