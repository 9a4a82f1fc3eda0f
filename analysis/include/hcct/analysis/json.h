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

}  // namespace hcct::analysis
