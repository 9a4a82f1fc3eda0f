// A small shared library used by the plugin's end-to-end examples (cct_main.c, cct_main.cc): it is
// built as its own .so, so the calling-context tree crosses a module boundary in both directions.
#ifndef HCCT_EXAMPLES_PLUGIN_CCT_LIB_H
#define HCCT_EXAMPLES_PLUGIN_CCT_LIB_H

#ifdef __cplusplus
extern "C" {
#endif

// Returns sum_{i<n} (i % 7); calls lib_step() n times.
int lib_sum(int n);
// Calls cb(i) for i in [0, n) and returns the sum: a call back from the library into the program.
int lib_each(int (*cb)(int), int n);

#ifdef __cplusplus
}
#endif

#endif
