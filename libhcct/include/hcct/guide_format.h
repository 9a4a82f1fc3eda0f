// The two files `hcct guide` writes (docs/GUIDE.md): one definition for every side that writes or
// reads them.
//  - The guidance (JSON): written by the CLI (tools/hcct/cmd_guide.cc), read by the kpath plugin's
//    OSR-point inserter (kpath/src/OsrPointInserter.cpp) at compile time. Version 2 adds, per
//    loop, the configuration the profile was recorded in ("stage": "early"/"late", "opt_level":
//    0..3 or null; the plugin refuses guidance for another configuration) and, per path, its
//    "blocks" (layout indices, header first: what a loop version is specialised for when an
//    "unroll" recommendation names the path with its "factor"). The plugin reads versions 1 and 2.
//  - The thresholds file (`hcct guide --thresholds FILE`): read by the runtime's online hotness
//    oracle at run time (HCCT_ORACLE_GUIDE, libhcct/oracle_input.cc). Lines, so that the runtime
//    needs no JSON parser:
//        # hcct-thresholds 1
//        KEY=T          one loop: its key (any bytes but NUL and newline, not starting with '#';
//        ...            '=' and ',' allowed: T follows the LAST '=') and its threshold, decimal
//        # end          required last line: a file cut anywhere is refused, never half read
//    Lines starting with '#' between them are comments; empty lines are allowed.
// Depends on nothing and never allocates (the runtime includes it).
#ifndef HCCT_GUIDE_FORMAT_H
#define HCCT_GUIDE_FORMAT_H

#include <stddef.h>

namespace hcct::guide_format {

inline constexpr char kGuideFormat[] = "hcct-guide";
inline constexpr unsigned kGuideVersion = 2;  // 2: each loop records the profile's "stage" and "opt_level"

inline constexpr char kThresholdsHeader[] = "# hcct-thresholds 1";
inline constexpr char kThresholdsHeaderPrefix[] = "# hcct-thresholds ";  // any version, for the message
inline constexpr char kThresholdsEnd[] = "# end";
// The longest loop key either side accepts (a path and a line).
inline constexpr size_t kMaxKeyBytes = 4095;

// Whether `key` (n bytes) can be a line of a thresholds file.
constexpr bool key_fits_thresholds_file(const char *key, size_t n) {
  if (n == 0 || n > kMaxKeyBytes || key[0] == '#') return false;
  for (size_t i = 0; i < n; ++i)
    if (key[i] == '\n' || key[i] == '\0') return false;
  return true;
}

}  // namespace hcct::guide_format

#endif
