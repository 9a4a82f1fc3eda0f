#include "text_layout.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>

#include "common.h"
#include "hcct/analysis/view.h"

namespace hcct::cli {

std::string display_function(const analysis::Symbol &s, const NameStyle &style) {
  std::string name = style.templates ? s.function : analysis::elide_template_arguments(s.function);
  if (s.stale) name += " (stale binary)";
  return escape_text(name);
}

namespace {
std::string source_file(const std::string &path, const NameStyle &style) {
  if (style.full_paths) return short_path(path);
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}
std::string source_location(const std::string &file, uint32_t line, const NameStyle &style) {
  if (file.empty()) return {};
  return source_file(file, style) + (line ? ":" + std::to_string(line) : "");
}
}  // namespace

std::string display_definition(const analysis::Symbol &s, const NameStyle &style) {
  return escape_text(source_location(s.file, s.line, style));
}

std::string display_call_site(const analysis::Symbol &s, const NameStyle &style) {
  if (s.stale || s.frames.empty() || s.file.empty()) return escape_text(describe_call_site(s));
  std::string out = source_location(s.frames[0].file, s.frames[0].line, style);
  if (s.frames.size() < 2) return escape_text(out);
  if (!style.inline_chains) return escape_text(out + " [inlined]");
  for (size_t k = 0; k + 1 < s.frames.size(); ++k)
    out += " in " + s.frames[k].function + ", inlined at " + source_location(s.frames[k + 1].file, s.frames[k + 1].line, style);
  return escape_text(out);
}

std::string display_call_site(const analysis::Symbol &s, const analysis::Symbol *parent, const NameStyle &style) {
  if (parent && analysis::call_site_outside(s, *parent)) return "inlined into " + display_function(*parent, style);
  return display_call_site(s, style);
}

size_t display_width(std::string_view text) {
  size_t w = 0;
  for (unsigned char c : text) w += (c & 0xc0) != 0x80;
  return w;
}

namespace {
// The byte offset where column `cols` starts.
size_t byte_of_column(std::string_view text, size_t cols) {
  size_t i = 0, w = 0;
  for (; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) {
      if (w == cols) return i;
      ++w;
    }
  }
  return text.size();
}
}  // namespace

std::string fit(std::string_view text, size_t width, bool keep_end) {
  const size_t w = display_width(text);
  if (w <= width) return std::string(text);
  if (width == 0) return {};
  if (width == 1) return "…";
  if (!keep_end) return std::string(text.substr(0, byte_of_column(text, width - 1))) + "…";
  size_t head = (width - 1) / 2, tail = width - 1 - head;
  return std::string(text.substr(0, byte_of_column(text, head))) + "…" +
         std::string(text.substr(byte_of_column(text, w - tail)));
}

size_t output_width(long requested) {
  if (requested >= 0) return size_t(requested);
  struct winsize ws {};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char *columns = std::getenv("COLUMNS")) {
    char *end = nullptr;
    long c = std::strtol(columns, &end, 10);
    if (end != columns && *end == '\0' && c > 0) return size_t(c);
  }
  return kDefaultWidth;
}

bool use_color(const std::string &mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char *no_color = std::getenv("NO_COLOR");
  return isatty(STDOUT_FILENO) && !(no_color && *no_color);
}

std::string fit_context(const std::string &function, const std::string &definition, const std::string &site,
                        size_t width) {
  std::string with_def = definition.empty() ? function : function + " (" + definition + ")";
  std::string at = site.empty() ? std::string() : "  @ " + site;
  if (width == 0 || display_width(with_def) + display_width(at) <= width) return with_def + at;
  // Too long: the definition's location goes first, then the call site shrinks (its file:line end
  // is what matters), then the name (both ends of a qualified name matter).
  if (display_width(function) + display_width(at) <= width) return function + at;
  const size_t name_min = std::min<size_t>(display_width(function), 24);
  if (!at.empty() && width > name_min + 8) {
    size_t site_room = width - name_min;
    std::string short_at = display_width(at) <= site_room ? at : "  @ " + fit(site, site_room - 4, true);
    return fit(function, width - display_width(short_at), true) + short_at;
  }
  return fit(function, width, true);
}

}  // namespace hcct::cli
