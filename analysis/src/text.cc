#include "hcct/analysis/text.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

namespace hcct::analysis {

std::string format_percent(double points, PercentStyle style) {
  char buf[48];
  if (style.significant)
    std::snprintf(buf, sizeof buf, style.sign ? "%+.*g%%" : "%.*g%%", style.digits, points);
  else
    std::snprintf(buf, sizeof buf, style.sign ? "%+.*f%%" : "%.*f%%", style.digits, points);
  return buf;
}

std::string percent(uint64_t part, uint64_t whole) {
  if (!whole) return "-";
  // In long double: counts above 2^53 keep their digits.
  return format_percent(static_cast<double>(100.0L * part / whole));
}

std::string share_percent(double fraction, PercentStyle style) { return format_percent(100.0 * fraction, style); }

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

std::string base_name(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
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

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = len && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 2;
    if (ok && c >= 0x20) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += c == '\t' ? ' ' : '?';
      i += ok ? len : 1;
    }
  }
  return out;
}

std::string dot_escape(std::string_view s) {
  std::string out;
  for (char c : valid_utf8(s)) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::vector<std::string> loss_warnings(const ThreadMeta &m) {
  std::vector<std::string> out;
  if (m.lost)
    out.push_back(with_commas(m.lost) + " calls (" + percent(m.lost, m.all_calls()) +
                  " of all calls) were lost when tree memory (max_mb) ran out: they are in no context, and "
                  "shares are against all " + with_commas(m.all_calls()) + " calls");
  if (m.unmatched_exits)
    out.push_back(with_commas(m.unmatched_exits) +
                  (m.unmatched_exits == 1 ? " exit" : " exits") + " had no matching enter: the tree above those frames "
                  "may be wrong (functions entered before profiling started, split functions, tail calls, longjmp, ...)");
  return out;
}

std::string calls_summary(const ThreadMeta &m) {
  if (!m.lost) return "N = " + with_commas(m.calls) + " calls";
  return "N = " + with_commas(m.calls) + " calls counted + " + with_commas(m.lost) + " lost = " +
         with_commas(m.all_calls()) + " calls";
}

}  // namespace hcct::analysis
