//===- hcct_plugin.cc - GCC plugin inserting gated hcct call/return probes ===//
//
// Inserts a probe at the entry and at every exit of each selected function:
//
//   if (*__hcct_gate_ptr)          // the unit's pointer to the runtime's gate byte (or to a zero byte)
//     __hcct_enter_open(&this_fn, __builtin_return_address(0));
//   try {
//     <original body>
//   } finally {
//     if (*__hcct_gate_ptr)
//       __hcct_exit_open(&this_fn);    // never a tail call
//   }
//
// The pass runs before "lower", i.e. while the body is still structured GIMPLE, so the exit probe is a
// GIMPLE_TRY_FINALLY cleanup: gcc's EH lowering then runs it on every return *and* when an exception
// unwinds the frame, exactly as it does for its own -finstrument-functions (gimplify.cc). Instrumenting
// before inlining also keeps one probe pair per source-level call, like -finstrument-functions, so the
// two produce the same calling-context tree. (The probes' calls go in first as stand-ins shaped like
// -finstrument-functions' hooks and get their gate once inlining is decided, so that gcc inlines the
// same calls in both: see "The probe" below.) stage=late instead inserts the probes into the
// optimised body, at the entry and on every path out, tail calls included.
//
// See docs/GCC-PLUGIN.md for the options, the selection rules and the generated code.
//
//===----------------------------------------------------------------------===//

// System and C++ headers first: gcc's system.h (pulled in by gcc-plugin.h) poisons malloc, strdup, ...
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <regex.h>
#include <unistd.h>

#include "gcc-plugin.h"
#include "plugin-version.h"

#include "tree.h"
#include "tree-pass.h"
#include "context.h"
#include "function.h"
#include "basic-block.h"
#include "gimple.h"
#include "gimple-iterator.h"
#include "gimple-walk.h"
#include "gimple-expr.h"
#include "stringpool.h"
#include "attribs.h"
#include "langhooks.h"
#include "diagnostic-core.h"
#include "intl.h"  // open_quote, close_quote: gcc's quotes in the user's locale
#include "ggc.h"
#include "varasm.h"
#include "cgraph.h"
#include "cfghooks.h"
#include "ssa.h"
#include "tree-cfg.h"
#include "tree-into-ssa.h"
#include "predict.h"
#include "gimple-predict.h"
#include "gimplify.h"
#include "tree-eh.h"
#include "memmodel.h"
#include "rtl.h"
#include "emit-rtl.h"
#include "output.h"
#include "rtl-iter.h"
#include "target.h"

#include "hcct/unit_abi.h"

// gcc loads only plugins that declare themselves GPL-compatible.
int plugin_is_GPL_compatible;

