// Laying out human-readable views (report, report --flat, diff) for a terminal: C++ names
// shortened, call sites with or without their inline chains, lines fitted to a width, colour.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "hcct/analysis/symbolizer.h"

namespace hcct::cli {

struct NameStyle {
  bool templates = false;     // keep template arguments
  bool inline_chains = false; // a call site inside inlined code: every frame, not only the innermost
  bool full_paths = false;    // source files as recorded (default: their names only)
};
// The function's name for a view: demangled, shortened as `style` says, escaped (escape_text).
std::string display_function(const analysis::Symbol &s, const NameStyle &style);
// "prog.c:40", or with inline chains "prog.c:22 in helper, inlined at prog.c:40"; the innermost
// frame alone marks that it was inlined ("prog.c:22 [inlined]"). File names only unless
// style.full_paths (then relative to the working directory when below it). Escaped.
std::string display_call_site(const analysis::Symbol &s, const NameStyle &style);
// The call site of a context whose parent is `parent` (null at a thread's root): "inlined into
// <parent>" when the site lies outside the parent's function (analysis::call_site_outside), since
// its file:line would be a line of the parent's caller.
std::string display_call_site(const analysis::Symbol &s, const analysis::Symbol *parent, const NameStyle &style);
// "prog.c:12" where the function is defined, or empty. Escaped.
std::string display_definition(const analysis::Symbol &s, const NameStyle &style);

// Columns `text` takes on a terminal: its code points (escape_text output is printable; wide
// characters are counted as one column).
size_t display_width(std::string_view text);
// `text` cut to at most `width` columns: the middle replaced by "…" (keep_end) or the end.
std::string fit(std::string_view text, size_t width, bool keep_end = false);

// --width: 0 means unlimited. The default: the terminal's width when stdout is one, else $COLUMNS,
// else kDefaultWidth.
inline constexpr size_t kDefaultWidth = 120;
size_t output_width(long requested);  // requested < 0: the default
// --color=auto|always|never: auto is on when stdout is a terminal and NO_COLOR is not set.
bool use_color(const std::string &mode);

// The text of one context in a view, fitted to `width` columns: the function (with its
// definition's location while it fits) and "@ call site" (while it fits).
std::string fit_context(const std::string &function, const std::string &definition, const std::string &site,
                        size_t width);

}  // namespace hcct::cli
