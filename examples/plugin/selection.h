// Functions defined in a header, for the file-selection tests (exclude-file / include-file).
#ifndef HCCT_EXAMPLES_PLUGIN_SELECTION_H
#define HCCT_EXAMPLES_PLUGIN_SELECTION_H

namespace hdr {
inline int header_leaf(int x) { return x ^ 5; }
inline int header_caller(int x) { return header_leaf(x) + header_leaf(x + 1); }
} // namespace hdr

#endif