namespace {

constexpr const char *kPluginVersion = "hcct_plugin 0.2 (hcct probe ABI 2)";

// ---------------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------------

// One compiled POSIX extended regular expression and its source text (for messages).
struct Pattern {
  std::string source;
  regex_t re;
};

struct Options {
  // The plugin's argument prefix, e.g. "hcct_plugin" when loaded from hcct_plugin.so; gcc derives it
  // from the file name, so messages print whatever the user has to type.
  std::string prefix;
  std::vector<Pattern *> include, exclude, include_file, exclude_file;
  // Leaf functions with fewer GIMPLE statements than this are not instrumented; 0 disables.
  unsigned long min_size = 0;
  std::string list_path;
  int list_fd = -1;
  // Where the probes go: before inlining (each source-level function, inlined copies included;
  // exits by exception run the exit probe as a cleanup) or after it (the optimised program's real
  // functions and clones; no exit probe on exception or longjmp exits). docs/INLINING.md.
  // Late by default: with profiling off it costs 1.00-1.05x native on the real workloads, where
  // every inlined copy's probes cost the early stage 1.12-2.84x (docs/GCC-PLUGIN.md, "Which stage
  // by default"); under -flto, which the late stage cannot serve yet, the default is early.
  enum class Stage { kEarly, kLate } stage = Stage::kLate;
  // Give the runtime the table of instrumented functions per call site where the machine frame
  // alone does not tell them (inlined functions with stage=early; `.cold` and `.part` pieces), so
  // that a burst can rebuild a calling path from the machine stack (docs/GCC-PLUGIN.md, "The unit
  // descriptor"). Off: the unit says it has none, and burst_sync=auto keeps a shadow stack.
  bool unwind_table = true;
  // The entry probe's clock (docs/GCC-PLUGIN.md, "The counting probe"): `gate` tests the gate byte
  // at both probes; `count` has the entry probe count the thread's calls down in a thread-local
  // counter of the module and call in when it goes negative, and the exit probe test a
  // thread-local byte of the module, so that a burst can be opened by the thread's own calls with
  // nothing called between bursts (docs/BURSTING.md, "The count clock").
  bool count_clock = false;
};

Options opts;

bool matches_any(const std::vector<Pattern *> &patterns, const std::string &text) {
  for (const Pattern *p : patterns)
    if (regexec(&p->re, text.c_str(), 0, nullptr, 0) == 0)
      return true;
  return false;
}

// Compiles `value` for `-fplugin-arg-PREFIX-key=value`; reports a compile error and returns false if
// it is missing or is not a valid POSIX extended regular expression.
bool add_pattern(std::vector<Pattern *> &to, const char *key, const char *value) {
  if (!value || !*value) {
    error("%<-fplugin-arg-%s-%s%> needs a regular expression, e.g. %<-fplugin-arg-%s-%s=^ns::%>",
          opts.prefix.c_str(), key, opts.prefix.c_str(), key);
    return false;
  }
  Pattern *p = new Pattern{value, {}};
  int rc = regcomp(&p->re, value, REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    char msg[256];
    regerror(rc, &p->re, msg, sizeof msg);
    error("%<-fplugin-arg-%s-%s=%s%>: invalid regular expression: %s", opts.prefix.c_str(), key, value,
          msg);
    delete p;
    return false;
  }
  to.push_back(p);
  return true;
}

bool parse_size(const char *key, const char *value, unsigned long *out) {
  // strtoul alone would accept " 12", "-1" (as ULONG_MAX) and "12abc"; only plain decimal digits are
  // a size.
  bool ok = value && *value;
  for (const char *c = value; ok && *c; ++c)
    ok = *c >= '0' && *c <= '9';
  if (ok) {
    errno = 0;
    *out = strtoul(value, nullptr, 10);
    ok = errno == 0;
  }
  if (!ok)
    error("%<-fplugin-arg-%s-%s=%s%>: expected a non-negative decimal number of GIMPLE statements",
          opts.prefix.c_str(), key, value ? value : "");
  return ok;
}

// The options whose value is one of a few words, in one table that the parser, its messages and
// the help text read. Each may be given once: a second one is an error, not a silent override.
struct WordOption {
  struct Choice {
    const char *word;
    const char *meaning;  // shown in the error for a value that is none of the words
  };
  const char *key;
  std::vector<Choice> choices;
  void (*set)(size_t choice);  // the index of the word given in `choices`
};

const std::vector<WordOption> &word_options() {
  static const std::vector<WordOption> table = {
      {"stage",
       {{"early", "before inlining"}, {"late", "after inlining"}},
       [](size_t choice) { opts.stage = choice == 0 ? Options::Stage::kEarly : Options::Stage::kLate; }},
      {"unwind-table",
       {{"yes", "a site table per unit"}, {"no", "none"}},
       [](size_t choice) { opts.unwind_table = choice == 0; }},
      {"clock",
       {{"gate", "test the gate at both probes"}, {"count", "count calls down at the entry probe"}},
       [](size_t choice) { opts.count_clock = choice == 1; }},
  };
  return table;
}

const WordOption *find_word_option(const char *key) {
  for (const WordOption &option : word_options())
    if (!strcmp(key, option.key))
      return &option;
  return nullptr;
}

// The keys given so far, for "given twice".
std::set<std::string> words_given;

bool parse_word_option(const WordOption &option, const char *value) {
  if (!words_given.insert(option.key).second) {
    error("%<-fplugin-arg-%s-%s%> given twice", opts.prefix.c_str(), option.key);
    return false;
  }
  for (size_t i = 0; i < option.choices.size(); ++i) {
    if (value && !strcmp(value, option.choices[i].word)) {
      option.set(i);
      return true;
    }
  }
  std::string expected;
  for (size_t i = 0; i < option.choices.size(); ++i) {
    if (i > 0)
      expected += i + 1 == option.choices.size() ? " or " : ", ";
    // gcc's quotes, as %< %> print them in the user's locale.
    expected += std::string(open_quote) + option.choices[i].word + close_quote + " (" +
                option.choices[i].meaning + ")";
  }
  error("%<-fplugin-arg-%s-%s=%s%>: expected %s", opts.prefix.c_str(), option.key, value ? value : "",
        expected.c_str());
  return false;
}

// Every option as `key=VALUE`, the word options with their words (`stage=early|late`).
std::string known_options(const char *separator) {
  std::string known;
  for (const char *other : {"include=RE", "exclude=RE", "include-file=RE", "exclude-file=RE",
                            "min-size=N", "list=FILE"})
    known += (known.empty() ? "" : separator) + std::string(other);
  for (const WordOption &option : word_options()) {
    known += separator + std::string(option.key) + "=";
    for (size_t i = 0; i < option.choices.size(); ++i)
      known += (i ? "|" : "") + std::string(option.choices[i].word);
  }
  return known;
}

bool parse_options(const plugin_name_args *info) {
  bool ok = true;
  for (int i = 0; i < info->argc; ++i) {
    const char *key = info->argv[i].key;
    const char *value = info->argv[i].value;
    if (!strcmp(key, "include")) {
      ok &= add_pattern(opts.include, key, value);
    } else if (!strcmp(key, "exclude")) {
      ok &= add_pattern(opts.exclude, key, value);
    } else if (!strcmp(key, "include-file")) {
      ok &= add_pattern(opts.include_file, key, value);
    } else if (!strcmp(key, "exclude-file")) {
      ok &= add_pattern(opts.exclude_file, key, value);
    } else if (!strcmp(key, "min-size")) {
      ok &= parse_size(key, value, &opts.min_size);
    } else if (const WordOption *word_option = find_word_option(key)) {
      ok &= parse_word_option(*word_option, value);
    } else if (!strcmp(key, "list")) {
      if (!value || !*value) {
        error("%<-fplugin-arg-%s-list%> needs a file name", opts.prefix.c_str());
        ok = false;
        continue;
      }
      if (opts.list_fd >= 0) {
        error("%<-fplugin-arg-%s-list%> given twice", opts.prefix.c_str());
        ok = false;
        continue;
      }
      // O_APPEND: parallel compiles share one list; each line is one write(2), which an O_APPEND file
      // on a local file system receives whole and unmixed.
      opts.list_path = value;
      opts.list_fd = open(value, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
      if (opts.list_fd < 0) {
        error("%<-fplugin-arg-%s-list=%s%>: cannot open: %s", opts.prefix.c_str(), value,
              xstrerror(errno));
        ok = false;
      }
    } else {
      // gcc passes unknown keys through silently; a misspelt option must not silently instrument
      // everything.
      error("unknown option %<-fplugin-arg-%s-%s%>; known: %s", opts.prefix.c_str(), key,
            known_options(", ").c_str());
      ok = false;
    }
  }
  return ok;
}

// ---------------------------------------------------------------------------------------------------
// Selection
// ---------------------------------------------------------------------------------------------------

// The absolute, lexically normalised form of a source path (symlinks are not resolved), so that
// file patterns such as `^/usr/include/` or `/third_party/` work however the file was named on the
// command line or in an #include.
std::string normalize_path(const char *file) {
  std::string in = file;
  if (in.empty() || in[0] == '<')  // <built-in>, <command-line>
    return in;
  if (in[0] != '/')
    in = std::string(getpwd()) + "/" + in;
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= in.size()) {
    size_t slash = in.find('/', pos);
    if (slash == std::string::npos)
      slash = in.size();
    std::string part = in.substr(pos, slash - pos);
    if (part == "..") {
      if (!parts.empty())
        parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    pos = slash + 1;
  }
  std::string out;
  for (const std::string &part : parts)
    out += "/" + part;
  return out.empty() ? "/" : out;
}

// Paths repeat for every function of a file: remember the last one.
const std::string &source_path(tree fd) {
  static const char *last_in = nullptr;
  static std::string last_out;
  const char *file = DECL_SOURCE_FILE(fd);
  if (!file)
    file = "";
  if (file != last_in) {
    last_in = file;
    last_out = normalize_path(file);
  }
  return last_out;
}

struct BodyStats {
  unsigned long statements = 0;
  bool calls = false;
};

bool counts_as_call(const gimple *stmt) {
  if (gimple_call_internal_p(stmt))
    return false;
  tree callee = gimple_call_fndecl(stmt);
  return !callee || !fndecl_built_in_p(callee, BUILT_IN_NORMAL) ||
         strncmp(IDENTIFIER_POINTER(DECL_NAME(callee)), "__builtin_", 10) != 0;
}

// Counts the statements that do work (not binds, labels, debug markers or the containers of
// try/catch), and notes whether any is a call to a function that could itself be instrumented: every
// call except gcc's internal functions and the compiler's own __builtin_* intrinsics. Calls to C
// library functions count as calls (qsort, exit and friends call back into user code).
tree count_stmt(gimple_stmt_iterator *gsi, bool *handled_ops, walk_stmt_info *wi) {
  *handled_ops = false;  // descend into binds, try bodies, cleanups and handlers
  BodyStats *stats = static_cast<BodyStats *>(wi->info);
  gimple *stmt = gsi_stmt(*gsi);
  switch (gimple_code(stmt)) {
  case GIMPLE_BIND:
  case GIMPLE_LABEL:
  case GIMPLE_NOP:
  case GIMPLE_DEBUG:
  case GIMPLE_PREDICT:
  case GIMPLE_TRY:
  case GIMPLE_CATCH:
  case GIMPLE_EH_FILTER:
  case GIMPLE_EH_ELSE:
    return NULL_TREE;
  case GIMPLE_CALL:
    stats->calls |= counts_as_call(stmt);
    break;
  default:
    break;
  }
  ++stats->statements;
  return NULL_TREE;
}

BodyStats body_stats(gimple_seq body) {
  BodyStats stats;
  walk_stmt_info wi;
  memset(&wi, 0, sizeof wi);
  wi.info = &stats;
  walk_gimple_seq(body, count_stmt, nullptr, &wi);
  return stats;
}

// The same counts on a body in CFG form (the late stage): after inlining, so a function whose
// callees were all inlined is a leaf here.
BodyStats body_stats_cfg(function *fun) {
  BodyStats stats;
  basic_block bb;
  FOR_EACH_BB_FN(bb, fun) {
    for (gimple_stmt_iterator gsi = gsi_start_bb(bb); !gsi_end_p(gsi); gsi_next(&gsi)) {
      gimple *stmt = gsi_stmt(gsi);
      switch (gimple_code(stmt)) {
      case GIMPLE_LABEL:
      case GIMPLE_NOP:
      case GIMPLE_DEBUG:
      case GIMPLE_PREDICT:
        continue;
      case GIMPLE_CALL:
        stats.calls |= counts_as_call(stmt);
        break;
      default:
        break;
      }
      ++stats.statements;
    }
  }
  return stats;
}

bool has_attribute(tree fd, const char *name) {
  return lookup_attribute(name, DECL_ATTRIBUTES(fd)) != NULL_TREE;
}

// Functions no option can select, because a probe in them would be wrong, not merely noisy.
bool never_instrument(tree fd) {
  // The user's opt-out. DECL_NO_INSTRUMENT_FUNCTION_ENTRY_EXIT cannot be used: gcc sets it on every
  // function when -finstrument-functions is off.
  if (has_attribute(fd, "no_instrument_function"))
    return true;
  // A naked function has no prologue or epilogue and its body is asm that must not be disturbed; a
  // probe would clobber registers and run after its asm `ret`. (gcc's -finstrument-functions
  // instruments them anyway and produces broken code.)
  if (has_attribute(fd, "naked"))
    return true;
  // An x86 interrupt/exception handler runs with an interrupted context on its stack and need not
  // preserve the SSE state a call into the runtime may clobber.
  if (has_attribute(fd, "interrupt") ||
      lookup_attribute("interrupt", TYPE_ATTRIBUTES(TREE_TYPE(fd))))  // a type attribute on x86
    return true;
  // gcc's own rule: an `extern inline` always_inline (gnu_inline) function has no body of its own in
  // any object (glibc's _FORTIFY_SOURCE wrappers of printf, read, memcpy, ...).
  if (DECL_DECLARED_INLINE_P(fd) && DECL_EXTERNAL(fd) && DECL_DISREGARD_INLINE_LIMITS(fd))
    return true;
  // The runtime's entry points, should the runtime itself be compiled with the plugin: a probe in
  // __hcct_enter would recurse.
  const char *name = IDENTIFIER_POINTER(DECL_NAME(fd));
  if (!strncmp(name, "__hcct_", 7) || !strncmp(name, "__cyg_profile_func_", 19))
    return true;
  // C++ thread_local access helpers: the wrapper (_ZTW) is called on every access to a thread_local
  // with dynamic initialisation, and it and the init function (_ZTH, __tls_init) do no work of the
  // user's. Probes there would add a context per access and cost a probe pair each. All other
  // compiler-generated functions (implicit constructors/destructors, lambda invokers, static
  // initialisers) are instrumented as -finstrument-functions does: they run user code and their
  // frames explain where it runs.
  if (DECL_ARTIFICIAL(fd)) {
    const char *asm_name = IDENTIFIER_POINTER(DECL_ASSEMBLER_NAME(fd));
    if (!strncmp(asm_name, "_ZTW", 4) || !strncmp(asm_name, "_ZTH", 4) || !strcmp(name, "__tls_init"))
      return true;
  }
  return false;
}

// By name and file only (the early stage's pre-check in late mode, before bodies are final).
bool selected_by_name(const std::string &name, const std::string &file) {
  if (!opts.include.empty() && !matches_any(opts.include, name))
    return false;
  if (matches_any(opts.exclude, name))
    return false;
  if (!opts.include_file.empty() && !matches_any(opts.include_file, file))
    return false;
  return !matches_any(opts.exclude_file, file);
}

bool selected(const std::string &name, const std::string &file, gimple_seq body) {
  if (!selected_by_name(name, file))
    return false;
  if (opts.min_size > 0) {
    BodyStats stats = body_stats(body);
    if (!stats.calls && stats.statements < opts.min_size)
      return false;
  }
  return true;
}

void write_list_line(tree fd, const std::string &name, const std::string &file) {
  if (opts.list_fd < 0)
    return;
  const char *asm_name = IDENTIFIER_POINTER(DECL_ASSEMBLER_NAME(fd));
  if (*asm_name == '*')  // "use this name verbatim" marker of asm labels
    ++asm_name;
  std::string line = name + "\t" + file + ":" + std::to_string(DECL_SOURCE_LINE(fd)) + "\t" +
                     asm_name + "\n";
  // One write(2) per line keeps lines whole in a list shared by parallel compiles.
  ssize_t n = write(opts.list_fd, line.data(), line.size());
  if (n != ssize_t(line.size()))
    error("cannot write to %qs: %s", opts.list_path.c_str(),
          n < 0 ? xstrerror(errno) : "short write");
}

// ---------------------------------------------------------------------------------------------------
// Probes
// ---------------------------------------------------------------------------------------------------

// The runtime's symbols and the unit's closed-gate byte, built once per translation unit. They live
// across passes, so they are registered as GC roots.
tree gate_decl;
tree closed_decl;
tree gate_ptr_decl;
tree ctor_decl;
tree enter_decl;
tree exit_decl;
tree enter_pending_decl;
tree exit_pending_decl;
// The unit descriptor (hcct/unit_abi.h): a hidden symbol written in assembly at the end of the unit
// (emit_unit_descriptor), and the runtime entry the constructor registers it with.
tree unit_decl;
tree register_decl;
// clock=count (hcct/unit_abi.h, "The count clock"): the module's thread-local countdown and exit
// gate, the unit's stub the entry probe calls when the countdown goes negative, and the runtime's
// exit entry. The first three are hidden symbols written in assembly at the end of the unit
// (emit_count_support), in comdat groups, so that a module has one of each.
tree countdown_decl;
tree count_exit_gate_decl;
tree count_miss_decl;
tree exit_count_decl;
// The functions named in the unit's site table, in the order of their indices in `chain_pool`.
vec<tree, va_gc> *chain_fns;

const ggc_root_tab gc_roots[] = {
    {&gate_decl, 1, sizeof(gate_decl), gt_ggc_mx_lang_tree_node, gt_pch_nx_lang_tree_node},
    {&closed_decl, 1, sizeof(closed_decl), gt_ggc_mx_lang_tree_node, gt_pch_nx_lang_tree_node},
    {&gate_ptr_decl, 1, sizeof(gate_ptr_decl), gt_ggc_mx_lang_tree_node, gt_pch_nx_lang_tree_node},
    {&ctor_decl, 1, sizeof(ctor_decl), gt_ggc_mx_lang_tree_node, gt_pch_nx_lang_tree_node},
    {&enter_decl, 1, sizeof(enter_decl), gt_ggc_mx_lang_tree_node, gt_pch_nx_lang_tree_node},
    {&exit_decl, 1, sizeof(exit_decl), gt_ggc_mx_lang_tree_node, gt_pch_nx_lang_tree_node},
    {&enter_pending_decl, 1, sizeof(enter_pending_decl), gt_ggc_mx_lang_tree_node,
     gt_pch_nx_lang_tree_node},
    {&exit_pending_decl, 1, sizeof(exit_pending_decl), gt_ggc_mx_lang_tree_node,
     gt_pch_nx_lang_tree_node},
    {&unit_decl, 1, sizeof(unit_decl), gt_ggc_mx_lang_tree_node, gt_pch_nx_lang_tree_node},
    {&register_decl, 1, sizeof(register_decl), gt_ggc_mx_lang_tree_node, gt_pch_nx_lang_tree_node},
    {&countdown_decl, 1, sizeof(countdown_decl), gt_ggc_mx_lang_tree_node, gt_pch_nx_lang_tree_node},
    {&count_exit_gate_decl, 1, sizeof(count_exit_gate_decl), gt_ggc_mx_lang_tree_node,
     gt_pch_nx_lang_tree_node},
    {&count_miss_decl, 1, sizeof(count_miss_decl), gt_ggc_mx_lang_tree_node, gt_pch_nx_lang_tree_node},
    {&exit_count_decl, 1, sizeof(exit_count_decl), gt_ggc_mx_lang_tree_node, gt_pch_nx_lang_tree_node},
    {&chain_fns, 1, sizeof(chain_fns), gt_ggc_mx_vec_tree_va_gc_, gt_pch_nx_vec_tree_va_gc_},
    LAST_GGC_ROOT_TAB};

// Weak, so that a program links and runs without libhcct (the address is then 0), and of default
// visibility even under -fvisibility=hidden: a hidden weak undefined symbol is bound to 0 at link time
// and could never see the runtime's definition.
void make_weak_extern(tree decl) {
  TREE_PUBLIC(decl) = 1;
  DECL_EXTERNAL(decl) = 1;
  // Sets DECL_WEAK and adds the `weak` attribute, which is what makes varasm emit `.weak`.
  declare_weak(decl);
  DECL_ARTIFICIAL(decl) = 1;
  DECL_IGNORED_P(decl) = 1;
  DECL_VISIBILITY(decl) = VISIBILITY_DEFAULT;
  DECL_VISIBILITY_SPECIFIED(decl) = 1;
  TREE_USED(decl) = 1;
}

tree build_probe_fn(const char *name, tree type) {
  tree decl = build_fn_decl(name, type);
  make_weak_extern(decl);
  // Never throws: a cleanup that may throw would need its own EH region.
  TREE_NOTHROW(decl) = 1;
  // `noplt`: call through the GOT slot (`call *__hcct_enter_open@GOTPCREL(%rip)`), not a PLT stub
  // that jumps through the same slot: one indirect branch per probe instead of a call plus a jump.
  // The slot is 0 without the runtime, but then the gate is closed and the call never runs.
  // Not `cold` (the first version was): gcc then moved every probe call to `f.cold`, so with
  // profiling on each probe took a branch out to .text.unlikely and one back, and values live across
  // the call were spilled around it. The call's block is predicted not taken instead
  // (append_probe), which keeps the off path falling through and lets gcc lay the on path out in the
  // function's own text (docs/GCC-PLUGIN.md, "Probe cost with profiling on"). Not `leaf`: the
  // runtime may call an allocator defined in the very unit being compiled.
  DECL_ATTRIBUTES(decl) = tree_cons(get_identifier("noplt"), NULL_TREE, DECL_ATTRIBUTES(decl));
  return decl;
}

tree gate_type() { return build_qualified_type(unsigned_char_type_node, TYPE_QUAL_VOLATILE); }

// The unit's own definition of `name`, if it has one (the runtime itself, or a test stub, compiled
// with the plugin). The probes must then use that definition: a weak declaration of the same name
// would make varasm emit `.weak name` and silently turn the unit's definition weak.
tree unit_definition(const char *name, bool function) {
  symtab_node *node = symtab_node::get_for_asmname(get_identifier(name));
  if (!node || !node->definition)
    return NULL_TREE;
  return (TREE_CODE(node->decl) == FUNCTION_DECL) == function ? node->decl : NULL_TREE;
}

// A hidden thread-local variable of the module, defined in assembly by emit_count_support. Its TLS
// model: local-exec in an executable, initial-exec in a shared library (never a call to
// __tls_get_addr; the runtime finds it at the same distance from every thread's pointer).
tree count_tls_decl(const char *name, tree type) {
  tree decl = build_decl(BUILTINS_LOCATION, VAR_DECL, get_identifier(name), type);
  TREE_PUBLIC(decl) = 1;
  DECL_EXTERNAL(decl) = 1;
  DECL_ARTIFICIAL(decl) = 1;
  DECL_IGNORED_P(decl) = 1;
  DECL_VISIBILITY(decl) = VISIBILITY_HIDDEN;
  DECL_VISIBILITY_SPECIFIED(decl) = 1;
  TREE_USED(decl) = 1;
  tls_model model = decl_default_tls_model(decl);
  set_decl_tls_model(decl, model < TLS_MODEL_INITIAL_EXEC ? TLS_MODEL_INITIAL_EXEC : model);
  return decl;
}

// Built when the first probe goes in (after the IPA passes, which would drop a thread-local
// variable's symbol-table node while nothing references it yet, and with it its TLS model).
void build_count_decls() {
  if (countdown_decl)
    return;
  tree enter_type = build_function_type_list(void_type_node, ptr_type_node, ptr_type_node, NULL_TREE);
  tree exit_type = build_function_type_list(void_type_node, ptr_type_node, NULL_TREE);
  // extern __thread long __hcct_countdown __attribute__((visibility("hidden")));  -- starts at 0
  countdown_decl = count_tls_decl(hcct::unit_abi::kCountdownSymbol, long_integer_type_node);
  // extern __thread volatile unsigned char __hcct_count_exit_gate (hidden): nonzero while the thread
  // wants exit events. Volatile: the final dump closes it from another thread.
  count_exit_gate_decl = count_tls_decl(hcct::unit_abi::kCountExitGateSymbol, gate_type());
  TREE_THIS_VOLATILE(count_exit_gate_decl) = 1;
  TREE_SIDE_EFFECTS(count_exit_gate_decl) = 1;
  // void __hcct_count_miss(void *fn, void *site) (hidden): jumps to the runtime's
  // __hcct_enter_count, or without a runtime sets the countdown to LONG_MAX (never negative again).
  count_miss_decl = build_fn_decl(hcct::unit_abi::kCountMissSymbol, enter_type);
  TREE_PUBLIC(count_miss_decl) = 1;
  DECL_EXTERNAL(count_miss_decl) = 1;
  DECL_ARTIFICIAL(count_miss_decl) = 1;
  DECL_VISIBILITY(count_miss_decl) = VISIBILITY_HIDDEN;
  DECL_VISIBILITY_SPECIFIED(count_miss_decl) = 1;
  TREE_NOTHROW(count_miss_decl) = 1;
  TREE_USED(count_miss_decl) = 1;
  // void __hcct_exit_count(void *fn) __attribute__((weak)): only called with the exit gate open,
  // which only the runtime opens.
  exit_count_decl = unit_definition(hcct::unit_abi::kExitCountSymbol, true);
  if (!exit_count_decl)
    exit_count_decl = build_probe_fn(hcct::unit_abi::kExitCountSymbol, exit_type);
}

void build_runtime_decls() {
  if (gate_decl)
    return;
  // extern volatile unsigned char __hcct_gate __attribute__((weak));
  // Volatile: the runtime turns the gate on and off from other threads; each probe must test it
  // anew rather than reuse a value loaded by an earlier (inlined) probe. (The probes read it through
  // a volatile access, so a definition of the unit's own need not be volatile.)
  gate_decl = unit_definition("__hcct_gate", false);
  if (!gate_decl) {
    gate_decl = build_decl(BUILTINS_LOCATION, VAR_DECL, get_identifier("__hcct_gate"), gate_type());
    make_weak_extern(gate_decl);
    TREE_THIS_VOLATILE(gate_decl) = 1;
    TREE_SIDE_EFFECTS(gate_decl) = 1;
  }
  TREE_ADDRESSABLE(gate_decl) = 1;

  // static volatile unsigned char __hcct_gate_closed;  -- always 0
  // What the probes read instead of the gate when the runtime is absent, so that both "off" states
  // (no runtime; runtime with a closed gate) run the same straight-line code: one select (cmov) and
  // one byte test, no taken branch. See "The gate" in docs/GCC-PLUGIN.md for the measurements.
  closed_decl =
      build_decl(BUILTINS_LOCATION, VAR_DECL, get_identifier("__hcct_gate_closed"), gate_type());
  TREE_STATIC(closed_decl) = 1;
  TREE_PUBLIC(closed_decl) = 0;
  TREE_THIS_VOLATILE(closed_decl) = 1;
  TREE_SIDE_EFFECTS(closed_decl) = 1;
  TREE_ADDRESSABLE(closed_decl) = 1;
  TREE_USED(closed_decl) = 1;
  DECL_ARTIFICIAL(closed_decl) = 1;
  DECL_IGNORED_P(closed_decl) = 1;
  varpool_node::finalize_decl(closed_decl);

  // static volatile unsigned char *volatile __hcct_gate_ptr = &__hcct_gate_closed;
  // What the probes read the gate through. The unit's constructor (build_gate_constructor) points it
  // at __hcct_gate when the runtime is there; until then, and for good without a runtime, it points
  // at the closed byte. So a probe is two loads, a test and a not-taken branch, with no select and
  // no register held across the body. The pointer is volatile so that every probe reloads it (one
  // RIP-relative load) instead of keeping it in a callee-saved register across the body.
  tree gate_ptr_type = build_pointer_type(gate_type());
  gate_ptr_decl = build_decl(BUILTINS_LOCATION, VAR_DECL, get_identifier("__hcct_gate_ptr"),
                             build_qualified_type(gate_ptr_type, TYPE_QUAL_VOLATILE));
  TREE_STATIC(gate_ptr_decl) = 1;
  TREE_PUBLIC(gate_ptr_decl) = 0;
  TREE_THIS_VOLATILE(gate_ptr_decl) = 1;
  TREE_SIDE_EFFECTS(gate_ptr_decl) = 1;
  TREE_USED(gate_ptr_decl) = 1;
  DECL_ARTIFICIAL(gate_ptr_decl) = 1;
  DECL_IGNORED_P(gate_ptr_decl) = 1;
  // A unit that defines the gate itself (the runtime, a test stub) points at it from the start.
  bool defines_gate = !DECL_EXTERNAL(gate_decl);
  DECL_INITIAL(gate_ptr_decl) =
      build_fold_addr_expr_with_type(defines_gate ? gate_decl : closed_decl, gate_ptr_type);
  varpool_node::finalize_decl(gate_ptr_decl);

  // Probe ABI 2 (docs/RUNTIME-ABI.md): the probes call only after they saw the gate open, so the
  // runtime skips its own first test; the exit passes no call site (it is never a tail call).
  tree enter_type =
      build_function_type_list(void_type_node, ptr_type_node, ptr_type_node, NULL_TREE);
  tree exit_type = build_function_type_list(void_type_node, ptr_type_node, NULL_TREE);
  enter_decl = unit_definition("__hcct_enter_open", true);
  if (!enter_decl)
    enter_decl = build_probe_fn("__hcct_enter_open", enter_type);
  exit_decl = unit_definition("__hcct_exit_open", true);
  if (!exit_decl)
    exit_decl = build_probe_fn("__hcct_exit_open", exit_type);

  // The stand-ins of the early stage's probes until inlining is decided (gate_pending_probes). Never
  // emitted: not weak, so that one left behind by mistake fails the link instead of vanishing.
  // Like -finstrument-functions' hooks, both take the call site and may throw (as far as gcc
  // knows), so that the bodies, their exception paths included, weigh what they weigh with it.
  enter_pending_decl = build_fn_decl("__hcct_enter_pending", enter_type);
  exit_pending_decl = build_fn_decl("__hcct_exit_pending", enter_type);
  for (tree decl : {enter_pending_decl, exit_pending_decl}) {
    TREE_PUBLIC(decl) = 1;
    DECL_EXTERNAL(decl) = 1;
    DECL_ARTIFICIAL(decl) = 1;
    TREE_NOTHROW(decl) = 0;  // build_fn_decl makes it nothrow
  }
}

// Whether the early stage's probes are gated in place or after inlining (see gate_pending_probes).
// With -flto the IR is streamed before any pass of this plugin could run again (the link step runs
// without it), so the probes must be complete when they are inserted.
bool gate_after_inlining() { return !flag_generate_lto && !flag_generate_offload; }

// Whether the unit registers a descriptor. Not with -flto: the code is generated by the link step,
// where this plugin does not run, so nothing could write the descriptor (such objects are served
// like objects built before descriptors existed).
bool describes_unit() { return gate_after_inlining(); }

// The descriptor's symbol: global (so that the constructor, compiled from trees, and the assembly
// written at the end of the unit name the same thing) but hidden, and unique in the module
// (get_file_function_name: the unit's first global symbol, else its file and random seed).
void build_unit_decls() {
  tree name = get_file_function_name("hcct_unit");
  unit_decl = build_decl(BUILTINS_LOCATION, VAR_DECL, name,
                         build_array_type_nelts(unsigned_char_type_node, hcct::unit_abi::kUnitSize));
  TREE_PUBLIC(unit_decl) = 1;
  DECL_EXTERNAL(unit_decl) = 1;
  TREE_READONLY(unit_decl) = 1;
  DECL_ARTIFICIAL(unit_decl) = 1;
  DECL_IGNORED_P(unit_decl) = 1;
  DECL_VISIBILITY(unit_decl) = VISIBILITY_HIDDEN;
  DECL_VISIBILITY_SPECIFIED(unit_decl) = 1;
  TREE_USED(unit_decl) = 1;
  TREE_ADDRESSABLE(unit_decl) = 1;
  // void __hcct_register_unit(const void *) __attribute__((weak));
  tree register_type = build_function_type_list(void_type_node, const_ptr_type_node, NULL_TREE);
  register_decl = build_fn_decl(hcct::unit_abi::kRegisterSymbol, register_type);
  make_weak_extern(register_decl);
  TREE_NOTHROW(register_decl) = 1;
}

// The unit's constructor, run before every other constructor of the module (priority 1):
//
//   if (&__hcct_gate) {
//     __hcct_gate_ptr = &__hcct_gate;
//     if (&__hcct_register_unit) __hcct_register_unit(&<the unit's descriptor>);
//   }
//
// Built once, when the unit instruments its first function: the pass runs while the call graph is
// being built, so the new function is analysed and lowered with the others (it is never
// instrumented). Built later (when the IPA passes start) it would reach LTO streaming unlowered.
void build_gate_constructor() {
  if (ctor_decl || !DECL_EXTERNAL(gate_decl))
    return;
  tree ptr_type = build_pointer_type(gate_type());
  tree addr = build_fold_addr_expr_with_type(gate_decl, ptr_type);
  tree cond = build2(NE_EXPR, boolean_type_node, addr, build_int_cst(ptr_type, 0));
  tree set = build2(MODIFY_EXPR, void_type_node, gate_ptr_decl, addr);
  if (describes_unit()) {
    build_unit_decls();
    tree fn_ptr_type = build_pointer_type(TREE_TYPE(register_decl));
    tree fn_addr = build_fold_addr_expr_with_type(register_decl, fn_ptr_type);
    tree has_entry = build2(NE_EXPR, boolean_type_node, fn_addr, build_int_cst(fn_ptr_type, 0));
    tree call = build_call_expr(register_decl, 1, build_fold_addr_expr(unit_decl));
    tree reg = build3(COND_EXPR, void_type_node, has_entry, call, NULL_TREE);
    set = build2(COMPOUND_EXPR, void_type_node, set, reg);
  }
  tree body = build3(COND_EXPR, void_type_node, cond, set, NULL_TREE);
  // cgraph_build_static_cdtor leaves cfun and current_function_decl cleared.
  function *saved_fun = cfun;
  tree saved_decl = current_function_decl;
  cgraph_build_static_cdtor('I', body, 1);
  // The symbol table lists the newest function first.
  ctor_decl = symtab->first_function() ? symtab->first_function()->decl : NULL_TREE;
  set_cfun(saved_fun);
  current_function_decl = saved_decl;
}

// The functions this unit's early stage instrumented (by DECL_UID, which is never reused): the
// site table names only these.
std::set<unsigned> instrumented_uids;

// ---------------------------------------------------------------------------------------------------
// The probe: one shape for both stages
// ---------------------------------------------------------------------------------------------------
//
//   p = __hcct_gate_ptr;  v = *p;          -- p volatile: every probe reloads both
//   if (v != 0)                             -- predicted not taken (10 %)
//     entry: __hcct_enter_open(&this_fn, __builtin_return_address(0));
//     exit:  __hcct_exit_open(&this_fn); asm volatile("");
//
// The stages differ only in the form of the body the probe goes into: structured GIMPLE with plain
// temporaries (early), or the optimised CFG in SSA form (late).
//
// The early stage inserts its probes in two steps (unless -flto): first only calls to stand-ins,
// `__hcct_enter_pending(&this_fn, __builtin_return_address(0))` and the same for the exit, exactly
// the statements of -finstrument-functions' probes; then, once inlining is decided and applied,
// gate_pending_probes turns each stand-in into the whole probe above (the exit's asm included:
// gcc's tail-call pass runs later). Why: gcc's inliners decide by the estimated size and exception
// paths of a body. The gated probe made every instrumented body 6 units larger than with
// -finstrument-functions, and its nothrow calls let gcc drop exception paths that
// -finstrument-functions' hooks keep. Functions whose only out-of-line copy is in another module
// (libstdc++'s extern-template members such as std::string::size, `extern inline` functions) were
// then inlined less often, and a call that is not inlined runs that module's copy, which has no
// probes: plugin builds saw fewer of them (docs/GCC-PLUGIN.md, "The same functions at run time").

enum class Probe { kEnter, kExit };

tree new_temp(tree type, bool ssa, const char *name) {
  return ssa ? make_ssa_name(type) : create_tmp_var(type, name);
}

void append_stmt(gimple_seq *seq, gimple *g, location_t loc) {
  gimple_set_location(g, loc);
  gimple_seq_add_stmt(seq, g);
}

// Appends `p = __hcct_gate_ptr; v = *p;` and returns v.
tree append_gate_load(gimple_seq *seq, bool ssa, location_t loc) {
  tree ptr_type = build_pointer_type(gate_type());
  tree p = new_temp(ptr_type, ssa, "hcct_gate_p");
  append_stmt(seq, gimple_build_assign(p, gate_ptr_decl), loc);
  // The byte is read as a plain load: the pointer's volatile load already makes every probe read
  // the byte anew (each through its own freshly loaded pointer, which gcc cannot prove equal to
  // another), and a plain load lets gcc fold it into the test, `cmpb $0, (%rax)`, where a volatile
  // one costs `movzbl (%rax), %eax; testb %al, %al` (combine leaves volatile memory alone): one
  // instruction less per probe, 20 % of the probes' off cost on tcc (docs/GCC-PLUGIN.md, "The gate").
  tree mem = build2(MEM_REF, unsigned_char_type_node, p, build_int_cst(ptr_type, 0));
  tree v = new_temp(unsigned_char_type_node, ssa, "hcct_gate");
  append_stmt(seq, gimple_build_assign(v, mem), loc);
  return v;
}

// clock=count: appends `c = __hcct_countdown; n = c - 1; __hcct_countdown = n;` and returns n (the
// probe calls in when it is negative): `subq $1, %fs:__hcct_countdown@tpoff; js` in an executable.
// Not volatile: only the thread itself changes its countdown, inside the calls into the runtime.
tree append_countdown(gimple_seq *seq, location_t loc) {
  tree type = long_integer_type_node;
  tree c = make_ssa_name(type);
  append_stmt(seq, gimple_build_assign(c, countdown_decl), loc);
  tree next = make_ssa_name(type);
  append_stmt(seq, gimple_build_assign(next, PLUS_EXPR, c, build_int_cst(type, -1)), loc);
  append_stmt(seq, gimple_build_assign(countdown_decl, next), loc);
  return next;
}

// clock=count, at an exit: `v = __hcct_count_exit_gate;` (one thread-local byte load). The exit does
// not read the countdown: right after the entry's store, that load would wait for the store to be
// forwarded on every call (docs/BURSTING.md, "The counting probe, session 10").
tree append_count_exit_gate_load(gimple_seq *seq, location_t loc) {
  tree v = make_ssa_name(unsigned_char_type_node);
  append_stmt(seq, gimple_build_assign(v, count_exit_gate_decl), loc);
  return v;
}

// &this_fn as a void *. TREE_NO_TRAMPOLINE: the runtime wants the code address, and taking the
// address of a GNU C nested function must not create a trampoline (gcc does the same for
// -finstrument-functions).
tree this_fn_address(tree fd) {
  tree addr = build_fold_addr_expr_with_type(fd, ptr_type_node);
  TREE_NO_TRAMPOLINE(addr) = 1;
  return addr;
}

// Appends what the probe does once the gate is open (the statements of the rarely entered block).
//
// Entry: the call site is read here, next to the call, so that nothing is computed on the off path.
//
// Exit: no call site. ABI 1 passed one so that the runtime could recognise an exit probe gcc had
// tail-called from the epilogue (`jmp __hcct_exit` at the end of a void function: its stack pointer
// is then the caller's), which cost a load of the return-address slot on every exit, off or on
// (read before the gate test: read next to the call it was wrong at -O3, where ipa-split outlines
// the block into `f.part.0`), and a comparison in the runtime. Instead the exit call is never a tail
// call: the empty volatile asm after it is a statement gcc's tail-call pass cannot move the call
// past, whatever pass or LTO step runs it, and it emits no instruction. (Outlined by ipa-split into
// `f.part.0`, the call runs below f's frame, which the runtime's exit matching accepts.) In the late
// stage the probes are inserted after the tail-call pass, so nothing is needed there.
//
// `fn` is &this_fn. `pending`: the stand-in calls instead (see above), which both pass the call
// site; `barrier`: the asm after the exit call.
void append_probe_call(gimple_seq *seq, Probe probe, tree fn, bool ssa, bool pending, bool barrier,
                       location_t loc) {
  if (probe == Probe::kEnter || pending) {
    tree site = new_temp(ptr_type_node, ssa, "hcct_site");
    gcall *ra =
        gimple_build_call(builtin_decl_implicit(BUILT_IN_RETURN_ADDRESS), 1, integer_zero_node);
    gimple_call_set_lhs(ra, site);
    append_stmt(seq, ra, loc);
    if (pending)
      append_stmt(seq,
                  gimple_build_call(probe == Probe::kEnter ? enter_pending_decl : exit_pending_decl,
                                    2, fn, site),
                  loc);
    else
      append_stmt(seq, gimple_build_call(opts.count_clock ? count_miss_decl : enter_decl, 2, fn, site),
                  loc);
    return;
  }
  append_stmt(seq, gimple_build_call(opts.count_clock ? exit_count_decl : exit_decl, 1, fn), loc);
  if (barrier) {
    gasm *barrier = gimple_build_asm_vec("", NULL, NULL, NULL, NULL);
    gimple_asm_set_volatile(barrier, true);
    gimple_asm_set_inline(barrier, true);  // counts as the minimum size for the inliner
    append_stmt(seq, barrier, loc);
  }
}

// The early stage: appends the whole probe to *seq, in the label/goto form structured GIMPLE uses
// before "lower".
void append_probe(gimple_seq *seq, Probe probe, tree fd, location_t loc) {
  if (gate_after_inlining()) {
    append_probe_call(seq, probe, this_fn_address(fd), false, true, false, loc);
    return;
  }
  tree v = append_gate_load(seq, false, loc);
  tree l_call = create_artificial_label(loc);
  tree l_done = create_artificial_label(loc);
  append_stmt(seq, gimple_build_cond(NE_EXPR, v, build_zero_cst(unsigned_char_type_node), l_call,
                                     l_done),
              loc);
  gimple_seq_add_stmt(seq, gimple_build_label(l_call));
  // What `__attribute__((cold))` on a label says: the block is rarely entered (90 %). Unlike a cold
  // callee it does not make gcc move the block to .text.unlikely.
  gimple_seq_add_stmt(seq, gimple_build_predict(PRED_COLD_LABEL, NOT_TAKEN));
  append_probe_call(seq, probe, this_fn_address(fd), false, false, true, loc);
  gimple_seq_add_stmt(seq, gimple_build_label(l_done));
}

// Inserts the whole probe before *gsi in a body in CFG/SSA form (the late stage, and the early
// stage's stand-ins once inlining is done). The call gets a block of its own (probability 10 %,
// like the early stage's predictor); the statement at *gsi ends up in the join block. `fn` is
// &this_fn; `barrier`: the asm after the exit call (needed before gcc's tail-call pass).
void insert_probe_before(gimple_stmt_iterator *gsi, Probe probe, tree fn, bool barrier,
                         location_t loc) {
  gimple_seq seq = NULL;
  if (opts.count_clock)
    build_count_decls();
  bool count = opts.count_clock && probe == Probe::kEnter;
  tree v = count ? append_countdown(&seq, loc)
               : opts.count_clock ? append_count_exit_gate_load(&seq, loc) : append_gate_load(&seq, true, loc);
  gimple *load = gimple_seq_last_stmt(seq);  // (before the sequence joins the block's)
  gsi_insert_seq_before(gsi, seq, GSI_SAME_STMT);
  gcond *cond = count ? gimple_build_cond(LT_EXPR, v, build_zero_cst(TREE_TYPE(v)), NULL_TREE, NULL_TREE)
                      : gimple_build_cond(NE_EXPR, v, build_zero_cst(unsigned_char_type_node), NULL_TREE,
                                          NULL_TREE);
  gimple_set_location(cond, loc);
  basic_block then_bb = insert_cond_bb(gimple_bb(load), load, cond,
                                       profile_probability::guessed_always().apply_scale(1, 10));
  gimple_seq call = NULL;
  append_probe_call(&call, probe, fn, true, false, barrier, loc);
  gimple_stmt_iterator at = gsi_start_bb(then_bb);
  gsi_insert_seq_before(&at, call, GSI_SAME_STMT);
}

// __builtin_return (the untyped return of __builtin_apply's result) leaves the function without a
// return statement, so no finally block runs for it: an exit probe goes right before each.
tree probe_before_builtin_return(gimple_stmt_iterator *gsi, bool *handled_ops, walk_stmt_info *wi) {
  *handled_ops = false;
  gimple *stmt = gsi_stmt(*gsi);
  if (gimple_call_builtin_p(stmt, BUILT_IN_RETURN)) {
    gimple_seq probe = NULL;
    append_probe(&probe, Probe::kExit, static_cast<tree>(wi->info), gimple_location(stmt));
    gsi_insert_seq_before(gsi, probe, GSI_SAME_STMT);
  }
  return NULL_TREE;
}

// The early stage: rewrites the body of fd to
//   { <entry probe>  try { <body> } finally { <exit probe> } }
void instrument(tree fd) {
  build_runtime_decls();
  location_t entry_loc = DECL_SOURCE_LOCATION(fd);
  location_t exit_loc = DECL_STRUCT_FUNCTION(fd)->function_end_locus;

  walk_stmt_info wi;
  memset(&wi, 0, sizeof wi);
  wi.info = fd;
  gimple_seq original = gimple_body(fd);
  walk_gimple_seq_mod(&original, probe_before_builtin_return, nullptr, &wi);
  gimple_set_body(fd, original);

  gimple_seq cleanup = NULL;
  append_probe(&cleanup, Probe::kExit, fd, exit_loc);
  gimple *tf = gimple_build_try(gimple_body(fd), cleanup, GIMPLE_TRY_FINALLY);

  gimple_seq body = NULL;
  append_probe(&body, Probe::kEnter, fd, entry_loc);
  gimple_seq_add_stmt(&body, tf);

  // Like gimplify_function_tree: the body of a function is a single GIMPLE_BIND.
  gimple_seq new_body = NULL;
  gimple_seq_add_stmt(&new_body, gimple_build_bind(NULL_TREE, body, NULL_TREE));
  gimple_set_body(fd, new_body);
  build_gate_constructor();
  instrumented_uids.insert(DECL_UID(fd));
}

// ---------------------------------------------------------------------------------------------------
// The late stage: probes in the optimised body (CFG and SSA form), after all inlining
// ---------------------------------------------------------------------------------------------------

// Where exit probes go in the optimised CFG. gcc's tail-call pass ("tailc") marks a call as a tail
// call when nothing but copies of its result, PHIs, labels and debug statements lie between it and
// a return, possibly across several blocks: after inlining, a return value is often merged by a PHI
// in a return block that some predecessors reach from a tail call and others from ordinary code.
// The expander turns a marked call into a jump (`jmp callee`) and drops the rest of its path, so
// the probe on that path must go before the call; the callee then runs after this frame is gone and
// its context is this function's caller's, as on the machine stack. A probe before the return must
// run only for the paths that do not come from a tail call: where the return block is shared, it
// goes on the incoming edges of those paths instead.
//
// Every other pred of the exit block ends in __builtin_return (exit_stmt); a call that does not
// return has no edge to it, and gcc 12 has no `musttail` whose block would end without a return.
struct ExitPlan {
  std::vector<gimple *> before;  // probe right before these statements
  std::vector<edge> on_edges;    // probe on these edges (each split into a block of its own)
};

gcall *tail_call_in(basic_block bb) {
  for (gimple_stmt_iterator gsi = gsi_start_bb(bb); !gsi_end_p(gsi); gsi_next(&gsi))
    if (gcall *call = dyn_cast<gcall *>(gsi_stmt(gsi)))
      if (gimple_call_tail_p(call))
        return call;
  return nullptr;
}

// The statement by which `bb` leaves the function, if it does: a return, or a call to
// __builtin_return (the untyped return of __builtin_apply's result), which ends a block with an
// edge to the exit block and no GIMPLE_RETURN.
gimple *exit_stmt(basic_block bb) {
  gimple *last = last_stmt(bb);
  if (last && (gimple_code(last) == GIMPLE_RETURN || gimple_call_builtin_p(last, BUILT_IN_RETURN)))
    return last;
  return nullptr;
}

bool ends_in_return(basic_block bb) { return exit_stmt(bb) != nullptr; }

// Adds to `plan` the edges into `bb` (a block on the way from some tail call to a return) that come
// from paths without a tail call, looking through blocks that are themselves on such a way.
void plan_edges_into(basic_block bb, hash_set<basic_block> &after_tail,
                     hash_set<basic_block> &visited, ExitPlan &plan) {
  if (visited.add(bb))
    return;
  edge e;
  edge_iterator ei;
  FOR_EACH_EDGE(e, ei, bb->preds) {
    if (tail_call_in(e->src))
      continue;  // the path's probe is before that call
    if (after_tail.contains(e->src))
      plan_edges_into(e->src, after_tail, visited, plan);
    else
      plan.on_edges.push_back(e);
  }
}

ExitPlan plan_exits(function *fun) {
  ExitPlan plan;
  // The blocks strictly after a tail call on its (single-successor) way to the return.
  hash_set<basic_block> after_tail;
  basic_block bb;
  FOR_EACH_BB_FN(bb, fun) {
    gcall *call = tail_call_in(bb);
    if (!call)
      continue;
    plan.before.push_back(call);
    for (basic_block b = bb; !ends_in_return(b) && single_succ_p(b);) {
      b = single_succ(b);
      if (b == EXIT_BLOCK_PTR_FOR_FN(fun) || after_tail.add(b))
        break;
    }
  }
  hash_set<basic_block> visited;
  edge e;
  edge_iterator ei;
  FOR_EACH_EDGE(e, ei, EXIT_BLOCK_PTR_FOR_FN(fun)->preds) {
    basic_block ret_bb = e->src;
    if (!ends_in_return(ret_bb) || tail_call_in(ret_bb))
      continue;
    if (!after_tail.contains(ret_bb))
      plan.before.push_back(exit_stmt(ret_bb));
    else
      plan_edges_into(ret_bb, after_tail, visited, plan);
  }
  // Edges into a return path come from ordinary control flow; an abnormal one (setjmp, nonlocal
  // goto) cannot be split. Should one ever be there, the function's tail calls become ordinary
  // calls and every path leaves through a return, which is always right, only deeper on the stack.
  for (edge on : plan.on_edges) {
    if (!(on->flags & EDGE_COMPLEX))
      continue;
    ExitPlan plain;
    FOR_EACH_BB_FN(bb, fun) {
      if (gcall *call = tail_call_in(bb))
        gimple_call_set_tail(call, false);
      if (ends_in_return(bb))
        plain.before.push_back(exit_stmt(bb));
    }
    return plain;
  }
  return plan;
}

// Inserts the probe at the start of an empty block: before a placeholder, which is then dropped.
void insert_probe_in_empty_block(basic_block bb, Probe probe, tree fd, location_t loc) {
  gimple_stmt_iterator gsi = gsi_start_bb(bb);
  gimple *nop = gimple_build_nop();
  gsi_insert_before(&gsi, nop, GSI_NEW_STMT);
  insert_probe_before(&gsi, probe, this_fn_address(fd), false, loc);
  gsi = gsi_for_stmt(nop);
  gsi_remove(&gsi, true);
}

unsigned instrument_late(function *fun) {
  tree fd = fun->decl;
  // Exits first, planned before any block is split.
  ExitPlan plan = plan_exits(fun);
  for (edge e : plan.on_edges) {
    // The return's location, as for a probe right before it.
    gimple *last = last_stmt(e->dest);
    location_t loc = last && gimple_location(last) != UNKNOWN_LOCATION ? gimple_location(last)
                                                                        : fun->function_end_locus;
    insert_probe_in_empty_block(split_edge(e), Probe::kExit, fd, loc);
  }
  for (gimple *at : plan.before) {
    location_t loc = gimple_location(at) != UNKNOWN_LOCATION ? gimple_location(at)
                                                              : fun->function_end_locus;
    gimple_stmt_iterator gsi = gsi_for_stmt(at);
    insert_probe_before(&gsi, Probe::kExit, this_fn_address(fd), false, loc);
  }
  basic_block first = split_edge(single_succ_edge(ENTRY_BLOCK_PTR_FOR_FN(fun)));
  insert_probe_in_empty_block(first, Probe::kEnter, fd, DECL_SOURCE_LOCATION(fd));
  mark_virtual_operands_for_renaming(fun);
  return TODO_update_ssa_only_virtuals | TODO_cleanup_cfg;
}

// ---------------------------------------------------------------------------------------------------
// The early stage's second step: the stand-ins become gated probes once inlining is done
// ---------------------------------------------------------------------------------------------------

// Removes what computed a stand-in's call site (`_1 = __builtin_return_address (0);` and copies of
// it) once nothing uses it: the gated probe reads the site itself, in its own block, so that the
// off path computes nothing.
void remove_unused_site(tree site) {
  while (site && TREE_CODE(site) == SSA_NAME && has_zero_uses(site)) {
    gimple *def = SSA_NAME_DEF_STMT(site);
    tree next = NULL_TREE;
    if (gimple_assign_ssa_name_copy_p(def))
      next = gimple_assign_rhs1(def);
    else if (!gimple_call_builtin_p(def, BUILT_IN_RETURN_ADDRESS))
      return;
    gimple_stmt_iterator gsi = gsi_for_stmt(def);
    gsi_remove(&gsi, true);
    release_defs(def);
    site = next;
  }
}

// Replaces every stand-in call of the body, its own and those of the functions inlined into it, by
// the whole probe for the same function.
unsigned gate_pending_probes(function *fun) {
  std::vector<gcall *> pending;
  basic_block bb;
  FOR_EACH_BB_FN(bb, fun) {
    for (gimple_stmt_iterator gsi = gsi_start_bb(bb); !gsi_end_p(gsi); gsi_next(&gsi)) {
      gcall *call = dyn_cast<gcall *>(gsi_stmt(gsi));
      tree callee = call ? gimple_call_fndecl(call) : NULL_TREE;
      if (callee && (callee == enter_pending_decl || callee == exit_pending_decl))
        pending.push_back(call);
    }
  }
  if (pending.empty())
    return 0;
  for (gcall *call : pending) {
    Probe probe = gimple_call_fndecl(call) == enter_pending_decl ? Probe::kEnter : Probe::kExit;
    tree fn = unshare_expr(gimple_call_arg(call, 0));
    tree site = gimple_call_arg(call, 1);
    gimple_stmt_iterator gsi = gsi_for_stmt(call);
    insert_probe_before(&gsi, probe, fn, true, gimple_location(call));
    // The stand-in could throw as far as gcc knew; the probe cannot: its exception edge goes.
    basic_block bb = gimple_bb(call);
    remove_stmt_from_eh_lp(call);
    gsi = gsi_for_stmt(call);
    unlink_stmt_vdef(call);
    gsi_remove(&gsi, true);
    release_defs(call);
    gimple_purge_dead_eh_edges(bb);
    remove_unused_site(site);
  }
  mark_virtual_operands_for_renaming(fun);
  return TODO_update_ssa_only_virtuals | TODO_cleanup_cfg;
}

// A GIMPLE pass over the optimised body (CFG and SSA form) that declares no other properties.
constexpr pass_data ssa_pass_data(const char *name) {
  return pass_data{GIMPLE_PASS, name, OPTGROUP_NONE, TV_NONE, PROP_cfg | PROP_ssa, 0, 0, 0, 0};
}

const pass_data gate_pass_data = ssa_pass_data("hcct_gate");

class GatePass : public gimple_opt_pass {
public:
  explicit GatePass(gcc::context *ctx) : gimple_opt_pass(gate_pass_data, ctx) {}

  unsigned int execute(function *fun) override {
    // Stand-ins exist only if the early pass instrumented something in this unit.
    return enter_pending_decl ? gate_pending_probes(fun) : 0;
  }
};

// ---------------------------------------------------------------------------------------------------
// The unit descriptor and its site table (hcct/unit_abi.h, docs/GCC-PLUGIN.md "The unit descriptor")
// ---------------------------------------------------------------------------------------------------
//
// With stage=early an inlined instrumented function has probes but no machine frame. For every call
// instruction of the final code whose active instrumented functions are not just the function of
// its machine frame, the table gives them, outermost first, keyed by the call's return address: a
// label right after the call. The active functions come from the call's lexical block (the blocks
// of inlined bodies, as the debug information describes them), which the inliner keeps on every
// statement it copies, the probes' calls included.

struct SiteRecord {
  int label;             // CODE_LABEL_NUMBER of the note after the call
  unsigned chain_begin;  // in chain_pool
  unsigned chain_length;
};

std::vector<SiteRecord> site_records;
std::vector<unsigned> chain_pool;                                  // indices into chain_fns
std::map<std::vector<unsigned>, unsigned> chain_begins;            // chain -> where it starts in chain_pool
std::map<unsigned, unsigned> chain_fn_index;                       // DECL_UID -> index into chain_fns

bool instrumented_here(tree fn) {
  return fn && TREE_CODE(fn) == FUNCTION_DECL && instrumented_uids.count(DECL_UID(fn));
}

// The instrumented function whose probes a body (or an inlined copy of it) carries: the function
// itself, or for a clone (`f.constprop.0`, `f.isra.0`, made after the probes went in) the original,
// whose address the probes pass.
tree probe_identity(tree fn) {
  for (int steps = 0; fn && TREE_CODE(fn) == FUNCTION_DECL && steps < 16; ++steps) {
    if (instrumented_here(fn))
      return fn;
    tree next = DECL_ABSTRACT_ORIGIN(fn);
    if (!next || next == fn) {
      cgraph_node *node = cgraph_node::get(fn);
      next = node ? node->former_clone_of : NULL_TREE;
    }
    if (next == fn)
      break;
    fn = next;
  }
  return NULL_TREE;
}

// The innermost scope of an inlined function that `insn` lies in, or null (the body's own code).
tree inlined_scope(rtx_insn *insn) {
  location_t loc = INSN_LOCATION(insn);
  for (tree b = loc != UNKNOWN_LOCATION ? LOCATION_BLOCK(loc) : NULL_TREE; b && TREE_CODE(b) == BLOCK;
       b = BLOCK_SUPERCONTEXT(b))
    if (inlined_function_outer_scope_p(b))
      return b;
  return NULL_TREE;
}

bool calls_probe(rtx_insn *insn, const char *probe) {
  subrtx_iterator::array_type array;
  FOR_EACH_SUBRTX(iter, array, PATTERN(insn), ALL) {
    if (SYMBOL_REF_P(*iter) && !strcmp(XSTR(*iter, 0), probe))
      return true;
  }
  return false;
}

bool calls_enter_probe(rtx_insn *insn) {
  return calls_probe(insn, opts.count_clock ? hcct::unit_abi::kCountMissSymbol : "__hcct_enter_open");
}
bool calls_exit_probe(rtx_insn *insn) {
  return calls_probe(insn, opts.count_clock ? hcct::unit_abi::kExitCountSymbol : "__hcct_exit_open");
}

// The function a probe call passes (`&this_fn`): the function symbol its block loads into one of the
// call's argument registers (`lea f(%rip), %rdi`), or null. This, not the inlined scope's origin,
// is what the runtime compares with: the scope of an inlined C++ constructor or destructor names
// the abstract one, while its probes pass the clone whose body was inlined (C1/C2, D1/D2), which is
// all the runtime sees.
tree probe_argument(rtx_insn *call) {
  int budget = 32;
  for (rtx_insn *insn = PREV_INSN(call); insn && budget-- > 0; insn = PREV_INSN(insn)) {
    if (LABEL_P(insn) || CALL_P(insn) || JUMP_P(insn) || BARRIER_P(insn))
      break;
    if (!NONDEBUG_INSN_P(insn))
      continue;
    rtx set = single_set(insn);
    if (!set || !REG_P(SET_DEST(set)) || !find_reg_fusage(call, USE, SET_DEST(set)))
      continue;
    rtx src = SET_SRC(set);
    if (!SYMBOL_REF_P(src)) {
      rtx note = find_reg_equal_equiv_note(insn);
      src = note ? XEXP(note, 0) : NULL_RTX;
    }
    if (src && SYMBOL_REF_P(src) && SYMBOL_REF_DECL(src) && TREE_CODE(SYMBOL_REF_DECL(src)) == FUNCTION_DECL)
      return SYMBOL_REF_DECL(src);
  }
  return NULL_TREE;
}

// Which code of the body runs an enter probe: the body's own (`own`), and the scopes of inlined
// functions (`scopes`, each with the function its probe passes, or null if that was not found).
// Only those are frames of instrumented functions. This leaves out, without asking how they came
// to be, the pieces ipa-split cut off a function after its enter probe (the `.part` clone, in a
// frame of its own or inlined back into its header or a caller: its blocks descend from the
// function's own), whose function is the frame or scope of the header.
struct EnterProbes {
  bool own = false;
  tree own_fn = NULL_TREE;
  std::map<tree, tree> scopes;
};

EnterProbes find_enter_probes() {
  EnterProbes found;
  for (rtx_insn *insn = get_insns(); insn; insn = NEXT_INSN(insn)) {
    if (!CALL_P(insn) || !calls_enter_probe(insn))
      continue;
    tree fn = probe_argument(insn);
    if (tree scope = inlined_scope(insn)) {
      tree &known = found.scopes[scope];
      if (!known)
        known = fn;
    } else {
      found.own = true;
      if (!found.own_fn)
        found.own_fn = fn;
    }
  }
  return found;
}

// The calls that run after the body's own exit probe: no instrumented function of the frame is
// active there any more. stage=late puts the exit probe right before every call gcc's tail-call
// pass marked, and the expander may still emit such a call as an ordinary call (it does when the
// callee needs more stack arguments than the caller received: sqlite's sqlite3_prepare_v2 calling
// sqlite3LockAndPrepare): its frame then stays on the machine stack below the callee's. Found by
// following the code from the probe, through unconditional jumps, to the first call; a conditional
// jump or a return ends the search.
std::set<rtx_insn *> calls_after_exit_probe() {
  std::set<rtx_insn *> found;
  for (rtx_insn *probe = get_insns(); probe; probe = NEXT_INSN(probe)) {
    if (!CALL_P(probe) || !calls_exit_probe(probe) || inlined_scope(probe))
      continue;
    rtx_insn *insn = NEXT_INSN(probe);
    for (int budget = 256; insn && budget > 0; --budget) {
      if (CALL_P(insn)) {
        if (!SIBLING_CALL_P(insn) && !calls_exit_probe(insn) && !calls_enter_probe(insn))
          found.insert(insn);
        break;
      }
      if (JUMP_P(insn)) {
        rtx label = JUMP_LABEL(insn);
        if (!any_uncondjump_p(insn) || !label || !LABEL_P(label))
          break;
        insn = as_a<rtx_insn *>(label);
      } else if (BARRIER_P(insn)) {
        break;
      }
      insn = NEXT_INSN(insn);
    }
  }
  return found;
}

// The instrumented functions active at `insn`, outermost first: the body's own function if it ran
// its enter probe, then each enclosing inlined scope that ran one.
std::vector<tree> active_chain(rtx_insn *insn, tree outer, const EnterProbes &probes) {
  std::vector<tree> inner;  // innermost first
  location_t loc = INSN_LOCATION(insn);
  for (tree b = loc != UNKNOWN_LOCATION ? LOCATION_BLOCK(loc) : NULL_TREE; b && TREE_CODE(b) == BLOCK;
       b = BLOCK_SUPERCONTEXT(b)) {
    if (!inlined_function_outer_scope_p(b))
      continue;
    auto probe = probes.scopes.find(b);
    if (probe == probes.scopes.end())
      continue;
    if (tree fn = probe->second ? probe->second : probe_identity(block_ultimate_origin(b)))
      inner.push_back(fn);
  }
  std::vector<tree> chain;
  if (outer)
    chain.push_back(outer);
  chain.insert(chain.end(), inner.rbegin(), inner.rend());
  return chain;
}

unsigned intern_chain(const std::vector<tree> &chain) {
  std::vector<unsigned> key;
  for (tree fn : chain) {
    auto it = chain_fn_index.find(DECL_UID(fn));
    if (it == chain_fn_index.end()) {
      it = chain_fn_index.emplace(DECL_UID(fn), chain_fns ? chain_fns->length() : 0).first;
      vec_safe_push(chain_fns, fn);
    }
    key.push_back(it->second);
  }
  auto found = chain_begins.find(key);
  if (found != chain_begins.end())
    return found->second;
  unsigned begin = chain_pool.size();
  chain_pool.insert(chain_pool.end(), key.begin(), key.end());
  chain_begins.emplace(key, begin);
  return begin;
}

// Puts a label after every call whose chain is not the natural one (the function at the machine
// frame's start, if instrumented: what the runtime assumes for a return address it does not find)
// and records it. The label is a NOTE_INSN_DELETED_LABEL, which final prints as `.L<n>:` like a
// label whose code was deleted but whose address is taken: a note has no length and no alignment,
// so the code is unchanged (docs/GCC-PLUGIN.md has the objdump comparison).
void record_sites(function *fun) {
  tree fd = fun->decl;
  EnterProbes probes = find_enter_probes();
  // The function the body's own probes pass (that of a clone's is the original's).
  tree outer = !probes.own ? NULL_TREE : probes.own_fn ? probes.own_fn : probe_identity(fd);
  std::set<rtx_insn *> after_exit = calls_after_exit_probe();
  bool cold = false;  // after the switch to the function's .cold part
  for (rtx_insn *insn = get_insns(); insn; insn = NEXT_INSN(insn)) {
    if (NOTE_P(insn) && NOTE_KIND(insn) == NOTE_INSN_SWITCH_TEXT_SECTIONS) {
      cold = !cold;
      continue;
    }
    if (!CALL_P(insn) || SIBLING_CALL_P(insn))
      continue;
    std::vector<tree> chain;
    if (!after_exit.count(insn))
      chain = active_chain(insn, outer, probes);
    // The runtime finds a frame's function by its region start, if the code takes its own address
    // (`lea f(%rip)`, the probes' argument): not in .cold, a clone (whose probes pass the
    // original), a .part, or a function that does not bind locally (in a shared library its
    // probes load &f from the GOT).
    bool natural = (!cold && outer == fd && targetm.binds_local_p(fd)) ? chain.size() == 1 : chain.empty();
    if (natural)
      continue;
    rtx_code_label *label = gen_label_rtx();
    rtx_insn *note = emit_label_after(label, insn);
    PUT_CODE(note, NOTE);
    NOTE_KIND(note) = NOTE_INSN_DELETED_LABEL;
    NOTE_DELETED_LABEL_NAME(note) = NULL;
    site_records.push_back(SiteRecord{CODE_LABEL_NUMBER(note), intern_chain(chain), unsigned(chain.size())});
  }
}

const pass_data sites_pass_data = {RTL_PASS, "hcct_sites", OPTGROUP_NONE, TV_NONE, 0, 0, 0, 0, 0};

class SitesPass : public rtl_opt_pass {
public:
  explicit SitesPass(gcc::context *ctx) : rtl_opt_pass(sites_pass_data, ctx) {}

  unsigned int execute(function *fun) override {
    if (unit_decl && fun->decl != ctor_decl)
      record_sites(fun);
    return 0;
  }
};

void print_label(FILE *out, int number) {
  char name[32];
  ASM_GENERATE_INTERNAL_LABEL(name, "L", number);
  assemble_name(out, name);
}

// Writes the descriptor (hcct/unit_abi.h Unit, then its sites and chains) in a relro data section.
// Pushed and popped, so that gcc's idea of the current section stays true.
void emit_unit_descriptor(void *, void *) {
  if (!unit_decl || !asm_out_file || seen_error())
    return;
  FILE *out = asm_out_file;
  bool table = opts.unwind_table;
  const char *name = IDENTIFIER_POINTER(DECL_ASSEMBLER_NAME(unit_decl));
  fprintf(out, "\t.pushsection\t.data.rel.ro.hcct_unit,\"aw\"\n\t.balign\t8\n");
  fprintf(out, "\t.globl\t%s\n\t.hidden\t%s\n\t.type\t%s, @object\n\t.size\t%s, %u\n%s:\n", name, name, name,
          name, unsigned(opts.count_clock ? hcct::unit_abi::kUnitSize : hcct::unit_abi::kUnitSizeGate), name);
  bool count = opts.count_clock;
  fprintf(out, "\t.long\t%u, %u, %u, 0\n", count ? hcct::unit_abi::kVersion : hcct::unit_abi::kVersionGate,
          opts.stage == Options::Stage::kEarly ? hcct::unit_abi::kStageEarly : hcct::unit_abi::kStageLate,
          (table ? hcct::unit_abi::kHasSiteTable : 0u) | (count ? hcct::unit_abi::kCountClock : 0u));
  bool sites = table && !site_records.empty();
  if (sites)
    fprintf(out, "\t.quad\t.Lhcct_sites, %zu, .Lhcct_chains, %zu\n", site_records.size(), chain_pool.size());
  else
    fprintf(out, "\t.quad\t0, 0, 0, 0\n");
  if (count)
    fprintf(out, "\t.quad\t%s\n", hcct::unit_abi::kCountTlsSymbol);
  if (!sites) {
    fprintf(out, "\t.popsection\n");
    return;
  }
  fprintf(out, ".Lhcct_sites:\n");
  for (const SiteRecord &r : site_records) {
    fprintf(out, "\t.quad\t");
    print_label(out, r.label);
    fprintf(out, "\n\t.long\t%u, %u\n", r.chain_begin, r.chain_length);
  }
  fprintf(out, ".Lhcct_chains:\n");
  for (unsigned index : chain_pool) {
    tree fn = (*chain_fns)[index];
    // A local function that was not output has no symbol to name (its probes cannot run either).
    if (!TREE_PUBLIC(fn) && !DECL_EXTERNAL(fn) && !TREE_ASM_WRITTEN(fn)) {
      fprintf(out, "\t.quad\t0\n");
      continue;
    }
    fprintf(out, "\t.quad\t");
    assemble_name(out, IDENTIFIER_POINTER(DECL_ASSEMBLER_NAME(fn)));
    fprintf(out, "\n");
  }
  fprintf(out, "\t.popsection\n");
}

// clock=count: the module's countdown and exit gate (hcct/unit_abi.h), the entry probe's stub and
// the function the descriptor gives the runtime, each in a comdat group so that every unit of a
// module writes them and the module keeps one. Initial-exec accesses, which the linker turns into
// local-exec ones in an executable.
void emit_count_support(FILE *out) {
  using namespace hcct::unit_abi;
  fprintf(out, "\t.pushsection\t.tbss.%s,\"awTG\",@nobits,%s,comdat\n\t.balign\t8\n", kCountdownSymbol,
          kCountdownSymbol);
  fprintf(out, "\t.globl\t%s\n\t.hidden\t%s\n\t.type\t%s, @object\n\t.size\t%s, 8\n%s:\n\t.zero\t%zu\n",
          kCountdownSymbol, kCountdownSymbol, kCountdownSymbol, kCountdownSymbol, kCountdownSymbol, kExitGateOffset);
  fprintf(out, "\t.globl\t%s\n\t.hidden\t%s\n\t.type\t%s, @object\n\t.size\t%s, 1\n%s:\n\t.zero\t8\n",
          kCountExitGateSymbol, kCountExitGateSymbol, kCountExitGateSymbol, kCountExitGateSymbol,
          kCountExitGateSymbol);
  fprintf(out, "\t.popsection\n");
  // __hcct_count_miss: a tail jump to the runtime (its CFA is then the probe's, as for a direct
  // call), or without one the countdown at INT64_MAX for good.
  fprintf(out, "\t.pushsection\t.text.%s,\"axG\",@progbits,%s,comdat\n", kCountMissSymbol, kCountMissSymbol);
  fprintf(out, "\t.weak\t%s\n", kEnterCountSymbol);
  fprintf(out,
          "\t.globl\t%1$s\n\t.hidden\t%1$s\n\t.type\t%1$s, @function\n%1$s:\n\t.cfi_startproc\n"
          "\tmovq\t%2$s@GOTPCREL(%%rip), %%rax\n\ttestq\t%%rax, %%rax\n\tje\t1f\n\tjmp\t*%%rax\n"
          "1:\tmovq\t%3$s@gottpoff(%%rip), %%rax\n\tmovabsq\t$0x7fffffffffffffff, %%rdx\n"
          "\tmovq\t%%rdx, %%fs:(%%rax)\n\tret\n\t.cfi_endproc\n\t.size\t%1$s, .-%1$s\n",
          kCountMissSymbol, kEnterCountSymbol, kCountdownSymbol);
  fprintf(out,
          "\t.globl\t%1$s\n\t.hidden\t%1$s\n\t.type\t%1$s, @function\n%1$s:\n\t.cfi_startproc\n"
          "\tmovq\t%2$s@gottpoff(%%rip), %%rax\n\taddq\t%%fs:0, %%rax\n\tret\n\t.cfi_endproc\n"
          "\t.size\t%1$s, .-%1$s\n\t.popsection\n",
          kCountTlsSymbol, kCountdownSymbol);
}

// At the end of the unit: the count clock's support (if a probe referenced it) and the descriptor.
void finish_unit(void *gcc_data, void *user_data) {
  if (countdown_decl && asm_out_file && !seen_error())
    emit_count_support(asm_out_file);
  emit_unit_descriptor(gcc_data, user_data);
}

const pass_data late_pass_data = ssa_pass_data("hcct_instrument_late");

class LatePass : public gimple_opt_pass {
public:
  explicit LatePass(gcc::context *ctx) : gimple_opt_pass(late_pass_data, ctx) {}

  unsigned int execute(function *fun) override {
    tree fd = fun->decl;
    // The early pass made the unit's gate pointer and constructor for every function it could
    // select; without them (nothing selectable in the unit) there is nothing to do.
    if (!gate_ptr_decl || never_instrument(fd) || fd == ctor_decl)
      return 0;
    std::string name = lang_hooks.decl_printable_name(fd, 1);
    const std::string &file = source_path(fd);
    if (!selected_by_name(name, file))
      return 0;
    if (opts.min_size > 0) {
      BodyStats stats = body_stats_cfg(fun);
      if (!stats.calls && stats.statements < opts.min_size)
        return 0;
    }
    unsigned todo = instrument_late(fun);
    instrumented_uids.insert(DECL_UID(fd));
    write_list_line(fd, name, file);
    return todo;
  }
};

const pass_data instrument_pass_data = {
    GIMPLE_PASS,
    "hcct_instrument",
    OPTGROUP_NONE,
    TV_NONE,
    PROP_gimple_any, // properties_required
    0,               // properties_provided
    0,               // properties_destroyed
    0,               // todo_flags_start
    0,               // todo_flags_finish
};

class InstrumentPass : public gimple_opt_pass {
public:
  explicit InstrumentPass(gcc::context *ctx) : gimple_opt_pass(instrument_pass_data, ctx) {}

  unsigned int execute(function *fun) override {
    tree fd = fun->decl;
    // Only structured GIMPLE can be wrapped in a try/finally. Functions that reach the lowering
    // passes already lowered (outlined OpenMP bodies, made from already instrumented code) are left
    // alone.
    if (!gimple_has_body_p(fd) || fun->cfg || (fun->curr_properties & PROP_gimple_lcf))
      return 0;
    if (never_instrument(fd) || fd == ctor_decl)
      return 0;
    std::string name = lang_hooks.decl_printable_name(fd, 1);
    const std::string &file = source_path(fd);
    if (opts.stage == Options::Stage::kLate) {
      // The probes go in later; the gate pointer and its constructor are made now, while new
      // functions can still join the call graph.
      if (selected_by_name(name, file)) {
        build_runtime_decls();
        build_gate_constructor();
      }
      return 0;
    }
    if (!selected(name, file, gimple_body(fd)))
      return 0;
    instrument(fd);
    write_list_line(fd, name, file);
    return 0;
  }
};

void finish(void *, void *) {
  if (opts.list_fd >= 0)
    close(opts.list_fd);
  opts.list_fd = -1;
}

// Runs `pass` right before the first instance of the pass named `reference`.
void insert_pass_before(const char *plugin, opt_pass *pass, const char *reference) {
  register_pass_info info;
  info.pass = pass;
  info.reference_pass_name = reference;
  info.ref_pass_instance_number = 1;
  info.pos_op = PASS_POS_INSERT_BEFORE;
  register_callback(plugin, PLUGIN_PASS_MANAGER_SETUP, nullptr, &info);
}

} // namespace

int plugin_init(plugin_name_args *info, plugin_gcc_version *version) {
  if (!plugin_default_version_check(version, &gcc_version)) {
    error("%s was built for gcc %s and cannot be loaded by gcc %s", info->base_name,
          gcc_version.basever, version->basever);
    return 1;
  }
  opts.prefix = info->base_name;
  if (!parse_options(info))
    return 1;
  if (!words_given.count("stage") && (flag_generate_lto || in_lto_p))
    opts.stage = Options::Stage::kEarly;
  if (flag_instrument_function_entry_exit)
    warning(0, "%qs and %<-finstrument-functions%> both instrument every function: the runtime will "
               "see each call twice",
            info->base_name);

  static const std::string help_text = known_options(" ") + "; see docs/GCC-PLUGIN.md";
  static plugin_info help = {kPluginVersion, help_text.c_str()};
  register_callback(info->base_name, PLUGIN_INFO, nullptr, &help);
  register_callback(info->base_name, PLUGIN_REGISTER_GGC_ROOTS, nullptr,
                    const_cast<ggc_root_tab *>(gc_roots));

  // Before "lower" (the first instance of pass_lower_cf): the body is still structured, so a
  // GIMPLE_TRY_FINALLY becomes both the normal-exit and the exception cleanup.
  insert_pass_before(info->base_name, new InstrumentPass(g), "lower");
  if (opts.stage == Options::Stage::kEarly && gate_after_inlining()) {
    // The first pass after the IPA passes have applied their decisions (inlining, cloning,
    // splitting) to the body: the stand-ins become gated probes before any later pass sees them.
    insert_pass_before(info->base_name, new GatePass(g), "ehdisp");
  }
  if (opts.count_clock && !describes_unit()) {
    // The runtime finds a module's countdown through the unit descriptor, which -flto units have not.
    error("%<-fplugin-arg-%s-clock=count%> does not support %<-flto%>: build without LTO or with "
          "%<clock=gate%>",
          opts.prefix.c_str());
    return 1;
  }
  if (opts.stage == Options::Stage::kLate) {
    if (flag_generate_lto || in_lto_p) {
      error("%<-fplugin-arg-%s-stage=late%> does not support %<-flto%> yet: instrument before "
            "inlining (stage=early) or build without LTO",
            opts.prefix.c_str());
      return 1;
    }
    // Right before "optimized" (pass_cleanup_cfg_post_optimizing), which runs at every -O level:
    // after IPA inlining, function splitting and cloning, tail-recursion elimination and tail-call
    // marking. Its dump (-fdump-tree-optimized) shows the probes.
    insert_pass_before(info->base_name, new LatePass(g), "optimized");
  }
  if (opts.unwind_table && describes_unit()) {
    // After every pass that moves or adds calls, before branch shortening and final.
    insert_pass_before(info->base_name, new SitesPass(g), "shorten");
  }
  register_callback(info->base_name, PLUGIN_FINISH_UNIT, finish_unit, nullptr);
  register_callback(info->base_name, PLUGIN_FINISH, finish, nullptr);
  return 0;
}
