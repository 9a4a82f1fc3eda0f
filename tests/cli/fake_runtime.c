// Stands in for libhcct.so in the `hcct record` plumbing tests: a valid shared object to preload
// that does nothing.
int hcct_fake_runtime_marker;
