// The library dl_main loads. Built twice (DL_LIB_VARIANT 1 and 2) into files with different
// build-ids: a different file at the recorded path.
static int dl_lib_helper(int x) { return x * DL_LIB_VARIANT; }

int dl_lib_work(int x) { return dl_lib_helper(x) + 1; }
