// JSON pieces shared by the CLI's --json outputs and the JSON export (nlohmann/json: a header-only
// dependency of whoever includes this header).
#pragma once

#include <nlohmann/json.hpp>

#include "hcct/analysis/symbolizer.h"

namespace hcct::analysis {

// Keys in insertion order, so that JSON output reads like the documentation.
using json = nlohmann::ordered_json;

// {"name", "resolved", "file", "line", "module", "offset"[, "stale"][, "frames"]} (docs/CLI.md).
json symbol_json(const Symbol &s, bool with_frames);
// A profile with a time metric: {"time", "sample_period_ns", "samples", "samples_lost",
// "time_error_bound"} (hcct: time_min_count; cct: 0), the same keys in every JSON output.
json time_json(const ThreadMeta &m);

}  // namespace hcct::analysis
