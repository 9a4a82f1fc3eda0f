// Text that every output of hcct shares — the CLI's views, the export formats, the path and guide
// reports: numbers, percentages, escaping for the formats that quote text. One function each, so
// that a share reads the same wherever it is shown and every DOT label is escaped the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hcct/analysis/profile.h"

namespace hcct::analysis {

// How format_percent writes a percentage.
struct PercentStyle {
  int digits = 2;            // decimals, or significant digits with `significant`
  bool significant = false;  // "%.4g"-like: 0.01234% rather than 0.01%
  bool sign = false;         // "+1.25%" / "-0.50%": a change in percentage points
};
// The one percentage formatter: `points` percent ("12.50%"), as `style` says.
std::string format_percent(double points, PercentStyle style = {});
// 100·part/whole with two decimals, "-" if whole is 0.
std::string percent(uint64_t part, uint64_t whole);
// A fraction (0.125) as a percentage ("12.50%").
std::string share_percent(double fraction, PercentStyle style = {});

std::string hex(uint64_t v);                // "0x1f"
std::string with_commas(uint64_t v);        // "1,234,567"
std::string base_name(std::string_view path);  // what follows the last '/'
// A source path shortened to be relative to the working directory when it lies below it.
std::string short_path(const std::string &path);
// The command line, shell-quoted where needed.
std::string shell_join(const std::vector<std::string> &args);

// Bytes that are not valid UTF-8 (and C0 controls) become '?', a tab a space, so that every
// consumer of the text formats (JSON, DOT, callgrind, pprof strings) accepts the text.
std::string valid_utf8(std::string_view s);
// The contents of a DOT string literal ("..."): valid UTF-8, '"' and '\' escaped.
std::string dot_escape(std::string_view s);

// ---- What a profile does not hold (docs/CLI.md, "Lost calls and unmatched exits").

// Plain-language warnings for calls lost when tree memory ran out and exits that matched no enter.
// One line each, without a prefix; empty when there is nothing to say.
std::vector<std::string> loss_warnings(const ThreadMeta &m);
// "N = 1,000 calls" or, with lost calls, "N = 1,000 calls counted + 20 lost = 1,020 calls".
std::string calls_summary(const ThreadMeta &m);

}  // namespace hcct::analysis
