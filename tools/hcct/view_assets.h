// The JavaScript and CSS that `hcct view` inlines into its page (cmake/hcctFlameGraph.cmake
// generates their definitions at configure time from the npm packages d3 and d3-flame-graph).
#pragma once

namespace hcct::cli {

// False when the libraries could not be fetched at configure time: `hcct view` then says so.
extern const bool kViewAssetsAvailable;
// Each a null-terminated list of pieces to concatenate (one string literal would be too long).
extern const char *const kD3Js[];
extern const char *const kFlameGraphJs[];
extern const char *const kFlameGraphCss[];

}  // namespace hcct::cli
